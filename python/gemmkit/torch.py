"""python/gemmkit/torch.py: gemmkit kernels as torch custom ops (torch.ops.gemmkit.*), which torch.compile traces
(fake implementations), CUDA graphs capture and autograd differentiates.

    import gemmkit.torch
    D = gemmkit.torch.gemm(A, B)                                       # also torch.ops.gemmkit.gemm
    D = gemmkit.torch.gemm(x, w.mT, bias_matrix, beta=1.0, activation="gelu")

One gemmkit plan serves each (dtypes, layouts, activation, device); the first call of a plan compiles its kernel
(or finds it in gemmkit's disk cache). Run one call eagerly before capturing a CUDA graph, as for any lazily
built kernel. Tensors: float16, bfloat16, float32 (TF32 tensor cores) or float64, on one CUDA device; A is
(..., M, K) with B (K, N), or batched (L, M, K) / (M, K) with B (L, K, N); C has D's shape; D is contiguous.
"""
from __future__ import annotations

import dataclasses
import threading
from typing import Any, Callable, Optional

import torch

from . import _gemmkit
from ._gemmkit import LayoutType, TensorError
from .op import Gemm

__all__ = ["gemm", "plans"]

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


def _matrix(t: torch.Tensor) -> tuple[torch.Tensor, LayoutType]:
    """The tensor and the layout gemmkit reads it with; a copy only when neither layout expresses it."""
    if t.stride(-1) == 1:
        return t, LayoutType.RowMajor
    if t.stride(-2) == 1:
        return t, LayoutType.ColumnMajor
    return t.contiguous(), LayoutType.RowMajor


# ---- plans -------------------------------------------------------------------------------------------------------

_plans: dict[tuple[Any, ...], Gemm] = {}
_plans_lock = threading.Lock()


def _plan(dtype: torch.dtype, layout_a: LayoutType, layout_b: LayoutType, activation: str, parameter: float,
          device: int) -> Gemm:
    """The plan for these operands; created once (plans are safe to run from many threads, not to reconfigure)."""
    key = (dtype, layout_a, layout_b, activation, parameter if activation == "leaky_relu" else None, device)
    plan = _plans.get(key)
    if plan is not None:
        return plan
    with _plans_lock:
        if key not in _plans:
            plan = Gemm(element=dtype, element_accumulator=_ACCUMULATORS[dtype], layout_A=layout_a,
                        layout_B=layout_b, layout_C=LayoutType.RowMajor, cc=_gemmkit.device_cc(device))
            plan.activation = (activation, parameter) if activation == "leaky_relu" else activation
            _plans[key] = plan
        return _plans[key]


def plans() -> dict[tuple[Any, ...], Gemm]:
    """The plans built so far, by (dtype, layout_A, layout_B, activation, leaky_relu slope, device)."""
    with _plans_lock:
        return dict(_plans)


# ---- gemm ----------------------------------------------------------------------------------------------------


def _launch(plan: Gemm, A: torch.Tensor, B: torch.Tensor, C: Optional[torch.Tensor], D: torch.Tensor, alpha: float,
            beta: float) -> None:
    """The plan's kernel on A's device and torch's current stream (gemmkit's run reads it), without a sync."""
    with torch.cuda.device(A.device):
        plan.run(A, B, C, D, alpha, beta, sync=False)


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
    if B.dim() == 2:  # (..., M, K) @ (K, N): one GEMM over the folded rows
        A, D = A.flatten(0, -2), D.flatten(0, -2)
        C = C.flatten(0, -2) if C is not None else None
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

# grouped_gemm: torch.ops.gemmkit.grouped_gemm(As, Bs, Cs=None, alpha, beta) joins here with GroupedGemm (issue 12):
# a custom op over lists of tensors, its fake implementation from _output_shape per pair, and its plan cache.
