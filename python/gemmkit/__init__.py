"""gemmkit: declare a GEMM in a few words, get a CUTLASS kernel for your GPU, compile it once, run it on your
tensors (numpy, torch, cupy, jax). A thin layer over gemmkit's C++ library; see README.md.

    import numpy as np, gemmkit
    plan = gemmkit.Gemm(element=np.float16, layout=gemmkit.LayoutType.RowMajor, element_accumulator=np.float32)
    plan.run(A, B, C, D)
"""
import os as _os

_here = _os.path.dirname(_os.path.abspath(__file__))
# An installed package carries gemmkit's device headers; the C++ toolchain looks for them under GEMMKIT_ROOT
# (a source checkout needs nothing: the library knows where it was built from).
if not _os.environ.get("GEMMKIT_ROOT") and _os.path.isdir(_os.path.join(_here, "device", "include")):
    _os.environ["GEMMKIT_ROOT"] = _here

from . import _gemmkit  # noqa: E402
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

__version__: str = _gemmkit.__version__

__all__ = [
    "Activation", "BiasMode", "CacheCounters", "CompileError", "CompiledKernel", "ConfigError", "CudaError", "DataType",
    "EpilogueScheduleType", "Error", "Gemm", "GroupedGemm", "KernelFamily", "KernelScheduleType", "KernelSource", "KernelSpec",
    "LayoutType", "MathOperation", "OpcodeClass", "RasterOrder", "SwizzlingFunctor", "TensorError", "TensorView",
    "TileDescription", "TileSchedulerType", "ToolchainError", "cache_counters", "cache_dir", "compile_many",
    "cuda_device_count", "device_cc", "emit", "epilogue", "op", "render", "swizzle", "tensor_view",
]
