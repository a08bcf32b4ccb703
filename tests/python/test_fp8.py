"""tests/python/test_fp8.py: FP8 (e4m3, e5m2) from Python. Unit: dtype names and torch dtypes, the SM90 plan and
its refusals, scale modes and block scaling, torch FP8 tensors read without copies. gpu: torch FP8 CUDA tensors
against a float64 reference of the dequantized inputs, per-tensor scales in alpha, row / column scale vectors and
block scales (SM90 only), and the MoE form's FP8 and block-scaled experts."""
import pytest

import gemmkit


def fp8_plan(a="e4m3", b="e4m3", d="bf16", layout_B="col", cc=90):
    return gemmkit.Gemm(element_A=a, element_B=b, element_C=d, element_D=d, layout_A="row", layout_B=layout_B,
                        layout_C="row", cc=cc)


def test_names_and_the_default_sm90_kernel():
    assert gemmkit.DataType.e4m3.name == "e4m3" and gemmkit.DataType.e5m2.name == "e5m2"
    plan = fp8_plan()
    assert plan.element_accumulator == gemmkit.DataType.f32
    name = plan.construct().name()
    # gemmkit's column-halves mainloop (the promotion overlapped) on CUTLASS's 128 x 192 cooperative kernel
    assert name == ("cutlass3x_sm90_tensorop_s0x0x0gemm_e4m3_e4m3_f32_bf16_bf16_256x192x128_2x1x1_0_tnt_align16"
                    "_warpspecialized_cooperative_fp8overlap_epi_tma")
    assert "_e5m2_e4m3_f32_f32_f32_" in fp8_plan("float8_e5m2", "float8_e4m3fn", "f32").construct().name()


def test_kernels_for_problems_without_tensors():
    # numpy has no FP8 dtype: spec_for_problem names run()'s kernel for a shape (packed device tensors) instead.
    plan = fp8_plan()
    assert plan.spec_for_problem(8192, 8192, 8192).name().endswith("_256x192x128_2x1x1_0_tnt_align16"
                                                                   "_warpspecialized_cooperative_fp8overlap_epi_tma")
    # a few waves: 128 x 128 tiles, on the loop that alternates K tiles between two sets of partials
    assert plan.spec_for_problem(1024, 4096, 4096).name().endswith("_256x128x128_2x1x1_0_tnt_align16"
                                                                   "_warpspecialized_cooperative_fp8alternating_epi_tma")
    long_k = plan.spec_for_problem(128, 4096, 4096)
    assert long_k.split_k_mode == gemmkit.SplitKMode.parallel and long_k.name().endswith("_splitk_parallel")
    # Only a GEMM plan names a kernel for a GEMM shape: a Conv2d plan has no such method to call by mistake.
    assert not hasattr(gemmkit.Conv2d(kind="fprop", element="f16", element_accumulator="f32", cc=90),
                       "spec_for_problem")


def test_refusals_name_the_fix():
    with pytest.raises(gemmkit.ConfigError, match="cc=90"):
        fp8_plan(cc=80)
    with pytest.raises(gemmkit.ConfigError, match="layout_A=RowMajor, layout_B=ColumnMajor"):
        fp8_plan(layout_B="row")
    with pytest.raises(gemmkit.ConfigError, match="tensor cores only"):
        fp8_plan().opclass = "simt"


def test_scale_modes():
    plan = fp8_plan()
    plan.scale = "row_and_column"
    assert plan.scale == gemmkit.ScaleMode.row_and_column
    assert plan.construct().name().endswith("_scalerowcolumn")
    assert plan.construct().scale == gemmkit.ScaleMode.row_and_column
    plan.scale = gemmkit.ScaleMode.none
    assert "_scale" not in plan.construct().name()


def test_a_plan_without_c():
    # element_C void: the kernel has no C operand (its epilogue's C buffers become a fifth mainloop stage on the
    # default tile); run() refuses a C by name before anything runs.
    plan = gemmkit.Gemm(element_A="e4m3", element_B="e4m3", element_C="void", element_D="bf16", layout_A="row",
                        layout_B="col", layout_C="row", cc=90)
    assert "_e4m3_e4m3_f32_void_bf16_" in plan.construct().name()
    assert "using ElementC = void;" in gemmkit.render(plan.construct()).text


def test_a_plan_without_c_refuses_a_c():
    torch = pytest.importorskip("torch")
    plan = gemmkit.Gemm(element_A="e4m3", element_B="e4m3", element_C="void", element_D="bf16", layout_A="row",
                        layout_B="col", layout_C="row", cc=90)
    a = torch.zeros(64, 128, dtype=torch.float8_e4m3fn)
    w = torch.zeros(32, 128, dtype=torch.float8_e4m3fn)
    d = torch.zeros(64, 32, dtype=torch.bfloat16)
    with pytest.raises(gemmkit.TensorError, match=r"has no C \(element_C void\)"):
        plan.run(a, w.t(), d, d)
    assert torch.count_nonzero(d) == 0


def test_block_scaling_plan_and_refusals():
    plan = fp8_plan()
    plan.block_scaling = "blockwise"
    assert plan.block_scaling == gemmkit.BlockScaling.blockwise
    name = plan.construct().name()
    assert name.endswith("_blockwise") and "x128x128_" in name  # 128-deep tiles, 128 wide per CTA
    assert all(td.threadblock_shape[1] % 128 == 0 for td in plan.tile_descriptions())
    with pytest.raises(gemmkit.ConfigError, match="replaces the scale vectors"):
        plan.scale = "row"
    assert plan.scale == gemmkit.ScaleMode.none
    with pytest.raises(gemmkit.ConfigError, match="Block scaling scales FP8 operands"):
        gemmkit.Gemm(element="f16", layout="row", element_accumulator="f32", cc=90).block_scaling = "blockwise"


def test_grouped_fp8_plans_and_block_scaling():
    plan = gemmkit.GroupedGemm(element_A="e4m3", element_B="e4m3", element_C="bf16", element_D="bf16",
                               layout_A="row", layout_B="col", layout_C="row", cc=90)
    assert plan.construct().name().startswith("cutlass3x_sm90_tensorop_s0x0x0gemm_grouped_e4m3_e4m3_f32_bf16_bf16_")
    assert any(td.math_operation == gemmkit.MathOperation.multiply_add_fast_accum for td in plan.tile_descriptions())
    plan.block_scaling = "blockwise"
    assert plan.block_scaling == gemmkit.BlockScaling.blockwise
    assert plan.construct().name().endswith("_blockwise")
    assert "KernelPtrArrayTmaWarpSpecializedCooperativeFP8Blockwise" in gemmkit.render(plan.construct()).text
    sm80 = gemmkit.GroupedGemm(element="f16", layout="row", element_accumulator="f32", cc=90, kernel_cc=80)
    with pytest.raises(gemmkit.ConfigError, match="Block scaling"):
        sm80.block_scaling = "blockwise"


def test_block_scales_are_checked_before_anything_runs():
    torch = pytest.importorskip("torch")
    m, n, k = 64, 256, 384
    a = torch.zeros(m, k, dtype=torch.float8_e4m3fn)
    w = torch.zeros(n, k, dtype=torch.float8_e4m3fn)
    d = torch.zeros(m, n, dtype=torch.bfloat16)
    plan = gemmkit.Gemm(A=a, B=w.t(), C=d, D=d, cc=90)
    plan.block_scaling = "blockwise"
    scale_b = torch.ones(2, 3)
    with pytest.raises(gemmkit.TensorError, match="RunOptions::scale_a"):
        plan.run(a, w.t(), None, d, scale_b=scale_b)
    with pytest.raises(gemmkit.TensorError, match=r"scale_a: has strides \(3, 1\)"):
        plan.run(a, w.t(), None, d, scale_a=torch.ones(m, 3), scale_b=scale_b)  # row-major, not M-major


def test_torch_fp8_dtypes_and_tensors():
    torch = pytest.importorskip("torch")
    plan = gemmkit.Gemm(element_A=torch.float8_e4m3fn, element_B=torch.float8_e5m2, element_C=torch.bfloat16,
                        element_D=torch.bfloat16, layout_A="row", layout_B="col", layout_C="row", cc=90)
    assert (plan.element_A, plan.element_B) == (gemmkit.DataType.e4m3, gemmkit.DataType.e5m2)
    a = torch.zeros(32, 64, dtype=torch.float8_e4m3fn)
    view = gemmkit.tensor_view(a)
    assert (view.dtype, view.shape, view.strides) == (gemmkit.DataType.e4m3, (32, 64), (64, 1))
    assert view.data == a.data_ptr()
    w = torch.zeros(48, 64, dtype=torch.float8_e5m2)
    assert gemmkit.tensor_view(w.t()).strides == (1, 64)  # a weight [N, K] is a column-major B
    assert gemmkit.tensor_view(w).dtype == gemmkit.DataType.e5m2


@pytest.fixture
def sm90_torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("FP8 GEMMs need an SM90 GPU visible to torch")
    return torch


def halves(torch, shape, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(-8, 9, shape, generator=g).double() / 2)


@pytest.mark.gpu
@pytest.mark.parametrize("a_dtype, b_dtype, d_dtype", [("float8_e4m3fn", "float8_e4m3fn", "bfloat16"),
                                                       ("float8_e4m3fn", "float8_e5m2", "float16"),
                                                       ("float8_e5m2", "float8_e5m2", "float32")])
def test_per_tensor_scales_exact_on_torch_tensors(sm90_torch, a_dtype, b_dtype, d_dtype):
    torch = sm90_torch
    m, n, k = 192, 144, 256
    a64, w64 = halves(torch, (m, k), 1), halves(torch, (n, k), 2)
    a = a64.to(getattr(torch, a_dtype)).cuda()
    w = w64.to(getattr(torch, b_dtype)).cuda()
    d = torch.empty(m, n, dtype=getattr(torch, d_dtype), device="cuda")
    scale_a, scale_b = 0.5, 0.125
    plan = gemmkit.Gemm(A=a, B=w.t(), C=d, D=d)
    plan.run(a, w.t(), None, d, scale_a * scale_b, 0.0)
    expected = (a64 * scale_a) @ (w64 * scale_b).t()  # float64 GEMM of the dequantized inputs
    assert torch.equal(d.cpu(), expected.to(d.dtype))


@pytest.mark.gpu
def test_row_and_column_scales_exact_on_torch_tensors(sm90_torch):
    torch = sm90_torch
    m, n, k = 256, 128, 384
    a64, w64 = halves(torch, (m, k), 3), halves(torch, (n, k), 4)
    a = a64.to(torch.float8_e4m3fn).cuda()
    w = w64.to(torch.float8_e4m3fn).cuda()
    row_scale = torch.tensor([0.25, 0.5, 2.0, 4.0], dtype=torch.float32).repeat(m // 4)
    column_scale = torch.tensor([0.5, 1.0, 0.75, 2.0], dtype=torch.float32).repeat(n // 4)
    d = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
    plan = gemmkit.Gemm(A=a, B=w.t(), C=d, D=d)
    plan.scale = "row_and_column"
    plan.run(a, w.t(), None, d, 2.0, 0.0, row_scale=row_scale.cuda(), column_scale=column_scale.cuda())
    expected = 2.0 * (a64 * row_scale.double()[:, None]) @ (w64 * column_scale.double()[:, None]).t()
    assert torch.equal(d.cpu(), expected.to(torch.bfloat16))
    with pytest.raises(gemmkit.TensorError, match="column_scale"):
        plan.run(a, w.t(), None, d, row_scale=row_scale.cuda())


@pytest.mark.gpu
def test_blockwise_scales_exact_on_torch_tensors(sm90_torch):
    torch = sm90_torch
    m, n, k = 192, 320, 400  # N and K end in partial 128 blocks
    kb, nb = (k + 127) // 128, (n + 127) // 128
    a64, w64 = halves(torch, (m, k), 5), halves(torch, (n, k), 6)
    powers = torch.tensor([0.25, 0.5, 1.0, 2.0, 4.0], dtype=torch.float32)
    scale_a = powers[torch.arange(kb * m) % 5].reshape(kb, m).t()  # (M, KB), M-major as torch._scaled_mm takes it
    scale_b = powers[(torch.arange(nb * kb) * 3) % 5].reshape(nb, kb)  # (NB, KB), row-major
    a = a64.to(torch.float8_e4m3fn).cuda()
    w = w64.to(torch.float8_e4m3fn).cuda()
    d = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
    plan = gemmkit.Gemm(A=a, B=w.t(), C=d, D=d)
    plan.block_scaling = "blockwise"
    plan.run(a, w.t(), None, d, 0.5, 0.0, scale_a=scale_a.cuda(), scale_b=scale_b.cuda())
    per_a = scale_a.double().repeat_interleave(128, dim=1)[:, :k]
    per_w = scale_b.double().repeat_interleave(128, dim=0)[:n].repeat_interleave(128, dim=1)[:, :k]
    expected = 0.5 * (a64 * per_a) @ (w64 * per_w).t()
    assert torch.equal(d.cpu(), expected.to(torch.bfloat16))


@pytest.mark.gpu
def test_the_fp8_walkthrough_matches_float64(sm90_torch, root):
    import subprocess
    import sys
    result = subprocess.run([sys.executable, str(root / "examples" / "python" / "fp8.py")], capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0 and "all match" in result.stdout, result.stdout[-4000:] + result.stderr[-4000:]


@pytest.mark.gpu
def test_block_scaled_experts_exact_on_torch_tensors(sm90_torch):
    torch = sm90_torch
    rows, n, k = [0, 5, 300, 17, 1, 61], 136, 272  # skewed and empty experts; N and K end in partial blocks
    g, total, kb, nb = len(rows), sum(rows), (k + 127) // 128, (n + 127) // 128
    a64, w64 = halves(torch, (total, k), 7), halves(torch, (g, n, k), 8)
    powers = torch.tensor([0.25, 0.5, 1.0, 2.0, 4.0], dtype=torch.float32)
    scale_a = powers[torch.arange(total * kb) % 5].reshape(total, kb)  # row-major: an expert's are its tokens' rows
    scale_b = powers[(torch.arange(g * nb * kb) * 3) % 5].reshape(g, nb, kb)
    a = a64.to(torch.float8_e4m3fn).cuda()
    w = w64.to(torch.float8_e4m3fn).cuda()
    d = torch.full((total, n), 7.0, dtype=torch.bfloat16, device="cuda")
    offsets = torch.tensor(rows, dtype=torch.int32).cumsum(0).to(torch.int32).cuda()
    plan = gemmkit.GroupedGemm(element_A="e4m3", element_B="e4m3", element_C="bf16", element_D="bf16",
                               layout_A="row", layout_B="col", layout_C="row")
    plan.block_scaling = "blockwise"
    plan.run_contiguous(a, w.transpose(1, 2), d, offsets, scale_a=scale_a.cuda(), scale_b=scale_b.cuda())
    expected = torch.empty(total, n, dtype=torch.float64)
    start = 0
    for e, m in enumerate(rows):
        per_a = scale_a[start:start + m].double().repeat_interleave(128, dim=1)[:, :k]
        per_w = scale_b[e].double().repeat_interleave(128, dim=0)[:n].repeat_interleave(128, dim=1)[:, :k]
        expected[start:start + m] = (a64[start:start + m] * per_a) @ (w64[e] * per_w).t()
        start += m
    assert torch.equal(d.cpu(), expected.to(torch.bfloat16))
