# python/gemmkit/_gemmkit.pyi: type stubs of the extension (scripts/stubgen: nanobind.stubgen output; the
# error classes, which stubgen imports from `gemmkit`, are written out here).
"""
gemmkit's C++ core: plans, kernel specs, tensors and errors (use the `gemmkit` package).
"""

from collections.abc import Sequence
import enum
from typing import overload

__version__: str

class Error(Exception):
    """Base class of every gemmkit error."""

class ConfigError(Error, ValueError):
    """A plan that cannot be built: a dtype/layout/opclass/tile/alignment/shared-memory rule."""

class TensorError(Error, ValueError):
    """A tensor that does not match the plan: dtype, rank, shape, stride, alignment, device."""

class ToolchainError(Error, RuntimeError):
    """nvcc or the CUTLASS headers are missing or too old."""

class CompileError(Error, RuntimeError):
    """nvcc failed on a generated kernel; .argv, .exit_code, .log and .source_path say how."""

    argv: list[str]
    exit_code: int
    log: str
    source_path: str

class CudaError(Error, RuntimeError):
    """A CUDA call failed or no device is present; .code is the CUDA error code."""

    code: int


class DataType(enum.Enum):
    """Element types."""

    f16 = 0

    bf16 = 1

    f32 = 2

    tf32 = 3

    f64 = 4

    s8 = 5

    u8 = 6

    s32 = 7

    void = 8

    e4m3 = 9

    e5m2 = 10

class LayoutType(enum.Enum):
    """Matrix layouts."""

    RowMajor = 0

    ColumnMajor = 1

class OpcodeClass(enum.Enum):
    """Tensor cores or CUDA cores."""

    TensorOp = 0

    Simt = 1

class KernelFamily(enum.Enum):
    """Which template renders a kernel."""

    sm80_universal = 0

    sm90_collective = 1

    sm80_grouped = 2

    sm90_grouped = 3

    sm80_conv2d = 4

    sm90_conv2d = 5

class MathOperation(enum.Enum):
    """The tensor-core math variant."""

    multiply_add = 0

    multiply_add_fast_f32 = 1

    multiply_add_saturate = 2

    multiply_add_fast_bf16 = 3

    multiply_add_fast_f16 = 4

    multiply_add_fast_accum = 5

class KernelScheduleType(enum.Enum):
    """SM90 mainloop schedules."""

    ScheduleAuto = 0

    TmaWarpSpecialized = 1

    TmaWarpSpecializedPingpong = 2

    TmaWarpSpecializedCooperative = 3

    CpAsyncWarpSpecialized = 4

    CpAsyncWarpSpecializedPingpong = 5

    CpAsyncWarpSpecializedCooperative = 6

    TmaWarpSpecializedCooperativeSplitN = 7

    TmaWarpSpecializedCooperativeFP8Overlap = 8

    TmaWarpSpecializedPingpongFP8Overlap = 9

    TmaWarpSpecializedCooperativeFP8AlternatingPromotion = 10

    TmaWarpSpecializedPingpongFP8AlternatingPromotion = 11

class EpilogueScheduleType(enum.Enum):
    """SM90 epilogue schedules."""

    ScheduleAuto = 0

    NoSmemWarpSpecialized = 1

    TmaWarpSpecialized = 2

    TmaWarpSpecializedCooperative = 3

    Lean = 4

class TileSchedulerType(enum.Enum):
    """SM90 tile schedulers."""

    Default = 0

    Persistent = 1

    StreamK = 2

class SwizzlingFunctor(enum.Enum):
    """
    Threadblock swizzles; ThreadblockSwizzleStreamK selects Stream-K (on SM80 and SM90 kernels).
    """

    IdentitySwizzle1 = 0

    IdentitySwizzle2 = 1

    IdentitySwizzle4 = 2

    IdentitySwizzle8 = 3

    HorizontalSwizzle = 4

    ThreadblockSwizzleStreamK = 5

class Activation(enum.Enum):
    """
    Elementwise activations fused into the epilogue: D = act(alpha * A @ B + beta * C).
    """

    gelu = 0

    hardswish = 1

    identity = 2

    leaky_relu = 3

    relu = 4

    sigmoid = 5

    silu = 6

    tanh = 7

    gelu_tanh = 8

class BiasMode(enum.Enum):
    """A bias vector added before the activation, per output row or column."""

    none = 0

    row = 1

    column = 2

class ScaleMode(enum.Enum):
    """
    f32 scale vectors multiplying the accumulator per output row, column or both (SM90; FP8).
    """

    none = 0

    row = 1

    column = 2

    row_and_column = 3

class BlockScaling(enum.Enum):
    """
    FP8 block scales applied in the SM90 mainloop: blockwise = A per row and 128-wide K block, B per 128 x 128 block (the DeepSeek-V3 format).
    """

    none = 0

    blockwise = 1

class RasterOrder(enum.Enum):
    """Order in which SM90 persistent schedulers walk output tiles."""

    Heuristic = 0

    AlongM = 1

    AlongN = 2

class Decomposition(enum.Enum):
    """
    How an SM90 Stream-K kernel shares out K: Auto (per shape), Heuristic, DataParallel, SplitK or StreamK.
    """

    Auto = 0

    Heuristic = 1

    DataParallel = 2

    SplitK = 3

    StreamK = 4

class ReductionMode(enum.Enum):
    """
    How split-K / Stream-K partial sums add up: in K order or as they finish.
    """

    Deterministic = 0

    Nondeterministic = 1

class ConvKind(enum.Enum):
    """Which convolution a Conv2d computes: fprop, dgrad or wgrad."""

    fprop = 0

    dgrad = 1

    wgrad = 2

class IteratorAlgorithm(enum.Enum):
    """How a conv kernel walks its operands."""

    analytic = 0

    optimized = 1

class StrideSupport(enum.Enum):
    """Dgrad kernels for unit strides only, or for any stride."""

    strided = 0

    unity = 1

class SplitKMode(enum.Enum):
    """How a conv splits its reduction: serial (one kernel) or parallel."""

    serial = 0

    parallel = 1

class TensorView:
    """
    What gemmkit sees of an array: pointer, dtype, shape, strides (in elements) and device (-1 = host). A view; it owns nothing.
    """

    @property
    def data(self) -> int: ...

    @property
    def dtype(self) -> DataType: ...

    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def strides(self) -> tuple[int, ...]: ...

    @property
    def device(self) -> int: ...

    def __repr__(self) -> str: ...

def default_stream(tensor: object) -> int:
    """
    The stream run() uses for `tensor` when none is given: torch's or cupy's current stream of its device; 0 (the default stream) for other arrays and host memory.
    """

def tensor_view(tensor: object) -> TensorView:
    """
    How gemmkit reads `tensor` (no copy): dtype, shape, strides in elements, device. Raises TensorError or TypeError as run() would.
    """

class EpilogueExpr:
    """
    A value of an epilogue visitor tree under construction (gemmkit.epilogue.trace builds these).
    """

    def __init__(self, constant: float) -> None: ...

    @overload
    def __add__(self, arg: EpilogueExpr, /) -> EpilogueExpr: ...

    @overload
    def __add__(self, arg: float, /) -> EpilogueExpr: ...

    @overload
    def __sub__(self, arg: EpilogueExpr, /) -> EpilogueExpr: ...

    @overload
    def __sub__(self, arg: float, /) -> EpilogueExpr: ...

    @overload
    def __mul__(self, arg: EpilogueExpr, /) -> EpilogueExpr: ...

    @overload
    def __mul__(self, arg: float, /) -> EpilogueExpr: ...

    @overload
    def __truediv__(self, arg: EpilogueExpr, /) -> EpilogueExpr: ...

    @overload
    def __truediv__(self, arg: float, /) -> EpilogueExpr: ...

    def __neg__(self) -> EpilogueExpr: ...

    def __radd__(self, arg: float, /) -> EpilogueExpr: ...

    def __rsub__(self, arg: float, /) -> EpilogueExpr: ...

    def __rmul__(self, arg: float, /) -> EpilogueExpr: ...

    def __rtruediv__(self, arg: float, /) -> EpilogueExpr: ...

def _evt_accumulator() -> EpilogueExpr:
    """The accumulator A @ B."""

def _evt_source() -> EpilogueExpr:
    """The GEMM's C."""

def _evt_aux(name: str, element: DataType | None = None, layout: LayoutType = LayoutType.RowMajor) -> EpilogueExpr:
    """A named m x n input tensor."""

def _evt_row_broadcast(name: str, element: DataType | None = None) -> EpilogueExpr:
    """A named row vector (1, n), broadcast over the rows."""

def _evt_column_broadcast(name: str, element: DataType | None = None) -> EpilogueExpr:
    """A named column vector (m, 1), broadcast over the columns."""

def _evt_scalar(name: str) -> EpilogueExpr:
    """A named scalar given at run time."""

def _evt_compute(op: str, inputs: Sequence[EpilogueExpr]) -> EpilogueExpr:
    """An elementwise operation of its inputs."""

def _evt_activation(activation: Activation, value: EpilogueExpr, parameter: float = 0.01) -> EpilogueExpr:
    """An activation."""

def _evt_convert(value: EpilogueExpr, element: DataType) -> EpilogueExpr:
    """Rounds to a type and back."""

def _evt_store(value: EpilogueExpr, name: str, element: DataType | None = None, layout: LayoutType = LayoutType.RowMajor) -> EpilogueExpr:
    """Writes the value to a named m x n output and stands for it."""

def _evt_reduction(kind: str, value: EpilogueExpr, name: str, op: str = 'sum', element: DataType | None = None) -> EpilogueExpr:
    """
    Reduces the value into a named row vector (kind 'row', over the rows), column vector ('column') or scalar.
    """

def plain_epilogue(activation: Activation = Activation.identity, bias: BiasMode = BiasMode.none, scale: ScaleMode = ScaleMode.none, activation_parameter: float = 0.01) -> Epilogue:
    """
    The tree of a plan's own epilogue settings, act(alpha * (acc * row_scale * column_scale) + beta * C + bias). A tree of this form (any names and order) set as epilogue_visitor runs the fused kernel of those settings.
    """

class Epilogue:
    """
    An epilogue visitor tree: loads, computes, stores and reductions over the accumulator. Set it as plan.epilogue_visitor; run() takes its tensors by name (visitor_args).
    """

    def __init__(self, D: EpilogueExpr, outputs: Sequence[EpilogueExpr] = []) -> None:
        """
        The tree whose value D takes; `outputs`: stores and reductions D does not read.
        """

    @property
    def inputs(self) -> list[str]:
        """The names of the tensors and scalars the tree reads, in tree order."""

    @property
    def outputs(self) -> list[str]:
        """The names of the tensors it writes besides D (stores and reductions)."""

    @property
    def reads_source(self) -> bool:
        """Whether the tree reads C."""

    @property
    def nodes(self) -> list[dict[str, object]]:
        """
        The nodes in tree order, one dict each (kind, name, element, layout, op, activation, value, reduce, inputs): the order of the launch's visitor operands.
        """

    def canonical(self) -> str:
        """A stable text of the structure: what the cache key hashes."""

    @property
    def digest(self) -> str:
        """8 hex digits of the canonical text, as kernel names carry it."""

    def __str__(self) -> str: ...

    def __repr__(self) -> str: ...

    def __eq__(self, arg: Epilogue, /) -> bool: ...  # type: ignore[override]

class MathInstruction:
    """
    The instruction a configuration issues (the reference's MathInstruction): its shape, the element types it multiplies, the opcode class and the math operation.
    """

    def __init__(self) -> None: ...

    @property
    def instruction_shape(self) -> list[int]: ...

    @property
    def element_a(self) -> DataType: ...

    @property
    def element_b(self) -> DataType: ...

    @property
    def element_accumulator(self) -> DataType: ...

    @property
    def opcode_class(self) -> OpcodeClass: ...

    @property
    def math_operation(self) -> MathOperation: ...

    def __repr__(self) -> str: ...

    def __eq__(self, arg: object, /) -> bool: ...

class TileDescription:
    """
    One kernel configuration. On SM90, threadblock_shape is the cluster's tile (as in the reference); cta_tile() is one CTA's share. str() prints the reference's block with the CTA tile added, repr() the fields (cta_tile included).
    """

    @overload
    def __init__(self) -> None: ...

    @overload
    def __init__(self, *, threadblock_shape: Sequence[int], warp_count: Sequence[int] = [0, 0, 0], stages: int = 0, instruction_shape: Sequence[int] = [0, 0, 0], cluster_shape: Sequence[int] = [1, 1, 1], kernel_schedule: KernelScheduleType = KernelScheduleType.ScheduleAuto, epilogue_schedule: EpilogueScheduleType = EpilogueScheduleType.ScheduleAuto, tile_scheduler: TileSchedulerType = TileSchedulerType.Default, math_operation: MathOperation = MathOperation.multiply_add) -> None: ...

    @property
    def threadblock_shape(self) -> list[int]: ...

    @threadblock_shape.setter
    def threadblock_shape(self, arg: Sequence[int], /) -> None: ...

    @property
    def warp_count(self) -> list[int]: ...

    @warp_count.setter
    def warp_count(self, arg: Sequence[int], /) -> None: ...

    @property
    def stages(self) -> int:
        """0 = as many as fit (SM90)"""

    @stages.setter
    def stages(self, arg: int, /) -> None: ...

    @property
    def instruction_shape(self) -> list[int]: ...

    @instruction_shape.setter
    def instruction_shape(self, arg: Sequence[int], /) -> None: ...

    @property
    def cluster_shape(self) -> list[int]: ...

    @cluster_shape.setter
    def cluster_shape(self, arg: Sequence[int], /) -> None: ...

    @property
    def kernel_schedule(self) -> KernelScheduleType: ...

    @kernel_schedule.setter
    def kernel_schedule(self, arg: KernelScheduleType, /) -> None: ...

    @property
    def epilogue_schedule(self) -> EpilogueScheduleType: ...

    @epilogue_schedule.setter
    def epilogue_schedule(self, arg: EpilogueScheduleType, /) -> None: ...

    @property
    def tile_scheduler(self) -> TileSchedulerType: ...

    @tile_scheduler.setter
    def tile_scheduler(self, arg: TileSchedulerType, /) -> None: ...

    @property
    def math_operation(self) -> MathOperation: ...

    @math_operation.setter
    def math_operation(self, arg: MathOperation, /) -> None: ...

    @property
    def math_instruction(self) -> MathInstruction | None:
        """
        The instruction it issues (None for a configuration no plan listed or stored).
        """

    def cta_tile(self) -> list[int]: ...

    def __str__(self) -> str: ...

    def __repr__(self) -> str: ...

    def __eq__(self, arg: object, /) -> bool: ...

    def __copy__(self) -> TileDescription: ...

    def __deepcopy__(self, memo: object) -> TileDescription: ...

class KernelSpec:
    """Everything that determines one generated kernel (a plain value)."""

    @property
    def cc(self) -> int: ...

    @property
    def kernel_cc(self) -> int: ...

    @property
    def family(self) -> KernelFamily: ...

    @property
    def opclass(self) -> OpcodeClass: ...

    @property
    def element_A(self) -> DataType: ...

    @property
    def element_B(self) -> DataType: ...

    @property
    def element_C(self) -> DataType: ...

    @property
    def element_D(self) -> DataType: ...

    @property
    def element_accumulator(self) -> DataType: ...

    @property
    def layout_A(self) -> LayoutType: ...

    @property
    def layout_B(self) -> LayoutType: ...

    @property
    def layout_C(self) -> LayoutType: ...

    @property
    def alignment_A(self) -> int: ...

    @property
    def alignment_B(self) -> int: ...

    @property
    def alignment_C(self) -> int: ...

    @property
    def alignment_D(self) -> int:
        """The vector width (elements) at which the kernel stores D."""

    @property
    def tile_description(self) -> TileDescription: ...

    @property
    def swizzling_functor(self) -> SwizzlingFunctor: ...

    @property
    def activation(self) -> Activation: ...

    @property
    def bias(self) -> BiasMode: ...

    @property
    def scale(self) -> ScaleMode: ...

    @property
    def block_scaling(self) -> BlockScaling: ...

    @property
    def activation_at_launch(self) -> bool:
        """
        Whether the kernel takes its activation at launch (one kernel for every activation)
        """

    @property
    def epilogue_visitor(self) -> Epilogue | None:
        """
        The kernel's epilogue visitor tree (its types resolved to the plan's), or None.
        """

    @property
    def conv_kind(self) -> ConvKind | None:
        """Conv2d kernels: fprop, dgrad or wgrad; None for a GEMM."""

    @property
    def iterator_algorithm(self) -> IteratorAlgorithm:
        """
        Conv2d kernels: how the iterators walk the operands (analytic for a GEMM).
        """

    @property
    def stride_support(self) -> StrideSupport:
        """
        Conv2d kernels: strided, or unity for the unit-stride dgrad kernels (strided for a GEMM).
        """

    @property
    def split_k_mode(self) -> SplitKMode:
        """
        Conv2d kernels: serial (the kernel writes D) or parallel (partial sums, then a reduction kernel).
        """

    def name(self) -> str:
        """The kernel's name in the reference's format."""

    def procedural_name(self) -> str:
        """Alias of name(), as the reference calls it."""

    def element_compute(self) -> DataType: ...

    def arch_flag(self) -> str: ...

    def canonical(self) -> str: ...

    def __eq__(self, arg: object, /) -> bool: ...

    def __repr__(self) -> str: ...

class KernelSource:
    """The generated translation unit of one kernel."""

    @property
    def kernel_name(self) -> str: ...

    @property
    def arch_flag(self) -> str: ...

    @property
    def text(self) -> str: ...

    def __str__(self) -> str: ...

class CompiledKernel:
    """What compile() produced: the kernel and its cache entry."""

    @property
    def kernel_name(self) -> str: ...

    @property
    def module_path(self) -> str: ...

    @property
    def cache_key(self) -> str: ...

    @property
    def cache_hit(self) -> bool: ...

    @property
    def build_seconds(self) -> float: ...

    def __repr__(self) -> str: ...

class CacheCounters:
    """Process-wide cache counters (tell a hit from a build)."""

    @property
    def builds(self) -> int: ...

    @property
    def disk_hits(self) -> int: ...

    @property
    def rebuilt_damaged(self) -> int: ...

    @property
    def background_builds(self) -> int: ...

    @property
    def pack_hits(self) -> int: ...

def render(spec: KernelSpec) -> KernelSource:
    """The kernel source for a spec (pure; no I/O)."""

def compile_many(specs: str | Sequence[KernelSpec], progress: object | None = None) -> list[CompiledKernel]:
    """
    Builds (or finds) every spec's module in the kernel cache, in parallel. `specs` is a list of KernelSpec or a pack name ('defaults'). progress: None shows a bar on stderr when it is a terminal; False is quiet; True shows a bar or, off a terminal, one line per kernel; a callable gets (done, total, kernel_name, finished, eta_seconds) for each build that starts or finishes.
    """

def wait_for_background_compiles() -> None:
    """
    Blocks until every kernel that run() chose to compile in the background is built (or failed).
    """

def pack_specs(name: str) -> list[KernelSpec]:
    """The kernels of a named pack ('defaults'); no GPU needed."""

def read_pack_file(path: str) -> list[KernelSpec]:
    """
    The kernels of a pack file: one plan per line, as gemmkit compile's options (e.g. --cc 90 --element bf16).
    """

def cache_counters() -> CacheCounters: ...

def cache_dir() -> str:
    """The kernel cache folder (GEMMKIT_CACHE_DIR, else per user)."""

def pack_dirs() -> list[str]:
    """
    The kernel packs searched after the cache, in order: GEMMKIT_PACK_PATH's folders, then the packs installed beside the library (gemmkit/packs/*). Read only.
    """

def cuda_device_count() -> int:
    """Visible CUDA devices; 0 without a GPU or driver."""

def tuning_database_path() -> str:
    """
    The tuning database (GEMMKIT_TUNING_DB, else <cache>/tuning.sqlite3; '' when it is off).
    """

def tuning_counters() -> tuple[int, int]:
    """
    (applied, not_built): how often run() used a tuning-database entry, and skipped one whose kernel is not built, in this process.
    """

def device_cc(device: int | None = None) -> int:
    """
    The compute capability (e.g. 90) of a device, by default the current one.
    """

def parse_data_type(text: str) -> DataType | None: ...

def parse_layout(text: str) -> LayoutType | None: ...

def parse_opclass(text: str) -> OpcodeClass | None: ...

class Plan:
    """What every C++ plan (Gemm, GroupedGemm, Conv2d) is configured with."""

    @property
    def cc(self) -> int: ...

    @property
    def kernel_cc(self) -> int:
        """The kernel generation the plan uses: 80 (CUTLASS 2.x) or 90 (3.x)."""

    @property
    def element_A(self) -> DataType: ...

    @property
    def element_B(self) -> DataType: ...

    @property
    def element_C(self) -> DataType: ...

    @property
    def element_D(self) -> DataType: ...

    @property
    def element_accumulator(self) -> DataType: ...

    @property
    def layout_A(self) -> LayoutType: ...

    @property
    def layout_B(self) -> LayoutType: ...

    @property
    def layout_C(self) -> LayoutType: ...

    @property
    def opclass(self) -> OpcodeClass: ...

    @opclass.setter
    def opclass(self, arg: OpcodeClass, /) -> None: ...

    def opclasses(self) -> list[OpcodeClass]: ...

    @property
    def math_operation(self) -> MathOperation | None:
        """The kernels' math operation (None: the family's default)."""

    @math_operation.setter
    def math_operation(self, math: MathOperation | None) -> None: ...

    def math_operations(self) -> list[MathOperation]:
        """The math operations on offer, the default first."""

    def tile_descriptions(self) -> list[TileDescription]:
        """Every valid configuration (default first)."""

    @property
    def tile_description(self) -> TileDescription | None:
        """The configuration set on the plan (None: chosen per alignment)."""

    @tile_description.setter
    def tile_description(self, arg: TileDescription, /) -> None: ...

    @property
    def swizzling_functor(self) -> SwizzlingFunctor: ...

    @swizzling_functor.setter
    def swizzling_functor(self, arg: SwizzlingFunctor, /) -> None: ...

    def swizzling_functors(self) -> list[SwizzlingFunctor]: ...

    @property
    def activation(self) -> Activation: ...

    @property
    def activation_parameter(self) -> float:
        """The leaky_relu slope."""

    def set_activation(self, activation: Activation, parameter: float = 0.01) -> None: ...

    @staticmethod
    def activations() -> list[Activation]: ...

    def construct(self, tile_description: TileDescription | None = None, alignment_A: int | None = None, alignment_B: int | None = None, alignment_C: int | None = None) -> KernelSpec:
        """
        The KernelSpec for the widest alignments (or those given); a tile given here stays in the plan.
        """

    def spec(self, alignment_A: int | None = None, alignment_B: int | None = None, alignment_C: int | None = None) -> KernelSpec:
        """Like construct() without storing anything."""

    def kernel_name(self) -> str: ...

    def render_source(self) -> KernelSource: ...

    def compile(self, tile_description: TileDescription | None = None) -> CompiledKernel:
        """
        Generates and compiles the kernel through the on-disk cache (needs nvcc, not a GPU).
        """

class Gemm(Plan):
    """
    The C++ plan, typed. Use gemmkit.Gemm, which also takes names and numpy/torch dtypes.
    """

    def __init__(self, *, element: DataType | None = None, element_A: DataType | None = None, element_B: DataType | None = None, element_C: DataType | None = None, element_D: DataType | None = None, element_accumulator: DataType | None = None, layout: LayoutType | None = None, layout_A: LayoutType | None = None, layout_B: LayoutType | None = None, layout_C: LayoutType | None = None, A: object | None = None, B: object | None = None, C: object | None = None, D: object | None = None, cc: int | None = None, kernel_cc: int | None = None) -> None: ...

    @property
    def epilogue_visitor(self) -> Epilogue | None:
        """
        An epilogue visitor tree (gemmkit.epilogue.trace) in place of alpha/beta, bias and activation; run() takes its tensors by name (visitor_args). None returns to the plain epilogue. A tree of the plain form act(alpha * (acc * row_scale * column_scale) + beta * C + bias) runs the fused kernel of those settings.
        """

    @epilogue_visitor.setter
    def epilogue_visitor(self, tree: Epilogue | None) -> None: ...

    @property
    def epilogue(self) -> Epilogue:
        """
        The plan's epilogue as a tree: the visitor tree, else plain_epilogue of its activation, bias and scales.
        """

    @property
    def bias(self) -> BiasMode:
        """
        A bias vector added before the activation, per output row or column (run(bias=...)).
        """

    @bias.setter
    def bias(self, arg: BiasMode, /) -> None: ...

    @property
    def scale(self) -> ScaleMode:
        """
        f32 scale vectors multiplying the accumulator per output row and/or column, e.g. FP8 dequantization scales (run(row_scale=..., column_scale=...); SM90 kernels).
        """

    @scale.setter
    def scale(self, arg: ScaleMode, /) -> None: ...

    @property
    def block_scaling(self) -> BlockScaling:
        """
        FP8 block scales applied in the mainloop (SM90): blockwise scales A per row and 128-wide K block and B per 128 x 128 block (run(scale_a=..., scale_b=...), torch._scaled_mm's layouts).
        """

    @block_scaling.setter
    def block_scaling(self, arg: BlockScaling, /) -> None: ...

    @property
    def activation_at_launch(self) -> bool:
        """
        SM90 kernels on CUTLASS's epilogues take a fused activation at launch: one kernel for every activation (default: GEMMKIT_ACTIVATION_AT_LAUNCH, on; FP8 operands: off).
        """

    @activation_at_launch.setter
    def activation_at_launch(self, arg: bool, /) -> None: ...

    @property
    def raster_order(self) -> RasterOrder:
        """
        SM90 persistent schedulers: the order output tiles are walked in (run-time only).
        """

    @raster_order.setter
    def raster_order(self, arg: RasterOrder, /) -> None: ...

    @property
    def max_swizzle_size(self) -> int:
        """
        SM90 persistent schedulers: 1, 2, 4 or 8, or 0 (the default): run() chooses per problem (run-time only).
        """

    @max_swizzle_size.setter
    def max_swizzle_size(self, arg: int, /) -> None: ...

    @property
    def decomposition(self) -> Decomposition:
        """
        SM90 Stream-K kernels: how K is shared out (Auto: run() chooses per shape; run-time only).
        """

    @decomposition.setter
    def decomposition(self, arg: Decomposition, /) -> None: ...

    @property
    def split_k_slices(self) -> int:
        """1: run() chooses; n > 1: split-K into n slices."""

    def set_split_k_slices(self, slices: int) -> None:
        """
        Split every output tile's K extent into this many slices on a Stream-K kernel (1: run() chooses).
        """

    @property
    def reduction_mode(self) -> ReductionMode:
        """
        Split-K / Stream-K partial sums: Deterministic (in K order) or Nondeterministic.
        """

    @reduction_mode.setter
    def reduction_mode(self, arg: ReductionMode, /) -> None: ...

    def spec_for(self, A: object | None, B: object | None, C: object | None, D: object | None, beta: float = 0.0) -> KernelSpec:
        """
        The kernel run() would use for these tensors (same checks; nothing runs; no GPU needed).
        """

    def running_kernel_name(self, A: object, B: object, C: object | None, D: object, beta: float = 0.0) -> str:
        """
        The kernel run() launches for these tensors now: spec_for's once built, else the one standing in for it while it compiles in the background; "" before the first run. Nothing compiles.
        """

    def spec_for_problem(self, m: int, n: int, k: int, batch: int = 1) -> KernelSpec:
        """
        The kernel run() would use for an m x n x k problem on packed device tensors of the plan's types and layouts (nothing runs; no GPU and no tensors needed: e.g. to compile FP8 kernels ahead of time).
        """

    def run(self, A: object | None, B: object | None, C: object | None, D: object | None, alpha: float = 1.0, beta: float = 0.0, stream: int | None = None, sync: bool = True, bias: object | None = None, row_scale: object | None = None, column_scale: object | None = None, scale_a: object | None = None, scale_b: object | None = None, visitor_args: dict[str, object] | None = None) -> None:
        """
        D = act(alpha * (A @ B * row_scale * column_scale) + beta * C + bias) on a stream handle (None: default_stream(D), i.e. torch's or cupy's current stream); with block scaling, A and B's 128-deep K blocks are scaled by scale_a and scale_b. Host arrays are staged and D holds the result on return.
        """

    def tune(self, A: object | None, B: object | None, C: object | None, D: object | None, alpha: float = 1.0, beta: float = 0.0, stream: int | None = None, max_candidates: int = 12, time_budget_s: float = 110.0, store: bool = True, verbose: bool = False, min_gain: float = 0.03) -> object:
        """
        Autotuning on device tensors: compiles up to max_candidates configurations in parallel, times each (warm-up, median), checks its result, stores the fastest (if at least min_gain faster than the heuristic's choice, else that) in the tuning database (run() then uses it for this plan and shape bucket in every process). Returns a dict: best, best_ms, heuristic, heuristic_ms, speedup, stored, database, candidates. D is overwritten.
        """

class GroupedGemm(Plan):
    """
    The C++ grouped plan, typed. Use gemmkit.GroupedGemm, which also takes names and dtypes.
    """

    def __init__(self, *, element: DataType | None = None, element_A: DataType | None = None, element_B: DataType | None = None, element_C: DataType | None = None, element_D: DataType | None = None, element_accumulator: DataType | None = None, layout: LayoutType | None = None, layout_A: LayoutType | None = None, layout_B: LayoutType | None = None, layout_C: LayoutType | None = None, A: object | None = None, B: object | None = None, C: object | None = None, D: object | None = None, cc: int | None = None, kernel_cc: int | None = None) -> None: ...

    def spec_for(self, A: object, B: object, C: object | None, D: object, beta: float = 0.0) -> KernelSpec:
        """
        The kernel run() would use for these lists (same checks; nothing runs; no GPU needed).
        """

    def run(self, A: object, B: object, C: object | None, D: object, alpha: float = 1.0, beta: float = 0.0, stream: int | None = None, sync: bool = True) -> None:
        """
        D[g] = act(alpha * A[g] @ B[g] + beta * C[g]) for every group, in one launch (lists of 2-D tensors; C may be None when beta is 0).
        """

    def run_contiguous(self, A: object, B: object, D: object, offsets: object, C: object | None = None, alpha: float = 1.0, beta: float = 0.0, stream: int | None = None, sync: bool = True, scale_a: object | None = None, scale_b: object | None = None) -> None:
        """
        The MoE form: A [total_M, K], B [G, K, N] (a [G, N, K] weight transposed also works), D [total_M, N], offsets a device int32 [G] of cumulative row ends; the GPU reads the group sizes (graph-capturable). A block-scaled plan takes scale_a [total_M, ceil(K/128)] and scale_b [G, ceil(N/128), ceil(K/128)], float32, row-major.
        """

    @property
    def block_scaling(self) -> BlockScaling:
        """
        FP8 block scales applied in the mainloop (SM90, the MoE form): blockwise scales A per row and 128-wide K block and each group's B per 128 x 128 block (run_contiguous(scale_a=..., scale_b=...)).
        """

    @block_scaling.setter
    def block_scaling(self, arg: BlockScaling, /) -> None: ...

    def spec_for_contiguous(self, A: object, B: object, D: object, offsets: object, C: object | None = None, beta: float = 0.0) -> KernelSpec:
        """
        The kernel run_contiguous() runs for these tensors (same checks but where they live and the block scales; nothing runs; no GPU needed). Where it is a 256 x 128 tile over an N that 256 does not divide and the experts average fewer than 1024 rows, the 128 x 256 one (rival_for_contiguous) is launched beside it and the GPU runs whichever needs fewer waves on the group sizes.
        """

    def rival_for_contiguous(self, A: object, B: object, D: object, offsets: object, C: object | None = None, beta: float = 0.0) -> KernelSpec | None:
        """
        The kernel run_contiguous() launches beside spec_for_contiguous()'s where the GPU picks between the two, else None.
        """

class Conv2d(Plan):
    """
    The C++ Conv2d plan, typed. Use gemmkit.Conv2d, which also takes names, dtypes and torch tensors.
    """

    def __init__(self, kind: ConvKind, *, element: DataType | None = None, element_A: DataType | None = None, element_B: DataType | None = None, element_C: DataType | None = None, element_D: DataType | None = None, element_accumulator: DataType | None = None, cc: int | None = None, kernel_cc: int | None = None) -> None: ...

    @property
    def kind(self) -> ConvKind: ...

    @property
    def iterator_algorithm(self) -> IteratorAlgorithm | None:
        """
        None: optimized where the problem allows it at run time (construct() names the analytic kernel).
        """

    @iterator_algorithm.setter
    def iterator_algorithm(self, arg: IteratorAlgorithm | None, /) -> None: ...

    @property
    def swizzling_stride(self) -> int:
        """The 2.x kernels' threadblock swizzle stride: 1, 2, 4 or 8."""

    @swizzling_stride.setter
    def swizzling_stride(self, arg: int, /) -> None: ...

    @property
    def stride_support(self) -> StrideSupport | None:
        """
        Dgrad: unity (unit strides only) or strided; None: by the problem's stride at run time.
        """

    @stride_support.setter
    def stride_support(self, arg: StrideSupport | None, /) -> None: ...

    @property
    def split_k_mode(self) -> SplitKMode | None:
        """
        serial or parallel as set; None: run() chooses (parallel for wgrad problems under a wave).
        """

    @property
    def split_k_slices(self) -> int:
        """As set; 0: run() chooses per problem."""

    def set_split_k(self, mode: SplitKMode | None, slices: int = 0) -> None:
        """
        (mode, slices): slices 0 lets run() choose the count; (None, 0) lets it choose both.
        """

    @staticmethod
    def output_size(input_size: Sequence[int], weight_size: Sequence[int], padding: Sequence[int] = [0, 0], stride: Sequence[int] = [1, 1], dilation: Sequence[int] = [1, 1]) -> list[int]:
        """
        (N, P, Q, K) of an input (N, H, W, C) under a filter (K, R, S, C): P = (H + 2 pad - dilation (R - 1) - 1) / stride + 1.
        """

    def spec_for(self, A: object, B: object, C: object | None, D: object, stride: Sequence[int] = [1, 1], padding: Sequence[int] = [0, 0], dilation: Sequence[int] = [1, 1], beta: float = 0.0) -> KernelSpec:
        """
        The kernel run() would use for these NHWC / KRSC tensors (same checks; nothing runs; no GPU needed).
        """

    def split_k_for(self, A: object, B: object, C: object | None, D: object, stride: Sequence[int] = [1, 1], padding: Sequence[int] = [0, 0], dilation: Sequence[int] = [1, 1], beta: float = 0.0) -> tuple[SplitKMode, int]:
        """
        (mode, slices): the split-K run() would use for these NHWC / KRSC tensors (slices 1: none).
        """

    def run(self, A: object, B: object, C: object | None, D: object, stride: Sequence[int] = [1, 1], padding: Sequence[int] = [0, 0], dilation: Sequence[int] = [1, 1], alpha: float = 1.0, beta: float = 0.0, stream: int | None = None, sync: bool = True) -> None:
        """D = act(alpha * conv(A, B) + beta * C) on NHWC / KRSC tensors."""

class Toolchain:
    """
    The build environment gemmkit compiles kernels with (see find_headers()).
    """

    @property
    def nvcc(self) -> str: ...

    @property
    def cuda_home(self) -> str: ...

    @property
    def nvcc_version(self) -> str: ...

    @property
    def cutlass_root(self) -> str: ...

    @property
    def cutlass_version(self) -> str: ...

    @property
    def device_include_dir(self) -> str: ...

    def __repr__(self) -> str: ...

    @staticmethod
    def find_headers() -> Toolchain:
        """
        CUTLASS and gemmkit's device headers as the compiler finds them (CUTLASS_PATH, GEMMKIT_ROOT, else the configured defaults); runs no program, so nvcc and the host compiler stay empty.
        """

def nvcc_command(toolchain: Toolchain, source: KernelSource, source_path: str, output_path: str) -> list[str]:
    """
    The nvcc command line gemmkit builds `source_path` into the shared object `output_path` with.
    """

def set_build_ahead(enabled: bool) -> None:
    """
    Whether declaring a Gemm plan starts building its default kernel in the background (GEMMKIT_BUILD_AHEAD; on by default in interactive sessions on a machine with a GPU).
    """

def set_progress(enabled: bool) -> None:
    """
    Whether compiles report on stderr (a live line on a terminal, a line at the start and end of each build otherwise), overriding GEMMKIT_PROGRESS; background builds never print.
    """
