"""python/gemmkit/utils/__init__.py: gemmkit.utils, helpers around the plans where the reference's cutlass.utils
has them (profiler.CUDAEventProfiler)."""
from . import profiler

__all__ = ["profiler"]
