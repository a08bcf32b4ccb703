"""tests/python/test_torch_ops_bias_act.py: gemmkit.torch.gemm_bias_act, the torch custom op of an epilogue tree:
act(A @ B + bias) + residual (gemm: test_torch_ops_gemm.py; grouped_gemm: test_torch_ops_grouped.py; what they share:
torch_ops_support.py). Unit (no GPU, no nvcc): its fake implementation, its checks, no backward, opcheck, a
torch.compile trace of a residual linear layer, the op's logic on an emulated kernel. GPU: against eager torch, one
plan per case and no rebuilds, under torch.compile."""
import pytest

torch = pytest.importorskip("torch")

import gemmkit  # noqa: E402
import gemmkit.torch as gt  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402
from gpu_specs import BIAS_ACT_CASES  # noqa: E402
from torch_ops_support import integers, meta  # noqa: E402


# ---- unit: gemm_bias_act ---------------------------------------------------------------------------------------

BIAS_ACT_SHAPES = [  # A, B, D
    ((64, 32), (32, 48), (64, 48)),
    ((2, 3, 64, 32), (32, 48), (2, 3, 64, 48)),  # leading dimensions fold into M
    ((4, 64, 32), (4, 32, 48), (4, 64, 48)),  # batched: the bias is the same for every batch
]


@pytest.mark.parametrize("a, b, d", BIAS_ACT_SHAPES)
def test_bias_act_fake_implementation_gives_ds_shape_and_dtype(a, b, d):
    D = gt.gemm_bias_act(meta(*a), meta(*b), meta(d[-1]), meta(*d), "gelu")
    assert (tuple(D.shape), D.dtype, D.device.type) == (d, torch.float16, "meta")
    with FakeTensorMode():  # as torch.compile traces: fake CUDA tensors, no GPU needed
        cuda = lambda *shape: torch.empty(*shape, dtype=torch.bfloat16, device="cuda")  # noqa: E731
        D = gt.gemm_bias_act(cuda(*a), cuda(*b), cuda(d[-1]), None, "leaky_relu", 0.2)
        assert (tuple(D.shape), D.dtype, D.device.type, D.is_contiguous()) == (d, torch.bfloat16, "cuda", True)


BIAS_ACT_BAD = [
    (lambda: gt.gemm_bias_act(meta(64, 32, dtype=torch.float32), meta(32, 48, dtype=torch.float32)),
     gemmkit.TensorError, "gemm_bias_act takes torch.float16 or torch.bfloat16"),
    (lambda: gt.gemm_bias_act(meta(64, 32), meta(31, 48)), gemmkit.TensorError, "K extents must agree"),
    (lambda: gt.gemm_bias_act(meta(64, 32), meta(32, 48), meta(64)), gemmkit.TensorError,
     r"bias is \(64,\) but D is \(64, 48\); bias is the row vector \(N,\) added to every row: \(48,\)"),
    (lambda: gt.gemm_bias_act(meta(64, 32), meta(32, 48), meta(1, 48)), gemmkit.TensorError, r"bias is \(1, 48\)"),
    (lambda: gt.gemm_bias_act(meta(64, 32), meta(32, 48), meta(48, dtype=torch.bfloat16)), gemmkit.TensorError,
     "bias has dtype torch.bfloat16 but A has torch.float16"),
    (lambda: gt.gemm_bias_act(meta(64, 32), meta(32, 48), None, meta(48)), gemmkit.TensorError,
     r"residual is \(48,\) but D is \(64, 48\); residual is added to D, so it has D's shape"),
    (lambda: gt.gemm_bias_act(meta(64, 32), meta(32, 48), torch.empty(48).half()), gemmkit.TensorError,
     "bias is on cpu but A is on meta"),
    (lambda: gt.gemm_bias_act(meta(64, 32), meta(32, 48), activation="swish"), gemmkit.ConfigError,
     "Invalid activation"),
]


@pytest.mark.parametrize("call, error, message", BIAS_ACT_BAD)
def test_bias_act_bad_arguments_are_refused_by_the_fake_implementation_too(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_bias_act_has_no_backward_and_says_so():
    A = meta(64, 32, grad=True)
    D = gt.gemm_bias_act(A, meta(32, 48), meta(48), None, "relu")
    with pytest.raises(NotImplementedError, match="gemm_bias_act has no backward; to train, compute the layer with "
                                                  "gemmkit.torch.gemm"):
        D.sum().backward()


def test_bias_act_opcheck_on_meta_tensors():
    result = torch.library.opcheck(gt.gemm_bias_act, (meta(64, 32), meta(32, 48), meta(48), meta(64, 48), "gelu",
                                                      0.01))
    assert set(result.values()) == {"SUCCESS"}


def linear_block(x, w, b, slope=0.2):
    """A residual linear layer: leaky_relu(x W^T + b) + x, in one gemmkit kernel."""
    return gt.gemm_bias_act(x, w.mT, b, x, "leaky_relu", slope)


def test_torch_compile_traces_gemm_bias_act_without_graph_breaks():
    torch._dynamo.reset()
    from torch._dynamo.utils import counters

    counters.clear()
    compiled = torch.compile(lambda x, w, b: linear_block(x, w, b) * 2, fullgraph=True, backend="aot_eager")
    y = compiled(meta(4, 16, 64), meta(64, 64), meta(64))
    assert y.shape == (4, 16, 64) and not counters["graph_break"]


# What gemm_bias_act does around the kernel (folding, layouts, the plan's key, K = 0), checked on the CPU: a CPU
# kernel emulates the fused tree's launch in float64, in a process of its own (the registration is global).
BIAS_ACT_EMULATED = """
    import json, torch, gemmkit.torch as gt
    from gemmkit import LayoutType
    launched = []

    def launch(plan, A, B, bias, residual, D):
        dtype, layout_a, layout_b, has_bias, has_residual, activation, slope, device = plan
        for t, layout in ((A, layout_a), (B, layout_b)):  # what the plan was chosen for is what the kernel reads
            assert (t.stride(-1) == 1 if layout == LayoutType.RowMajor else t.stride(-2) == 1), (t.stride(), layout)
        assert (bias is not None, residual is not None) == (has_bias, has_residual)
        launched.append([list(A.shape), list(B.shape), layout_a.name, layout_b.name, has_bias, has_residual, slope])
        z = torch.matmul(A.double(), B.double()) + (bias.double() if bias is not None else 0)
        z = gt._ACTIVATIONS[activation].forward(z, slope) + (residual.double() if residual is not None else 0)
        D.copy_(z.to(D.dtype))

    gt._bias_act_launch = launch
    gt._bias_act_plan = lambda *key: key
    gt.gemm_bias_act.register_kernel("cpu")(gt._gemm_bias_act)

    def reference(A, B, bias, residual, activation, slope):
        z = torch.matmul(A.double(), B.double()) + (bias.double() if bias is not None else 0)
        return (gt._ACTIVATIONS[activation].forward(z, slope) + (residual.double() if residual is not None else 0))

    torch.manual_seed(0)
    rand = lambda *shape: torch.randn(*shape).half()
    results = []
    for a, b in [((6, 4), (4, 5)), ((2, 3, 6, 4), (4, 5)), ((3, 6, 4), (3, 4, 5)), ((6, 4), (5, 4)),
                 ((4, 6), (4, 5)), ((6, 0), (0, 5))]:
        A, B = rand(*a), rand(*b)
        if a == (4, 6):
            A = A.mT  # column-major A
        if b == (5, 4):
            B = B.mT  # column-major B: a linear layer's weight
        d = torch.matmul(A, B).shape
        for bias, residual in [(None, None), (rand(d[-1]), None), (None, rand(*d)), (rand(d[-1]), rand(*d))]:
            for activation, slope in [("identity", 0.01), ("relu", 0.01), ("leaky_relu", 0.3), ("gelu", 0.01)]:
                got = gt.gemm_bias_act(A, B, bias, residual, activation, slope)
                expected = reference(A, B, bias, residual, activation, slope)
                results.append(bool(torch.allclose(got.double(), expected, rtol=1e-2, atol=1e-2)))
    print(json.dumps({"forward": results, "launched": sorted({json.dumps(x) for x in launched})}))
"""


def test_bias_act_logic_with_an_emulated_kernel():
    import json

    from isolated import run_isolated

    result = json.loads(run_isolated(BIAS_ACT_EMULATED, timeout=300))
    assert all(result["forward"]) and len(result["forward"]) == 6 * 4 * 4
    launched = [json.loads(x) for x in result["launched"]]
    # (2, 3, 6, 4) @ (4, 5) is one GEMM over 36 rows; layouts follow strides; K = 0 launches nothing.
    assert [[36, 4], [4, 5], "RowMajor", "RowMajor", True, True, 0.01] in launched
    assert [[6, 4], [4, 5], "RowMajor", "ColumnMajor", True, False, 0.3] in launched
    assert [[6, 4], [4, 5], "ColumnMajor", "RowMajor", False, True, 0.01] in launched
    assert [[3, 6, 4], [3, 4, 5], "RowMajor", "RowMajor", False, False, 0.01] in launched
    assert not any(shapes[0][-1] == 0 for shapes in launched)


# ---- gpu: gemm_bias_act --------------------------------------------------------------------------------------

def bias_act_reference(A, B, bias, residual, activation, slope):
    z = torch.matmul(A.double(), B.double()) + (bias.double() if bias is not None else 0)
    return gt._ACTIVATIONS[activation].forward(z, slope) + (residual.double() if residual is not None else 0)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, has_bias, has_residual, activation, slope", BIAS_ACT_CASES)
def test_gemm_bias_act_matches_eager_torch(dtype, has_bias, has_residual, activation, slope):
    """x W^T + b, activated, plus a residual, against torch eager in float64: exact where the activation is (small
    integers: every f32 sum is exact and both round it once), within a rounding of the output type otherwise."""
    dtype = getattr(torch, dtype)
    x, w = integers(2, 64, 64, seed=90, dtype=dtype), integers(96, 64, seed=91, dtype=dtype)
    bias = integers(96, seed=92, dtype=dtype) if has_bias else None
    residual = integers(2, 64, 96, seed=93, dtype=dtype) if has_residual else None
    scale = 1.0 if activation in ("identity", "relu", "leaky_relu") else 1 / 64  # near gelu's and silu's curve
    A = x * scale  # a power of two: exact
    D = gt.gemm_bias_act(A, w.mT, bias, residual, activation, slope)
    assert (D.shape, D.dtype, D.is_contiguous()) == ((2, 64, 96), dtype, True)
    expected = bias_act_reference(A, w.mT, bias, residual, activation, slope).to(dtype)
    exact = activation in ("identity", "relu")
    tolerance = 0 if exact else (2e-2 if dtype == torch.bfloat16 else 2e-3)
    torch.testing.assert_close(D, expected, rtol=tolerance, atol=tolerance)


@pytest.mark.gpu
def test_gemm_bias_act_one_plan_per_case_and_no_rebuilds():
    x, w, b = integers(64, 64, seed=94), integers(96, 64, seed=95), integers(96, seed=96)
    gt.gemm_bias_act(x, w.mT, b, None, "relu")
    gt.gemm_bias_act(x, w.mT, b, x[:, :1].expand(64, 96).contiguous(), "relu")
    plans, builds = gt.bias_act_plans(), gemmkit.cache_counters().builds
    for _ in range(3):
        gt.gemm_bias_act(integers(128, 64, seed=97), w.mT, b, None, "relu")  # another shape, the same plan
        gt.gemm_bias_act(x, w.mT, b, x[:, :1].expand(64, 96).contiguous(), "relu")
    assert gt.bias_act_plans() == plans and gemmkit.cache_counters().builds == builds
    assert len({key[3:6] for key in plans}) >= 2  # with and without a residual: two trees


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gemm_bias_act_under_torch_compile_matches_eager(dtype):
    torch._dynamo.reset()
    dtype = getattr(torch, dtype)
    x, w, b = (integers(*shape, seed=98 + i, dtype=dtype) for i, shape in enumerate([(4, 32, 64), (64, 64), (64,)]))
    compiled = torch.compile(lambda x, w, b: linear_block(x, w, b) * 2, fullgraph=True)
    out = compiled(x, w, b)
    torch.testing.assert_close(out, linear_block(x, w, b) * 2, rtol=0, atol=0)
    expected = (bias_act_reference(x, w.mT, b, x, "leaky_relu", 0.2) * 2).to(dtype)
    torch.testing.assert_close(out, expected, rtol=2e-2 if dtype == torch.bfloat16 else 2e-3, atol=1e-2)
