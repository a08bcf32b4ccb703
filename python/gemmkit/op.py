"""gemmkit.op.Gemm, GroupedGemm and Conv2d: the reference's plan API over the C++ plans (gemmkit._gemmkit.Gemm,
GroupedGemm and Conv2d). They convert names, numpy / torch dtypes and streams, and pass everything else through; checks and
errors come from C++."""
from __future__ import annotations

import enum
import inspect
import numbers
from typing import TYPE_CHECKING, Any, Optional, Sequence, Union, cast

from . import _convert
from ._convert import (
    ActivationLike,
    DataTypeLike,
    EnumLike,
    LayoutLike,
    OpcodeClassLike,
    StreamLike,
    SwizzleLike,
    TileLike,
)
from ._gemmkit import (
    Activation,
    BiasMode,
    BlockScaling,
    CompiledKernel,
    ConfigError,
    ConvKind,
    Decomposition,
    Epilogue,
    Error,
    IteratorAlgorithm,
    KernelSpec,
    MathOperation,
    OpcodeClass,
    RasterOrder,
    ReductionMode,
    ScaleMode,
    SplitKMode,
    StrideSupport,
    SwizzlingFunctor,
    TensorError,
    TileDescription,
)
from ._gemmkit import Conv2d as _ConvPlan
from ._gemmkit import Gemm as _Plan
from ._gemmkit import Plan as _Base
from ._gemmkit import GroupedGemm as _GroupedPlan
from ._gemmkit import render as _render
from .epilogue import TracedEpilogue

__all__ = ["Conv2d", "Conv2dDgrad", "Conv2dFprop", "Conv2dWgrad", "Gemm", "GroupedGemm"]


def __dir__() -> list[str]:
    """dir() shows the API; the enums, errors and typing helpers the methods use stay attributes, unlisted."""
    return sorted({*__all__, *(name for name in globals() if name.startswith("__"))})

#: A tensor gemmkit reads without a copy: a numpy array, a torch / cupy / jax tensor, or None (not given).
Tensor = Any


def _plan_arguments(element_accumulator: DataTypeLike, element: DataTypeLike, layout: LayoutLike,
                    element_A: DataTypeLike, element_B: DataTypeLike, element_C: DataTypeLike,
                    element_D: DataTypeLike, layout_A: LayoutLike, layout_B: LayoutLike, layout_C: LayoutLike,
                    A: Tensor, B: Tensor, C: Tensor, D: Tensor, cc: Optional[int],
                    kernel_cc: Optional[int]) -> dict[str, Any]:
    """The C++ plans' keyword arguments: names and numpy / torch dtypes converted."""
    dt, lt = _convert.data_type, _convert.layout
    return dict(element=dt(element), element_A=dt(element_A), element_B=dt(element_B), element_C=dt(element_C),
                element_D=dt(element_D), element_accumulator=dt(element_accumulator), layout=lt(layout),
                layout_A=lt(layout_A), layout_B=lt(layout_B), layout_C=lt(layout_C), A=A, B=B, C=C, D=D, cc=cc,
                kernel_cc=kernel_cc)


def _set(plan: _Base, name: str, value: object) -> None:
    """Sets the C++ plan's property `name` (the Python properties below widen what their setters take): the one of
    the nearest C++ class of the plan that has it (a property every plan has lives on the C++ Plan)."""
    native = (_Plan, _GroupedPlan, _ConvPlan, _Base)
    owner = next(c for c in type(plan).__mro__ if c in native and name in c.__dict__)
    getattr(owner, name).__set__(plan, value)


def _operand_fields(name: str, operands: str, values: Sequence[enum.Enum]) -> list[str]:
    """repr fields: `name=value` when every operand agrees (the constructor's generic argument), else per operand."""
    if len(set(values)) == 1:
        return [f"{name}={values[0].name}"]
    return [f"{name}_{x}={v.name}" for x, v in zip(operands, values)]


# nanobind classes take one nanobind base, so at run time the shared configuration is a plain mixin placed before the
# C++ plan; type checkers see it as the C++ plan's subclass, which is what its methods (through super()) reach.
if TYPE_CHECKING:
    _Mixin = _Base
else:
    class _Mixin:
        __slots__ = ()

        def __new__(cls, *args, **kwargs):
            """Allocates the C++ plan; __init__ takes the arguments and declares it."""
            return super().__new__(cls)

        # help() would list nanobind's allocator as __new__(*args, **kwargs); placed after the plans' __init__ in the
        # MRO, this one leaves inspect.signature() to __init__ and shows what calling it directly takes.
        __new__.__signature__ = inspect.Signature([inspect.Parameter("cls", inspect.Parameter.POSITIONAL_OR_KEYWORD)])


class _Configuration(_Mixin):
    """The configuration both plans share: the C++ base class's properties, taking names as well as enums."""

    __slots__ = ()  # the plans hold _defaults: a slot here would clash with the C++ plan's instance layout

    def __init__(self, A: Tensor = None, B: Tensor = None, C: Tensor = None, D: Tensor = None, alpha: float = 1.0,
                 beta: float = 0.0, element_accumulator: DataTypeLike = None, element: DataTypeLike = None,
                 layout: LayoutLike = None, element_A: DataTypeLike = None, element_B: DataTypeLike = None,
                 element_C: DataTypeLike = None, element_D: DataTypeLike = None, layout_A: LayoutLike = None,
                 layout_B: LayoutLike = None, layout_C: LayoutLike = None, cc: Optional[int] = None,
                 kernel_cc: Optional[int] = None) -> None:
        """Declares the plan (see the class); raises ConfigError when no kernel fits. Tensors and alpha / beta given
        here are the defaults of run() (a grouped plan's tensors are only representative)."""
        super().__init__(**_plan_arguments(element_accumulator, element, layout, element_A, element_B, element_C,
                                           element_D, layout_A, layout_B, layout_C, A, B, C, D, cc, kernel_cc))
        self._defaults: tuple[Tensor, Tensor, Tensor, Tensor, float, float] = (A, B, C, D, alpha, beta)

    def __repr__(self) -> str:
        """The plan's kind, element types, layouts, opclass, cc and kernel (kernel_name() compiles nothing)."""
        fields = [f"kind={self.kind.name}"] if isinstance(self, _ConvPlan) else []
        fields += _operand_fields("element", "ABCD", (self.element_A, self.element_B, self.element_C, self.element_D))
        fields.append(f"element_accumulator={self.element_accumulator.name}")
        if not isinstance(self, _ConvPlan):  # conv operands are NHWC / KRSC tensors, not matrices
            fields += _operand_fields("layout", "ABC", (self.layout_A, self.layout_B, self.layout_C))
        fields += [f"opclass={self.opclass.name}", f"cc={self.cc}", f"kernel_cc={self.kernel_cc}"]
        try:
            fields.append(f"kernel={self.kernel_name()}")
        except Error:  # a repr never raises; the configuration's error shows where the plan is used
            pass
        return f"{type(self).__name__}({', '.join(fields)})"

    @staticmethod
    def activations() -> list[Activation]:
        """Every activation gemmkit fuses into the epilogue (gemmkit.epilogue lists the same)."""
        return _Base.activations()

    @property
    def opclass(self) -> OpcodeClass:
        """OpcodeClass.TensorOp or Simt; settable with the enum or "tensor_op" / "simt"."""
        return super().opclass

    @opclass.setter
    def opclass(self, value: OpcodeClassLike) -> None:
        _set(self, "opclass", _convert.opcode_class(value))

    @property
    def activation(self) -> Activation:
        """The fused activation; set an Activation (gemmkit.epilogue.relu), its name, or (activation, slope)."""
        return super().activation

    @activation.setter
    def activation(self, value: ActivationLike) -> None:
        act, slope = _convert.activation(value, self.activations())
        if slope is None:
            self.set_activation(act)
        else:
            self.set_activation(act, slope)

    @property
    def swizzling_functor(self) -> SwizzlingFunctor:
        """The threadblock swizzle; set a gemmkit.swizzle functor or its name."""
        return super().swizzling_functor

    @swizzling_functor.setter
    def swizzling_functor(self, value: SwizzleLike) -> None:
        _set(self, "swizzling_functor", _convert.swizzle(value, self.swizzling_functors()))

    @property
    def math_operation(self) -> Optional[MathOperation]:
        """The kernels' math operation, or None (the family's default); settable with the enum or its name, e.g.
        "multiply_add_fast_f32" (3xTF32). One that only CUTLASS 2.x kernels offer moves an SM90 plan without
        kernel_cc to them (plan.kernel_cc becomes 80, said once on stderr)."""
        value: Optional[MathOperation] = _Base.math_operation.__get__(self)
        return value

    @math_operation.setter
    def math_operation(self, value: Optional[EnumLike[MathOperation]]) -> None:
        member = None if value is None else _convert.enum_member(MathOperation, value, "math operation")
        _set(self, "math_operation", member)

    @property
    def tile_description(self) -> Optional[TileDescription]:
        """The configuration set on the plan (None: the default, chosen per alignment). Set a TileDescription, or
        a dict of fields laid over the current one."""
        return super().tile_description

    @tile_description.setter
    def tile_description(self, value: TileLike) -> None:
        _set(self, "tile_description", self._tile(value))

    def _tile(self, value: TileLike) -> Optional[TileDescription]:
        if not isinstance(value, dict):
            return value
        return _convert.tile_description(value, self.tile_description or self.spec().tile_description)

    def construct(self, tile_description: TileLike = None, alignment_A: Optional[int] = None,
                  alignment_B: Optional[int] = None, alignment_C: Optional[int] = None) -> KernelSpec:
        """The KernelSpec for the widest alignments (or those given). A tile given here stays in the plan."""
        return super().construct(self._tile(tile_description), alignment_A, alignment_B, alignment_C)

    def compile(self, tile_description: TileLike = None, print_module: bool = False) -> CompiledKernel:
        """Generates and compiles the kernel through the on-disk cache (nvcc; no GPU needed). A tile given here
        stays in the plan; print_module prints the generated source first."""
        tile = self._tile(tile_description)
        if print_module:
            if tile is not None:
                super().construct(tile)
            print(self.render_source().text)
        return super().compile(tile)


class Gemm(_Configuration, _Plan):
    """A GEMM plan, D = act(alpha * A @ B + beta * C + bias).

    Per operand, a representative tensor (A/B/C/D: its dtype and strides) wins over element_X / layout_X,
    which win over the generic element / layout; element_accumulator defaults to C's element type (f32 for FP8
    A and B: "e4m3" / "e5m2" or torch.float8_e4m3fn / float8_e5m2, SM90 only, A row-major, B column-major); cc defaults
    to the current GPU's; kernel_cc asks for a kernel generation (80: CUTLASS 2.x kernels, also on an SM90 GPU).
    Tensors and alpha / beta given here are the defaults of run(). Planning, construct() and compile() need no GPU
    when cc is given; run() needs one.
    """

    __slots__ = ("_defaults", "_visitor")

    # The property holds what was set, a traced function or a bare tree, where the C++ plan's holds the tree alone.
    @property  # type: ignore[override]
    def epilogue_visitor(self) -> Union[TracedEpilogue, Epilogue, None]:
        """The epilogue visitor tree (CUTLASS 3.x and 2.x tensor-op kernels): set what gemmkit.epilogue.trace
        returns (or a gemmkit._gemmkit.Epilogue; None returns to the plain epilogue). It replaces the bias, scales and
        activation (alpha and beta are the tree's scalars of those names, if it has them); run() takes the tensors
        and scalars it names in visitor_args. Reads back what was set."""
        tree: Optional[Epilogue] = _Plan.epilogue_visitor.__get__(self)
        held = getattr(self, "_visitor", None)
        if isinstance(held, TracedEpilogue) and tree is not None and held.epilogue == tree:
            return held
        return tree

    @epilogue_visitor.setter
    def epilogue_visitor(self, value: Union[TracedEpilogue, Epilogue, None]) -> None:
        if isinstance(value, TracedEpilogue):
            self._check_traced_operands(value)
        _set(self, "epilogue_visitor", value.epilogue if isinstance(value, TracedEpilogue) else value)
        self._visitor = value

    def _check_traced_operands(self, visitor: TracedEpilogue) -> None:
        """The examples' C and D against the plan's: the kernel reads and writes them in the plan's types."""
        for name, (element, layout) in visitor.operands.items():
            planned = self.element_C if name == "C" else self.element_D
            if element != planned or layout != self.layout_C:
                raise ConfigError(f"epilogue_visitor: the traced {name} is {element.name} {layout.name}, the plan's "
                                  f"{name} {planned.name} {self.layout_C.name}; trace with a {name} like the plan's.")

    @staticmethod
    def _visitor_arguments(visitor_args: dict[str, Any], visitor: Optional[TracedEpilogue]) -> dict[str, Any]:
        """visitor_args as the C++ run() takes them: without `accum` (the reference's test bed passes one) and the
        traced function's parameters the tree does not read; numbers as floats."""
        unread = {"accum"}
        if isinstance(visitor, TracedEpilogue):
            unread |= set(visitor.arguments) - set(visitor.inputs) - {"C", "D"}
        return {name: float(value) if isinstance(value, numbers.Real) else value
                for name, value in visitor_args.items() if name not in unread}

    @property
    def bias(self) -> BiasMode:
        """BiasMode.none, row or column; settable with the enum or its name. run() then takes bias=."""
        return super().bias

    @bias.setter
    def bias(self, value: EnumLike[BiasMode]) -> None:
        _set(self, "bias", _convert.enum_member(BiasMode, value, "bias"))

    @property
    def scale(self) -> ScaleMode:
        """ScaleMode.none, row, column or row_and_column (SM90 kernels; e.g. FP8 dequantization scales); settable
        with the enum or its name. run() then takes row_scale= (m float32) and / or column_scale= (n float32)."""
        return super().scale

    @scale.setter
    def scale(self, value: EnumLike[ScaleMode]) -> None:
        _set(self, "scale", _convert.enum_member(ScaleMode, value, "scale"))

    @property
    def block_scaling(self) -> BlockScaling:
        """BlockScaling.none or blockwise (SM90 FP8 plans); settable with the enum or its name. blockwise scales
        each 128-deep K block of A @ B in the mainloop by A's scale of the row and B's scale of the 128 x 128 block
        (the DeepSeek-V3 format); run() then takes scale_a= (M x ceil(K/128) float32, M-major: strides (1, M)) and
        scale_b= (ceil(N/128) x ceil(K/128) float32, row-major), the layouts torch._scaled_mm takes."""
        return super().block_scaling

    @block_scaling.setter
    def block_scaling(self, value: EnumLike[BlockScaling]) -> None:
        _set(self, "block_scaling", _convert.enum_member(BlockScaling, value, "block scaling"))

    @property
    def raster_order(self) -> RasterOrder:
        """RasterOrder.Heuristic, AlongM or AlongN (SM90 kernels); settable with the enum or its name."""
        return super().raster_order

    @raster_order.setter
    def raster_order(self, value: EnumLike[RasterOrder]) -> None:
        _set(self, "raster_order", _convert.enum_member(RasterOrder, value, "raster order"))

    @property
    def decomposition(self) -> Decomposition:
        """Decomposition.Auto (run() chooses per shape), Heuristic, DataParallel or StreamK (SM90 Stream-K kernels;
        SplitK: set_split_k_slices); settable with the enum or its name."""
        return super().decomposition

    @decomposition.setter
    def decomposition(self, value: EnumLike[Decomposition]) -> None:
        _set(self, "decomposition", _convert.enum_member(Decomposition, value, "decomposition"))

    @property
    def reduction_mode(self) -> ReductionMode:
        """ReductionMode.Deterministic or Nondeterministic (split-K / Stream-K); settable with the enum or its name."""
        return super().reduction_mode

    @reduction_mode.setter
    def reduction_mode(self, value: EnumLike[ReductionMode]) -> None:
        _set(self, "reduction_mode", _convert.enum_member(ReductionMode, value, "reduction mode"))

    # run() and run_contiguous() take the reference's arguments (print_module, any stream object), not the C++ base
    # class's: the override is deliberate.
    def run(self, A: Tensor = None, B: Tensor = None, C: Tensor = None, D: Tensor = None,  # type: ignore[override]
            alpha: Optional[float] = None, beta: Optional[float] = None, sync: bool = True,
            print_module: bool = False, stream: StreamLike = None, bias: Tensor = None, row_scale: Tensor = None,
            column_scale: Tensor = None, visitor_args: Optional[dict[str, Any]] = None, scale_a: Tensor = None,
            scale_b: Tensor = None) -> None:
        """D = act(alpha * A @ B + beta * C + bias). Arguments left as None take the constructor's. Device tensors
        run in place on `stream` (a torch / cupy stream or an int; by default torch's or cupy's current stream, else
        the default stream); sync=False returns once launched. Host arrays (numpy, torch CPU) are staged through the
        GPU and D holds the result on return. bias: the vector a plan with a bias adds (m or n elements of C's
        type). row_scale / column_scale: the float32 vectors of a plan with scale vectors (m / n elements) that
        multiply A @ B per output row / column before alpha (FP8 per-row and per-column dequantization scales).
        scale_a / scale_b: a block-scaled plan's float32 scales (see block_scaling).
        visitor_args: with an epilogue_visitor, its tensors and scalars by name (numbers for scalars; alpha and beta
        default to the arguments; C and D may be given here instead)."""
        A0, B0, C0, D0, alpha0, beta0 = self._defaults
        # The traced function set as epilogue_visitor, while it is still the plan's tree (None for other plans).
        held = self.epilogue_visitor if getattr(self, "_visitor", None) is not None else None
        visitor = held if isinstance(held, TracedEpilogue) else None
        if visitor_args is not None:
            visitor_args = self._visitor_arguments(visitor_args, visitor)
            C = visitor_args.get("C") if C is None else C
            D = visitor_args.get("D") if D is None else D
        A = A0 if A is None else A
        B = B0 if B is None else B
        C = C0 if C is None else C
        D = D0 if D is None else D
        alpha = alpha0 if alpha is None else alpha
        beta = beta0 if beta is None else beta
        if visitor is not None and visitor.transforms:  # its permute() / reshape() of the tensors
            C, D = visitor.kernel_view("C", C), visitor.kernel_view("D", D)
            if visitor_args is not None:
                visitor_args = {name: visitor.kernel_view(name, value) for name, value in visitor_args.items()}
        handle = None if stream is None else _convert.stream_handle(stream)  # None: D's framework's stream
        if print_module:
            print(_render(self.spec_for(A, B, C, D, beta)).text)
        super().run(A, B, C, D, alpha, beta, handle, sync, bias, row_scale, column_scale, scale_a, scale_b, visitor_args)

    def tune(self, A: Tensor = None, B: Tensor = None, C: Tensor = None, D: Tensor = None,
             alpha: Optional[float] = None, beta: Optional[float] = None, stream: StreamLike = None,
             max_candidates: int = 12, time_budget_s: float = 110.0, store: bool = True,
             verbose: bool = False, min_gain: float = 0.03) -> dict[str, Any]:
        """Autotunes this problem on device tensors (torch / cupy CUDA arrays): compiles up to max_candidates of the
        plan's configurations in parallel, times each (warm-up, median of rounds), checks its result against the
        kernel run() picked before, and stores the fastest — when at least min_gain (a fraction) faster than that
        kernel, else that kernel — in the tuning database (gemmkit.tuning_database_path()),
        which run() then uses for this plan and shape bucket in every process. D is overwritten. Returns a dict
        (best, best_ms, heuristic, heuristic_ms, speedup, stored, database, candidates)."""
        A0, B0, C0, D0, alpha0, beta0 = self._defaults
        A, B, C, D = (d if x is None else x for x, d in zip((A, B, C, D), (A0, B0, C0, D0)))
        alpha = alpha0 if alpha is None else alpha
        beta = beta0 if beta is None else beta
        handle = None if stream is None else _convert.stream_handle(stream)
        return cast(dict[str, Any], _Plan.tune(self, A, B, C, D, alpha, beta, handle, max_candidates, time_budget_s,
                                               store, verbose, min_gain))


class GroupedGemm(_Configuration, _GroupedPlan):
    """Many GEMMs of different extents in one launch: D[g] = act(alpha * A[g] @ B[g] + beta * C[g]).

    Declared like Gemm (tensors given here are representative: their dtypes and layouts); SM90 GPUs get CUTLASS 3.x
    ptr-array grouped kernels, kernel_cc=80 (or an SM80 GPU) the 2.x GemmGrouped. Swizzles and bias do not apply.
    """

    __slots__ = ("_defaults",)

    def run(self, A: Sequence[Tensor], B: Sequence[Tensor],  # type: ignore[override]
            C: Optional[Sequence[Tensor]] = None,
            D: Optional[Sequence[Tensor]] = None, alpha: Optional[float] = None, beta: Optional[float] = None,
            sync: bool = True, print_module: bool = False, stream: StreamLike = None) -> None:
        """Runs every group in one launch: A, B, C and D are lists (C may be None when beta is 0). Device tensors run
        in place on `stream` (by default D[0]'s framework's current stream); host arrays are staged and land in D
        before return."""
        alpha0, beta0 = self._defaults[4:]
        alpha = alpha0 if alpha is None else alpha
        beta = beta0 if beta is None else beta
        if D is None:
            raise TensorError("Tensors D: pass the list of outputs (one per group).")
        handle = None if stream is None else _convert.stream_handle(stream)
        if print_module:
            print(_render(self.spec_for(A, B, C, D, beta)).text)
        super().run(A, B, C, D, alpha, beta, handle, sync)

    @property
    def block_scaling(self) -> BlockScaling:
        """BlockScaling.none or blockwise (SM90 FP8 plans, the MoE form); settable with the enum or its name.
        blockwise scales each 128-deep K block of A @ B in the mainloop by A's scale of the row and B's scale of the
        group's 128 x 128 block (the DeepSeek-V3 format); run_contiguous() then takes scale_a= ([total_M,
        ceil(K/128)] float32, row-major: a group's scales are the rows of its own tokens) and scale_b= ([G,
        ceil(N/128), ceil(K/128)] float32, row-major)."""
        return super().block_scaling

    @block_scaling.setter
    def block_scaling(self, value: EnumLike[BlockScaling]) -> None:
        _set(self, "block_scaling", _convert.enum_member(BlockScaling, value, "block scaling"))

    def run_contiguous(self, A: Tensor, B: Tensor, D: Tensor, offsets: Tensor,  # type: ignore[override]
                       C: Tensor = None, alpha: float = 1.0, beta: float = 0.0, sync: bool = True,
                       stream: StreamLike = None, scale_a: Tensor = None, scale_b: Tensor = None,
                       print_module: bool = False) -> None:
        """The MoE form (as torch._grouped_mm): A [total_M, K] with the groups stacked along M, B [G, K, N] (a
        [G, N, K] weight tensor transposed, i.e. column-major, also works), D [total_M, N], offsets a device int32
        [G] of cumulative row ends. The GPU reads the group sizes: no host sync, capturable in a CUDA graph.
        scale_a / scale_b: a block-scaled plan's float32 scales (see block_scaling). print_module: print the
        kernel's generated source first, as run() does."""
        handle = None if stream is None else _convert.stream_handle(stream)
        if print_module:
            print(_render(self.spec_for_contiguous(A, B, D, offsets, C, beta)).text)
        super().run_contiguous(A, B, D, offsets, C, alpha, beta, handle, sync, scale_a, scale_b)


Pair = Any  # an int, or a pair (h, w) of ints


def _pair(value: Pair, what: str) -> tuple[int, int]:
    if isinstance(value, int):
        return (value, value)
    pair = tuple(value)
    if len(pair) != 2:
        raise TensorError(f"Conv2d {what} is an int or a pair (h, w); got {pair!r}.")
    return (int(pair[0]), int(pair[1]))


class Conv2d(_Configuration, _ConvPlan):
    """A 2-D convolution plan: D = act(alpha * conv + beta * C), cross-correlation as torch's conv2d, groups = 1.

    kind: "fprop" (A = input x, B = weight w, D = output y), "dgrad" (A = grad_output, B = weight, D = grad_input)
    or "wgrad" (A = grad_output, B = input, D = grad_weight). Element types as for Gemm (tensors given here are
    representative: their dtypes); the accumulator defaults to C's type. torch tensors are (N, C, H, W) / (K, C, R, S)
    in channels_last memory, read in place; numpy arrays are NHWC / KRSC. Kernels (plan.kernel_cc, construct().family
    and the kernel names say which): kernel_cc=90, the default on SM90 GPUs, gives CUTLASS 3.x implicit GEMM with TMA
    im2col (TensorOp f16/bf16; tf32 fprop); kernel_cc=80 gives CUTLASS 2.x implicit GEMM (any SM80+ GPU; SIMT, narrow
    channel vectors, strided dgrad, split-K). What only the 2.x kernels run is refused on an SM90 plan with a ConfigError
    or TensorError that says to pass kernel_cc=80 (no silent fallback); opclass Simt uses them and says so.
    """

    __slots__ = ("_defaults",)

    def __init__(self, kind: EnumLike[ConvKind] = "fprop", A: Tensor = None, B: Tensor = None,
                 C: Tensor = None, D: Tensor = None, alpha: float = 1.0, beta: float = 0.0,
                 element: DataTypeLike = None, element_A: DataTypeLike = None, element_B: DataTypeLike = None,
                 element_C: DataTypeLike = None, element_D: DataTypeLike = None,
                 element_accumulator: DataTypeLike = None, cc: Optional[int] = None,
                 kernel_cc: Optional[int] = None) -> None:
        """Declares the plan (see the class); raises ConfigError when no kernel fits."""
        dt = _convert.data_type

        def element_of(tensor: Tensor, specific: DataTypeLike, name: str) -> Any:
            if tensor is not None and specific is not None:
                raise ConfigError(f"Must not specify both element_{name} and tensor {name}.")
            return _convert.data_type(tensor.dtype) if tensor is not None else dt(specific)

        _ConvPlan.__init__(self, _convert.enum_member(ConvKind, kind, "conv kind"), element=dt(element),
                           element_A=element_of(A, element_A, "A"), element_B=element_of(B, element_B, "B"),
                           element_C=element_of(C, element_C, "C"), element_D=element_of(D, element_D, "D"),
                           element_accumulator=dt(element_accumulator), cc=cc, kernel_cc=kernel_cc)
        self._defaults = (A, B, C, D, alpha, beta)

    @property
    def iterator_algorithm(self) -> Optional[IteratorAlgorithm]:
        """IteratorAlgorithm.analytic or optimized, or None (the default: optimized where the problem allows it)."""
        value: Optional[IteratorAlgorithm] = _ConvPlan.iterator_algorithm.__get__(self)
        return value

    @iterator_algorithm.setter
    def iterator_algorithm(self, value: Optional[EnumLike[IteratorAlgorithm]]) -> None:
        member = None if value is None else _convert.enum_member(IteratorAlgorithm, value, "iterator algorithm")
        getattr(_ConvPlan, "iterator_algorithm").__set__(self, member)

    @property
    def stride_support(self) -> Optional[StrideSupport]:
        """Dgrad kernels: StrideSupport.unity or strided, or None (by the problem's stride)."""
        value: Optional[StrideSupport] = _ConvPlan.stride_support.__get__(self)
        return value

    @stride_support.setter
    def stride_support(self, value: Optional[EnumLike[StrideSupport]]) -> None:
        member = None if value is None else _convert.enum_member(StrideSupport, value, "stride support")
        getattr(_ConvPlan, "stride_support").__set__(self, member)

    @staticmethod
    def output_size(input_size: Sequence[int], weight_size: Sequence[int], padding: Pair = (0, 0),  # type: ignore[override]
                    stride: Pair = (1, 1), dilation: Pair = (1, 1)) -> tuple[int, ...]:
        """(N, P, Q, K) of an input (N, H, W, C) under a weight (K, R, S, C), as the reference computes it for
        dilation 1 and torch for any: P = (H + 2 pad - dilation (R - 1) - 1) // stride + 1."""
        return tuple(_ConvPlan.output_size(tuple(input_size), tuple(weight_size), _pair(padding, "padding"),
                                           _pair(stride, "stride"), _pair(dilation, "dilation")))

    def _operands(self, A: Tensor, B: Tensor, C: Tensor, D: Tensor, alpha: Optional[float],
                  beta: Optional[float]) -> tuple[Tensor, Tensor, Tensor, Tensor, Any, Any]:
        A0, B0, C0, D0, alpha0, beta0 = self._defaults
        A = A0 if A is None else A
        B = B0 if B is None else B
        C = C0 if C is None else C
        D = D0 if D is None else D
        return A, B, C, D, alpha0 if alpha is None else alpha, beta0 if beta is None else beta

    def spec_for(self, A: Tensor = None, B: Tensor = None, C: Tensor = None,
                 D: Tensor = None, stride: Pair = (1, 1), padding: Pair = (0, 0), dilation: Pair = (1, 1),
                 beta: Optional[float] = None) -> KernelSpec:
        """The KernelSpec run() would use for these tensors (same checks; nothing runs; no GPU needed)."""
        A, B, C, D, _, beta = self._operands(A, B, C, D, None, beta)
        spec: KernelSpec = _ConvPlan.spec_for(self, A, B, C, D, _pair(stride, "stride"), _pair(padding, "padding"),
                                              _pair(dilation, "dilation"), beta)
        return spec

    def split_k_for(self, A: Tensor = None, B: Tensor = None, C: Tensor = None, D: Tensor = None,
                    stride: Pair = (1, 1), padding: Pair = (0, 0), dilation: Pair = (1, 1),
                    beta: Optional[float] = None) -> tuple[SplitKMode, int]:
        """(mode, slices): the split-K run() would use for these tensors (slices 1: not split; same checks as
        spec_for; nothing runs)."""
        A, B, C, D, _, beta = self._operands(A, B, C, D, None, beta)
        split: tuple[SplitKMode, int] = _ConvPlan.split_k_for(self, A, B, C, D, _pair(stride, "stride"),
                                                              _pair(padding, "padding"), _pair(dilation, "dilation"),
                                                              beta)
        return split

    def set_split_k(self, mode: Optional[EnumLike[SplitKMode]], slices: int = 0) -> None:
        """Split-K as the reference's split_k = (mode, slices): "serial" or "parallel"; slices 0 lets run() choose the
        count per problem; mode None (with slices 0) lets run() choose both (the default: parallel for wgrad problems
        whose output is under a wave of CTAs)."""
        member = None if mode is None else _convert.enum_member(SplitKMode, mode, "split-K mode")
        _ConvPlan.set_split_k(self, member, int(slices))

    def run(self, A: Tensor = None, B: Tensor = None, C: Tensor = None, D: Tensor = None,  # type: ignore[override]
            stride: Pair = (1, 1), padding: Pair = (0, 0), dilation: Pair = (1, 1), alpha: Optional[float] = None,
            beta: Optional[float] = None, split_k: Optional[tuple[Any, int]] = None, sync: bool = True,
            print_module: bool = False, stream: StreamLike = None) -> None:
        """D = act(alpha * conv(A, B) + beta * C). stride, padding and dilation are ints or (h, w) pairs; split_k is
        (mode, slices) as in the reference ("serial" or "parallel"; see set_split_k) and stays set on the plan; None
        keeps the plan's (by default chosen per problem: split_k_for says what). Device tensors run in place on
        `stream` (by default torch's current stream); host arrays are staged."""
        if split_k is not None:
            mode, slices = split_k
            self.set_split_k(mode, int(slices))
        A, B, C, D, alpha, beta = self._operands(A, B, C, D, alpha, beta)
        if D is None:
            raise TensorError("Tensor D: pass the output tensor.")
        geometry = (_pair(stride, "stride"), _pair(padding, "padding"), _pair(dilation, "dilation"))
        handle = None if stream is None else _convert.stream_handle(stream)
        if print_module:
            print(_render(_ConvPlan.spec_for(self, A, B, C, D, *geometry, beta)).text)
        _ConvPlan.run(self, A, B, C, D, *geometry, alpha, beta, handle, sync)


class Conv2dFprop(Conv2d):
    """Conv2d(kind="fprop") with the reference's operand names: run(input, weight, C, output, ...)."""

    def __init__(self, input: Tensor = None, weight: Tensor = None, C: Tensor = None, output: Tensor = None,
                 alpha: float = 1.0, beta: float = 0.0, *, element: DataTypeLike = None,
                 element_A: DataTypeLike = None, element_B: DataTypeLike = None, element_C: DataTypeLike = None,
                 element_D: DataTypeLike = None, element_accumulator: DataTypeLike = None, cc: Optional[int] = None,
                 kernel_cc: Optional[int] = None) -> None:
        super().__init__("fprop", input, weight, C, output, alpha, beta, element=element,
                         element_A=element_A, element_B=element_B, element_C=element_C, element_D=element_D,
                         element_accumulator=element_accumulator, cc=cc, kernel_cc=kernel_cc)


class Conv2dDgrad(Conv2d):
    """Conv2d(kind="dgrad") with the reference's operand names: run(grad_output, weight, C, grad_input, ...)."""

    def __init__(self, grad_output: Tensor = None, weight: Tensor = None, C: Tensor = None, grad_input: Tensor = None,
                 alpha: float = 1.0, beta: float = 0.0, *, element: DataTypeLike = None,
                 element_A: DataTypeLike = None, element_B: DataTypeLike = None, element_C: DataTypeLike = None,
                 element_D: DataTypeLike = None, element_accumulator: DataTypeLike = None, cc: Optional[int] = None,
                 kernel_cc: Optional[int] = None) -> None:
        super().__init__("dgrad", grad_output, weight, C, grad_input, alpha, beta, element=element,
                         element_A=element_A, element_B=element_B, element_C=element_C, element_D=element_D,
                         element_accumulator=element_accumulator, cc=cc, kernel_cc=kernel_cc)


class Conv2dWgrad(Conv2d):
    """Conv2d(kind="wgrad") with the reference's operand names: run(grad_output, input, C, grad_weight, ...)."""

    def __init__(self, grad_output: Tensor = None, input: Tensor = None, C: Tensor = None, grad_weight: Tensor = None,
                 alpha: float = 1.0, beta: float = 0.0, *, element: DataTypeLike = None,
                 element_A: DataTypeLike = None, element_B: DataTypeLike = None, element_C: DataTypeLike = None,
                 element_D: DataTypeLike = None, element_accumulator: DataTypeLike = None, cc: Optional[int] = None,
                 kernel_cc: Optional[int] = None) -> None:
        super().__init__("wgrad", grad_output, input, C, grad_weight, alpha, beta, element=element,
                         element_A=element_A, element_B=element_B, element_C=element_C, element_D=element_D,
                         element_accumulator=element_accumulator, cc=cc, kernel_cc=kernel_cc)
