"""gemmkit: declare a GEMM in a few words, get a CUTLASS kernel for your GPU, compile it once, run it on your
tensors (numpy, torch, cupy, jax). A thin layer over gemmkit's C++ library; see README.md.

    import numpy as np, gemmkit
    plan = gemmkit.Gemm(element=np.float16, layout=gemmkit.LayoutType.RowMajor, element_accumulator=np.float32)
    plan.run(A, B, C, D)
"""
from . import _gemmkit
from ._gemmkit import (  # noqa: E402
    Activation,
    BiasMode,
    CacheCounters,
    CompiledKernel,
    CompileError,
    ConfigError,
    CudaError,
    DataType,
    EpilogueScheduleType,
    Error,
    KernelFamily,
    KernelScheduleType,
    KernelSource,
    KernelSpec,
    LayoutType,
    MathOperation,
    OpcodeClass,
    RasterOrder,
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
    render,
    tensor_view,
)
from . import emit, epilogue, op, swizzle  # noqa: E402
from .op import Gemm, GroupedGemm  # noqa: E402

__version__ = _gemmkit.__version__

__all__ = [
    "Activation", "BiasMode", "CacheCounters", "CompileError", "CompiledKernel", "ConfigError", "CudaError", "DataType",
    "EpilogueScheduleType", "Error", "Gemm", "GroupedGemm", "KernelFamily", "KernelScheduleType", "KernelSource", "KernelSpec",
    "LayoutType", "MathOperation", "OpcodeClass", "RasterOrder", "SwizzlingFunctor", "TensorError", "TensorView",
    "TileDescription", "TileSchedulerType", "ToolchainError", "cache_counters", "cache_dir", "compile_many",
    "cuda_device_count", "device_cc", "emit", "epilogue", "op", "render", "swizzle", "tensor_view",
]
