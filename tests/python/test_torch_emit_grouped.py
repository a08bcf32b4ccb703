"""tests/python/test_torch_emit_grouped.py: gemmkit.emit.pytorch on GroupedGemm kernels (SM90 ptr-array and the
CUTLASS 2.x GemmGrouped; helpers shared with the other test_torch_emit_*.py files: torch_emit_support.py). Unit: the
files it writes and where its binding differs from a Gemm's (no nvcc, no GPU). Compile (nvcc, torch, no GPU): the JIT
build against a cached kernel and its checks on meta tensors, and one AOT `setup.py build_ext` on a clean folder. GPU:
the reference's grouped walk-through against torch.matmul, exactly, a fused ReLU and empty groups, the current stream,
a CUDA graph and torch.compile, and its errors."""
import filecmp
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import gemmkit
from gemmkit import _gemmkit
from isolated import run_isolated
from torch_emit_support import (JIT_SETUP, assert_only_the_binding_was_compiled, exact, setup_flags, small_integers,
                                spec)
from workloads import doubled_on_a_side_stream, walkthrough_shapes


def grouped_spec(cc, kernel_cc=None, activation=None, layout_B="row"):
    plan = gemmkit.GroupedGemm(element=np.float16, layout_A="row", layout_B=layout_B, layout_C="row",
                               element_accumulator=np.float32, cc=cc, kernel_cc=kernel_cc)
    if activation is not None:
        plan.activation = activation
    return plan.construct()


GROUPED_EXPORTS = [  # (cc, kernel_cc, activation, layout_B, family)
    (90, None, None, "row", gemmkit.KernelFamily.sm90_grouped),
    (90, 80, "relu", "col", gemmkit.KernelFamily.sm80_grouped),
    (80, None, ("leaky_relu", 0.2), "row", gemmkit.KernelFamily.sm80_grouped),
]


@pytest.mark.parametrize("cc, kernel_cc, activation, layout_B, family", GROUPED_EXPORTS)
def test_writes_a_grouped_kernel_its_binding_and_setup(tmp_path, cc, kernel_cc, activation, layout_B, family):
    op = grouped_spec(cc, kernel_cc, activation, layout_B)
    assert op.family == family
    assert gemmkit.emit.pytorch(op, "my_grouped", cc, str(tmp_path)) is None
    # The kernel is the very source gemmkit runs (ptr-array SM90 or GemmGrouped SM80), fused activation included.
    assert (tmp_path / "my_grouped_kernel.cu").read_text() == _gemmkit.render(op).text
    binding = (tmp_path / "my_grouped.cpp").read_text()
    assert f"//   {op.name()}\n" in binding
    leaky = op.activation == gemmkit.Activation.leaky_relu
    slope = ", float slope=0.01" if leaky else ""
    assert (f'"run(Tensor[] As, Tensor[] Bs, Tensor[]? Cs=None, float alpha=1.0, float beta=0.0{slope}) -> Tensor[]"'
            in binding)
    assert f"/*takes_slope=*/{int(leaky)}," in binding
    assert "gk_torch_register_grouped_v1(ns, kSchema" in binding and "kGroupedEntryPoints" in binding
    assert f'"D[g] = {op.activation.name}(alpha * As[g] @ Bs[g] + beta * Cs[g])' in binding
    assert "{{" not in binding and "torch/" not in binding and "kGemmEntryPoints" not in binding
    # The glue declares the grouped registration; setup.py builds the same three sources with the kernel's flags.
    assert "gk_torch_register_grouped_v1" in (tmp_path / "gemmkit" / "torch_export.h").read_text()
    assert "gk_grouped_pack" in (tmp_path / "gemmkit" / "torch_module.h").read_text()
    assert (tmp_path / "gemmkit" / "grouped_entry.hpp").is_file()
    text = (tmp_path / "setup.py").read_text()
    assert '["my_grouped.cpp", "gemmkit/torch_export_grouped.cpp", "my_grouped_kernel.cu"]' in text
    assert f"-gencode=arch=compute_{op.arch_flag()[3:]},code={op.arch_flag()}" in setup_flags(tmp_path / "setup.py")[
        "flags"]


def test_grouped_and_gemm_bindings_differ_only_where_the_kernels_do(tmp_path):
    gemmkit.emit.pytorch(grouped_spec(90), "g", 90, str(tmp_path / "grouped"))
    gemmkit.emit.pytorch(spec(90), "g", 90, str(tmp_path / "gemm"))
    grouped, dense = ((tmp_path / kind / "g.cpp").read_text() for kind in ("grouped", "gemm"))
    assert "-> Tensor[]" in grouped and "-> Tensor\"" in dense
    assert "gk_torch_register_gemm_v1" in dense and "gk_torch_register_grouped_v1" not in dense
    # Both extensions carry the same glue files; each setup.py compiles its own kind's.
    for glue in ("torch_export_common.h", "torch_export_gemm.cpp", "torch_export_grouped.cpp"):
        assert filecmp.cmp(tmp_path / "grouped" / "gemmkit" / glue, tmp_path / "gemm" / "gemmkit" / glue, shallow=False)
    assert "gemmkit/torch_export_grouped.cpp" in (tmp_path / "grouped" / "setup.py").read_text()
    assert "gemmkit/torch_export_gemm.cpp" in (tmp_path / "gemm" / "setup.py").read_text()


# ---- compile tier: nvcc and torch, no GPU ------------------------------------------------------------------

GROUPED_JIT_BUILD = JIT_SETUP.format(plan="GroupedGemm") + """
    gemmkit.emit.pytorch(op, "jit_grouped", 80, out + "/first", jit=True)  # also builds gemmkit's torch glue
    start = time.perf_counter()
    mod = gemmkit.emit.pytorch(op, "jit_grouped2", 80, out + "/second", jit=True)  # the usual case: all cached
    seconds = time.perf_counter() - start
    half = lambda *shape, device="meta": torch.empty(*shape, dtype=torch.float16, device=device)
    Ds = mod.run([half(64, 32), half(0, 16), half(24, 8)], [half(32, 48), half(16, 8), half(8, 0)])
    errors = []
    for args in [([half(64, 32), half(64, 32).float()], [half(32, 48)] * 2),
                 ([half(64, 32)], [half(48, 32).mT]),
                 ([half(64, 32)] * 2, [half(32, 48)]),
                 ([half(64, 32)], [half(32, 48)], [half(64, 48)] * 2),
                 ([half(64, 32)], [half(32, 48)], None, 1.0, 2.0),
                 ([half(64, 32)] * 2, [half(32, 48), half(31, 48)]),
                 ([half(64, 32), half(64, 0)], [half(32, 48), half(0, 48)]),
                 ([half(2, 64, 32)], [half(32, 48)]),
                 ([half(64, 32, device="cpu")], [half(32, 48, device="cpu")]),
                 ([half(64, 32)], [half(32, 48, device="cpu")]),
                 ([], [])]:
        try:
            mod.run(*args)
            errors.append("")
        except ValueError as error:
            errors.append(str(error).splitlines()[0])
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():  # how torch.compile sees the op: its meta path, no GPU
        fake = mod.run([half(64, 32, device="cuda")], [half(32, 48, device="cuda")], [half(64, 48, device="cuda")],
                       1.0, 1.0)
    traced = torch.compile(lambda a, b: [d + 1 for d in mod.run(a, b)], fullgraph=True, backend="aot_eager")(
        [half(64, 32), half(16, 8)], [half(32, 48), half(8, 24)])
    build = mod.gemmkit_build
    print(json.dumps({"fake": [[list(d.shape), str(d.device)] for d in fake], "traced": [list(d.shape) for d in traced],
                      "seconds": seconds, "binding_seconds": build.binding_seconds, "glue_seconds": build.glue_seconds,
                      "hit": build.kernel.cache_hit, "builds": gemmkit.cache_counters().builds - builds,
                      "kernel_name": mod.kernel_name, "op_name": op.name(),
                      "same_module": build.kernel.module_path == cached.module_path,
                      "library": build.kernel_library, "glue": build.glue_library, "extension": mod.__file__,
                      "shapes": [list(d.shape) for d in Ds], "dtypes": sorted({str(d.dtype) for d in Ds}),
                      "devices": sorted({str(d.device) for d in Ds}),
                      "ops_run": mod.run is torch.ops.jit_grouped2.run, "errors": errors}))
"""


@pytest.mark.compile
def test_grouped_jit_links_the_cached_kernel_and_compiles_only_the_binding(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "out"
    result = json.loads(run_isolated(GROUPED_JIT_BUILD, timeout=900, GEMMKIT_CACHE_DIR=str(tmp_path / "cache"),
                                     OUT_DIR=str(out)))
    print(f"\ngrouped JIT build with the kernel and gemmkit's torch glue cached: {result['seconds']:.1f} s (binding "
          f"{result['binding_seconds']:.1f} s)")
    assert result["hit"] and result["builds"] == 0 and result["same_module"]
    assert result["glue_seconds"] == 0
    assert result["kernel_name"] == result["op_name"] and result["ops_run"]
    # Empty groups are allowed: their D is empty.
    assert result["shapes"] == [[64, 48], [0, 8], [24, 0]]
    assert (result["dtypes"], result["devices"]) == (["torch.float16"], ["meta"])
    assert result["fake"] == [[[64, 48], "cuda:0"]] and result["traced"] == [[64, 48], [16, 24]]
    errors = result["errors"]
    assert "As[1] has dtype Float but the kernel was built for Half" in errors[0]
    assert "Bs[0] has shape [32, 48] and strides [1, 32] but the kernel reads it row-major" in errors[1]
    assert "As has 2 tensors, Bs 1; pass one A, B per group" in errors[2]
    assert "As has 1 tensors, Bs 1, Cs 2; pass one A, B and C per group" in errors[3]
    assert "beta is 2 but no Cs were given" in errors[4]
    assert "As[1] is 64 x 32 (M x K) but Bs[1] is 31 x 48 (K x N)" in errors[5]
    assert "As[1] and Bs[1]: K is 0 but D[1] is 64 x 48; the kernel needs K >= 1" in errors[6]
    assert "As[0] must be a matrix (rank 2): a grouped kernel takes one matrix per group" in errors[7]
    assert "As[0] is on cpu; the kernel runs on CUDA tensors" in errors[8]
    assert "Bs[0] is on cpu but As[0] is on meta" in errors[9]
    assert "As is empty; pass at least one group" in errors[10]
    assert_only_the_binding_was_compiled(result, out / "second" / "build-jit", "jit_grouped2", tmp_path / "cache")


GROUPED_AOT_IMPORT = """
    import json, sys, torch
    sys.path.insert(0, sys.argv[1])
    import aot_grouped
    half = lambda *shape: torch.empty(*shape, dtype=torch.float16, device="meta")
    Ds = aot_grouped.run([half(64, 32), half(8, 16)], [half(32, 48), half(16, 8)], [half(64, 48), half(8, 8)], 1.0, 1.0)
    print(json.dumps({"kernel_name": aot_grouped.kernel_name, "shapes": [list(d.shape) for d in Ds]}))
"""


@pytest.mark.compile
def test_grouped_setup_py_builds_on_a_clean_folder(tmp_path):
    """The grouped extension from source: the CUTLASS 2.x GemmGrouped kernel with a fused ReLU, the glue, the
    binding."""
    pytest.importorskip("torch")
    op = grouped_spec(80, activation="relu")
    out = tmp_path / "aot"
    gemmkit.emit.pytorch(op, "aot_grouped", 80, str(out))
    result = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=out,
                            env=dict(os.environ, MAX_JOBS="2"), capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert len(list(out.glob("aot_grouped*.so"))) == 1
    imported = subprocess.run([sys.executable, "-c", GROUPED_AOT_IMPORT.replace("\n    ", "\n"), str(out)],
                              capture_output=True, text=True, timeout=300)
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout.splitlines()[-1]) == {"kernel_name": op.name(), "shapes": [[64, 48], [8, 8]]}


# ---- gpu tier: the exported grouped module (the reference's grouped walk-through) -------------------------------


@pytest.fixture(scope="module")
def exported_grouped(tmp_path_factory):
    """The walk-through's f16 GroupedGemm exported with jit=True: SM90 ptr-array on an SM90 GPU, the SM80
    GemmGrouped (kernel_cc=80), and the SM90 one with a fused ReLU."""
    torch = pytest.importorskip("torch")
    cc = gemmkit.device_cc()
    out = tmp_path_factory.mktemp("exported_grouped")
    modules = {}
    for key, kernel_cc, activation in [("native", None, None), ("sm80", 80, None), ("relu", None, "relu")]:
        op = grouped_spec(cc, kernel_cc, activation)
        modules[key] = gemmkit.emit.pytorch(op, f"gk_test_grouped_{key}", cc, str(out / key), jit=True)
    return torch, modules


def walkthrough_operands(torch, count=50, seed=2023):
    """The reference's workload (M, N, K from {128, 256, 512, 1024}) in small integers."""
    shapes = walkthrough_shapes(count, seed)
    As = [small_integers(torch, (m, k), 3 * g) for g, (m, n, k) in enumerate(shapes)]
    Bs = [small_integers(torch, (k, n), 3 * g + 1) for g, (m, n, k) in enumerate(shapes)]
    return As, Bs


@pytest.mark.gpu
@pytest.mark.parametrize("key", ["native", "sm80"])
def test_exported_grouped_walkthrough_matches_matmul(exported_grouped, key):
    """GroupedGemm -> emit.pytorch(jit=True) -> run -> compared with [a @ b ...], on both grouped families."""
    torch, modules = exported_grouped
    mod = modules[key]
    As, Bs = walkthrough_operands(torch)
    Ds = mod.run(As, Bs)
    assert len(Ds) == 50
    for g, (a, b, d) in enumerate(zip(As, Bs, Ds)):
        assert d.dtype == torch.float16 and d.device == a.device and d.is_contiguous(), g
        torch.testing.assert_close(d, exact(torch, a, b), rtol=0, atol=0, msg=lambda m: f"group {g}: {m}")
        torch.testing.assert_close(d, a @ b, msg=lambda m: f"group {g}: {m}")
    Cs = [small_integers(torch, (a.shape[0], b.shape[1]), 100 + g) for g, (a, b) in enumerate(zip(As, Bs))]
    for a, b, c, d in zip(As, Bs, Cs, mod.run(As, Bs, Cs, 2.0, -1.0)):
        torch.testing.assert_close(d, exact(torch, a, b, c, 2.0, -1.0), rtol=0, atol=0)


@pytest.mark.gpu
def test_exported_grouped_fused_relu_and_empty_groups(exported_grouped):
    torch, modules = exported_grouped
    shapes = [(128, 64, 96), (0, 64, 96), (64, 32, 0), (8, 16, 24), (256, 128, 64)]  # (m, k, n)
    As = [small_integers(torch, (m, k), g) for g, (m, k, n) in enumerate(shapes)]
    Bs = [small_integers(torch, (k, n), 10 + g) for g, (m, k, n) in enumerate(shapes)]
    Cs = [small_integers(torch, (m, n), 20 + g) for g, (m, k, n) in enumerate(shapes)]
    Ds = modules["relu"].run(As, Bs, Cs, 1.0, 1.0)
    assert [tuple(d.shape) for d in Ds] == [(m, n) for m, k, n in shapes]
    for a, b, c, d in zip(As, Bs, Cs, Ds):
        torch.testing.assert_close(d, exact(torch, a, b, c, 1.0, 1.0, relu=True), rtol=0, atol=0)
    # Every group empty: nothing is launched, the outputs are still there.
    assert [tuple(d.shape) for d in modules["native"].run(As[1:3], Bs[1:3])] == [(0, 96), (64, 0)]


@pytest.mark.gpu
def test_exported_grouped_refuses_with_the_group_and_the_operand(exported_grouped):
    torch, modules = exported_grouped
    mod = modules["native"]
    A, B = small_integers(torch, (128, 64), 30), small_integers(torch, (64, 96), 31)
    cases = [(([A, A.float()], [B, B]), "As\\[1\\] has dtype Float but the kernel was built for Half"),
             (([A, A], [B, B.cpu()]), "Bs\\[1\\] is on cpu but As\\[0\\] is on cuda"),
             (([A], [B.mT.contiguous().mT]), "Bs\\[0\\] has shape .* but the kernel reads it row-major"),
             (([A, small_integers(torch, (128, 66), 32)[:, 1:65]], [B, B]), "As\\[1\\]: its leading dimension 66"),
             (([A], [B], [small_integers(torch, (127, 96), 33)]), "Cs\\[0\\] is 127 x 96 but As\\[0\\] @ Bs\\[0\\]"),
             (([A, A], [B]), "As has 2 tensors, Bs 1"),
             (([A, small_integers(torch, (128, 0), 34)], [B, small_integers(torch, (0, 96), 35)]), "K is 0")]
    for args, message in cases:
        with pytest.raises(ValueError, match=message):
            mod.run(*args)
    # The SM80 kernel reads whole vectors: a row of 100 halves is refused, not read past its end.
    with pytest.raises(ValueError, match="Bs\\[0\\] is 64 x 100: its rows \\(100 elements\\) must be a multiple of 8"):
        modules["sm80"].run([A], [small_integers(torch, (64, 104), 36)[:, :100]])


@pytest.mark.gpu
def test_exported_grouped_on_the_current_stream_in_a_cuda_graph_and_torch_compile(exported_grouped):
    torch, modules = exported_grouped
    mod = modules["native"]
    As, Bs = walkthrough_operands(torch, count=8, seed=7)
    for a, b, d in zip(As, Bs, doubled_on_a_side_stream(torch, mod.run, As, Bs)):
        torch.testing.assert_close(d, exact(torch, a, b, alpha=2.0), rtol=0, atol=0)
    mod.run(As, Bs)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # the metadata copy and the launch are captured; the copy's pinned buffer is kept
        Ds = mod.run(As, Bs)
    for replay in range(3):
        for g, a in enumerate(As):
            a.copy_(small_integers(torch, tuple(a.shape), 1000 * replay + g))
        graph.replay()
        torch.cuda.synchronize()
        for g, (a, b, d) in enumerate(zip(As, Bs, Ds)):
            torch.testing.assert_close(d, exact(torch, a, b), rtol=0, atol=0, msg=lambda m: f"replay {replay}: {m}")
    compiled = torch.compile(lambda a, b: [d * 2 for d in mod.run(a, b)], fullgraph=True)
    for a, b, d in zip(As, Bs, compiled(As, Bs)):
        torch.testing.assert_close(d, exact(torch, a, b, alpha=2.0), rtol=0, atol=0)
