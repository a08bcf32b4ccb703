"""tests/python/test_torch_ops_moe.py: gemmkit.torch.grouped_mm and scaled_grouped_mm, the MoE form as torch custom
ops (torch._grouped_mm's operands: stacked tokens, the experts' matrices, int32 row offsets on the GPU). Unit (no GPU,
no nvcc): their fake implementations, the refusals, no backward, opcheck, a torch.compile trace of an MoE layer. GPU:
exact against float64 on small integers with skewed and empty experts and both weight layouts, a CUDA graph replayed
with new offsets, and the FP8 form with power-of-two block scales (SM90)."""
import pytest

torch = pytest.importorskip("torch")

import gemmkit  # noqa: E402
import gemmkit.torch as gt  # noqa: E402
from torch_ops_support import integers, meta  # noqa: E402

E4M3 = torch.float8_e4m3fn
ROWS = [0, 5, 300, 0, 17, 128, 1, 61]  # skewed, empty and one-row experts
G, TOTAL, N, K = len(ROWS), sum(ROWS), 136, 272  # N and K end in partial 128 blocks
KB, NB = 3, 2


def offsets(rows, device="meta"):
    return torch.tensor(rows, dtype=torch.int32).cumsum(0).to(torch.int32).to(device)


# ---- unit ---------------------------------------------------------------------------------------------------------

def test_fake_implementations_give_ds_shape_and_dtype():
    D = gt.grouped_mm(meta(TOTAL, K, dtype=torch.bfloat16), meta(G, N, K, dtype=torch.bfloat16).transpose(1, 2),
                      offsets(ROWS))
    assert (tuple(D.shape), D.dtype, D.device.type) == ((TOTAL, N), torch.bfloat16, "meta")
    D = gt.scaled_grouped_mm(meta(TOTAL, K, dtype=E4M3), meta(G, N, K, dtype=E4M3).transpose(1, 2),
                             meta(TOTAL, KB, dtype=torch.float32), meta(G, KB, NB, dtype=torch.float32),
                             offsets(ROWS), torch.float16)
    assert (tuple(D.shape), D.dtype) == ((TOTAL, N), torch.float16)


BF16 = torch.bfloat16
BAD = [
    (lambda: gt.grouped_mm(meta(TOTAL, K, dtype=BF16), meta(N, K, dtype=BF16).t(), offsets(ROWS)),
     r"expected a \(total_M, K\)"),
    (lambda: gt.grouped_mm(meta(TOTAL, K, dtype=BF16), meta(G, K + 16, N, dtype=BF16), offsets(ROWS)),
     r"expected a \(total_M, K\)"),
    (lambda: gt.grouped_mm(meta(TOTAL, K, dtype=BF16), meta(G, K, N, dtype=BF16), offsets(ROWS).long()),
     r"expected int32 \(8,\)"),
    (lambda: gt.grouped_mm(meta(TOTAL, K, dtype=BF16), meta(G, K, N, dtype=BF16), offsets(ROWS[:3])),
     r"expected int32 \(8,\)"),
    (lambda: gt.grouped_mm(meta(TOTAL, K, dtype=torch.float32), meta(G, K, N, dtype=torch.float32), offsets(ROWS)),
     "float16 or bfloat16"),
    (lambda: gt.grouped_mm(meta(TOTAL, K, dtype=BF16), meta(G, K, N, dtype=BF16), offsets(ROWS), torch.float32),
     "out_dtype"),
    (lambda: gt.scaled_grouped_mm(meta(TOTAL, K, dtype=BF16), meta(G, K, N, dtype=E4M3),
                                  meta(TOTAL, KB, dtype=torch.float32), meta(G, KB, NB, dtype=torch.float32),
                                  offsets(ROWS)), "FP8 a and b"),
    (lambda: gt.scaled_grouped_mm(meta(TOTAL, K, dtype=E4M3), meta(G, K, N, dtype=E4M3),
                                  meta(TOTAL, KB, dtype=torch.float32), meta(G, NB, KB, dtype=torch.float32),
                                  offsets(ROWS)), r"scale_b is torch.float32 \(8, 2, 3\); expected float32 \(8, 3, 2\)"),
    (lambda: gt.scaled_grouped_mm(meta(TOTAL, K, dtype=E4M3), meta(G, K, N, dtype=E4M3),
                                  meta(TOTAL, KB, dtype=BF16), meta(G, KB, NB, dtype=torch.float32),
                                  offsets(ROWS)), "scale_a is torch.bfloat16"),
]


@pytest.mark.parametrize("call, message", BAD)
def test_refusals_name_the_fix(call, message):
    with pytest.raises(gemmkit.TensorError, match=message):
        call()


def test_no_backward_and_it_says_so():
    a = meta(TOTAL, K, dtype=BF16, grad=True)
    D = gt.grouped_mm(a, meta(G, K, N, dtype=BF16), offsets(ROWS))
    with pytest.raises(NotImplementedError, match="grouped_mm and scaled_grouped_mm have no backward"):
        D.sum().backward()


def test_opcheck_on_meta_tensors():
    args = (meta(TOTAL, K, dtype=BF16), meta(G, N, K, dtype=BF16).transpose(1, 2), offsets(ROWS))
    assert set(torch.library.opcheck(gt.grouped_mm, args).values()) == {"SUCCESS"}
    scaled = (meta(TOTAL, K, dtype=E4M3), meta(G, N, K, dtype=E4M3).transpose(1, 2),
              meta(TOTAL, KB, dtype=torch.float32), meta(G, KB, NB, dtype=torch.float32), offsets(ROWS))
    assert set(torch.library.opcheck(gt.scaled_grouped_mm, scaled).values()) == {"SUCCESS"}


def moe_layer(x, w_gate_up, w_down, offs):
    """Experts over pre-sorted tokens: silu(x W1^T) W2^T, one grouped GEMM per projection."""
    hidden = torch.nn.functional.silu(gt.grouped_mm(x, w_gate_up.transpose(1, 2), offs))
    return gt.grouped_mm(hidden, w_down.transpose(1, 2), offs)


def test_torch_compile_traces_an_moe_layer_without_graph_breaks():
    torch._dynamo.reset()
    from torch._dynamo.utils import counters

    counters.clear()
    x, offs = meta(TOTAL, 64, dtype=BF16), offsets(ROWS)
    y = torch.compile(moe_layer, fullgraph=True, backend="aot_eager")(x, meta(G, 128, 64, dtype=BF16),
                                                                      meta(G, 64, 128, dtype=BF16), offs)
    assert tuple(y.shape) == (TOTAL, 64) and not counters["graph_break"]


# ---- gpu ----------------------------------------------------------------------------------------------------------

def experts_reference(a, b, rows):
    """float64: each expert's rows of a times its matrix of b."""
    out, start = torch.zeros(a.shape[0], b.shape[2], dtype=torch.float64), 0
    for g, m in enumerate(rows):
        out[start:start + m] = a[start:start + m].double().cpu() @ b[g].double().cpu()
        start += m
    return out


@pytest.mark.gpu
@pytest.mark.parametrize("weights", ["transposed", "row_major"])
def test_grouped_mm_exact_with_skewed_and_empty_experts(weights):
    a = integers(TOTAL, K, seed=1, dtype=BF16, low=-3, high=4)
    w = integers(G, N, K, seed=2, dtype=BF16, low=-3, high=4)
    b = w.transpose(1, 2) if weights == "transposed" else w.transpose(1, 2).contiguous()
    D = gt.grouped_mm(a, b, offsets(ROWS, "cuda"))
    assert torch.equal(D.cpu(), experts_reference(a, b, ROWS).to(BF16))


@pytest.mark.gpu
def test_grouped_mm_in_a_cuda_graph_replayed_with_new_offsets():
    a = integers(TOTAL, K, seed=3, dtype=BF16, low=-3, high=4)
    b = integers(G, N, K, seed=4, dtype=BF16, low=-3, high=4).transpose(1, 2)
    offs = offsets(ROWS, "cuda")
    gt.grouped_mm(a, b, offs)  # built and loaded before the capture
    stream = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        D = gt.grouped_mm(a, b, offs)
    for rows in ([TOTAL // G] * (G - 1) + [TOTAL - (G - 1) * (TOTAL // G)], [TOTAL] + [0] * (G - 1), ROWS):
        offs.copy_(offsets(rows, "cuda"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(D.cpu(), experts_reference(a, b, rows).to(BF16)), rows


@pytest.mark.gpu
def test_scaled_grouped_mm_exact_with_power_of_two_block_scales():
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("FP8 GEMMs need an SM90 GPU")
    generator = torch.Generator().manual_seed(5)
    a64 = torch.randint(-8, 9, (TOTAL, K), generator=generator).double() / 2
    w64 = torch.randint(-8, 9, (G, N, K), generator=generator).double() / 2
    powers = torch.tensor([0.25, 0.5, 1.0, 2.0, 4.0], dtype=torch.float32)
    scale_a = powers[torch.arange(TOTAL * KB) % 5].reshape(TOTAL, KB)
    scale_w = powers[(torch.arange(G * NB * KB) * 3) % 5].reshape(G, NB, KB)  # the weights' (N/128, K/128) blocks
    D = gt.scaled_grouped_mm(a64.to(E4M3).cuda(), w64.to(E4M3).cuda().transpose(1, 2), scale_a.cuda(),
                             scale_w.cuda().transpose(1, 2), offsets(ROWS, "cuda"))
    per_a = scale_a.double().repeat_interleave(128, dim=1)[:, :K]
    per_w = scale_w.double().repeat_interleave(128, dim=1)[:, :N].repeat_interleave(128, dim=2)[:, :, :K]
    expected = experts_reference(a64 * per_a, (w64 * per_w).transpose(1, 2), ROWS)
    assert torch.equal(D.cpu(), expected.to(BF16))
