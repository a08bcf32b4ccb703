"""tests/python/test_torch_ops.py: gemmkit.torch.gemm, the torch custom op. Unit (no GPU, no nvcc): its fake
implementation on meta and fake tensors, its checks, opcheck, backward shapes and a torch.compile(fullgraph=True)
trace of an MLP block with its backward. GPU: results against torch (exact on small integers), every layout,
batches, activations, autograd, the plan cache, CUDA graph capture and replay, torch.compile against eager torch.
gemm_bias_act (an epilogue tree: act(A @ B + bias) + residual) and grouped_gemm likewise: fake implementations,
checks, no backward, the op's logic on an emulated kernel; on the GPU against eager torch and under torch.compile."""
import pytest

torch = pytest.importorskip("torch")

import gemmkit  # noqa: E402
import gemmkit.torch as gt  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402
from gpu_specs import BIAS_ACT_CASES  # noqa: E402
from workloads import doubled_on_a_side_stream, walkthrough_shapes  # noqa: E402

F = torch.nn.functional


def meta(*shape, dtype=torch.float16, grad=False):
    return torch.empty(*shape, dtype=dtype, device="meta", requires_grad=grad)


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


# ---- unit: grouped_gemm ----------------------------------------------------------------------------------------

GROUPS = [((64, 32), (32, 48)), ((0, 16), (16, 8)), ((24, 8), (8, 0)), ((16, 0), (0, 40))]  # empty groups too


def test_grouped_fake_implementation_gives_every_ds_shape():
    As, Bs = [meta(*a) for a, _ in GROUPS], [meta(*b) for _, b in GROUPS]
    Ds = gt.grouped_gemm(As, Bs)
    assert [(tuple(d.shape), d.dtype, d.device.type) for d in Ds] == [
        ((64, 48), torch.float16, "meta"), ((0, 8), torch.float16, "meta"), ((24, 0), torch.float16, "meta"),
        ((16, 40), torch.float16, "meta")]
    with FakeTensorMode():  # as torch.compile traces: fake CUDA tensors, no GPU needed
        As = [torch.empty(a, dtype=torch.bfloat16, device="cuda") for a, _ in GROUPS]
        Bs = [torch.empty(b, dtype=torch.bfloat16, device="cuda") for _, b in GROUPS]
        Cs = [torch.empty(a[0], b[1], dtype=torch.bfloat16, device="cuda") for a, b in GROUPS]
        Ds = gt.grouped_gemm(As, Bs, Cs, 1.0, 1.0, "relu")
        assert [(tuple(d.shape), d.dtype, d.device.type) for d in Ds] == [
            ((a[0], b[1]), torch.bfloat16, "cuda") for a, b in GROUPS]


GROUPED_BAD = [
    (lambda: gt.grouped_gemm([], []), "As: the list is empty"),
    (lambda: gt.grouped_gemm([meta(64, 32)] * 2, [meta(32, 48)]), "Lengths of As, Bs must be equal"),
    (lambda: gt.grouped_gemm([meta(64, 32)], [meta(32, 48)], [meta(64, 48)] * 2), "Lengths of As, Bs and Cs"),
    (lambda: gt.grouped_gemm([meta(64, 32), meta(64, 31)], [meta(32, 48)] * 2),
     r"As\[1\] and Bs\[1\]: A is \(64, 31\) \(M x K\) but B is \(32, 48\)"),
    (lambda: gt.grouped_gemm([meta(64, 32)] * 2, [meta(32, 48), meta(32, 48, dtype=torch.float32)]),
     r"Bs\[1\] has dtype torch.float32 but As\[0\] has torch.float16"),
    (lambda: gt.grouped_gemm([meta(64, 32)], [torch.empty(32, 48).half()]),
     r"Bs\[0\] is on cpu but As\[0\] is on meta"),
    (lambda: gt.grouped_gemm([meta(2, 64, 32)], [meta(32, 48)]), r"As\[0\] is \(2, 64, 32\); grouped_gemm takes one"),
    (lambda: gt.grouped_gemm([meta(64, 32)], [meta(32, 48)], [meta(64, 47)], beta=1.0), r"Cs\[0\] is \(64, 47\)"),
    (lambda: gt.grouped_gemm([meta(64, 32)], [meta(32, 48)], beta=1.0), "no Cs were given"),
    (lambda: gt.grouped_gemm([meta(64, 32, dtype=torch.int8)], [meta(32, 48, dtype=torch.int8)]),
     "grouped_gemm takes"),
]


@pytest.mark.parametrize("call, message", GROUPED_BAD)
def test_grouped_bad_arguments_name_the_group_and_the_operand(call, message):
    with pytest.raises(gemmkit.TensorError, match=message):
        call()
    with pytest.raises(gemmkit.ConfigError, match="Invalid activation"):
        gt.grouped_gemm([meta(64, 32)], [meta(32, 48)], activation="swish")


def test_grouped_gemm_has_no_backward_and_says_so():
    A = meta(64, 32, grad=True)
    Ds = gt.grouped_gemm([A], [meta(32, 48)])
    with pytest.raises(NotImplementedError, match="grouped_gemm has no backward; to differentiate, call "
                                                  "gemmkit.torch.gemm per group"):
        Ds[0].sum().backward()


def test_grouped_opcheck_on_meta_tensors():
    As, Bs = [meta(*a) for a, _ in GROUPS], [meta(*b) for _, b in GROUPS]
    Cs = [meta(a[0], b[1]) for a, b in GROUPS]
    result = torch.library.opcheck(gt.grouped_gemm_op, (As, Bs, Cs, 2.0, 1.0, "gelu", 0.01))
    assert set(result.values()) == {"SUCCESS"}


def moe_block(x, w_experts):
    """Experts over pre-sorted tokens: relu(x_g W_g^T) per group, then a sum of the rows (one graph)."""
    outputs = gt.grouped_gemm(list(x), [w.mT for w in w_experts], activation="relu")
    return torch.cat([o.sum(0, keepdim=True) for o in outputs])


def test_torch_compile_traces_grouped_gemm_without_graph_breaks():
    torch._dynamo.reset()
    from torch._dynamo.utils import counters

    counters.clear()
    x = [meta(16 * (g + 1), 64) for g in range(4)]
    w = [meta(128, 64) for _ in range(4)]
    y = torch.compile(moe_block, fullgraph=True, backend="aot_eager")(x, w)
    assert y.shape == (4, 128) and not counters["graph_break"]


# What grouped_gemm does around the kernel (layouts, K = 0 groups, empty groups) checked on the CPU: a CPU kernel
# emulates gemmkit's grouped launch in float64, in a process of its own (the registration is global).
GROUPED_EMULATED = """
    import json, torch, gemmkit, gemmkit.torch as gt
    from gemmkit import LayoutType
    launched = []

    def launch(plan, As, Bs, Cs, Ds, alpha, beta):
        activation, parameter, layout_a, layout_b = plan
        for ts, layout in ((As, layout_a), (Bs, layout_b)):  # the plan's one layout per list is what it reads
            for t in ts:
                assert gt._fits(t, layout), (t.shape, t.stride(), layout)
        launched.append([len(As), layout_a.name, layout_b.name])
        for g, (A, B, D) in enumerate(zip(As, Bs, Ds)):
            if A.shape[1] == 0 or D.numel() == 0:
                continue  # the kernel skips empty groups and does not write their D
            z = alpha * torch.matmul(A.double(), B.double()) + (beta * Cs[g].double() if Cs is not None else 0)
            D.copy_(gt._ACTIVATIONS[activation].forward(z, parameter).to(D.dtype))

    gt._grouped_launch = launch
    gt._grouped_plan = lambda dtype, layout_a, layout_b, activation, parameter, device: (activation, parameter,
                                                                                       layout_a, layout_b)
    gt.grouped_gemm_op.register_kernel("cpu")(gt._grouped_gemm)

    torch.manual_seed(0)
    rand = lambda *shape: torch.randn(*shape, dtype=torch.float64)
    shapes = [(6, 4, 5), (0, 4, 5), (3, 0, 5), (7, 2, 0), (5, 3, 2)]  # (m, k, n): empty and K = 0 groups
    results = {"forward": []}
    for a_layout, b_layout in [("row", "row"), ("col", "col"), ("mixed", "row")]:
        As = [rand(m, k) if a_layout == "row" or (a_layout == "mixed" and g % 2) else rand(k, m).mT
              for g, (m, k, n) in enumerate(shapes)]
        Bs = [rand(k, n) if b_layout == "row" else rand(n, k).mT for m, k, n in shapes]
        Cs = [rand(m, n) for m, k, n in shapes]
        for activation in ("identity", "relu", "sigmoid"):
            got = gt.grouped_gemm(As, Bs, Cs, 0.5, 2.0, activation)
            want = [gt._ACTIVATIONS[activation].forward(0.5 * A @ B + 2.0 * C, 0.01) for A, B, C in zip(As, Bs, Cs)]
            results["forward"].append(all(torch.allclose(x, y) for x, y in zip(got, want)))
            got = gt.grouped_gemm(As, Bs, activation=activation)
            want = [gt._ACTIVATIONS[activation].forward(A @ B, 0.01) for A, B in zip(As, Bs)]
            results["forward"].append(all(torch.allclose(x, y) for x, y in zip(got, want)))
    results["launched"] = sorted({json.dumps(x) for x in launched})
    launched.clear()
    gt.grouped_gemm([rand(0, 4), rand(3, 0)], [rand(4, 5), rand(0, 5)])  # nothing for the kernel: no launch
    results["no_work_launches"] = len(launched)
    print(json.dumps(results))
"""


def test_grouped_op_logic_with_an_emulated_kernel():
    import json

    from isolated import run_isolated

    result = json.loads(run_isolated(GROUPED_EMULATED, timeout=300))
    assert all(result["forward"]) and len(result["forward"]) == 18
    assert result["no_work_launches"] == 0
    # One launch per call with every group; a list all column-major is read so, a mixed one is made row-major.
    assert [json.loads(x) for x in result["launched"]] == [[5, "ColumnMajor", "ColumnMajor"], [5, "RowMajor", "RowMajor"]]


# ---- gpu: exact on small integers (fp16 holds every integer up to 2048) --------------------------------------

def integers(*shape, seed, dtype=torch.float16, low=-4, high=5):
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(low, high, shape, generator=generator).to(dtype).cuda()


def reference(A, B, C=None, alpha=1.0, beta=0.0, activation="identity", dtype=torch.float16):
    z = alpha * torch.matmul(A.double(), B.double())
    if C is not None:
        z = z + beta * C.double()
    return gt._ACTIVATIONS[activation].forward(z, 0.01).to(dtype)


LAYOUTS = {"row": lambda x: x, "col": lambda x: x.mT.contiguous().mT}


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


# ---- gpu: grouped_gemm ---------------------------------------------------------------------------------------


def walkthrough_groups(count=50, seed=2023):
    """The reference's grouped workload (M, N, K from {128, 256, 512, 1024}) in small integers."""
    shapes = walkthrough_shapes(count, seed)
    return ([integers(m, k, seed=3 * g) for g, (m, n, k) in enumerate(shapes)],
            [integers(k, n, seed=3 * g + 1) for g, (m, n, k) in enumerate(shapes)])


@pytest.mark.gpu
def test_grouped_gemm_walkthrough_matches_matmul_exactly():
    As, Bs = walkthrough_groups()
    Ds = gt.grouped_gemm(As, Bs)
    for g, (A, B, D) in enumerate(zip(As, Bs, Ds)):
        torch.testing.assert_close(D, reference(A, B), rtol=0, atol=0, msg=lambda m: f"group {g}: {m}")
    Cs = [integers(A.shape[0], B.shape[1], seed=200 + g) for g, (A, B) in enumerate(zip(As, Bs))]
    for A, B, C, D in zip(As, Bs, Cs, gt.grouped_gemm(As, Bs, Cs, 2.0, -1.0)):
        torch.testing.assert_close(D, reference(A, B, C, 2.0, -1.0), rtol=0, atol=0)


# The grouped plans the gpu tier uses (tests/python/gpu_specs.py compiles their kernels ahead).
GROUPED_KINDS = [("row", "row", "identity"), ("row", "row", "relu"), ("col", "col", "identity"), ("row", "col", "relu")]


@pytest.mark.gpu
@pytest.mark.parametrize("layout_a, layout_b, activation", GROUPED_KINDS)
def test_grouped_gemm_layouts_activations_and_empty_groups(layout_a, layout_b, activation):
    shapes = [(128, 64, 96), (0, 64, 32), (64, 32, 0), (32, 0, 48), (256, 128, 64)]  # (m, k, n); K = 0 in group 3
    As = [LAYOUTS[layout_a](integers(m, k, seed=g)) for g, (m, k, n) in enumerate(shapes)]
    Bs = [LAYOUTS[layout_b](integers(k, n, seed=10 + g)) for g, (m, k, n) in enumerate(shapes)]
    Cs = [integers(m, n, seed=20 + g) for g, (m, k, n) in enumerate(shapes)]
    Ds = gt.grouped_gemm(As, Bs, Cs, 1.0, 1.0, activation)
    assert [tuple(D.shape) for D in Ds] == [(m, n) for m, k, n in shapes]
    for A, B, C, D in zip(As, Bs, Cs, Ds):
        torch.testing.assert_close(D, reference(A, B, C, 1.0, 1.0, activation), rtol=0, atol=0)
    layout = {"row": gemmkit.LayoutType.RowMajor, "col": gemmkit.LayoutType.ColumnMajor}
    # The plan reads each list in its own layout (no copy to another one).
    assert (torch.float16, layout[layout_a], layout[layout_b], activation, None,
            torch.cuda.current_device()) in gt.grouped_plans()


@pytest.mark.gpu
def test_grouped_gemm_one_plan_per_operand_kind_and_no_rebuilds():
    As, Bs = walkthrough_groups(count=4, seed=3)
    gt.grouped_gemm(As, Bs)
    plans, builds = gt.grouped_plans(), gemmkit.cache_counters().builds
    for seed in range(3):
        gt.grouped_gemm(*walkthrough_groups(count=6, seed=seed))  # other shapes, the same plan
    assert gt.grouped_plans() == plans and gemmkit.cache_counters().builds == builds


@pytest.mark.gpu
def test_grouped_gemm_runs_on_the_current_stream():
    As, Bs = walkthrough_groups(count=6, seed=4)
    for A, B, D in zip(As, Bs, doubled_on_a_side_stream(torch, gt.grouped_gemm, As, Bs)):
        torch.testing.assert_close(D, reference(2 * A, B), rtol=0, atol=0)


@pytest.mark.gpu
def test_grouped_gemm_cuda_graph_capture_and_replay():
    As, Bs = walkthrough_groups(count=8, seed=5)
    Cs = [integers(A.shape[0], B.shape[1], seed=50 + g) for g, (A, B) in enumerate(zip(As, Bs))]
    gt.grouped_gemm(As, Bs, Cs, 1.0, 1.0, "relu")  # eager first: the plan resolves and loads its kernel
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        Ds = gt.grouped_gemm(As, Bs, Cs, 1.0, 1.0, "relu")
    for replay in range(3):
        for g, A in enumerate(As):
            A.copy_(integers(*A.shape, seed=1000 * replay + g))
        graph.replay()
        torch.cuda.synchronize()
        for A, B, C, D in zip(As, Bs, Cs, Ds):
            torch.testing.assert_close(D, reference(A, B, C, 1.0, 1.0, "relu"), rtol=0, atol=0)


@pytest.mark.gpu
def test_grouped_gemm_under_torch_compile_matches_eager():
    torch._dynamo.reset()
    x = [integers(16 * (g + 1), 64, seed=60 + g) for g in range(4)]
    w = [integers(128, 64, seed=70 + g) for g in range(4)]
    compiled = torch.compile(moe_block, fullgraph=True)
    torch.testing.assert_close(compiled(x, w), moe_block(x, w), rtol=0, atol=0)
    expected = torch.cat([torch.relu(a.double() @ b.double().mT).sum(0, keepdim=True) for a, b in zip(x, w)])
    torch.testing.assert_close(compiled(x, w).double(), expected, rtol=1e-3, atol=1)


@pytest.mark.gpu
def test_grouped_opcheck_on_cuda_tensors():
    As, Bs = walkthrough_groups(count=3, seed=6)
    Cs = [integers(A.shape[0], B.shape[1], seed=80 + g) for g, (A, B) in enumerate(zip(As, Bs))]
    result = torch.library.opcheck(gt.grouped_gemm_op, (As, Bs, Cs, 1.0, 1.0, "relu", 0.01))
    assert set(result.values()) == {"SUCCESS"}


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
