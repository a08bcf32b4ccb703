"""tests/python/torch_emit_support.py: what the test_torch_emit_*.py files share (gemmkit.emit.pytorch on Gemm,
GroupedGemm, Conv2d and epilogue-visitor kernels): the f16 Gemm plans and specs they export, the flags of a generated
setup.py, the start of a JIT test's isolated script and its check that only the binding was compiled, and the GPU
tier's small-integer operands and their exact f16 result."""
import ast
import filecmp
import pathlib
import subprocess

import numpy as np

import gemmkit


def f16_plan(cc, **kwargs):
    return gemmkit.Gemm(element=np.float16, element_accumulator=np.float32, cc=cc, **kwargs)


def spec(cc, activation=None, layout_B="row"):
    plan = f16_plan(cc, layout_A="row", layout_B=layout_B, layout_C="row")
    if activation is not None:
        plan.activation = activation
    return plan.construct()


def setup_flags(path):
    """NVCC_FLAGS and the CUTLASS default of a generated setup.py, read as Python."""
    tree = ast.parse(path.read_text())
    values = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id == "NVCC_FLAGS":
                values["flags"] = ast.literal_eval(node.value)
            if node.targets[0].id == "CUTLASS":
                values["cutlass_default"] = ast.literal_eval(node.value.args[1])
    return values


# A JIT test's start: the walk-through's f16 plan (Gemm or GroupedGemm) for SM80, its kernel in gemmkit's cache.
JIT_SETUP = """
    import json, os, time, torch, numpy as np, gemmkit
    plan = gemmkit.{plan}(element=np.float16, layout="row", element_accumulator=np.float32, cc=80)
    op = plan.construct()
    cached = plan.compile()  # the kernel as gemmkit's cache holds it
    builds = gemmkit.cache_counters().builds
    out = os.environ["OUT_DIR"]
"""


def assert_only_the_binding_was_compiled(result, build, name, cache):
    """No CUDA object was built: the binding links copies of the cached kernel and glue via $ORIGIN, and never
    libgemmkit."""
    assert sorted(p.name for p in build.rglob("*.o")) == [f"{name}.o"]
    library, glue = pathlib.Path(result["library"]), pathlib.Path(result["glue"])
    assert library.parent == build and glue.parent == build
    assert filecmp.cmp(library, next(cache.rglob("kernel.so")), shallow=False)
    dynamic = subprocess.run(["readelf", "-d", result["extension"]], capture_output=True, text=True).stdout
    assert f"Shared library: [{library.name}]" in dynamic and f"Shared library: [{glue.name}]" in dynamic
    assert "[$ORIGIN]" in dynamic
    assert "libgemmkit" not in dynamic and "_gemmkit" not in dynamic
    # Nothing the binding defines is shared with another extension: a GNU unique symbol (an inline variable) is one
    # object for the whole process, and a second exported kernel then ran the first one's entry points.
    symbols = subprocess.run(["readelf", "-sW", "--dyn-syms", result["extension"]], capture_output=True, text=True)
    assert " UNIQUE " not in symbols.stdout, symbols.stdout


def small_integers(torch, shape, seed, low=-3, high=3):
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(low, high, shape, generator=generator).half().cuda()


def exact(torch, A, B, C=None, alpha=1.0, beta=0.0, relu=False):
    """alpha * A @ B + beta * C in float64, rounded once to f16 as the kernel's f32 epilogue does (every value here
    is an integer below 2^24, so the f32 sums are exact)."""
    z = alpha * torch.matmul(A.double(), B.double()) + (beta * C.double() if C is not None else 0.0)
    return (torch.relu(z) if relu else z).half()
