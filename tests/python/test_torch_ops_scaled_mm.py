"""tests/python/test_torch_ops_scaled_mm.py: gemmkit.torch.scaled_mm, FP8 with torch._scaled_mm's scales. Unit (no
GPU, no nvcc): its fake implementation on meta tensors and which scaling each pair of scale shapes selects, with the
refusals. GPU (SM90): per-tensor, row-wise and 1 x 128 / 128 x 128 block scales, with and without a bias, against a
float64 reference of the dequantized operands, exact on halves and power-of-two scales; the bias under torch.compile.
quantize_blockwise (no GPU): the scales' layouts and the round trip."""
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
    D = gt.scaled_mm(a, b, sa, sb, torch.bfloat16, bias=meta(N, dtype=torch.bfloat16))
    assert (tuple(D.shape), D.dtype) == ((M, N), torch.bfloat16)


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
    (lambda: gt.scaled_mm(meta(M, K, dtype=E4M3), meta(N, K, dtype=E4M3).t(), meta(M, KB, dtype=torch.float32),
                          meta(KB, NB, dtype=torch.float32), torch.bfloat16, True), "use_fast_accum=False"),
    (lambda: gt.scaled_mm(meta(M, K, dtype=E4M3), meta(N, K, dtype=E4M3).t(), meta(1, dtype=torch.float32),
                          meta(1, dtype=torch.float32), torch.bfloat16, bias=meta(M, dtype=torch.bfloat16)),
     r"a bias \(320,\) of out_dtype"),
    (lambda: gt.scaled_mm(meta(M, K, dtype=E4M3), meta(N, K, dtype=E4M3).t(), meta(1, dtype=torch.float32),
                          meta(1, dtype=torch.float32), torch.bfloat16, bias=meta(N, dtype=torch.float16)),
     r"Tensor bias is torch.float16"),
]


@pytest.mark.parametrize("call, message", BAD)
def test_refusals_name_the_fix(call, message):
    with pytest.raises(gemmkit.TensorError, match=message):
        call()


@pytest.mark.parametrize("rows, shape", [(1, (M, K)), (128, (N, K))])
def test_quantize_blockwise_gives_the_layouts_run_takes_and_dequantizes_within_fp8(rows, shape):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(rows)) * 3
    x[:, :128] *= 100  # blocks of another magnitude: each block keeps its own scale
    q, scale = gt.quantize_blockwise(x, rows=rows)
    blocks = ((shape[0] + rows - 1) // rows, KB)
    assert q.dtype == E4M3 and q.shape == x.shape and q.is_contiguous()
    assert scale.dtype == torch.float32 and tuple(scale.shape) == blocks
    assert scale.stride() == ((1, blocks[0]) if rows == 1 else (KB, 1))  # M-major for A, row-major for a weight
    per = scale.repeat_interleave(rows, dim=0)[:shape[0]].repeat_interleave(128, dim=1)[:, :K]
    restored = q.float() * per
    # e4m3 keeps 3 mantissa bits: each element within 1/16 of itself, or of the block's scale near zero.
    assert ((restored - x).abs() <= x.abs() / 16 + per / 64).all()
    assert (q.float().abs().amax() == torch.finfo(E4M3).max)  # each block's largest magnitude maps to e4m3's


def test_quantize_blockwise_refusals():
    with pytest.raises(gemmkit.ConfigError, match="rows is 64"):
        gt.quantize_blockwise(torch.ones(4, 4), rows=64)
    with pytest.raises(gemmkit.TensorError, match="floating-point matrix"):
        gt.quantize_blockwise(torch.ones(4, dtype=torch.float32))


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
@pytest.mark.parametrize("scaling, fast, with_bias", [("tensor", False, False), ("row", False, False),
                                                      ("block", False, False), ("tensor", True, False),
                                                      ("row", True, False), ("tensor", False, True),
                                                      ("row", False, True), ("block", False, True)])
def test_exact_against_the_dequantized_operands(sm90, scaling, fast, with_bias):
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
    bias = halves((N,), 13) if with_bias else None  # torch._scaled_mm's bias: one value per column, after the scales
    D = gt.scaled_mm(a, w.t(), scale_a.cuda(), scale_b.cuda(), torch.bfloat16, fast,
                     bias=bias.to(torch.bfloat16).cuda() if with_bias else None)
    expected = ((a64 * per_a) @ (w64 * per_w).t() + (bias if with_bias else 0)).to(torch.bfloat16)
    # Fast accumulation keeps the whole K in the tensor cores' narrower sums: within bf16's rounding, not exact.
    tolerance = 1e-2 if fast else 0.0
    torch.testing.assert_close(D.cpu(), expected, rtol=tolerance, atol=tolerance)
    assert (torch.bfloat16 in {key[2] for key in gt.scaled_mm_plans()})
    # Declared without C (scaled_mm never reads one), so the epilogue leaves its shared memory to the mainloop.
    assert all("_void_" in plan.kernel_name() for plan in gt.scaled_mm_plans().values())


@pytest.mark.gpu
def test_quantized_with_quantize_blockwise_matches_the_dequantized_matmul(sm90):
    g = torch.Generator().manual_seed(21)
    x, w = torch.randn(M, K, generator=g), torch.randn(N, K, generator=g)
    xq, xs = gt.quantize_blockwise(x.cuda())
    wq, ws = gt.quantize_blockwise(w.cuda(), rows=128)
    D = gt.scaled_mm(xq, wq.t(), xs, ws.t(), torch.float32)
    per_x = xs.double().repeat_interleave(128, dim=1)[:, :K]
    per_w = ws.double().repeat_interleave(128, dim=0)[:N].repeat_interleave(128, dim=1)[:, :K]
    expected = (xq.double() * per_x) @ (wq.double() * per_w).t()
    # Only the FP8 tensor cores' accumulation inside each 128-deep block differs from the float64 sum.
    torch.testing.assert_close(D.double(), expected, rtol=1e-2, atol=1e-2 * expected.abs().max().item())


@pytest.mark.gpu
def test_a_bias_traces_under_torch_compile_and_matches_eager(sm90):
    a = halves((M, K), 31).to(E4M3).cuda()
    w = halves((N, K), 32).to(E4M3).cuda()
    scale_a, scale_b = powers_of_two((M, 1), 3).cuda(), powers_of_two((1, N), 4).cuda()
    bias = halves((N,), 33).to(torch.bfloat16).cuda()

    def linear(x, weight, sx, sw, b):
        return gt.scaled_mm(x, weight.t(), sx, sw, torch.bfloat16, bias=b)

    eager = linear(a, w, scale_a, scale_b, bias)
    compiled = torch.compile(linear, fullgraph=True)(a, w, scale_a, scale_b, bias)
    assert torch.equal(compiled, eager)
    assert not torch.equal(eager, gt.scaled_mm(a, w.t(), scale_a, scale_b, torch.bfloat16))  # the bias was added
