"""gemmkit.op.Gemm, GroupedGemm and Conv2d: the reference's plan API over the C++ plans (gemmkit._gemmkit.Gemm,
GroupedGemm and Conv2d). They convert names, numpy / torch dtypes and streams, and pass everything else through; checks and
errors come from C++."""
from . import _convert
from ._gemmkit import BiasMode, ConvKind, IteratorAlgorithm, RasterOrder, SplitKMode, StrideSupport, TensorError
from ._gemmkit import ConfigError
from ._gemmkit import Conv2d as _ConvPlan
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


def _conv_operand(tensor, name):
    """A conv operand as the kernels read it: NHWC activations / KRSC filters. torch tensors are (N, C, H, W) /
    (K, C, R, S) in channels_last memory, viewed in place as NHWC / KRSC; other arrays are NHWC / KRSC already."""
    if tensor is None or type(tensor).__module__.split(".")[0] != "torch":
        return tensor
    import torch

    if tensor.dim() != 4:
        raise TensorError(f"Tensor {name}: a conv operand is 4-D (N, C, H, W); got shape {tuple(tensor.shape)}.")
    if not tensor.is_contiguous(memory_format=torch.channels_last):
        raise TensorError(
            f"Tensor {name} with shape {tuple(tensor.shape)} and strides {tensor.stride()} is not in channels_last "
            f"memory; the conv kernels read NHWC in place. Call .to(memory_format=torch.channels_last) on it first "
            f"(or allocate it so: torch.empty(..., memory_format=torch.channels_last)).")
    return tensor.permute(0, 2, 3, 1)


def _pair(value, what):
    if isinstance(value, int):
        return (value, value)
    value = tuple(value)
    if len(value) != 2:
        raise TensorError(f"Conv2d {what} is an int or a pair (h, w); got {value!r}.")
    return value


class Conv2d(_ConvPlan):
    """A 2-D convolution plan: D = act(alpha * conv + beta * C), cross-correlation as torch's conv2d, groups = 1.

    kind: "fprop" (A = input x, B = weight w, D = output y), "dgrad" (A = grad_output, B = weight, D = grad_input)
    or "wgrad" (A = grad_output, B = input, D = grad_weight). Element types as for Gemm (tensors given here are
    representative: their dtypes); the accumulator defaults to C's type. torch tensors are (N, C, H, W) / (K, C, R, S)
    in channels_last memory, read in place; numpy arrays are NHWC / KRSC. Kernels: CUTLASS 2.x implicit GEMM (also on
    SM90 GPUs; plan.kernel_cc and construct().family say so).
    """

    def __init__(self, kind="fprop", A=None, B=None, C=None, D=None, alpha=1.0, beta=0.0, element=None,
                 element_A=None, element_B=None, element_C=None, element_D=None, element_accumulator=None, cc=None,
                 kernel_cc=None):
        dt = _convert.data_type

        def element_of(tensor, specific, name):
            if tensor is not None and specific is not None:
                raise ConfigError(f"Must not specify both element_{name} and tensor {name}.")
            return _convert.data_type(tensor.dtype) if tensor is not None else dt(specific)

        super().__init__(_convert.enum_member(ConvKind, kind, "conv kind"), element=dt(element),
                         element_A=element_of(A, element_A, "A"), element_B=element_of(B, element_B, "B"),
                         element_C=element_of(C, element_C, "C"), element_D=element_of(D, element_D, "D"),
                         element_accumulator=dt(element_accumulator), cc=cc, kernel_cc=kernel_cc)
        self._defaults = (A, B, C, D, alpha, beta)

    opclass = Gemm.opclass
    activation = Gemm.activation
    swizzling_functor = Gemm.swizzling_functor
    tile_description = Gemm.tile_description
    _tile = Gemm._tile
    construct = Gemm.construct
    compile = Gemm.compile

    @property
    def iterator_algorithm(self):
        """IteratorAlgorithm.analytic or optimized, or None (the default: optimized where the problem allows it)."""
        return _ConvPlan.iterator_algorithm.__get__(self)

    @iterator_algorithm.setter
    def iterator_algorithm(self, value):
        member = None if value is None else _convert.enum_member(IteratorAlgorithm, value, "iterator algorithm")
        _ConvPlan.iterator_algorithm.__set__(self, member)

    @property
    def stride_support(self):
        """Dgrad kernels: StrideSupport.unity or strided, or None (by the problem's stride)."""
        return _ConvPlan.stride_support.__get__(self)

    @stride_support.setter
    def stride_support(self, value):
        member = None if value is None else _convert.enum_member(StrideSupport, value, "stride support")
        _ConvPlan.stride_support.__set__(self, member)

    @staticmethod
    def output_size(input_size, weight_size, padding=(0, 0), stride=(1, 1), dilation=(1, 1)):
        """(N, P, Q, K) of an input (N, H, W, C) under a weight (K, R, S, C), as the reference computes it for
        dilation 1 and torch for any: P = (H + 2 pad - dilation (R - 1) - 1) // stride + 1."""
        return tuple(_ConvPlan.output_size(tuple(input_size), tuple(weight_size), _pair(padding, "padding"),
                                           _pair(stride, "stride"), _pair(dilation, "dilation")))

    def _operands(self, A, B, C, D, alpha, beta):
        A0, B0, C0, D0, alpha0, beta0 = self._defaults
        A = A0 if A is None else A
        B = B0 if B is None else B
        C = C0 if C is None else C
        D = D0 if D is None else D
        alpha = alpha0 if alpha is None else alpha
        beta = beta0 if beta is None else beta
        return (_conv_operand(A, "A"), _conv_operand(B, "B"), _conv_operand(C, "C"), _conv_operand(D, "D"), alpha,
                beta)

    def spec_for(self, A=None, B=None, C=None, D=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), beta=None):
        """The KernelSpec run() would use for these tensors (same checks; nothing runs; no GPU needed)."""
        A, B, C, D, _, beta = self._operands(A, B, C, D, None, beta)
        return _ConvPlan.spec_for(self, A, B, C, D, _pair(stride, "stride"), _pair(padding, "padding"),
                                  _pair(dilation, "dilation"), beta)

    def run(self, A=None, B=None, C=None, D=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), alpha=None,
            beta=None, split_k=None, sync=True, print_module=False, stream=None):
        """D = act(alpha * conv(A, B) + beta * C). stride, padding and dilation are ints or (h, w) pairs; split_k is
        (mode, slices) as in the reference ("serial"; "parallel" is refused) and stays set on the plan. Device
        tensors run in place on `stream` (by default torch's current stream); host arrays are staged."""
        if split_k is not None:
            mode, slices = split_k
            self.set_split_k(_convert.enum_member(SplitKMode, mode, "split-K mode"), int(slices))
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

    def __init__(self, input=None, weight=None, C=None, output=None, alpha=1.0, beta=0.0, **kwargs):
        super().__init__("fprop", input, weight, C, output, alpha, beta, **kwargs)


class Conv2dDgrad(Conv2d):
    """Conv2d(kind="dgrad") with the reference's operand names: run(grad_output, weight, C, grad_input, ...)."""

    def __init__(self, grad_output=None, weight=None, C=None, grad_input=None, alpha=1.0, beta=0.0, **kwargs):
        super().__init__("dgrad", grad_output, weight, C, grad_input, alpha, beta, **kwargs)


class Conv2dWgrad(Conv2d):
    """Conv2d(kind="wgrad") with the reference's operand names: run(grad_output, input, C, grad_weight, ...)."""

    def __init__(self, grad_output=None, input=None, C=None, grad_weight=None, alpha=1.0, beta=0.0, **kwargs):
        super().__init__("wgrad", grad_output, input, C, grad_weight, alpha, beta, **kwargs)
