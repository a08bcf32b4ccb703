"""gemmkit.op.Gemm and GroupedGemm: the reference's plan API over the C++ plans (gemmkit._gemmkit.Gemm and
GroupedGemm). They convert names, numpy / torch dtypes and streams, and pass everything else through; checks and
errors come from C++."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Sequence, TypeVar

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
    CompiledKernel,
    KernelSpec,
    OpcodeClass,
    RasterOrder,
    SwizzlingFunctor,
    TensorError,
    TileDescription,
)
from ._gemmkit import Gemm as _Plan
from ._gemmkit import GroupedGemm as _GroupedPlan
from ._gemmkit import render as _render

__all__ = ["Gemm", "GroupedGemm"]

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


def _set(plan: _Plan, name: str, value: object) -> None:
    """Sets the C++ plan's property `name` (the Python properties below widen what their setters take)."""
    getattr(_Plan, name).__set__(plan, value)


# nanobind classes take one nanobind base, so at run time the shared configuration is a plain mixin placed before the
# C++ plan; type checkers see it as the C++ plan's subclass, which is what its methods (through super()) reach.
if TYPE_CHECKING:
    _Mixin = _Plan
else:
    _Mixin = object


_P = TypeVar("_P", bound="_Configuration")


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

    def __new__(cls: type[_P], *args: Any, **kwargs: Any) -> _P:
        """A plan not yet initialised (the C++ plan's allocation; __init__ declares it)."""
        return super().__new__(cls)

    @staticmethod
    def activations() -> list[Activation]:
        """Every activation gemmkit fuses into the epilogue (gemmkit.epilogue lists the same)."""
        return _Plan.activations()

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
    which win over the generic element / layout; element_accumulator defaults to C's element type; cc defaults
    to the current GPU's; kernel_cc asks for a kernel generation (80: CUTLASS 2.x kernels, also on an SM90 GPU).
    Tensors and alpha / beta given here are the defaults of run(). Planning, construct() and compile() need no GPU
    when cc is given; run() needs one.
    """

    __slots__ = ("_defaults",)

    @property
    def bias(self) -> BiasMode:
        """BiasMode.none, row or column; settable with the enum or its name. run() then takes bias=."""
        return super().bias

    @bias.setter
    def bias(self, value: EnumLike[BiasMode]) -> None:
        _set(self, "bias", _convert.enum_member(BiasMode, value, "bias"))

    @property
    def raster_order(self) -> RasterOrder:
        """RasterOrder.Heuristic, AlongM or AlongN (SM90 kernels); settable with the enum or its name."""
        return super().raster_order

    @raster_order.setter
    def raster_order(self, value: EnumLike[RasterOrder]) -> None:
        _set(self, "raster_order", _convert.enum_member(RasterOrder, value, "raster order"))

    # run() and run_contiguous() take the reference's arguments (print_module, any stream object), not the C++ base
    # class's: the override is deliberate.
    def run(self, A: Tensor = None, B: Tensor = None, C: Tensor = None, D: Tensor = None,  # type: ignore[override]
            alpha: Optional[float] = None, beta: Optional[float] = None, sync: bool = True,
            print_module: bool = False, stream: StreamLike = None, bias: Tensor = None) -> None:
        """D = act(alpha * A @ B + beta * C + bias). Arguments left as None take the constructor's. Device tensors
        run in place on `stream` (a torch / cupy stream or an int; by default torch's or cupy's current stream, else
        the default stream); sync=False returns once launched. Host arrays (numpy, torch CPU) are staged through the
        GPU and D holds the result on return. bias: the vector a plan with a bias adds (m or n elements of C's
        type)."""
        A0, B0, C0, D0, alpha0, beta0 = self._defaults
        A = A0 if A is None else A
        B = B0 if B is None else B
        C = C0 if C is None else C
        D = D0 if D is None else D
        alpha = alpha0 if alpha is None else alpha
        beta = beta0 if beta is None else beta
        handle = None if stream is None else _convert.stream_handle(stream)  # None: D's framework's stream
        if print_module:
            print(_render(self.spec_for(A, B, C, D, beta)).text)
        super().run(A, B, C, D, alpha, beta, handle, sync, bias)


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

    def run_contiguous(self, A: Tensor, B: Tensor, D: Tensor, offsets: Tensor,  # type: ignore[override]
                       C: Tensor = None, alpha: float = 1.0, beta: float = 0.0, sync: bool = True,
                       stream: StreamLike = None) -> None:
        """The MoE form (as torch._grouped_mm): A [total_M, K] with the groups stacked along M, B [G, K, N] (a
        [G, N, K] weight tensor transposed, i.e. column-major, also works), D [total_M, N], offsets a device int32
        [G] of cumulative row ends. The GPU reads the group sizes: no host sync, capturable in a CUDA graph."""
        handle = None if stream is None else _convert.stream_handle(stream)
        super().run_contiguous(A, B, D, offsets, C, alpha, beta, handle, sync)
