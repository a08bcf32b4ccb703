"""gemmkit.op.Gemm and GroupedGemm: the reference's plan API over the C++ plans (gemmkit._gemmkit.Gemm and
GroupedGemm). They convert names, numpy / torch dtypes and streams, and pass everything else through; checks and
errors come from C++."""
from . import _convert
from ._gemmkit import BiasMode, RasterOrder, TensorError
from ._gemmkit import Gemm as _Plan
from ._gemmkit import GroupedGemm as _GroupedPlan
from ._gemmkit import render as _render


def _plan_arguments(element_accumulator, element, layout, element_A, element_B, element_C, element_D, layout_A,
                    layout_B, layout_C, A, B, C, D, cc, kernel_cc):
    """The C++ plans' keyword arguments: names and numpy / torch dtypes converted."""
    dt, lt = _convert.data_type, _convert.layout
    return dict(element=dt(element), element_A=dt(element_A), element_B=dt(element_B), element_C=dt(element_C),
                element_D=dt(element_D), element_accumulator=dt(element_accumulator), layout=lt(layout),
                layout_A=lt(layout_A), layout_B=lt(layout_B), layout_C=lt(layout_C), A=A, B=B, C=C, D=D, cc=cc,
                kernel_cc=kernel_cc)


class Gemm(_Plan):
    """A GEMM plan, D = act(alpha * A @ B + beta * C + bias).

    Per operand, a representative tensor (A/B/C/D: its dtype and strides) wins over element_X / layout_X,
    which win over the generic element / layout; element_accumulator defaults to C's element type; cc defaults
    to the current GPU's; kernel_cc asks for a kernel generation (80: CUTLASS 2.x kernels, also on an SM90 GPU).
    Tensors and alpha / beta given here are the defaults of run().
    """

    def __init__(self, A=None, B=None, C=None, D=None, alpha=1.0, beta=0.0, element_accumulator=None, element=None,
                 layout=None, element_A=None, element_B=None, element_C=None, element_D=None, layout_A=None,
                 layout_B=None, layout_C=None, cc=None, kernel_cc=None):
        super().__init__(**_plan_arguments(element_accumulator, element, layout, element_A, element_B, element_C,
                                           element_D, layout_A, layout_B, layout_C, A, B, C, D, cc, kernel_cc))
        self._defaults = (A, B, C, D, alpha, beta)

    @property
    def opclass(self):
        """OpcodeClass.TensorOp or Simt; settable with the enum or "tensor_op" / "simt"."""
        return _Plan.opclass.__get__(self)

    @opclass.setter
    def opclass(self, value):
        _Plan.opclass.__set__(self, _convert.opcode_class(value))

    @property
    def activation(self):
        """The fused activation; set an Activation (gemmkit.epilogue.relu), its name, or (activation, slope)."""
        return _Plan.activation.__get__(self)

    @activation.setter
    def activation(self, value):
        act, slope = _convert.activation(value, self.activations())
        if slope is None:
            self.set_activation(act)
        else:
            self.set_activation(act, slope)

    @property
    def swizzling_functor(self):
        """The threadblock swizzle; set a gemmkit.swizzle functor or its name."""
        return _Plan.swizzling_functor.__get__(self)

    @swizzling_functor.setter
    def swizzling_functor(self, value):
        _Plan.swizzling_functor.__set__(self, _convert.swizzle(value, self.swizzling_functors()))

    @property
    def bias(self):
        """BiasMode.none, row or column; settable with the enum or its name. run() then takes bias=."""
        return _Plan.bias.__get__(self)

    @bias.setter
    def bias(self, value):
        _Plan.bias.__set__(self, _convert.enum_member(BiasMode, value, "bias"))

    @property
    def raster_order(self):
        """RasterOrder.Heuristic, AlongM or AlongN (SM90 kernels); settable with the enum or its name."""
        return _Plan.raster_order.__get__(self)

    @raster_order.setter
    def raster_order(self, value):
        _Plan.raster_order.__set__(self, _convert.enum_member(RasterOrder, value, "raster order"))

    @property
    def tile_description(self):
        """The configuration set on the plan (None: the default, chosen per alignment). Set a TileDescription, or
        a dict of fields laid over the current one."""
        return _Plan.tile_description.__get__(self)

    @tile_description.setter
    def tile_description(self, value):
        _Plan.tile_description.__set__(self, self._tile(value))

    def _tile(self, value):
        if not isinstance(value, dict):
            return value
        return _convert.tile_description(value, self.tile_description or self.spec().tile_description)

    def construct(self, tile_description=None, alignment_A=None, alignment_B=None, alignment_C=None):
        """The KernelSpec for the widest alignments (or those given). A tile given here stays in the plan."""
        return _Plan.construct(self, self._tile(tile_description), alignment_A, alignment_B, alignment_C)

    def compile(self, tile_description=None, print_module=False):
        """Generates and compiles the kernel through the on-disk cache (nvcc; no GPU needed)."""
        tile = self._tile(tile_description)
        if print_module:
            if tile is not None:
                _Plan.construct(self, tile)
            print(self.render_source().text)
        return _Plan.compile(self, tile)

    def _with_defaults(self, A, B, C, D, alpha, beta):
        """The arguments, those left as None replaced by the constructor's."""
        given = (A, B, C, D, alpha, beta)
        return tuple(default if value is None else value for value, default in zip(given, self._defaults))

    def run(self, A=None, B=None, C=None, D=None, alpha=None, beta=None, sync=True, print_module=False,
            stream=None, bias=None):
        """D = act(alpha * A @ B + beta * C + bias). Arguments left as None take the constructor's. Device tensors
        run in place on `stream` (a torch / cupy stream or an int; by default torch's or cupy's current stream, else
        the default stream); sync=False returns once launched. Host arrays (numpy, torch CPU) are staged through the
        GPU and D holds the result on return. bias: the vector a plan with a bias adds (m or n elements of C's
        type)."""
        A, B, C, D, alpha, beta = self._with_defaults(A, B, C, D, alpha, beta)
        handle = None if stream is None else _convert.stream_handle(stream)  # None: D's framework's stream
        if print_module:
            print(_render(self.spec_for(A, B, C, D, beta)).text)
        _Plan.run(self, A, B, C, D, alpha, beta, handle, sync, bias)

    def tune(self, A=None, B=None, C=None, D=None, alpha=None, beta=None, stream=None, max_candidates=12,
             time_budget_s=110.0, store=True, verbose=False):
        """Autotunes this problem on device tensors (torch / cupy CUDA arrays): compiles up to max_candidates of the
        plan's configurations in parallel, times each (warm-up, median of rounds), checks its result against the
        kernel run() picked before, and stores the fastest in the tuning database (gemmkit.tuning_database_path()),
        which run() then uses for this plan and shape bucket in every process. D is overwritten. Returns a dict
        (best, best_ms, heuristic, heuristic_ms, speedup, stored, database, candidates)."""
        A, B, C, D, alpha, beta = self._with_defaults(A, B, C, D, alpha, beta)
        handle = None if stream is None else _convert.stream_handle(stream)
        return _Plan.tune(self, A, B, C, D, alpha, beta, handle, max_candidates, time_budget_s, store, verbose)


class GroupedGemm(_GroupedPlan):
    """Many GEMMs of different extents in one launch: D[g] = act(alpha * A[g] @ B[g] + beta * C[g]).

    Declared like Gemm (tensors given here are representative: their dtypes and layouts); SM90 GPUs get CUTLASS 3.x
    ptr-array grouped kernels, kernel_cc=80 (or an SM80 GPU) the 2.x GemmGrouped. Swizzles and bias do not apply.
    """

    def __init__(self, A=None, B=None, C=None, D=None, alpha=1.0, beta=0.0, element_accumulator=None, element=None,
                 layout=None, element_A=None, element_B=None, element_C=None, element_D=None, layout_A=None,
                 layout_B=None, layout_C=None, cc=None, kernel_cc=None):
        super().__init__(**_plan_arguments(element_accumulator, element, layout, element_A, element_B, element_C,
                                           element_D, layout_A, layout_B, layout_C, A, B, C, D, cc, kernel_cc))
        self._defaults = (alpha, beta)

    # The configuration API is Gemm's (its properties call the C++ base class both plans share).
    opclass = Gemm.opclass
    activation = Gemm.activation
    swizzling_functor = Gemm.swizzling_functor
    tile_description = Gemm.tile_description
    _tile = Gemm._tile
    construct = Gemm.construct
    compile = Gemm.compile

    def run(self, A, B, C=None, D=None, alpha=None, beta=None, sync=True, print_module=False, stream=None):
        """Runs every group in one launch: A, B, C and D are lists (C may be None when beta is 0). Device tensors run
        in place on `stream` (by default D[0]'s framework's current stream); host arrays are staged and land in D
        before return."""
        alpha0, beta0 = self._defaults
        alpha = alpha0 if alpha is None else alpha
        beta = beta0 if beta is None else beta
        if D is None:
            raise TensorError("Tensors D: pass the list of outputs (one per group).")
        handle = None if stream is None else _convert.stream_handle(stream)
        if print_module:
            print(_render(self.spec_for(A, B, C, D, beta)).text)
        _GroupedPlan.run(self, A, B, C, D, alpha, beta, handle, sync)

    def run_contiguous(self, A, B, D, offsets, C=None, alpha=1.0, beta=0.0, sync=True, stream=None):
        """The MoE form (as torch._grouped_mm): A [total_M, K] with the groups stacked along M, B [G, K, N] (a
        [G, N, K] weight tensor transposed, i.e. column-major, also works), D [total_M, N], offsets a device int32
        [G] of cumulative row ends. The GPU reads the group sizes: no host sync, capturable in a CUDA graph."""
        handle = None if stream is None else _convert.stream_handle(stream)
        _GroupedPlan.run_contiguous(self, A, B, D, offsets, C, alpha, beta, handle, sync)
