"""python/gemmkit/torch.py: gemmkit kernels as torch custom ops (torch.ops.gemmkit.*), which torch.compile traces
(fake implementations) and CUDA graphs capture; autograd differentiates gemm.

    import gemmkit.torch
    D = gemmkit.torch.gemm(A, B)                                       # also torch.ops.gemmkit.gemm
    D = gemmkit.torch.gemm(x, w.mT, bias_matrix, beta=1.0, activation="gelu")
    y = gemmkit.torch.gemm_bias_act(x, w.mT, b, x, "gelu")             # gelu(x @ w.T + b) + x, one kernel
    Ds = gemmkit.torch.grouped_gemm([A0, A1], [B0, B1])                # also torch.ops.gemmkit.grouped_gemm
    y = gemmkit.torch.grouped_mm(tokens, w.transpose(1, 2), offs)      # MoE experts, as torch._grouped_mm
    y = gemmkit.torch.scaled_grouped_mm(t8, w8.transpose(1, 2), st, sw.transpose(1, 2), offs)  # FP8 blocks
    y = gemmkit.torch.scaled_mm(a8, w8.t(), scale_a, scale_b, torch.bfloat16)  # as torch._scaled_mm; SM90 FP8
    y = gemmkit.torch.scaled_mm(a8, w8.t(), scale_a, scale_b, torch.bfloat16, bias=b)  # + b (N,), in the kernel
    a8, sa = gemmkit.torch.quantize_blockwise(x)            # DeepSeek-V3's 1 x 128 blocks, sa (M, K/128) M-major
    w8, sw = gemmkit.torch.quantize_blockwise(w, rows=128)  # 128 x 128 blocks of a weight (N, K), sw (N/128, K/128)

One gemmkit plan serves each (dtypes, layouts, activation, device); the first call of a plan compiles its kernel
(or finds it in gemmkit's disk cache). Run one call eagerly before capturing a CUDA graph, as for any lazily
built kernel. Tensors: float16, bfloat16, float32 (TF32 tensor cores) or float64, on one CUDA device; A is
(..., M, K) with B (K, N), or batched (L, M, K) / (M, K) with B (L, K, N); C has D's shape; D is contiguous.
gemm_bias_act fuses a linear layer's epilogue, D = act(A @ B + bias) + residual with bias (N,) and residual of D's
shape (both optional), as an epilogue visitor tree (float16 and bfloat16; no backward). grouped_gemm takes lists of
matrices (group g: As[g] M_g x K_g, Bs[g] K_g x N_g, Cs[g] M_g x N_g), runs every group in one launch and returns
the list of D; it has no backward (differentiate per group with gemm). grouped_mm is the MoE form of
torch._grouped_mm: the tokens of every expert stacked in a (total_M, K), the experts' weights (G, K, N) and the
int32 row offsets on the GPU, in one launch that reads no group size on the host (CUDA graphs capture it);
scaled_grouped_mm is its FP8 form with DeepSeek-V3's block scales (SM90). scaled_mm takes torch._scaled_mm's FP8
operands and scales (per-tensor, row-wise, or DeepSeek-V3's 1 x 128 / 128 x 128 blocks) on SM90, and its bias (N,)
of out_dtype, added in the kernel's epilogue. None of these four has a backward.
"""
from __future__ import annotations

import atexit
import dataclasses
import threading
from typing import Any, Callable, Optional, cast

import torch

from . import _gemmkit
from ._gemmkit import LayoutType, TensorError
from .op import Gemm, GroupedGemm

__all__ = ["gemm", "gemm_bias_act", "grouped_gemm", "grouped_gemm_op", "grouped_mm", "scaled_grouped_mm", "scaled_mm",
           "quantize_blockwise", "plans", "grouped_plans", "bias_act_plans", "scaled_mm_plans", "moe_plans"]


def __dir__() -> list[str]:
    """dir() shows the API; torch, typing's Optional and the rest stay attributes: torch evaluates the custom ops'
    annotations in this module's namespace."""
    return sorted({*__all__, *(name for name in globals() if name.startswith("__"))})

_ACCUMULATORS = {torch.float16: torch.float32, torch.bfloat16: torch.float32, torch.float32: torch.float32,
                 torch.float64: torch.float64}


# ---- activations: torch's own formula (empty problems) and derivative (backward) per fused activation --------


@dataclasses.dataclass(frozen=True)
class _Activation:
    forward: Callable[[torch.Tensor, float], torch.Tensor]
    # dZ from dD and either D (from_output: no recomputation) or Z = alpha * A @ B + beta * C (recomputed).
    backward: Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor]
    from_output: bool


_aten = torch.ops.aten
_F = torch.nn.functional
_ACTIVATIONS: dict[str, _Activation] = {
    "identity": _Activation(lambda z, p: z, lambda g, d, p: g, True),
    "relu": _Activation(lambda z, p: torch.relu(z), lambda g, d, p: _aten.threshold_backward(g, d, 0), True),
    # The output has the sign of the input only for a non-negative slope (see _from_output).
    "leaky_relu": _Activation(lambda z, p: _F.leaky_relu(z, p),
                              lambda g, y, p: _aten.leaky_relu_backward(g, y, p, p >= 0), True),
    "sigmoid": _Activation(lambda z, p: torch.sigmoid(z), lambda g, d, p: _aten.sigmoid_backward(g, d), True),
    "tanh": _Activation(lambda z, p: torch.tanh(z), lambda g, d, p: _aten.tanh_backward(g, d), True),
    "gelu": _Activation(lambda z, p: _F.gelu(z), lambda g, z, p: _aten.gelu_backward(g, z), False),
    "gelu_tanh": _Activation(lambda z, p: _F.gelu(z, approximate="tanh"),
                             lambda g, z, p: _aten.gelu_backward(g, z, approximate="tanh"), False),
    "silu": _Activation(lambda z, p: _F.silu(z), lambda g, z, p: _aten.silu_backward(g, z), False),
    "hardswish": _Activation(lambda z, p: _F.hardswish(z), lambda g, z, p: _aten.hardswish_backward(g, z), False),
}


def _activation(name: str) -> _Activation:
    if name not in _ACTIVATIONS:
        raise _gemmkit.ConfigError(f"Invalid activation {name!r}; available: {', '.join(_ACTIVATIONS)}.")
    return _ACTIVATIONS[name]


def _from_output(activation: str, parameter: float) -> bool:
    return _activation(activation).from_output and (activation != "leaky_relu" or parameter >= 0)


# ---- shapes (shared by the CUDA and the fake implementation) ---------------------------------------------------


def _output_shape(A: torch.Tensor, B: torch.Tensor, C: Optional[torch.Tensor], beta: float,
                  activation: str) -> list[int]:
    """D's shape, after every check that needs no data (the fake implementation's too); raises TensorError or
    ConfigError like gemmkit's run."""
    _activation(activation)
    if C is None and beta != 0.0:
        raise TensorError(f"beta is {beta} but no C was given; pass C or beta=0.")
    if A.dtype not in _ACCUMULATORS:
        raise TensorError(f"Tensor A has dtype {A.dtype}; gemmkit.torch.gemm takes "
                          f"{', '.join(str(t) for t in _ACCUMULATORS)}.")
    for name, t in (("B", B), ("C", C)):
        if t is not None and t.dtype != A.dtype:
            raise TensorError(f"Tensor {name} has dtype {t.dtype} but A has {A.dtype}; give every operand A's dtype.")
    if A.dim() < 2 or B.dim() not in (2, 3) or (B.dim() == 3 and A.dim() > 3):
        raise TensorError(f"A is {tuple(A.shape)} and B is {tuple(B.shape)}; expected A (..., M, K) with B (K, N), or "
                          "A (L, M, K) or (M, K) with B (L, K, N).")
    if A.shape[-1] != B.shape[-2]:
        raise TensorError(f"A is {tuple(A.shape)} and B is {tuple(B.shape)}: their K extents must agree.")
    if B.dim() == 2:
        shape = [*A.shape[:-1], B.shape[-1]]
    else:
        a_batch = A.shape[0] if A.dim() == 3 else 1
        if a_batch != B.shape[0] and 1 not in (a_batch, B.shape[0]):
            raise TensorError(f"A has a batch of {a_batch} and B of {B.shape[0]}; they must be equal, or one of "
                              "them 1.")
        shape = [max(a_batch, B.shape[0]), A.shape[-2], B.shape[-1]]
    if C is not None and list(C.shape) != shape:
        raise TensorError(f"Tensor C is {tuple(C.shape)} but D is {tuple(shape)}; C must have D's shape.")
    return shape


def _folded(A: torch.Tensor, B: torch.Tensor, D: torch.Tensor,
            C: Optional[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
    """(..., M, K) @ (K, N) as one GEMM over the folded rows: A, D and C (D's shape) as matrices; batches as given."""
    if B.dim() != 2:
        return A, D, C
    return A.flatten(0, -2), D.flatten(0, -2), C.flatten(0, -2) if C is not None else None


def _matrix(t: torch.Tensor) -> tuple[torch.Tensor, LayoutType]:
    """The tensor and the layout gemmkit reads it with; a copy only when neither layout expresses it."""
    if t.stride(-1) == 1:
        return t, LayoutType.RowMajor
    if t.stride(-2) == 1:
        return t, LayoutType.ColumnMajor
    return t.contiguous(), LayoutType.RowMajor


# ---- plans -------------------------------------------------------------------------------------------------------

_plans: dict[tuple[Any, ...], Gemm] = {}
_grouped_plans: dict[tuple[Any, ...], GroupedGemm] = {}
_bias_act_plans: dict[tuple[Any, ...], Gemm] = {}
_scaled_mm_plans: dict[tuple[Any, ...], Gemm] = {}
_moe_plans: dict[tuple[Any, ...], GroupedGemm] = {}
_plans_lock = threading.Lock()


def _cached(cache: dict[tuple[Any, ...], Any], key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
    """cache[key], made once (plans are safe to run from many threads, not to reconfigure)."""
    plan = cache.get(key)
    if plan is not None:
        return plan
    with _plans_lock:
        if key not in cache:
            cache[key] = make()
        return cache[key]


def _new_plan(plan_class: type, dtype: torch.dtype, layout_a: LayoutType, layout_b: LayoutType, device: int) -> Any:
    return plan_class(element=dtype, element_accumulator=_ACCUMULATORS[dtype], layout_A=layout_a, layout_B=layout_b,
                      layout_C=LayoutType.RowMajor, cc=_gemmkit.device_cc(device))


def _cached_plan(cache: dict[tuple[Any, ...], Any], plan_class: type, dtype: torch.dtype, layout_a: LayoutType, layout_b: LayoutType,
                 activation: str, parameter: float, device: int) -> Any:
    """The plan for these operands and this fused activation."""
    def make() -> Any:
        plan = _new_plan(plan_class, dtype, layout_a, layout_b, device)
        plan.activation = (activation, parameter) if activation == "leaky_relu" else activation
        return plan

    return _cached(cache, (dtype, layout_a, layout_b, activation, parameter if activation == "leaky_relu" else None,
                           device), make)


def _plan(dtype: torch.dtype, layout_a: LayoutType, layout_b: LayoutType, activation: str, parameter: float,
          device: int) -> Gemm:
    return cast(Gemm, _cached_plan(_plans, Gemm, dtype, layout_a, layout_b, activation, parameter, device))


def _grouped_plan(dtype: torch.dtype, layout_a: LayoutType, layout_b: LayoutType, activation: str, parameter: float,
                  device: int) -> GroupedGemm:
    return cast(GroupedGemm, _cached_plan(_grouped_plans, GroupedGemm, dtype, layout_a, layout_b, activation, parameter,
                                          device))


def plans() -> dict[tuple[Any, ...], Gemm]:
    """gemm's plans built so far, by (dtype, layout_A, layout_B, activation, leaky_relu slope, device)."""
    with _plans_lock:
        return dict(_plans)


def grouped_plans() -> dict[tuple[Any, ...], GroupedGemm]:
    """grouped_gemm's plans built so far, keyed as plans()."""
    with _plans_lock:
        return dict(_grouped_plans)


def scaled_mm_plans() -> dict[tuple[Any, ...], Gemm]:
    """scaled_mm's plans built so far, by (A's dtype, B's dtype, out_dtype, block scales, use_fast_accum, device,
    bias given)."""
    with _plans_lock:
        return dict(_scaled_mm_plans)


def moe_plans() -> dict[tuple[Any, ...], GroupedGemm]:
    """grouped_mm's and scaled_grouped_mm's plans built so far, by (A's dtype, B's dtype, B's layout, out dtype, block
    scales, device)."""
    with _plans_lock:
        return dict(_moe_plans)


def bias_act_plans() -> dict[tuple[Any, ...], Gemm]:
    """gemm_bias_act's plans built so far, by (dtype, layout_A, layout_B, bias given, residual given, activation,
    leaky_relu slope, device)."""
    with _plans_lock:
        return dict(_bias_act_plans)


@atexit.register
def _release_plans() -> None:
    """Drops the plans before the interpreter tears down: torch's op registry keeps this module's functions, and
    through them these caches, alive past the extension's own teardown, which would report the plans as leaked."""
    with _plans_lock:
        _plans.clear()
        _grouped_plans.clear()
        _bias_act_plans.clear()
        _scaled_mm_plans.clear()
        _moe_plans.clear()


# ---- gemm ----------------------------------------------------------------------------------------------------


def _launch(plan: Gemm, A: torch.Tensor, B: torch.Tensor, C: Optional[torch.Tensor], D: torch.Tensor, alpha: float,
            beta: float, row_scale: Optional[torch.Tensor] = None, column_scale: Optional[torch.Tensor] = None,
            scale_a: Optional[torch.Tensor] = None, scale_b: Optional[torch.Tensor] = None,
            bias: Optional[torch.Tensor] = None) -> None:
    """The plan's kernel on A's device and torch's current stream (gemmkit's run reads it), without a sync; with the
    scale vectors, block scales or bias of a plan that takes them."""
    with torch.cuda.device(A.device):
        plan.run(A, B, C, D, alpha, beta, sync=False, bias=bias, row_scale=row_scale, column_scale=column_scale,
                 scale_a=scale_a, scale_b=scale_b)


def _gemm(A: torch.Tensor, B: torch.Tensor, C: Optional[torch.Tensor] = None, alpha: float = 1.0, beta: float = 0.0,
          activation: str = "identity", activation_parameter: float = 0.01) -> torch.Tensor:
    """D = activation(alpha * A @ B + beta * C) by a gemmkit kernel (activation_parameter: leaky_relu's slope)."""
    shape = _output_shape(A, B, C, beta, activation)
    D = torch.empty(shape, dtype=A.dtype, device=A.device)
    if D.numel() == 0:
        return D
    if A.shape[-1] == 0:  # no product to compute: the kernels need K >= 1
        return D.copy_(_activation(activation).forward(beta * C if C is not None else torch.zeros_like(D),
                                                       activation_parameter))
    A, D, C = _folded(A, B, D, C)
    A, layout_a = _matrix(A)
    B, layout_b = _matrix(B)
    C = C.contiguous() if C is not None else None
    _launch(_plan(A.dtype, layout_a, layout_b, activation, activation_parameter, A.device.index), A, B, C, D, alpha,
            beta)
    return D.view(shape)


gemm = torch.library.custom_op("gemmkit::gemm", _gemm, mutates_args=(), device_types="cuda")


@gemm.register_fake
def _gemm_fake(A: torch.Tensor, B: torch.Tensor, C: Optional[torch.Tensor] = None, alpha: float = 1.0,
               beta: float = 0.0, activation: str = "identity", activation_parameter: float = 0.01) -> torch.Tensor:
    return A.new_empty(_output_shape(A, B, C, beta, activation))


def _gemm_setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    A, B, C, alpha, beta, activation, parameter = inputs
    from_output = _from_output(activation, parameter)
    # D serves the derivative when the activation's output determines it; otherwise backward recomputes Z (one
    # more GEMM) instead of keeping it from the forward pass.
    ctx.save_for_backward(A, B, C if not from_output else None, output if from_output else None)
    ctx.options = (alpha, beta, activation, parameter, from_output, C is not None)


def _gemm_backward(ctx: Any, dD: torch.Tensor) -> tuple[Any, ...]:
    A, B, C, D = ctx.saved_tensors
    alpha, beta, activation, parameter, from_output, has_c = ctx.options
    saved = D if from_output else gemm(A, B, C, alpha, beta if has_c else 0.0)
    dZ = _activation(activation).backward(dD, saved, parameter)
    dA = dB = dC = None
    if ctx.needs_input_grad[0]:  # dA = alpha * dZ @ B^T
        dA = gemm(dZ, B.mT, alpha=alpha).sum_to_size(A.shape)
    if ctx.needs_input_grad[1]:  # dB = alpha * A^T @ dZ
        if B.dim() == 2:
            dB = gemm(A.flatten(0, -2).mT, dZ.flatten(0, -2), alpha=alpha)  # flatten: K may be 0
        else:
            dB = gemm(A.mT, dZ, alpha=alpha).sum_to_size(B.shape)
    if has_c and ctx.needs_input_grad[2]:
        dC = dZ * beta
    return dA, dB, dC, None, None, None, None


gemm.register_autograd(_gemm_backward, setup_context=_gemm_setup_context)


# ---- gemm_bias_act: a linear layer's epilogue (bias, activation, residual) fused by an epilogue visitor tree ------

# Epilogue trees run on tensor-core kernels that compute D itself (not f32 row-major ones, which compute D^T).
_BIAS_ACT_DTYPES = (torch.float16, torch.bfloat16)


def _bias_act_shape(A: torch.Tensor, B: torch.Tensor, bias: Optional[torch.Tensor], residual: Optional[torch.Tensor],
                    activation: str) -> list[int]:
    """D's shape, after every check that needs no data (the fake implementation's too)."""
    if A.dtype not in _BIAS_ACT_DTYPES:
        raise TensorError(f"Tensor A has dtype {A.dtype}; gemmkit.torch.gemm_bias_act takes torch.float16 or "
                          "torch.bfloat16 (gemmkit.torch.gemm takes the others).")
    shape = _output_shape(A, B, None, 0.0, activation)
    for name, t, expected in (("bias", bias, [shape[-1]]), ("residual", residual, shape)):
        if t is None:
            continue
        if t.dtype != A.dtype:
            raise TensorError(f"Tensor {name} has dtype {t.dtype} but A has {A.dtype}; give every operand A's dtype.")
        if t.device != A.device:
            raise TensorError(f"Tensor {name} is on {t.device} but A is on {A.device}; put every operand on one "
                              "device.")
        if list(t.shape) != expected:
            what = "the row vector (N,) added to every row" if name == "bias" else "added to D, so it has D's shape"
            raise TensorError(f"Tensor {name} is {tuple(t.shape)} but D is {tuple(shape)}; {name} is {what}: "
                              f"{tuple(expected)}.")
    return shape


def _bias_act_tree(has_bias: bool, has_residual: bool, activation: str, slope: float) -> _gemmkit.Epilogue:
    """act(A @ B + bias) + residual as an epilogue tree: bias the row vector "bias" (one value per column, the same
    for every row), the residual the GEMM's C."""
    value = _gemmkit._evt_accumulator()
    if has_bias:
        value = value + _gemmkit._evt_row_broadcast("bias")
    if activation != "identity":
        value = _gemmkit._evt_activation(_gemmkit.Activation[activation], value, slope)
    if has_residual:
        value = value + _gemmkit._evt_source()
    return _gemmkit.Epilogue(value)


def _bias_act_plan(dtype: torch.dtype, layout_a: LayoutType, layout_b: LayoutType, has_bias: bool,
                   has_residual: bool, activation: str, slope: float, device: int) -> Gemm:
    def make() -> Gemm:
        plan = cast(Gemm, _new_plan(Gemm, dtype, layout_a, layout_b, device))
        plan.epilogue_visitor = _bias_act_tree(has_bias, has_residual, activation, slope)
        return plan

    slope_key = slope if activation == "leaky_relu" else None
    return cast(Gemm, _cached(_bias_act_plans, (dtype, layout_a, layout_b, has_bias, has_residual, activation,
                                                slope_key, device), make))


def _bias_act_launch(plan: Gemm, A: torch.Tensor, B: torch.Tensor, bias: Optional[torch.Tensor],
                     residual: Optional[torch.Tensor], D: torch.Tensor) -> None:
    """The plan's kernel on A's device and torch's current stream, without a sync; the residual is the GEMM's C."""
    with torch.cuda.device(A.device):
        plan.run(A, B, residual, D, sync=False, visitor_args={"bias": bias} if bias is not None else None)


def _gemm_bias_act(A: torch.Tensor, B: torch.Tensor, bias: Optional[torch.Tensor] = None,
                   residual: Optional[torch.Tensor] = None, activation: str = "identity",
                   slope: float = 0.01) -> torch.Tensor:
    """D = activation(A @ B + bias) + residual by one gemmkit kernel (the op torch.ops.gemmkit.gemm_bias_act, which
    torch.compile places in its graph): bias a row vector (N,) added to every row (a linear layer's bias), residual
    of D's shape, both optional; slope is leaky_relu's negative slope. A (..., M, K) with B (K, N), or batched as
    gemmkit.torch.gemm takes them; float16 or bfloat16 on one CUDA device. The epilogue is an epilogue visitor tree:
    one plan (and kernel) per dtype, layouts, bias and residual given or not, activation and slope. Not
    differentiable: its backward raises NotImplementedError (train with gemmkit.torch.gemm, which has a backward)."""
    shape = _bias_act_shape(A, B, bias, residual, activation)
    D = torch.empty(shape, dtype=A.dtype, device=A.device)
    if D.numel() == 0:
        return D
    if A.shape[-1] == 0:  # no product to compute: the kernels need K >= 1
        z = _activation(activation).forward(torch.zeros_like(D) + (bias if bias is not None else 0), slope)
        return D.copy_(z + residual if residual is not None else z)
    A, D, residual = _folded(A, B, D, residual)
    A, layout_a = _matrix(A)
    B, layout_b = _matrix(B)
    bias = bias.contiguous() if bias is not None else None
    residual = residual.contiguous() if residual is not None else None
    plan = _bias_act_plan(A.dtype, layout_a, layout_b, bias is not None, residual is not None, activation, slope,
                          A.device.index)
    _bias_act_launch(plan, A, B, bias, residual, D)
    return D.view(shape)


gemm_bias_act = torch.library.custom_op("gemmkit::gemm_bias_act", _gemm_bias_act, mutates_args=(),
                                        device_types="cuda")
gemm_bias_act.__doc__ = _gemm_bias_act.__doc__  # what help() and IDEs show for the op


@gemm_bias_act.register_fake
def _gemm_bias_act_fake(A: torch.Tensor, B: torch.Tensor, bias: Optional[torch.Tensor] = None,
                        residual: Optional[torch.Tensor] = None, activation: str = "identity",
                        slope: float = 0.01) -> torch.Tensor:
    return A.new_empty(_bias_act_shape(A, B, bias, residual, activation))


def _gemm_bias_act_backward(ctx: Any, dD: torch.Tensor) -> tuple[Any, ...]:
    raise NotImplementedError("gemmkit.torch.gemm_bias_act has no backward; to train, compute the layer with "
                              "gemmkit.torch.gemm, which has one (gemm(A, B, bias.expand(M, N), beta=1.0, "
                              "activation=...) + residual), or detach the inputs.")


gemm_bias_act.register_autograd(_gemm_bias_act_backward)


# ---- grouped_gemm ---------------------------------------------------------------------------------------------


def _grouped_shapes(As: list[torch.Tensor], Bs: list[torch.Tensor], Cs: Optional[list[torch.Tensor]], beta: float,
                    activation: str) -> list[list[int]]:
    """Every D's shape, after every check that needs no data (the fake implementation's too); errors name the
    group and the operand."""
    _activation(activation)
    groups = len(As)
    if groups == 0:
        raise TensorError("Tensors As: the list is empty; pass at least one group.")
    if len(Bs) != groups or (Cs is not None and len(Cs) != groups):
        lengths = f"{len(As)}, {len(Bs)}" + (f" and {len(Cs)}" if Cs is not None else "")
        raise TensorError(f"Lengths of As, Bs{' and Cs' if Cs is not None else ''} must be equal (one matrix per "
                          f"group): got {lengths}.")
    if Cs is None and beta != 0.0:
        raise TensorError(f"beta is {beta} but no Cs were given; pass Cs or beta=0.")
    dtype, device = As[0].dtype, As[0].device
    if dtype not in _ACCUMULATORS:
        raise TensorError(f"Tensor As[0] has dtype {dtype}; gemmkit.torch.grouped_gemm takes "
                          f"{', '.join(str(t) for t in _ACCUMULATORS)}.")
    shapes = []
    for g in range(groups):
        C = Cs[g] if Cs is not None else None
        for name, t in ((f"As[{g}]", As[g]), (f"Bs[{g}]", Bs[g]), (f"Cs[{g}]", C)):
            if t is None:
                continue
            if t.dim() != 2:
                raise TensorError(f"Tensor {name} is {tuple(t.shape)}; grouped_gemm takes one matrix (2-D) per group.")
            if t.dtype != dtype:
                raise TensorError(f"Tensor {name} has dtype {t.dtype} but As[0] has {dtype}; give every operand As[0]'s "
                                  "dtype.")
            if t.device != device:
                raise TensorError(f"Tensor {name} is on {t.device} but As[0] is on {device}; put every operand on one "
                                  "device.")
        if As[g].shape[1] != Bs[g].shape[0]:
            raise TensorError(f"Tensors As[{g}] and Bs[{g}]: A is {tuple(As[g].shape)} (M x K) but B is "
                              f"{tuple(Bs[g].shape)} (K x N); their K extents must agree.")
        shape = [As[g].shape[0], Bs[g].shape[1]]
        if C is not None and list(C.shape) != shape:
            raise TensorError(f"Tensor Cs[{g}] is {tuple(C.shape)} but As[{g}] @ Bs[{g}] is {tuple(shape)}.")
        shapes.append(shape)
    return shapes


def _fits(t: torch.Tensor, layout: LayoutType) -> bool:
    """gemmkit's rule: contiguous along the layout's fast dimension (extents of 0 or 1 need nothing), rows (or
    columns) not overlapping."""
    rows, cols = t.shape[-2], t.shape[-1]
    if layout == LayoutType.RowMajor:
        return (cols <= 1 or t.stride(-1) == 1) and t.stride(-2) >= (0 if rows <= 1 else cols)
    return (rows <= 1 or t.stride(-2) == 1) and t.stride(-1) >= (0 if cols <= 1 else rows)


def _matrices(ts: list[torch.Tensor]) -> tuple[list[torch.Tensor], LayoutType]:
    """The list and the one layout the plan reads it with: column-major when every matrix is, else row-major, with a
    copy of those that are not."""
    if all(_fits(t, LayoutType.ColumnMajor) for t in ts) and not all(_fits(t, LayoutType.RowMajor) for t in ts):
        return ts, LayoutType.ColumnMajor
    return [t if _fits(t, LayoutType.RowMajor) else t.contiguous() for t in ts], LayoutType.RowMajor


def _grouped_launch(plan: GroupedGemm, As: list[torch.Tensor], Bs: list[torch.Tensor], Cs: Optional[list[torch.Tensor]],
                    Ds: list[torch.Tensor], alpha: float, beta: float) -> None:
    """Every group in one launch on the operands' device and torch's current stream (gemmkit's run reads it): the
    metadata goes up in one stream-ordered copy, no sync."""
    with torch.cuda.device(As[0].device):
        plan.run(As, Bs, Cs, Ds, alpha, beta, sync=False)


def _grouped_gemm(As: list[torch.Tensor], Bs: list[torch.Tensor], Cs_or_empty: list[torch.Tensor],
                  alpha: float = 1.0, beta: float = 0.0, activation: str = "identity",
                  activation_parameter: float = 0.01) -> list[torch.Tensor]:
    """D[g] = activation(alpha * As[g] @ Bs[g] + beta * Cs[g]) for every group, in one gemmkit launch. The op takes
    no C as an empty list: torch < 2.15 cannot infer a schema for an optional list of tensors."""
    Cs = Cs_or_empty or None
    shapes = _grouped_shapes(As, Bs, Cs, beta, activation)
    Ds = [torch.empty(shape, dtype=As[0].dtype, device=As[0].device) for shape in shapes]
    As, layout_a = _matrices(As)
    Bs, layout_b = _matrices(Bs)
    Cs = [C.contiguous() for C in Cs] if Cs is not None else None
    if any(D.numel() > 0 and A.shape[1] > 0 for A, D in zip(As, Ds)):
        plan = _grouped_plan(As[0].dtype, layout_a, layout_b, activation, activation_parameter, As[0].device.index)
        _grouped_launch(plan, As, Bs, Cs, Ds, alpha, beta)
    for g, D in enumerate(Ds):  # no product to compute: the kernel skips K = 0 groups, torch fills them
        if As[g].shape[1] == 0 and D.numel() > 0:
            D.copy_(_activation(activation).forward(beta * Cs[g] if Cs is not None else torch.zeros_like(D),
                                                    activation_parameter))
    return Ds


grouped_gemm_op = torch.library.custom_op("gemmkit::grouped_gemm", _grouped_gemm, mutates_args=(),
                                          device_types="cuda")


def grouped_gemm(As: list[torch.Tensor], Bs: list[torch.Tensor], Cs: Optional[list[torch.Tensor]] = None,
                 alpha: float = 1.0, beta: float = 0.0, activation: str = "identity",
                 activation_parameter: float = 0.01) -> list[torch.Tensor]:
    """D[g] = activation(alpha * As[g] @ Bs[g] + beta * Cs[g]) for every group g in one gemmkit launch (the op
    torch.ops.gemmkit.grouped_gemm, grouped_gemm_op here; activation_parameter: leaky_relu's slope). Not
    differentiable: its backward raises NotImplementedError."""
    if len(As) == 0:  # torch's dispatcher finds no device without a tensor; say what is wrong instead
        raise TensorError("Tensors As: the list is empty; pass at least one group.")
    return cast(list[torch.Tensor],
                grouped_gemm_op(As, Bs, Cs or [], alpha, beta, activation, activation_parameter))


@grouped_gemm_op.register_fake
def _grouped_gemm_fake(As: list[torch.Tensor], Bs: list[torch.Tensor], Cs_or_empty: list[torch.Tensor],
                       alpha: float = 1.0, beta: float = 0.0, activation: str = "identity",
                       activation_parameter: float = 0.01) -> list[torch.Tensor]:
    return [As[0].new_empty(shape) for shape in _grouped_shapes(As, Bs, Cs_or_empty or None, beta, activation)]


def _grouped_gemm_backward(ctx: Any, dDs: list[torch.Tensor]) -> tuple[Any, ...]:
    raise NotImplementedError("gemmkit.torch.grouped_gemm has no backward; to differentiate, call gemmkit.torch.gemm "
                              "per group (its backward is two gemmkit GEMMs) or detach the inputs.")


grouped_gemm_op.register_autograd(_grouped_gemm_backward)



# ---- scaled_mm: FP8 with torch._scaled_mm's scales -----------------------------------------------------------------

_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
_FP8_OUTPUTS = (torch.bfloat16, torch.float16, torch.float32)


def _scaling(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
             out_dtype: torch.dtype, use_fast_accum: bool = False, bias: Optional[torch.Tensor] = None) -> str:
    """Which of _scaled_mm's scalings the scales' shapes ask for, after every check that needs no data."""
    if a.dtype not in _FP8 or b.dtype not in _FP8:
        raise TensorError(f"scaled_mm takes FP8 a and b (float8_e4m3fn or float8_e5m2); got {a.dtype} and {b.dtype}.")
    if out_dtype not in _FP8_OUTPUTS:
        raise TensorError(f"out_dtype is {out_dtype}; scaled_mm writes bfloat16, float16 or float32.")
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise TensorError(f"a is {tuple(a.shape)} and b is {tuple(b.shape)}; expected a (M, K) and b (K, N).")
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if s.dtype != torch.float32:
            raise TensorError(f"Tensor {name} has dtype {s.dtype}; the scales are float32.")
    (m, k), n = a.shape, b.shape[1]
    if bias is not None and (tuple(bias.shape) != (n,) or bias.dtype != out_dtype or bias.device != a.device):
        raise TensorError(f"Tensor bias is {bias.dtype} {tuple(bias.shape)} on {bias.device}; scaled_mm adds a bias "
                          f"({n},) of out_dtype ({out_dtype}) on a's device ({a.device}), one value per column of the "
                          "output.")
    k_blocks, n_blocks = (k + 127) // 128, (n + 127) // 128
    if scale_a.numel() == 1 and scale_b.numel() == 1:
        return "tensor"
    if tuple(scale_a.shape) == (m, 1) and tuple(scale_b.shape) == (1, n):
        return "row"
    if tuple(scale_a.shape) == (m, k_blocks) and tuple(scale_b.shape) == (k_blocks, n_blocks):
        if use_fast_accum:
            raise TensorError("use_fast_accum with 1 x 128 / 128 x 128 block scales: the block scales are applied "
                              "where the sums are promoted, which fast accumulation skips; pass use_fast_accum=False.")
        return "block"
    raise TensorError(f"scale_a is {tuple(scale_a.shape)} and scale_b {tuple(scale_b.shape)}; scaled_mm takes one "
                      f"value each (per tensor), ({m}, 1) and (1, {n}) (row-wise), or ({m}, {k_blocks}) and "
                      f"({k_blocks}, {n_blocks}) (1 x 128 and 128 x 128 blocks), as torch._scaled_mm does.")


def _scaled_mm_plan(a: torch.Tensor, b: torch.Tensor, out_dtype: torch.dtype, scaling: str,
                    use_fast_accum: bool, has_bias: bool) -> Gemm:
    device = a.device.index

    def make() -> Gemm:
        # No C (scaled_mm never reads one): the epilogue keeps no shared memory for it, which gives the mainloop a
        # stage more on the default tile (docs/fp8.md).
        plan = Gemm(element_A=a.dtype, element_B=b.dtype, element_C="void", element_D=out_dtype,
                    element_accumulator=torch.float32, layout_A=LayoutType.RowMajor, layout_B=LayoutType.ColumnMajor,
                    layout_C=LayoutType.RowMajor, cc=_gemmkit.device_cc(device))
        if scaling == "block":
            plan.block_scaling = "blockwise"
        else:  # per tensor runs as row-wise with the two scalars broadcast: no host read of a device scale
            plan.scale = "row_and_column"
        if use_fast_accum:
            plan.math_operation = "multiply_add_fast_accum"
        if has_bias:
            plan.bias = "column"  # one value per column of D, of D's type (a plan without C)
        return plan

    key = (a.dtype, b.dtype, out_dtype, scaling == "block", use_fast_accum, device, has_bias)
    return cast(Gemm, _cached(_scaled_mm_plans, key, make))


def _scaled_mm(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
               out_dtype: torch.dtype = torch.bfloat16, use_fast_accum: bool = False,
               bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """a @ b of FP8 a (M, K, row-major) and b (K, N, column-major: a weight (N, K) transposed) with torch._scaled_mm's
    scales, by a gemmkit kernel on SM90, written as out_dtype. use_fast_accum as torch's: the tensor cores accumulate
    throughout instead of promoting into f32 every 128 deep (not with block scales). bias: (N,) of out_dtype, added to
    every row after the scales, in the kernel's epilogue (torch._scaled_mm's bias)."""
    scaling = _scaling(a, b, scale_a, scale_b, out_dtype, use_fast_accum, bias)
    (m, k), n = a.shape, b.shape[1]
    D = torch.empty(m, n, dtype=out_dtype, device=a.device)
    if D.numel() == 0:
        return D
    if k == 0:
        return D.copy_(bias.expand(m, n)) if bias is not None else D.zero_()
    a = a if a.stride(1) == 1 else a.contiguous()
    b = b if b.stride(0) == 1 else b.t().contiguous().t()  # column-major, as FP8 tensor cores read it
    plan = _scaled_mm_plan(a, b, out_dtype, scaling, use_fast_accum, bias is not None)
    bias = bias.contiguous() if bias is not None else None
    if scaling == "block":
        # torch's B scales are those of b.t() (N/128 x K/128, row-major), handed over transposed.
        _launch(plan, a, b, None, D, 1.0, 0.0, scale_a=scale_a, scale_b=scale_b.t(), bias=bias)
    else:
        rows = scale_a.reshape(-1).expand(m).contiguous()
        columns = scale_b.reshape(-1).expand(n).contiguous()
        _launch(plan, a, b, None, D, 1.0, 0.0, row_scale=rows, column_scale=columns, bias=bias)
    return D


scaled_mm = torch.library.custom_op("gemmkit::scaled_mm", _scaled_mm, mutates_args=(), device_types="cuda")


@scaled_mm.register_fake
def _scaled_mm_fake(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
                    out_dtype: torch.dtype = torch.bfloat16, use_fast_accum: bool = False,
                    bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    _scaling(a, b, scale_a, scale_b, out_dtype, use_fast_accum, bias)
    return a.new_empty((a.shape[0], b.shape[1]), dtype=out_dtype)


def quantize_blockwise(x: torch.Tensor, rows: int = 1,
                       dtype: torch.dtype = torch.float8_e4m3fn) -> tuple[torch.Tensor, torch.Tensor]:
    """x (M, K) in FP8 blocks of `rows` x 128 (1: an activation, DeepSeek-V3's 1 x 128 blocks; 128: a weight (N, K)
    in 128 x 128 blocks), each block scaled so that its largest magnitude is the FP8 type's largest. Returns the FP8
    tensor (contiguous) and its float32 dequantization scales, x ~ q * scale per block, laid out as gemmkit's
    block-scaled plans take them: (M, ceil(K/128)) M-major for rows=1 (run's scale_a, and scaled_mm's), and
    (ceil(N/128), ceil(K/128)) row-major for rows=128 (run's scale_b; scaled_mm takes its transpose). An all-zero
    block gets the scale 1. Runs on x's device with torch operations; any floating dtype in."""
    if x.dim() != 2 or not x.dtype.is_floating_point:
        raise TensorError(f"quantize_blockwise takes a floating-point matrix (M, K); got {x.dtype} {tuple(x.shape)}.")
    if rows not in (1, 128):
        raise _gemmkit.ConfigError(f"rows is {rows}; quantize_blockwise makes 1 x 128 (activation) or 128 x 128 "
                                   "(weight) blocks.")
    if dtype not in _FP8:
        raise TensorError(f"dtype is {dtype}; quantize_blockwise writes float8_e4m3fn or float8_e5m2.")
    m, k = x.shape
    row_blocks, k_blocks = (m + rows - 1) // rows, (k + 127) // 128
    padded = x.new_zeros((row_blocks * rows, k_blocks * 128), dtype=torch.float32)
    padded[:m, :k] = x
    blocks = padded.view(row_blocks, rows, k_blocks, 128)
    largest = blocks.abs().amax(dim=(1, 3))  # (row_blocks, k_blocks)
    scale = torch.where(largest > 0, largest / torch.finfo(dtype).max, torch.ones_like(largest))
    q = (blocks / scale[:, None, :, None]).view(row_blocks * rows, k_blocks * 128)[:m, :k]
    q = q.clamp(-torch.finfo(dtype).max, torch.finfo(dtype).max).to(dtype).contiguous()
    if rows == 1:
        return q, scale.t().contiguous().t()  # (M, KB), M-major
    return q, scale.contiguous()


# ---- grouped_mm / scaled_grouped_mm: the MoE form, as torch._grouped_mm --------------------------------------------

_MOE_DTYPES = (torch.float16, torch.bfloat16)


def _moe_shape(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor, op: str) -> list[int]:
    """D's shape (total_M, N), after every check that needs no data."""
    if a.dim() != 2 or b.dim() != 3 or a.shape[1] != b.shape[1]:
        raise TensorError(f"{op}: a is {tuple(a.shape)} and b is {tuple(b.shape)}; expected a (total_M, K), the "
                          "stacked tokens, and b (G, K, N), one matrix per expert (a weight (G, N, K) transposed).")
    if offs.dtype != torch.int32 or offs.dim() != 1 or offs.shape[0] != b.shape[0]:
        raise TensorError(f"{op}: offs is {offs.dtype} {tuple(offs.shape)}; expected int32 ({b.shape[0]},), each "
                          "expert's cumulative row end in a.")
    for name, t in (("b", b), ("offs", offs)):
        if t.device != a.device:
            raise TensorError(f"{op}: {name} is on {t.device} but a is on {a.device}; put every operand on one device.")
    return [a.shape[0], b.shape[2]]


def _grouped_mm_shape(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor,
                      out_dtype: Optional[torch.dtype]) -> list[int]:
    """grouped_mm's D shape, after its checks that need no data (the fake implementation's too)."""
    shape = _moe_shape(a, b, offs, "grouped_mm")
    if a.dtype not in _MOE_DTYPES or b.dtype != a.dtype:
        raise TensorError(f"grouped_mm takes float16 or bfloat16 a and b of one dtype; got {a.dtype} and {b.dtype}.")
    if out_dtype not in (None, a.dtype):
        raise TensorError(f"out_dtype is {out_dtype}; grouped_mm writes a's dtype ({a.dtype}).")
    return shape


def _weight_layout(b: torch.Tensor) -> tuple[torch.Tensor, LayoutType]:
    """b (G, K, N) as the plan reads it: transposed weights (each expert column-major) as they are, else row-major."""
    if b.stride(1) == 1 and b.stride(2) >= max(1, b.shape[1]) and b.stride(0) >= b.shape[1] * b.shape[2]:
        return b, LayoutType.ColumnMajor
    return b.contiguous(), LayoutType.RowMajor


def _moe_plan(a: torch.Tensor, b: torch.Tensor, layout_b: LayoutType, out_dtype: torch.dtype,
              blockwise: bool) -> GroupedGemm:
    device = a.device.index

    def make() -> GroupedGemm:
        plan = GroupedGemm(element_A=a.dtype, element_B=b.dtype, element_C=out_dtype, element_D=out_dtype,
                           element_accumulator=torch.float32, layout_A=LayoutType.RowMajor, layout_B=layout_b,
                           layout_C=LayoutType.RowMajor, cc=_gemmkit.device_cc(device))
        if blockwise:
            plan.block_scaling = "blockwise"
        return plan

    return cast(GroupedGemm, _cached(_moe_plans, (a.dtype, b.dtype, layout_b, out_dtype, blockwise, device), make))


def _moe_launch(plan: GroupedGemm, a: torch.Tensor, b: torch.Tensor, D: torch.Tensor, offs: torch.Tensor,
                scale_a: Optional[torch.Tensor] = None, scale_b: Optional[torch.Tensor] = None) -> None:
    """One launch on a's device and torch's current stream: the GPU derives each expert's rows from offs."""
    with torch.cuda.device(a.device):
        plan.run_contiguous(a, b, D, offs, sync=False, scale_a=scale_a, scale_b=scale_b)


def _grouped_mm(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor,
                out_dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """D[rows of expert g] = a[rows of expert g] @ b[g] for every expert, by one gemmkit launch. a (total_M, K) holds
    the experts' tokens back to back, expert g owning rows offs[g-1]..offs[g] (offs int32 on the GPU; an expert may
    own none); b (G, K, N), each expert's matrix row-major or, as a weight (G, N, K) transposed, column-major. Rows
    past offs[-1] are not written, as in torch._grouped_mm. float16 or bfloat16, f32 accumulation."""
    shape = _grouped_mm_shape(a, b, offs, out_dtype)
    D = torch.empty(shape, dtype=a.dtype, device=a.device)
    if D.numel() == 0:
        return D
    if a.shape[1] == 0:
        return D.zero_()
    b, layout_b = _weight_layout(b)
    _moe_launch(_moe_plan(a, b, layout_b, a.dtype, False), a.contiguous(), b, D, offs)
    return D


grouped_mm = torch.library.custom_op("gemmkit::grouped_mm", _grouped_mm, mutates_args=(), device_types="cuda")


@grouped_mm.register_fake
def _grouped_mm_fake(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor,
                     out_dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    return a.new_empty(_grouped_mm_shape(a, b, offs, out_dtype))


def _scaled_grouped_mm_shape(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
                             offs: torch.Tensor, out_dtype: torch.dtype) -> list[int]:
    """scaled_grouped_mm's D shape, after its checks that need no data (the fake implementation's too)."""
    shape = _moe_shape(a, b, offs, "scaled_grouped_mm")
    if a.dtype not in _FP8 or b.dtype not in _FP8:
        raise TensorError(f"scaled_grouped_mm takes FP8 a and b (float8_e4m3fn or float8_e5m2); got {a.dtype} and "
                          f"{b.dtype}.")
    if out_dtype not in _FP8_OUTPUTS:
        raise TensorError(f"out_dtype is {out_dtype}; scaled_grouped_mm writes bfloat16, float16 or float32.")
    total, k = a.shape
    groups, n = b.shape[0], b.shape[2]
    k_blocks, n_blocks = (k + 127) // 128, (n + 127) // 128
    for name, s, expected in (("scale_a", scale_a, (total, k_blocks)),
                              ("scale_b", scale_b, (groups, k_blocks, n_blocks))):
        if s.dtype != torch.float32 or tuple(s.shape) != expected:
            raise TensorError(f"Tensor {name} is {s.dtype} {tuple(s.shape)}; expected float32 {expected}: 1 x 128 "
                              "blocks of a's rows (scale_a) and 128 x 128 blocks of each expert's b (scale_b).")
    return shape


def _scaled_grouped_mm(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
                       offs: torch.Tensor, out_dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    """grouped_mm of FP8 a (total_M, K) and b (G, K, N) (a weight (G, N, K) transposed: FP8 tensor cores read it
    column-major) with DeepSeek-V3's block scales, by one gemmkit launch on SM90: scale_a (total_M, ceil(K/128))
    scales each token's 128-deep K blocks, scale_b (G, ceil(K/128), ceil(N/128)) each expert's 128 x 128 blocks of b
    (a weight's (G, N/128, K/128) scales transposed, as scaled_mm takes them), float32. Written as out_dtype."""
    D = torch.empty(_scaled_grouped_mm_shape(a, b, scale_a, scale_b, offs, out_dtype), dtype=out_dtype,
                    device=a.device)
    if D.numel() == 0:
        return D
    if a.shape[1] == 0:
        return D.zero_()
    b = b if b.stride(1) == 1 else b.transpose(1, 2).contiguous().transpose(1, 2)  # column-major per expert
    plan = _moe_plan(a, b, LayoutType.ColumnMajor, out_dtype, True)
    # The kernel takes A's scales row-major (an expert's are its tokens' rows) and the weights' (G, N/128, K/128).
    _moe_launch(plan, a.contiguous(), b, D, offs, scale_a.contiguous(), scale_b.transpose(1, 2).contiguous())
    return D


scaled_grouped_mm = torch.library.custom_op("gemmkit::scaled_grouped_mm", _scaled_grouped_mm, mutates_args=(),
                                            device_types="cuda")


@scaled_grouped_mm.register_fake
def _scaled_grouped_mm_fake(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
                            offs: torch.Tensor, out_dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    return a.new_empty(_scaled_grouped_mm_shape(a, b, scale_a, scale_b, offs, out_dtype), dtype=out_dtype)


def _moe_backward(ctx: Any, dD: torch.Tensor) -> tuple[Any, ...]:
    raise NotImplementedError("gemmkit.torch.grouped_mm and scaled_grouped_mm have no backward; detach the inputs, or "
                              "differentiate per expert with gemmkit.torch.gemm.")


grouped_mm.register_autograd(_moe_backward)
scaled_grouped_mm.register_autograd(_moe_backward)
