"""tests/python/test_torch_ops_gemm.py: gemmkit.torch.gemm, the torch custom op (gemm_bias_act:
test_torch_ops_bias_act.py; grouped_gemm: test_torch_ops_grouped.py; what they share: torch_ops_support.py). Unit (no
GPU, no nvcc): its fake implementation on meta and fake tensors, its checks, opcheck, backward shapes and a
torch.compile(fullgraph=True) trace of an MLP block with its backward; the op's logic and gradients on an emulated
kernel. GPU: results against torch (exact on small integers), every layout, batches, activations, autograd, the plan
cache, CUDA graph capture and replay, torch.compile against eager torch."""
import pytest

torch = pytest.importorskip("torch")

import gemmkit  # noqa: E402
import gemmkit.torch as gt  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402
from torch_ops_support import LAYOUTS, integers, meta, reference  # noqa: E402

F = torch.nn.functional


# ---- unit --------------------------------------------------------------------------------------------------------

def test_every_fused_activation_has_a_derivative():
    assert set(gt._ACTIVATIONS) == {a.name for a in gemmkit.Activation}


SHAPES = [  # A, B, D
    ((64, 32), (32, 48), (64, 48)),
    ((2, 3, 64, 32), (32, 48), (2, 3, 64, 48)),  # leading dimensions fold into M
    ((4, 64, 32), (4, 32, 48), (4, 64, 48)),  # batched
    ((64, 32), (4, 32, 48), (4, 64, 48)),  # A broadcast over the batch
    ((1, 64, 32), (4, 32, 48), (4, 64, 48)),
    ((4, 64, 32), (1, 32, 48), (4, 64, 48)),
]


@pytest.mark.parametrize("a, b, d", SHAPES)
def test_fake_implementation_gives_ds_shape_and_dtype(a, b, d):
    D = gt.gemm(meta(*a, dtype=torch.bfloat16), meta(*b, dtype=torch.bfloat16))
    assert (tuple(D.shape), D.dtype, D.device.type) == (d, torch.bfloat16, "meta")
    with FakeTensorMode():  # as torch.compile traces: fake CUDA tensors, no GPU needed
        A = torch.empty(a, dtype=torch.float16, device="cuda")
        D = gt.gemm(A, torch.empty(b, dtype=torch.float16, device="cuda"), torch.empty(d, dtype=torch.float16,
                    device="cuda"), beta=1.0, activation="silu")
        assert (tuple(D.shape), D.dtype, D.device.type, D.is_contiguous()) == (d, torch.float16, "cuda", True)


BAD = [
    (lambda: gt.gemm(meta(64, 32), meta(31, 48)), gemmkit.TensorError, "K extents must agree"),
    (lambda: gt.gemm(meta(64, 32), meta(32, 48, dtype=torch.float32)), gemmkit.TensorError, "B has dtype"),
    (lambda: gt.gemm(meta(64, 32, dtype=torch.int8), meta(32, 48, dtype=torch.int8)), gemmkit.TensorError,
     "gemmkit.torch.gemm takes"),
    (lambda: gt.gemm(meta(32), meta(32, 48)), gemmkit.TensorError, "expected A"),
    (lambda: gt.gemm(meta(2, 2, 64, 32), meta(2, 32, 48)), gemmkit.TensorError, "expected A"),
    (lambda: gt.gemm(meta(3, 64, 32), meta(4, 32, 48)), gemmkit.TensorError, "batch of 3"),
    (lambda: gt.gemm(meta(64, 32), meta(32, 48), meta(48)), gemmkit.TensorError, "C must have D's shape"),
    (lambda: gt.gemm(meta(64, 32), meta(32, 48), beta=1.0), gemmkit.TensorError, "no C was given"),
    (lambda: gt.gemm(meta(64, 32), meta(32, 48), activation="swish"), gemmkit.ConfigError, "Invalid activation"),
]


@pytest.mark.parametrize("call, error, message", BAD)
def test_bad_arguments_are_refused_by_the_fake_implementation_too(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize("activation", ["identity", "relu", "gelu"])
def test_opcheck_on_meta_tensors(activation):
    A, B, C = meta(64, 32, grad=True), meta(32, 48, grad=True), meta(64, 48, grad=True)
    torch.library.opcheck(gt.gemm, (A, B, C, 2.0, 1.0, activation))


@pytest.mark.parametrize("activation", sorted(gt._ACTIVATIONS))
@pytest.mark.parametrize("a, b, d", SHAPES)
def test_backward_gives_each_input_its_shape(activation, a, b, d):
    A, B, C = meta(*a, grad=True), meta(*b, grad=True), meta(*d, grad=True)
    gt.gemm(A, B, C, 0.5, 2.0, activation).sum().backward()
    for x in (A, B, C):
        assert (x.grad.shape, x.grad.dtype) == (x.shape, x.dtype)


def mlp_block(x, w1, w2):
    """A transformer MLP block: gelu(x W1^T) W2^T + x, the first activation fused into the GEMM."""
    return gt.gemm(gt.gemm(x, w1.mT, activation="gelu"), w2.mT, x, beta=1.0)


def test_torch_compile_traces_forward_and_backward_without_graph_breaks():
    torch._dynamo.reset()
    from torch._dynamo.utils import counters

    counters.clear()
    x, w1, w2 = meta(4, 16, 64, grad=True), meta(256, 64, grad=True), meta(64, 256, grad=True)
    compiled = torch.compile(mlp_block, fullgraph=True, backend="aot_eager")
    y = compiled(x, w1, w2)
    y.sum().backward()
    assert y.shape == x.shape and w1.grad.shape == w1.shape and w2.grad.shape == w2.shape
    assert not counters["graph_break"]


# What the op does around the kernel (folding, layouts, plans, K = 0) and its backward formulas, checked on the
# CPU: a CPU kernel emulates gemmkit's launch in float64, in a process of its own (the registration is global).
EMULATED = """
    import json, torch, gemmkit, gemmkit.torch as gt
    from gemmkit import LayoutType
    launched = []

    def launch(plan, A, B, C, D, alpha, beta):
        activation, parameter, layout_a, layout_b = plan
        for t, layout in ((A, layout_a), (B, layout_b)):  # what the plan was chosen for is what the kernel reads
            assert (t.stride(-1) == 1 if layout == LayoutType.RowMajor else t.stride(-2) == 1), (t.stride(), layout)
        launched.append([list(A.shape), list(B.shape), layout_a.name, layout_b.name])
        z = alpha * torch.matmul(A.double(), B.double()) + (beta * C.double() if C is not None else 0)
        D.copy_(gt._ACTIVATIONS[activation].forward(z, parameter).to(D.dtype))

    gt._launch = launch
    gt._plan = lambda dtype, layout_a, layout_b, activation, parameter, device: (activation, parameter, layout_a,
                                                                               layout_b)
    gt.gemm.register_kernel("cpu")(gt._gemm)

    def reference(A, B, C, alpha, beta, activation, parameter=0.01):
        z = alpha * torch.matmul(A, B) + (beta * C if C is not None else 0)
        return gt._ACTIVATIONS[activation].forward(z, parameter)

    torch.manual_seed(0)
    rand = lambda *shape: torch.randn(*shape, dtype=torch.float64)
    results = {"forward": [], "gradcheck": []}
    for a, b in [((6, 4), (4, 5)), ((2, 3, 6, 4), (4, 5)), ((3, 6, 4), (3, 4, 5)), ((6, 4), (3, 4, 5)),
                 ((1, 6, 4), (3, 4, 5)), ((6, 4), (5, 4)), ((4, 6), (4, 5)), ((6, 0), (0, 5))]:
        A, B = rand(*a), rand(*b)
        if a == (4, 6):
            A = A.mT  # column-major A
        if b == (5, 4):
            B = B.mT  # column-major B
        d = torch.matmul(A, B).shape
        C = rand(*d)
        for activation in gt._ACTIVATIONS:
            got = gt.gemm(A, B, C, 0.5, 2.0, activation, 0.2)
            results["forward"].append(bool(torch.allclose(got, reference(A, B, C, 0.5, 2.0, activation, 0.2))))
            inputs = (A.detach().requires_grad_(), B.detach().requires_grad_(), C.requires_grad_(), 0.5, 2.0,
                      activation, 0.2)
            results["gradcheck"].append(bool(torch.autograd.gradcheck(gt.gemm, inputs, fast_mode=True)))
    results["launched"] = sorted({json.dumps(x) for x in launched})
    results["opcheck"] = torch.library.opcheck(gt.gemm, (rand(6, 4).requires_grad_(), rand(4, 5).requires_grad_(),
                                                         rand(6, 5).requires_grad_(), 1.0, 1.0, "gelu"))
    print(json.dumps(results))
"""


def test_op_logic_and_gradients_with_an_emulated_kernel():
    import json

    from isolated import run_isolated

    result = json.loads(run_isolated(EMULATED, timeout=300))
    assert all(result["forward"]) and len(result["forward"]) == 8 * len(gt._ACTIVATIONS)
    assert all(result["gradcheck"]) and len(result["gradcheck"]) == 8 * len(gt._ACTIVATIONS)
    launched = [json.loads(x) for x in result["launched"]]
    # (2, 3, 6, 4) @ (4, 5) is one GEMM over 36 rows, its dB = A^T dZ one over K x 36 x N; layouts follow strides.
    assert [[36, 4], [4, 5], "RowMajor", "RowMajor"] in launched
    assert [[4, 36], [36, 5], "ColumnMajor", "RowMajor"] in launched
    assert [[6, 5], [5, 4], "RowMajor", "ColumnMajor"] in launched  # dA = dZ B^T
    assert [[6, 4], [4, 5], "ColumnMajor", "RowMajor"] in launched  # A.mT given
    assert [[6, 4], [4, 5], "RowMajor", "ColumnMajor"] in launched  # B.mT given
    assert set(result["opcheck"].values()) == {"SUCCESS"}


# ---- gpu: exact on small integers (fp16 holds every integer up to 2048) --------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("layout_a", sorted(LAYOUTS))
@pytest.mark.parametrize("layout_b", sorted(LAYOUTS))
def test_every_layout_matches_matmul_exactly(layout_a, layout_b):
    A = LAYOUTS[layout_a](integers(128, 64, seed=1))
    B = LAYOUTS[layout_b](integers(64, 96, seed=2))
    C = integers(128, 96, seed=3)
    torch.testing.assert_close(gt.gemm(A, B), reference(A, B), rtol=0, atol=0)
    torch.testing.assert_close(gt.gemm(A, B, C, 2.0, -1.0), reference(A, B, C, 2.0, -1.0), rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("a, b, d", SHAPES)
def test_batches_and_folded_rows_match_matmul_exactly(a, b, d):
    A, B = integers(*a, seed=4), integers(*b, seed=5)
    D = gt.gemm(A, B)
    assert tuple(D.shape) == d
    torch.testing.assert_close(D, reference(A, B), rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("activation", sorted(gt._ACTIVATIONS))
def test_fused_activations_match_torch(activation):
    A, B, C = integers(128, 64, seed=6), integers(64, 96, seed=7), integers(128, 96, seed=8)
    scale = 1 / 64  # keep Z near the activations' interesting range
    D = gt.gemm(A, B, C, scale, scale, activation)
    torch.testing.assert_close(D, reference(A, B, C, scale, scale, activation), rtol=2e-3, atol=2e-3)


@pytest.mark.gpu
def test_empty_and_k0_problems_follow_matmul():
    A, B = integers(0, 64, seed=9), integers(64, 32, seed=10)
    assert gt.gemm(A, B).shape == (0, 32)
    A, B, C = integers(16, 0, seed=11), integers(0, 32, seed=12), integers(16, 32, seed=13)
    torch.testing.assert_close(gt.gemm(A, B, C, beta=2.0, activation="relu"), torch.relu(2 * C), rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("activation", ["identity", "relu", "leaky_relu", "gelu", "silu"])
def test_gradients_match_eager_torch(activation):
    A, B, C = integers(64, 32, seed=14), integers(32, 48, seed=15), integers(64, 48, seed=16)
    grad = integers(64, 48, seed=17)
    alpha, beta = (1.0, 1.0) if activation in ("identity", "relu") else (1 / 32, 1 / 32)
    inputs = [t.clone().requires_grad_() for t in (A, B, C)]
    ours = torch.autograd.grad(gt.gemm(*inputs, alpha, beta, activation), inputs, grad)
    ref_inputs = [t.double().requires_grad_() for t in (A, B, C)]
    act = gt._ACTIVATIONS[activation].forward
    theirs = torch.autograd.grad(act(alpha * ref_inputs[0] @ ref_inputs[1] + beta * ref_inputs[2], 0.01),
                                 ref_inputs, grad.double())
    exact = activation in ("identity", "relu")  # integer data: every product and sum is exact
    for mine, expected in zip(ours, theirs):
        torch.testing.assert_close(mine, expected.half(), rtol=0 if exact else 2e-2, atol=0 if exact else 2e-2)


@pytest.mark.gpu
def test_opcheck_on_cuda_tensors():
    A, B, C = (integers(*s, seed=18 + i).requires_grad_() for i, s in enumerate([(64, 32), (32, 48), (64, 48)]))
    torch.library.opcheck(gt.gemm, (A, B, C, 1.0, 1.0, "relu"))


@pytest.mark.gpu
def test_one_plan_per_operand_kind_and_no_rebuilds():
    A, B = integers(64, 32, seed=21), integers(32, 48, seed=22)
    gt.gemm(A, B)
    gt.gemm(A, B.mT.contiguous().mT)
    plans, builds = gt.plans(), gemmkit.cache_counters().builds
    for _ in range(3):
        gt.gemm(A, B)
        gt.gemm(integers(128, 32, seed=23), B.mT.contiguous().mT)  # another shape, the same plan
    assert gt.plans() == plans and gemmkit.cache_counters().builds == builds


@pytest.mark.gpu
def test_runs_on_the_current_stream():
    A, B = integers(256, 128, seed=24), integers(128, 64, seed=25)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        A2 = A * 2  # produced on the side stream: the GEMM must be ordered after it
        D = gt.gemm(A2, B)
    stream.synchronize()
    torch.testing.assert_close(D, reference(2 * A, B), rtol=0, atol=0)


@pytest.mark.gpu
def test_cuda_graph_capture_and_replay():
    A, B, C = integers(128, 64, seed=26), integers(64, 96, seed=27), integers(128, 96, seed=28)
    gt.gemm(A, B, C, 1.0, 1.0, "relu")  # eager first: the plan resolves and loads its kernel outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        D = gt.gemm(A, B, C, 1.0, 1.0, "relu")
    for seed in range(3):
        A.copy_(integers(128, 64, seed=40 + seed))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(D, reference(A, B, C, 1.0, 1.0, "relu"), rtol=0, atol=0)


@pytest.mark.gpu
def test_torch_compile_mlp_block_matches_eager_torch():
    torch._dynamo.reset()
    generator = torch.Generator().manual_seed(29)
    # Weights scaled like a trained layer's (1/sqrt(fan-in)), so that every activation stays of order 1.
    x, w1, w2 = (torch.randn(*s, generator=generator).div(scale).half().cuda()
                 for s, scale in [((4, 64, 256), 1), ((1024, 256), 16), ((256, 1024), 32)])
    grad = torch.randn(4, 64, 256, generator=generator).half().cuda()
    ours_in = [t.clone().requires_grad_() for t in (x, w1, w2)]
    compiled = torch.compile(mlp_block, fullgraph=True)
    out = compiled(*ours_in)
    ours = torch.autograd.grad(out, ours_in, grad)
    ref_in = [t.float().requires_grad_() for t in (x, w1, w2)]
    ref_out = F.gelu(ref_in[0] @ ref_in[1].mT) @ ref_in[2].mT + ref_in[0]
    theirs = torch.autograd.grad(ref_out, ref_in, grad.float())
    torch.testing.assert_close(out.float(), ref_out, rtol=2e-2, atol=2e-2)
    for mine, expected in zip(ours, theirs):
        torch.testing.assert_close(mine.float(), expected, rtol=2e-2, atol=5e-2)
    # The compiled graph computes what eager gemmkit does (Inductor may hand the op other strides, so another
    # kernel of the same plan family may run: equal up to the order of the f32 sums).
    torch.testing.assert_close(out, mlp_block(x, w1, w2), rtol=1e-3, atol=1e-3)
