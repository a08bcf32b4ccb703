"""gemmkit: declare a GEMM in a few words, get a CUTLASS kernel for your GPU, compile it once, run it on your
tensors (numpy, torch, cupy, jax). A thin layer over gemmkit's C++ library; see README.md.

    import numpy as np, gemmkit
    plan = gemmkit.Gemm(element=np.float16, layout=gemmkit.LayoutType.RowMajor, element_accumulator=np.float32)
    plan.run(A, B, C, D)
"""
import logging as _logging
import os as _os

from . import _gemmkit
from ._gemmkit import (  # noqa: E402
    Activation,
    BiasMode,
    BlockScaling,
    CacheCounters,
    CompiledKernel,
    CompileError,
    ConfigError,
    ConvKind,
    CudaError,
    DataType,
    Decomposition,
    EpilogueScheduleType,
    IteratorAlgorithm,
    Error,
    KernelFamily,
    KernelScheduleType,
    KernelSource,
    KernelSpec,
    LayoutType,
    MathInstruction,
    MathOperation,
    OpcodeClass,
    RasterOrder,
    ReductionMode,
    ScaleMode,
    SplitKMode,
    StrideSupport,
    SwizzlingFunctor,
    TensorError,
    TensorView,
    TileDescription,
    TileSchedulerType,
    ToolchainError,
    cache_counters,
    cache_dir,
    compile_many,
    cuda_device_count,
    device_cc,
    pack_dirs,
    pack_specs,
    read_pack_file,
    render,
    set_build_ahead,
    tensor_view,
    tuning_counters,
    tuning_database_path,
    wait_for_background_compiles,
)
from . import emit, epilogue, op, shape, swizzle, utils  # noqa: E402
from .op import Conv2d, Conv2dDgrad, Conv2dFprop, Conv2dWgrad, Gemm, GroupedGemm  # noqa: E402
from .tensor import Tensor  # noqa: E402

__version__: str = _gemmkit.__version__


def _interactive() -> bool:
    """A REPL (python -i, the prompt) or a Jupyter / IPython kernel: where a plan is declared well before it runs."""
    import sys
    return hasattr(sys, "ps1") or bool(sys.flags.interactive) or "ipykernel" in sys.modules


# Build-ahead: in an interactive session a declared plan's default kernel starts building while the user writes the
# next cell; a script declares and runs at once, so there it would only add builds (GEMMKIT_BUILD_AHEAD=1 forces it).
if _os.environ.get("GEMMKIT_BUILD_AHEAD", "auto") == "auto" and _interactive() and cuda_device_count() > 0:
    set_build_ahead(True)


def set_log_level(level: int | str) -> None:
    """Sets the level of the `gemmkit` logger (a logging level, or its name), as the reference's set_log_level does;
    compile progress on stderr follows it: reported at INFO and DEBUG, quiet at WARNING and above."""
    logger = _logging.getLogger(__name__)
    logger.setLevel(level)
    set_progress = getattr(_gemmkit, "set_progress", None)  # an extension built without progress reports lacks it
    if set_progress is not None:
        set_progress(logger.getEffectiveLevel() <= _logging.INFO)


__all__ = [
    "Activation", "BiasMode", "BlockScaling", "CacheCounters", "CompileError", "CompiledKernel", "ConfigError", "Conv2d", "Conv2dDgrad",
    "Conv2dFprop", "Conv2dWgrad", "ConvKind", "CudaError", "DataType", "Decomposition",
    "EpilogueScheduleType", "Error", "Gemm", "GroupedGemm", "IteratorAlgorithm", "KernelFamily", "KernelScheduleType", "KernelSource", "KernelSpec",
    "LayoutType", "MathInstruction", "MathOperation", "OpcodeClass", "RasterOrder", "ReductionMode", "ScaleMode", "SplitKMode", "StrideSupport", "SwizzlingFunctor", "Tensor", "TensorError", "TensorView",
    "TileDescription", "TileSchedulerType", "ToolchainError", "cache_counters", "cache_dir", "compile_many",
    "cuda_device_count", "device_cc", "emit", "epilogue", "op", "pack_dirs", "pack_specs", "read_pack_file", "render", "set_build_ahead", "set_log_level", "shape", "swizzle",
    "tensor_view", "utils", "tuning_counters", "tuning_database_path", "wait_for_background_compiles",
]
