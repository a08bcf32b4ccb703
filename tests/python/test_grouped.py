"""tests/python/test_grouped.py: gemmkit.GroupedGemm. Unit tests (no GPU): names, families, the reference's swizzle
refusal, errors that name the group and the operand. gpu tests: lists of numpy and torch tensors against numpy, and
the MoE form on torch tensors against per-expert matmuls."""
import numpy as np
import pytest

import gemmkit


def plan(**kwargs):
    return gemmkit.GroupedGemm(element=np.float16, layout="row", element_accumulator=np.float32, **kwargs)


def integers(shape, seed, dtype=np.float16):
    return np.ceil(np.random.default_rng(seed).uniform(-4, 4, shape)).astype(dtype)


def test_names_follow_the_reference_and_the_family():
    assert plan(cc=90).kernel_name() == (
        "cutlass3x_sm90_tensorop_s0x0x0gemm_grouped_f16_f16_f32_f16_f16_128x128x64_1x1x1_0_ttt_align8")
    assert plan(cc=90, kernel_cc=80).kernel_name() == "cutlass_tensorop_f16_s16816gemm_grouped_f16_256x128_64x3_tt_align8"
    relu = plan(cc=90)
    relu.activation = "relu"
    assert relu.kernel_name().endswith("_relu")
    assert gemmkit.op.GroupedGemm is gemmkit.GroupedGemm


def test_swizzles_are_refused_as_the_reference_does():
    p = plan(cc=90)
    with pytest.raises(gemmkit.ConfigError, match="does not currently support different swizzling functors"):
        p.swizzling_functor = gemmkit.swizzle.ThreadblockSwizzleStreamK


def test_errors_name_the_group_and_the_operand():
    p = plan(cc=90)
    A = [np.zeros((64, 32), np.float16), np.zeros((64, 32), np.float16)]
    B = [np.zeros((32, 16), np.float16), np.zeros((48, 16), np.float16)]
    D = [np.zeros((64, 16), np.float16), np.zeros((64, 16), np.float16)]
    with pytest.raises(gemmkit.TensorError, match=r"^Tensors A\[1\] and B\[1\]"):
        p.spec_for(A, B, None, D)
    with pytest.raises(gemmkit.TensorError, match="Lengths of A, B, C, and D lists must be equal"):
        p.spec_for(A, B[:1], None, D)
    B[1] = np.zeros((32, 16), np.float16)
    assert p.spec_for(A, B, None, D).alignment_A == 8


def test_a_tile_description_is_validated_and_kept():
    p = plan(cc=90)
    td = p.tile_descriptions()[1]
    p.tile_description = td
    assert p.tile_description == td
    assert "gemm_grouped" in p.kernel_name()


def test_spec_for_contiguous_checks_the_moe_operands_and_names_the_kernel(capsys):
    p = plan(cc=90, layout_B="col")
    A = np.zeros((512, 64), np.float16)
    B = np.zeros((4, 128, 64), np.float16).transpose(0, 2, 1)  # [G, N, K] weights viewed as [G, K, N]
    D = np.zeros((512, 128), np.float16)
    offsets = np.array([128, 256, 384, 512], np.int32)
    assert p.spec_for_contiguous(A, B, D, offsets).name() == p.kernel_name()
    assert p.spec_for_contiguous(A, B, D, offsets, C=D, beta=1.0).name() == p.kernel_name()
    with pytest.raises(gemmkit.TensorError, match="^Tensor offsets"):
        p.spec_for_contiguous(A, B, D, offsets[:3])
    with pytest.raises((gemmkit.TensorError, gemmkit.CudaError)):  # host arrays, or no GPU: printed, then refused
        p.run_contiguous(A, B, D, offsets, print_module=True)
    assert p.kernel_name() in capsys.readouterr().out
    with pytest.raises(gemmkit.TensorError, match="^Tensors A, B and D"):
        p.spec_for_contiguous(A, B, D[:, :64], offsets)


def test_rival_for_contiguous_names_the_transposed_tile_the_gpu_may_run_instead():
    p = plan(cc=90, layout_B="col")
    offsets = np.array([256, 512, 768, 1024], np.int32)
    A = np.zeros((1024, 64), np.float16)
    for n in (1408, 1024):
        B = np.zeros((4, n, 64), np.float16).transpose(0, 2, 1)
        D = np.zeros((1024, n), np.float16)
        chosen = p.spec_for_contiguous(A, B, D, offsets).name()
        rival = p.rival_for_contiguous(A, B, D, offsets)
        if n % 256:
            assert "_256x128x64_" in chosen and rival.name() == chosen.replace("_256x128x64_", "_128x256x64_")
        else:
            assert "_128x256x64_" in chosen and rival is None


@pytest.mark.gpu
@pytest.mark.parametrize("kernel_cc", [None, 80])
def test_walkthrough_lists_on_numpy_equal_numpy(kernel_cc):
    import random

    random.seed(2023)
    p = plan(kernel_cc=kernel_cc)
    sizes = [128, 256, 512, 1024]
    As, Bs, Ds, expected = [], [], [], []
    for g in range(50):
        m, n, k = (random.choice(sizes) for _ in range(3))
        As.append(integers((m, k), 3 * g))
        Bs.append(integers((k, n), 3 * g + 1))
        Ds.append(np.zeros((m, n), np.float16))
        expected.append((As[-1].astype(np.float32) @ Bs[-1].astype(np.float32)).astype(np.float16))
    p.run(As, Bs, None, Ds)
    for g, (d, e) in enumerate(zip(Ds, expected)):
        np.testing.assert_array_equal(d, e, err_msg=f"group {g}")


@pytest.mark.gpu
def test_torch_lists_and_the_moe_form():
    torch = pytest.importorskip("torch")
    p = plan()
    As = [torch.from_numpy(integers((m, 64), m)).cuda() for m in (1, 127, 256)]
    Bs = [torch.from_numpy(integers((64, 96), n)).cuda() for n in range(3)]
    Ds = [torch.empty(a.shape[0], 96, dtype=torch.float16, device="cuda") for a in As]
    p.run(As, Bs, None, Ds)
    for a, b, d in zip(As, Bs, Ds):
        assert torch.equal(d, (a.float() @ b.float()).half())

    moe = gemmkit.GroupedGemm(element=torch.bfloat16, layout="row", layout_B="col", element_accumulator=np.float32)
    rows = [0, 5, 300, 17, 0, 128]
    A = torch.from_numpy(integers((sum(rows), 256), 1, np.float32)).to(torch.bfloat16).cuda()
    weights = torch.from_numpy(integers((len(rows), 136, 256), 2, np.float32)).to(torch.bfloat16).cuda()  # [G, N, K]
    B = weights.transpose(1, 2)  # [G, K, N], column-major per expert
    D = torch.zeros(sum(rows), 136, dtype=torch.bfloat16, device="cuda")
    offsets = torch.tensor(np.cumsum(rows), dtype=torch.int32, device="cuda")
    moe.run_contiguous(A, B, D, offsets)
    start = 0
    for g, r in enumerate(rows):
        want = (A[start:start + r].float() @ B[g].float()).to(torch.bfloat16)
        assert torch.equal(D[start:start + r], want), f"expert {g}"
        start += r
