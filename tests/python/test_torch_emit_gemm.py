"""tests/python/test_torch_emit_gemm.py: gemmkit.emit.pytorch on Gemm kernels (GroupedGemm, Conv2d and epilogue
visitor trees: test_torch_emit_grouped.py, test_torch_emit_conv.py, test_torch_emit_evt.py; what they share:
torch_emit_support.py). Unit: the files it writes for SM80 and SM90 kernels and fused activations, the flags of
setup.py, refused arguments (no nvcc, no GPU; no torch unless a test says so). Compile (nvcc, torch, no GPU): the JIT
build against a cached kernel, importable without a GPU, and one AOT `setup.py build_ext` on a clean folder. GPU: the
exported module against torch.matmul, exactly, on the current stream, in a CUDA graph and under torch.compile, and
its errors."""
import filecmp
import json
import os
import pathlib
import subprocess
import sys

import pytest

import gemmkit
from gemmkit import _gemmkit
from isolated import run_isolated
from torch_emit_support import (JIT_SETUP, assert_only_the_binding_was_compiled, exact, f16_plan, setup_flags,
                                small_integers, spec)


# ---- unit ------------------------------------------------------------------------------------------------------

EXPORTS = [  # (cc, activation, layout_B, arch flag)
    (80, None, "row", "-gencode=arch=compute_80,code=sm_80"),
    (90, None, "row", "-gencode=arch=compute_90a,code=sm_90a"),
    (90, "relu", "col", "-gencode=arch=compute_90a,code=sm_90a"),
    (90, ("leaky_relu", 0.2), "row", "-gencode=arch=compute_90a,code=sm_90a"),
]


@pytest.mark.parametrize("cc, activation, layout_B, gencode", EXPORTS)
def test_writes_kernel_binding_setup_and_headers(tmp_path, cc, activation, layout_B, gencode):
    op = spec(cc, activation, layout_B)
    assert gemmkit.emit.pytorch(op, "my_gemm", cc, str(tmp_path / "out")) is None
    out = tmp_path / "out"
    # The kernel is exactly the source gemmkit compiles, fused epilogue included.
    assert (out / "my_gemm_kernel.cu").read_text() == _gemmkit.render(op).text
    binding = (out / "my_gemm.cpp").read_text()
    assert f"//   {op.name()}\n" in binding
    assert '#include "gemmkit/torch_module.h"' in binding
    assert "/*a=*/{GK_DTYPE_F16, GK_ROW_MAJOR, 8}," in binding
    b_layout = "GK_ROW_MAJOR" if layout_B == "row" else "GK_COLUMN_MAJOR"
    assert f"/*b=*/{{GK_DTYPE_F16, {b_layout}, 8}}," in binding
    assert "/*d=*/{GK_DTYPE_F16, GK_ROW_MAJOR, 8}," in binding
    assert "/*has_c=*/1," in binding
    assert f"// Activation {op.activation.name}." in binding
    leaky = op.activation == gemmkit.Activation.leaky_relu
    assert f"/*takes_slope=*/{int(leaky)}," in binding
    slope = ", float slope=0.01" if leaky else ""
    assert f'"run(Tensor A, Tensor B, Tensor? C=None, float alpha=1.0, float beta=0.0{slope}) -> Tensor"' in binding
    assert "GK_PYTHON_MODULE(TORCH_EXTENSION_NAME, register_op," in binding
    assert "{{" not in binding and "torch/" not in binding  # no torch header: the binding builds in a second
    # The glue headers: gemmkit's device headers as the compiler reads them, and the torch side.
    device = pathlib.Path(_gemmkit.Toolchain.find_headers().device_include_dir) / "gemmkit"
    for header in device.iterdir():
        assert filecmp.cmp(header, out / "gemmkit" / header.name, shallow=False), header.name
    for glue in ("torch_export.h", "torch_module.h", "torch_export_common.h", "torch_export_gemm.cpp",
                 "torch_export_grouped.cpp", "torch_export_conv2d.cpp"):
        assert (out / "gemmkit" / glue).is_file()
    flags = setup_flags(out / "setup.py")
    assert gencode in flags["flags"]


def test_setup_py_has_gemmkits_nvcc_flags(tmp_path):
    op = spec(90, "gelu")
    gemmkit.emit.pytorch(op, "gelu_gemm", 90, str(tmp_path))
    text = (tmp_path / "setup.py").read_text()
    values = setup_flags(tmp_path / "setup.py")
    toolchain = _gemmkit.Toolchain.find_headers()
    # Every compile flag of gemmkit's own command, in order; files, linking and include folders are setup.py's own.
    command = _gemmkit.nvcc_command(toolchain, _gemmkit.render(op), "k.cu", "k.so")
    compile_flags = [f for f in command[1:] if f not in ("k.cu", "-o", "k.so", "-shared", "-cudart", "shared")
                     and not f.startswith("-I")]
    assert values["flags"][:len(compile_flags)] == compile_flags
    for flag in ("-std=c++17", "-O3", "-DNDEBUG", "--expt-relaxed-constexpr", "-gencode=arch=compute_90a,code=sm_90a"):
        assert flag in values["flags"]
    assert "-U__CUDA_NO_HALF_OPERATORS__" in values["flags"]
    assert not any(f.startswith("-I") or f in ("-shared", "-o") for f in values["flags"])
    assert values["cutlass_default"] == toolchain.cutlass_root
    assert 'os.environ.get("CUTLASS_PATH"' in text
    assert '["gelu_gemm.cpp", "gemmkit/torch_export_gemm.cpp", "gelu_gemm_kernel.cu"]' in text
    assert "include_dirs=[HERE] + CUTLASS_INCLUDES" in text
    assert 'CUDAExtension(\n            "gelu_gemm",' in text
    assert "{{" not in text


def test_default_sourcedir_is_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    gemmkit.emit.pytorch(spec(80), "here", 80)
    assert {p.name for p in tmp_path.iterdir()} == {"here_kernel.cu", "here.cpp", "setup.py", "gemmkit"}


def test_unsupported_op_types_are_refused(tmp_path):
    plan = f16_plan(90, layout="row")
    for op in (plan, "gemm", None):
        with pytest.raises(TypeError, match=f"Operation type {type(op).__name__} is not currently supported"):
            gemmkit.emit.pytorch(op, "x", 90, str(tmp_path))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["", "1gemm", "my-gemm", "my.gemm", "class", "aten", "gemmkit", 3])
def test_bad_names_are_refused_before_writing(tmp_path, name):
    with pytest.raises(gemmkit.ConfigError, match="name"):
        gemmkit.emit.pytorch(spec(80), name, 80, str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_bias_kernels_are_refused_before_writing(tmp_path):
    plan = f16_plan(90, layout="row")
    plan.bias = "column"
    with pytest.raises(gemmkit.ConfigError, match="adds a bias vector"):
        gemmkit.emit.pytorch(plan.construct(), "biased", 90, str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_block_scaled_kernels_are_refused_before_writing(tmp_path):
    plan = gemmkit.Gemm(element_A="e4m3", element_B="e4m3", element_C="bf16", element_D="bf16", layout_A="row",
                        layout_B="col", layout_C="row", cc=90)
    plan.block_scaling = "blockwise"
    with pytest.raises(gemmkit.ConfigError, match="takes block scales.*gemmkit.torch.scaled_mm"):
        gemmkit.emit.pytorch(plan.construct(), "blocked", 90, str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_cc_must_be_the_ops(tmp_path):
    with pytest.raises(gemmkit.ConfigError, match="constructed for cc 90"):
        gemmkit.emit.pytorch(spec(90), "x", 80, str(tmp_path))


def test_setup_py_refuses_a_missing_cutlass(tmp_path):
    pytest.importorskip("torch")
    gemmkit.emit.pytorch(spec(80), "nocutlass", 80, str(tmp_path))
    env = dict(os.environ, CUTLASS_PATH=str(tmp_path / "nowhere"))
    result = subprocess.run([sys.executable, "setup.py", "--name"], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode != 0
    assert "nocutlass: CUTLASS headers not found under" in result.stderr
    ok = subprocess.run([sys.executable, "setup.py", "--name"], cwd=tmp_path, capture_output=True, text=True,
                        timeout=120)
    assert ok.returncode == 0 and ok.stdout.strip().endswith("nocutlass"), ok.stderr


# ---- compile tier: nvcc and torch, no GPU ------------------------------------------------------------------

JIT_BUILD = JIT_SETUP.format(plan="Gemm") + """
    first = gemmkit.emit.pytorch(op, "jit_gemm", 80, out + "/first", jit=True)  # also builds gemmkit's torch glue
    start = time.perf_counter()
    mod = gemmkit.emit.pytorch(op, "jit_gemm2", 80, out + "/second", jit=True)  # the usual case: all cached
    seconds = time.perf_counter() - start
    A = torch.empty(64, 32, dtype=torch.float16, device="meta")
    B = torch.empty(32, 48, dtype=torch.float16, device="meta")
    D = mod.run(A, B)
    errors = []
    host = (torch.zeros(64, 32, dtype=torch.float16), torch.zeros(32, 48, dtype=torch.float16))
    for args in [(A.float(), B), (A, B.mT), (A, B, None, 1.0, 2.0), host]:
        try:
            mod.run(*args)
        except ValueError as error:
            errors.append(str(error).splitlines()[0])
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():  # how torch.compile sees the op: its meta path, no GPU
        fake = mod.run(torch.empty(4, 64, 32, dtype=torch.float16, device="cuda"),
                       torch.empty(32, 48, dtype=torch.float16, device="cuda"))
    traced = torch.compile(lambda a, b: mod.run(a, b) + 1, fullgraph=True, backend="aot_eager")(A, B)
    again = gemmkit.emit.pytorch(op, "jit_gemm2", 80, out + "/again", jit=True) is mod  # loaded: no rebuild
    plan.activation = "relu"
    try:  # another kernel under a namespace this process registered already
        gemmkit.emit.pytorch(plan.construct(), "jit_gemm2", 80, out + "/other", jit=True)
        refused = ""
    except gemmkit.ConfigError as error:
        refused = str(error)
    build = mod.gemmkit_build
    print(json.dumps({"fake": [list(fake.shape), str(fake.device)], "traced": list(traced.shape), "again": again,
                      "refused": refused,"seconds": seconds, "binding_seconds": build.binding_seconds,
                      "first_glue_seconds": first.gemmkit_build.glue_seconds, "glue_seconds": build.glue_seconds,
                      "hit": build.kernel.cache_hit, "builds": gemmkit.cache_counters().builds - builds,
                      "kernel_name": mod.kernel_name, "op_name": op.name(),
                      "same_module": build.kernel.module_path == cached.module_path,
                      "library": build.kernel_library, "glue": build.glue_library, "extension": mod.__file__,
                      "shape": list(D.shape), "dtype": str(D.dtype), "device": str(D.device),
                      "ops_run": mod.run is torch.ops.jit_gemm2.run, "errors": errors}))
"""


@pytest.mark.compile
def test_jit_links_the_cached_kernel_and_compiles_only_the_binding(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "out"
    # A ninja that does not run (as on the GPU machine) must not matter: the JIT build does not use ninja.
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "ninja").write_text("#!/bin/sh\nexit 1\n")
    (fake_bin / "ninja").chmod(0o755)
    result = json.loads(run_isolated(JIT_BUILD, timeout=900, GEMMKIT_CACHE_DIR=str(tmp_path / "cache"),
                                     OUT_DIR=str(out), PATH=f"{fake_bin}:{os.environ['PATH']}"))
    print(f"\nJIT build with the kernel and gemmkit's torch glue cached: {result['seconds']:.1f} s (binding "
          f"{result['binding_seconds']:.1f} s); the glue's one-time build took {result['first_glue_seconds']:.1f} s")
    assert result["hit"] and result["builds"] == 0 and result["same_module"]
    assert result["first_glue_seconds"] > 0 and result["glue_seconds"] == 0
    assert result["kernel_name"] == result["op_name"]
    assert result["ops_run"]
    assert (result["shape"], result["dtype"], result["device"]) == ([64, 48], "torch.float16", "meta")
    assert result["fake"] == [[4, 64, 48], "cuda:0"] and result["traced"] == [64, 48]
    assert result["again"]
    assert "torch.ops.jit_gemm2 was registered in this process by another kernel" in result["refused"]
    assert "A has dtype Float but the kernel was built for Half" in result["errors"][0]
    assert "the kernel reads it row-major" in result["errors"][1]
    assert "beta is 2 but no C was given" in result["errors"][2]
    assert "A is on cpu; the kernel runs on CUDA tensors" in result["errors"][3]
    assert_only_the_binding_was_compiled(result, out / "second" / "build-jit", "jit_gemm2", tmp_path / "cache")


AOT_IMPORT = """
    import json, sys, torch
    sys.path.insert(0, sys.argv[1])
    import aot_gemm
    D = aot_gemm.run(torch.empty(2, 64, 32, dtype=torch.float16, device="meta"),
                     torch.empty(32, 48, dtype=torch.float16, device="meta"))
    print(json.dumps({"kernel_name": aot_gemm.kernel_name, "shape": list(D.shape)}))
"""


@pytest.mark.compile
def test_setup_py_builds_on_a_clean_folder(tmp_path):
    """The reference's extension does not build for SM90 kernels with fused epilogues; ours does, from source."""
    pytest.importorskip("torch")
    op = spec(90, "relu")
    out = tmp_path / "aot"
    gemmkit.emit.pytorch(op, "aot_gemm", 90, str(out))
    env = dict(os.environ, MAX_JOBS="2")
    result = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=out, env=env,
                            capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    built = list(out.glob("aot_gemm*.so"))
    assert len(built) == 1
    imported = subprocess.run([sys.executable, "-c", AOT_IMPORT.replace("\n    ", "\n"), str(out)],
                              capture_output=True, text=True, timeout=300)
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout.splitlines()[-1]) == {"kernel_name": op.name(), "shape": [2, 64, 48]}


# ---- gpu tier: the exported module on the device --------------------------------------------------------------


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The walk-through's f16 Gemm (and a fused-ReLU one) for this GPU, exported and built with jit=True."""
    torch = pytest.importorskip("torch")
    cc = gemmkit.device_cc()
    out = tmp_path_factory.mktemp("exported")
    plain = gemmkit.emit.pytorch(spec(cc), "gk_test_gemm", cc, str(out / "gemm"), jit=True)
    relu = gemmkit.emit.pytorch(spec(cc, "relu"), "gk_test_gemm_relu", cc, str(out / "relu"), jit=True)
    return torch, plain, relu


@pytest.mark.gpu
def test_exported_gemm_matches_matmul(exported):
    """The reference's test_gemm: every call form of run against A @ B, and 2 A @ B - C."""
    torch, mod, _ = exported
    A, B, C = (small_integers(torch, s, i) for i, s in enumerate([(1024, 512), (512, 256), (1024, 256)]))
    for D in (mod.run(A, B), mod.run(A, B, C), mod.run(A, B, C, 1.0), mod.run(A, B, C, 1.0, 0.0)):
        assert D.dtype == torch.float16 and D.device == A.device
        torch.testing.assert_close(D, exact(torch, A, B), rtol=0, atol=0)
        torch.testing.assert_close(D, torch.matmul(A, B))
    torch.testing.assert_close(mod.run(A, B, C, 2.0, -1.0), exact(torch, A, B, C, 2.0, -1.0), rtol=0, atol=0)
    torch.testing.assert_close(mod.run(A, B, C=C, beta=1.0), exact(torch, A, B, C, 1.0, 1.0), rtol=0, atol=0)


@pytest.mark.gpu
def test_exported_fused_relu_and_batches(exported):
    torch, mod, relu = exported
    A, B = small_integers(torch, (3, 128, 64), 5), small_integers(torch, (64, 96), 6)
    C = small_integers(torch, (3, 128, 96), 7)
    torch.testing.assert_close(relu.run(A, B, C, 1.0, 1.0), exact(torch, A, B, C, 1.0, 1.0, relu=True), rtol=0, atol=0)
    B3 = small_integers(torch, (3, 64, 96), 8)
    torch.testing.assert_close(mod.run(A, B3), exact(torch, A, B3), rtol=0, atol=0)
    torch.testing.assert_close(mod.run(A[0], B3), exact(torch, A[0], B3), rtol=0, atol=0)  # A broadcast


@pytest.mark.gpu
def test_exported_gemm_refuses_what_its_kernel_cannot_read(exported):
    torch, mod, _ = exported
    A, B = small_integers(torch, (128, 64), 9), small_integers(torch, (64, 96), 10)
    cases = [((A.float(), B), "A has dtype Float but the kernel was built for Half"),
             ((A, B.cpu()), "B is on cpu but A is on cuda"),
             ((A, B.mT.contiguous().mT), "the kernel reads it row-major"),
             ((small_integers(torch, (128, 66), 11)[:, 1:65], B), "multiples of 8 elements"),
             ((A, B, small_integers(torch, (127, 96), 12)), "C is 127 x 96 but A @ B is 128 x 96"),
             ((A, small_integers(torch, (63, 96), 13)), "their K extents must agree")]
    for args, message in cases:
        with pytest.raises(ValueError, match=message):
            mod.run(*args)


@pytest.mark.gpu
def test_exported_gemm_on_the_current_stream_in_a_cuda_graph_and_torch_compile(exported):
    torch, mod, _ = exported
    A, B = small_integers(torch, (256, 128), 14), small_integers(torch, (128, 64), 15)
    mod.run(A, B)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # captured on torch's capture stream, the op's current stream
        D = mod.run(A, B)
    A.copy_(small_integers(torch, (256, 128), 16))
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(D, exact(torch, A, B), rtol=0, atol=0)
    # torch.compile traces the op through its meta path (no graph break) and runs the kernel.
    compiled = torch.compile(lambda a, b: mod.run(a, b) * 2, fullgraph=True)
    torch.testing.assert_close(compiled(A, B), exact(torch, A, B, alpha=2.0), rtol=0, atol=0)
