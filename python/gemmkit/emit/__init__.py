"""python/gemmkit/emit/__init__.py: exporters of gemmkit kernels as other projects' sources.

    spec = gemmkit.Gemm(element=torch.float16, layout="row", element_accumulator=torch.float32).construct()
    mod = gemmkit.emit.pytorch(spec, name="my_gemm", cc=spec.cc, sourcedir="out", jit=True)
    D = mod.run(A, B)
"""
from .pytorch import pytorch

__all__ = ["pytorch"]
