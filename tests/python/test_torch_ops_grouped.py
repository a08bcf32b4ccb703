"""tests/python/test_torch_ops_grouped.py: gemmkit.torch.grouped_gemm, the torch custom op (gemm:
test_torch_ops_gemm.py; gemm_bias_act: test_torch_ops_bias_act.py; what they share: torch_ops_support.py). Unit (no
GPU, no nvcc): its fake implementation with empty groups, its checks naming the group and the operand, no backward,
opcheck, a torch.compile trace of an MoE block, the op's logic on an emulated kernel. GPU: the reference's grouped
walk-through against matmul exactly, layouts, activations and empty groups, the plan cache, the current stream, CUDA
graph capture and replay, torch.compile against eager, opcheck."""
import pytest

torch = pytest.importorskip("torch")

import gemmkit  # noqa: E402
import gemmkit.torch as gt  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402
from torch_ops_support import LAYOUTS, integers, meta, reference  # noqa: E402
from workloads import doubled_on_a_side_stream, walkthrough_shapes  # noqa: E402


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
