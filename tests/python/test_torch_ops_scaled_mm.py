"""tests/python/test_torch_ops_scaled_mm.py: gemmkit.torch.scaled_mm, FP8 with torch._scaled_mm's scales. Unit (no
GPU, no nvcc): its fake implementation on meta tensors and which scaling each pair of scale shapes selects, with the
refusals. GPU (SM90): per-tensor, row-wise and 1 x 128 / 128 x 128 block scales against a float64 reference of the
dequantized operands, exact on halves and power-of-two scales."""
import pytest

torch = pytest.importorskip("torch")

import gemmkit  # noqa: E402
import gemmkit.torch as gt  # noqa: E402
from torch_ops_support import meta  # noqa: E402

E4M3 = torch.float8_e4m3fn
M, N, K = 192, 320, 400  # N and K end in partial 128 blocks
KB, NB = 4, 3


# ---- unit --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("scale_a, scale_b, scaling", [((1,), (1,), "tensor"), ((M, 1), (1, N), "row"),
                                                       ((M, KB), (KB, NB), "block")])
def test_scale_shapes_select_the_scaling_and_the_fake_gives_ds_shape(scale_a, scale_b, scaling):
    a, b = meta(M, K, dtype=E4M3), meta(N, K, dtype=E4M3).t()
    sa, sb = meta(*scale_a, dtype=torch.float32), meta(*scale_b, dtype=torch.float32)
    assert gt._scaling(a, b, sa, sb, torch.bfloat16) == scaling
    D = gt.scaled_mm(a, b, sa, sb, torch.float16)
    assert (tuple(D.shape), D.dtype, D.device.type) == ((M, N), torch.float16, "meta")


BAD = [
    (lambda: gt.scaled_mm(meta(M, K), meta(N, K, dtype=E4M3).t(), meta(1, dtype=torch.float32),
                          meta(1, dtype=torch.float32)), "FP8 a and b"),
    (lambda: gt.scaled_mm(meta(M, K, dtype=E4M3), meta(N, K, dtype=E4M3).t(), meta(M, 2, dtype=torch.float32),
                          meta(1, N, dtype=torch.float32)), r"\(192, 1\) and \(1, 320\) \(row-wise\)"),
    (lambda: gt.scaled_mm(meta(M, K, dtype=E4M3), meta(N, K, dtype=E4M3).t(), meta(M, 1),
                          meta(1, N)), "the scales are float32"),
    (lambda: gt.scaled_mm(meta(M, K, dtype=E4M3), meta(N, K + 16, dtype=E4M3).t(), meta(1, dtype=torch.float32),
                          meta(1, dtype=torch.float32)), "expected a \\(M, K\\) and b \\(K, N\\)"),
    (lambda: gt.scaled_mm(meta(M, K, dtype=E4M3), meta(N, K, dtype=E4M3).t(), meta(1, dtype=torch.float32),
                          meta(1, dtype=torch.float32), torch.int32), "out_dtype"),
]


@pytest.mark.parametrize("call, message", BAD)
def test_refusals_name_the_fix(call, message):
    with pytest.raises(gemmkit.TensorError, match=message):
        call()


# ---- gpu ---------------------------------------------------------------------------------------------------------

@pytest.fixture
def sm90():
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("FP8 GEMMs need an SM90 GPU visible to torch")


def halves(shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-8, 9, shape, generator=g).double() / 2


def powers_of_two(shape, offset):
    powers = torch.tensor([0.25, 0.5, 1.0, 2.0, 4.0], dtype=torch.float32)
    count = 1
    for extent in shape:
        count *= extent
    return powers[(torch.arange(count) * 3 + offset) % 5].reshape(shape)


@pytest.mark.gpu
@pytest.mark.parametrize("scaling", ["tensor", "row", "block"])
def test_exact_against_the_dequantized_operands(sm90, scaling):
    a64, w64 = halves((M, K), 11), halves((N, K), 12)
    if scaling == "tensor":
        scale_a, scale_b = torch.tensor(0.5), torch.tensor(0.25)
        per_a, per_w = scale_a.double(), scale_b.double()
    elif scaling == "row":
        scale_a, scale_b = powers_of_two((M, 1), 0), powers_of_two((1, N), 1)
        per_a, per_w = scale_a.double(), scale_b.double().t()
    else:
        scale_a = powers_of_two((KB, M), 0).t()  # (M, KB), M-major, as torch._scaled_mm takes it
        scale_b = powers_of_two((NB, KB), 2).t()  # (KB, NB): the scales of b.t() = w, transposed
        per_a = scale_a.double().repeat_interleave(128, dim=1)[:, :K]
        per_w = scale_b.t().double().repeat_interleave(128, dim=0)[:N].repeat_interleave(128, dim=1)[:, :K]
    a, w = a64.to(E4M3).cuda(), w64.to(E4M3).cuda()
    D = gt.scaled_mm(a, w.t(), scale_a.cuda(), scale_b.cuda(), torch.bfloat16)
    expected = ((a64 * per_a) @ (w64 * per_w).t()).to(torch.bfloat16)
    torch.testing.assert_close(D.cpu(), expected, rtol=0, atol=0)
    assert (torch.bfloat16 in {key[2] for key in gt.scaled_mm_plans()})
