"""tests/python/test_torch_emit_evt.py: gemmkit.emit.pytorch on Gemm kernels with an epilogue visitor tree
(helpers shared with the other test_torch_emit_*.py files: torch_emit_support.py). Unit: run's arguments, one operand
line per node, reductions and named scalars, the trees it refuses (no nvcc, no GPU). Compile (nvcc, torch, no GPU): an
epilogue tree's export and its checks on meta tensors. GPU: the reference notebook's tree (D and F) and a reductions
tree against the traced function in float64, and their errors."""
import json
import pathlib

import pytest

import gemmkit
import gpu_specs
from gemmkit import _gemmkit
from isolated import run_isolated
from torch_emit_support import f16_plan, small_integers


# ---- unit: Gemm kernels with an epilogue visitor tree ---------------------------------------------------------

NOTEBOOK_SCHEMA = ('"run(Tensor A, Tensor B, Tensor? C=None, float alpha=1.0, float beta=0.0, Tensor? aux=None, '
                   'Tensor? bias=None, Tensor(a0!)? F=None) -> Tensor"')


def node_table(binding):
    """The binding's table of tree nodes, one line per node."""
    return binding.split("constexpr gk_torch_visitor_node kNodes[] = {\n")[1].split("\n};")[0].splitlines()


@pytest.mark.parametrize("kernel_cc, family", [(None, "sm90_collective"), (80, "sm80_universal")])
def test_an_evt_export_takes_the_trees_arguments_and_lists_one_operand_per_node(tmp_path, kernel_cc, family):
    op = gpu_specs.evt_spec(gpu_specs.notebook_epilogue, gpu_specs.notebook_examples(), 90, kernel_cc)
    assert op.family == gemmkit.KernelFamily[family]
    assert gemmkit.emit.pytorch(op, "nb_evt", 90, str(tmp_path)) is None
    assert (tmp_path / "nb_evt_kernel.cu").read_text() == _gemmkit.render(op).text
    binding = (tmp_path / "nb_evt.cpp").read_text()
    # run's own arguments, then the tree's inputs and outputs in the tree's order (its alpha and beta are run's).
    assert NOTEBOOK_SCHEMA in binding
    assert "// import nb_evt; nb_evt.run(A, B, C=None, alpha=1.0, beta=0.0, aux=None, bias=None, F=None) -> D" in binding
    assert "//   F = ((alpha * accum) + ((beta * C) + aux))\n//   D = ((relu((F + 1)) + bias) + F)\n" in binding
    nodes = op.epilogue_visitor.nodes
    table = node_table(binding)
    assert len(table) == len(nodes) == 16
    for index, (line, node) in enumerate(zip(table, nodes)):
        assert f"  // {index}: " in line, line
        if node["kind"] in ("accumulator", "source", "compute"):
            assert line.lstrip().startswith("visitor::none(),"), line
    # Scalars name run's argument, tensors also their type, layout and the bytes the kernel moves them in (TMA's 16
    # on SM90, C's 8-element vectors of f16 on CUTLASS 2.x); constants are written in.
    for call in ('visitor::scalar("alpha", 3),', 'visitor::scalar("beta", 4),',
                 'visitor::input(GK_TORCH_VISITOR_MATRIX, "aux", 5, GK_DTYPE_F16, GK_ROW_MAJOR, 16),',
                 'visitor::input(GK_TORCH_VISITOR_COLUMN, "bias", 6, GK_DTYPE_F16, GK_ROW_MAJOR, 0),',
                 'visitor::store("F", 7, GK_DTYPE_F16, GK_ROW_MAJOR, 16),', "visitor::constant(1.0),"):
        assert sum(line.lstrip().startswith(call) for line in table) == 1, call
    assert "constexpr gk_torch_visitor_tree kTree = {kNodes, 16, /*reads_c=*/1};" in binding
    assert "/*has_c=*/1," in binding and "/*takes_slope=*/0," in binding
    assert ("gk_torch_register_gemm_visitor_v1(ns, kSchema, &kKernel, &kTree, &gemmkit::torch_module::kGemmEntryPoints)"
            in binding)
    assert "{{" not in binding and "torch/" not in binding  # no torch header: the binding builds in a second
    assert '["nb_evt.cpp", "gemmkit/torch_export_gemm.cpp", "nb_evt_kernel.cu"]' in (tmp_path / "setup.py").read_text()
    assert "gk_torch_register_gemm_visitor_v1" in (tmp_path / "gemmkit" / "torch_export_gemm.cpp").read_text()


def test_an_evt_export_fills_reductions_and_takes_named_scalars(tmp_path):
    sm80 = gpu_specs.evt_spec(gpu_specs.reductions_epilogue, gpu_specs.reductions_examples(), 90, kernel_cc=80)
    gemmkit.emit.pytorch(sm80, "reductions", 90, str(tmp_path / "reductions"))
    binding = (tmp_path / "reductions" / "reductions.cpp").read_text()
    assert ("Tensor? aux=None, Tensor? cbias=None, Tensor? rbias=None, Tensor(a0!)? F=None, "
            "Tensor(a1!)? F_row_max=None, Tensor(a2!)? E_col_max=None) -> Tensor\"" in binding)
    table = "\n".join(node_table(binding))
    # Max reductions start from all-ones bytes; CUTLASS 2.x reads row vectors in C's vectors.
    assert 'visitor::reduction(GK_TORCH_VISITOR_ROW, "F_row_max", 9, GK_DTYPE_F32, 0xff),' in table
    assert 'visitor::reduction(GK_TORCH_VISITOR_COLUMN, "E_col_max", 10, GK_DTYPE_F32, 0xff),' in table
    assert 'visitor::input(GK_TORCH_VISITOR_ROW, "rbias", 7, GK_DTYPE_F16, GK_ROW_MAJOR, 16),' in table
    # A tree built with the node constructors: a named scalar, a sum into a scalar, no C, a constant that is not
    # finite.
    gamma = _gemmkit._evt_scalar("gamma") * _gemmkit._evt_accumulator()
    bounded = _gemmkit._evt_compute("minimum", [gamma, _gemmkit.EpilogueExpr(float("inf"))])
    plan = f16_plan(90, layout="row")
    plan.epilogue_visitor = _gemmkit.Epilogue(_gemmkit._evt_reduction("scalar", bounded, "total", "sum",
                                                                      gemmkit.DataType.f32))
    gemmkit.emit.pytorch(plan.construct(), "scaled", 90, str(tmp_path / "scaled"))
    binding = (tmp_path / "scaled" / "scaled.cpp").read_text()
    assert ('"run(Tensor A, Tensor B, Tensor? C=None, float alpha=1.0, float beta=0.0, float? gamma=None, '
            'Tensor(a0!)? total=None) -> Tensor"') in binding
    table = "\n".join(node_table(binding))
    assert 'visitor::scalar("gamma", 5),' in table
    assert "visitor::constant(std::numeric_limits<double>::infinity())," in table
    assert 'visitor::reduction(GK_TORCH_VISITOR_PER_BATCH, "total", 6, GK_DTYPE_F32, 0x00),' in table
    assert "/*reads_c=*/0};" in binding


def tree_with(node):
    # The aux matrix keeps the tree off the plain form, which would export the fused kernel of those settings instead.
    return _gemmkit.Epilogue(_gemmkit._evt_accumulator() + node + _gemmkit._evt_aux("extra"))


@pytest.mark.parametrize("node, message", [
    (lambda: _gemmkit._evt_aux("aux8", gemmkit.DataType.e4m3), "node 1 \\(matrix 'aux8'\\) is a tensor of e4m3"),
    (lambda: _gemmkit._evt_aux("A"), "named 'A' like a parameter of run itself"),
    (lambda: _gemmkit._evt_row_broadcast("alpha"), "named 'alpha' like a parameter of run itself"),
    (lambda: _gemmkit._evt_scalar("lambda"), "named 'lambda', which cannot name a parameter of run"),
    (lambda: _gemmkit._evt_column_broadcast("row-bias"), "named 'row-bias', which cannot name a parameter of run"),
])
def test_an_evt_export_refuses_a_node_it_cannot_express_before_writing(tmp_path, node, message):
    plan = f16_plan(90, layout="row")
    plan.epilogue_visitor = tree_with(node())
    op = plan.construct()
    with pytest.raises(gemmkit.ConfigError, match=message):
        gemmkit.emit.pytorch(op, "refused", 90, str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


# ---- compile tier: nvcc and torch, no GPU ------------------------------------------------------------------

EVT_JIT_BUILD = """
    import json, os, sys, torch, gemmkit
    sys.path.insert(0, os.environ["TESTS_DIR"])
    import gpu_specs
    op = gpu_specs.evt_spec(gpu_specs.notebook_epilogue, gpu_specs.notebook_examples(), 80)
    mod = gemmkit.emit.pytorch(op, "jit_evt", 80, os.environ["OUT_DIR"], jit=True)
    half = lambda *shape, device="meta": torch.empty(*shape, dtype=torch.float16, device=device)
    A, B, C, aux, F = half(256, 64), half(64, 128), half(256, 128), half(256, 128), half(256, 128)
    bias = half(256, 1)
    D = mod.run(A, B, C, 0.5, 0.5, aux, bias, F)
    batched = mod.run(half(2, 256, 64), B, half(2, 256, 128), 0.5, 0.5, aux, half(2, 256, 1), half(2, 256, 128))
    errors = []
    for args, kwargs in [((A, B, C, 0.5, 0.5, aux, bias), {}),
                         ((A, B, C, 0.5, 0.5, aux, bias.float(), F), {}),
                         ((A, B, C, 0.5, 0.5, aux, half(1, 256), F), {}),
                         ((A, B, C, 0.5, 0.5, aux.mT.contiguous().mT, bias, F), {}),
                         ((A, B, C, 0.5, 0.5, half(256, 132)[:, :128], bias, F), {}),
                         ((A, B, C, 0.5, 0.5, aux, half(256, 1, device="cpu"), F), {}),
                         ((A, B, None), dict(aux=aux, bias=bias, F=F)),
                         ((A, B, C, 0.5, 0.5, aux, bias, half(128).expand(256, 128)), {}),
                         ((A, B, C), dict(beta=0.5, aux=aux, bias=bias, F=half(3, 256, 128)))]:
        try:
            mod.run(*args, **kwargs)
            errors.append("")
        except ValueError as error:
            errors.append(str(error).splitlines()[0])
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():  # how torch.compile sees the op: its meta path, no GPU
        cuda = lambda *shape: torch.empty(*shape, dtype=torch.float16, device="cuda")
        fake = mod.run(cuda(256, 64), cuda(64, 128), cuda(256, 128), 0.5, 0.5, cuda(256, 128), cuda(256, 1),
                       cuda(256, 128))
    traced = torch.compile(lambda *t: mod.run(*t[:3], 0.5, 0.5, *t[3:]) + 1, fullgraph=True,
                           backend="aot_eager")(A, B, C, aux, bias, F)
    print(json.dumps({"shape": list(D.shape), "batched": list(batched.shape), "errors": errors,
                      "fake": [list(fake.shape), str(fake.device)], "traced": list(traced.shape),
                      "kernel_name": mod.kernel_name == op.name(), "schema": str(torch.ops.jit_evt.run.default._schema)}))
"""


@pytest.mark.compile
def test_an_evt_export_builds_and_checks_the_trees_arguments(tmp_path):
    """The notebook's tree on a CUTLASS 2.x kernel, exported with jit=True (the kernel, the Gemm glue and the
    binding built for this torch), run on meta tensors: D's shape, and the glue's refusals, each naming the argument,
    which come before anything runs; fake tensors and torch.compile trace the op (it writes F in place)."""
    pytest.importorskip("torch")
    result = json.loads(run_isolated(EVT_JIT_BUILD, timeout=1200, GEMMKIT_CACHE_DIR=str(tmp_path / "cache"),
                                     OUT_DIR=str(tmp_path / "out"), TESTS_DIR=str(pathlib.Path(__file__).parent)))
    assert result["kernel_name"] and result["shape"] == [256, 128] and result["batched"] == [2, 256, 128]
    assert result["fake"] == [[256, 128], "cuda:0"] and result["traced"] == [256, 128]
    assert "Tensor(a0!)? F=None) -> Tensor" in result["schema"]
    errors = result["errors"]
    assert "F (an output the epilogue tree stores) is missing; pass a tensor of shape (256, 128) and dtype Half" in (
        errors[0])
    assert "bias (a column vector of the epilogue tree) has dtype Float but the tree was built for Half" in errors[1]
    assert "bias (a column vector of the epilogue tree) has shape [1, 256] but the tree expects (256, 1)" in errors[2]
    assert "aux has shape [256, 128] and strides [1, 256] but the kernel reads it row-major" in errors[3]
    assert "aux: its address, leading dimension (132) and batch stride must be multiples of 16 bytes" in errors[4]
    assert "bias is on cpu but A is on meta" in errors[5]
    assert "the epilogue tree reads C; pass C" in errors[6]
    assert "F has strides [0, 1] under which elements share an address, but the kernel writes it" in errors[7]
    assert "F (an output the epilogue tree stores) has shape [3, 256, 128] but the tree expects (256, 128)" in (
        errors[8])


# ---- gpu tier: exported epilogue visitor trees (the reference notebook's, and reductions) ------------------------


@pytest.fixture(scope="module")
def exported_evt(tmp_path_factory):
    """gpu_specs.evt_export_specs' kernels for this GPU (the notebook's tree on the GPU's own family and on CUTLASS
    2.x, the reductions' tree on the GPU's own), compiled in parallel, exported and built with jit=True."""
    torch = pytest.importorskip("torch")
    cc = gemmkit.device_cc()
    ops = gpu_specs.evt_export_specs(cc)
    gemmkit.compile_many(list(ops.values()))
    out = tmp_path_factory.mktemp("exported_evt")
    modules = {key: gemmkit.emit.pytorch(op, f"gk_test_evt_{key}", cc, str(out / key), jit=True)
               for key, op in ops.items()}
    return torch, modules


def notebook_operands(torch, batch=None, m=256, n=128, k=64):
    """Small integers: F = 0.5 accum + 0.5 C + aux is a multiple of 1/2 below 300 and D below 600, exact in f16 as
    in the f32 epilogue, so that results compare exactly. F starts as NaN: the kernel must write all of it."""
    full = (m, n) if batch is None else (batch, m, n)
    A = small_integers(torch, full[:-1] + (k,), 60)
    B, C, aux = small_integers(torch, (k, n), 61), small_integers(torch, full, 62), small_integers(torch, (m, n), 63)
    bias = small_integers(torch, (m, 1) if batch is None else (batch, m, 1), 64)
    F = torch.full(full, float("nan"), dtype=torch.float16, device="cuda")
    return A, B, C, aux, bias, F


@pytest.mark.gpu
@pytest.mark.parametrize("key", ["native", "sm80"])
@pytest.mark.parametrize("batch", [None, 2])
def test_exported_evt_computes_the_notebooks_d_and_f(exported_evt, key, batch):
    """run(A, B, C, alpha, beta, aux, bias, F) -> D, with F written in place, against the traced function run on
    float64 torch tensors; a batch of 2 with a per-batch bias (2, m, 1) and one aux for every batch."""
    torch, modules = exported_evt
    A, B, C, aux, bias, F = notebook_operands(torch, batch)
    D = modules[key].run(A, B, C, 0.5, 0.5, aux, bias, F)
    D_ref, F_ref = gpu_specs.notebook_epilogue(A.double() @ B.double(), 0.5, C.double(), 0.5, aux.double(),
                                               bias.double())
    assert D.dtype == torch.float16 and D.shape == C.shape
    torch.testing.assert_close(F, F_ref.half(), rtol=0, atol=0)
    torch.testing.assert_close(D, D_ref.half(), rtol=0, atol=0)
    # By keyword too, alpha and beta being run's own.
    D = modules[key].run(A, B, C=C, alpha=1.0, beta=-1.0, aux=aux, bias=bias, F=F)
    D_ref, F_ref = gpu_specs.notebook_epilogue(A.double() @ B.double(), 1.0, C.double(), -1.0, aux.double(),
                                               bias.double())
    torch.testing.assert_close(F, F_ref.half(), rtol=0, atol=0)
    torch.testing.assert_close(D, D_ref.half(), rtol=0, atol=0)


@pytest.mark.gpu
def test_exported_evt_refuses_a_tensor_its_tree_cannot_read_and_writes_nothing(exported_evt):
    """On device memory (the compile tier checks the rest on meta tensors): an address off TMA's 16 bytes, a host
    tensor, another dtype, a missing C; F stays as it was."""
    torch, modules = exported_evt
    A, B, C, aux, bias, F = notebook_operands(torch)
    shifted = small_integers(torch, (256 * 128 + 1,), 65)[1:].view(256, 128)  # 2 bytes past an allocation's start
    cases = [((A, B, C, 0.5, 0.5, shifted, bias, F), "aux: its address, leading dimension \\(128\\) and batch "
                                                     "stride must be multiples of 16 bytes"),
             ((A, B, C, 0.5, 0.5, aux, bias.cpu(), F), "bias is on cpu but A is on cuda:0"),
             ((A, B, C, 0.5, 0.5, aux, bias, F.float()), "F \\(an output the epilogue tree stores\\) has dtype "
                                                         "Float but the tree was built for Half"),
             ((A, B, None, 0.5, 0.5, aux, bias, F), "the epilogue tree reads C; pass C")]
    for args, message in cases:
        with pytest.raises(ValueError, match=message):
            modules["native"].run(*args)
    assert F.isnan().all()  # every check comes before the launch


@pytest.mark.gpu
def test_exported_evt_fills_and_reduces_the_trees_outputs(exported_evt):
    """The reductions' tree over a batch of 2: F stored per batch, its maximum per column and E's per row reduced
    over the batches too, into outputs that start as garbage (run fills them with the maximum's identity first)."""
    torch, modules = exported_evt
    l, m, n, k = 2, 256, 128, 64
    A, B = small_integers(torch, (l, m, k), 70), small_integers(torch, (k, n), 71)
    C, aux = small_integers(torch, (l, m, n), 72), small_integers(torch, (l, m, n), 73)
    cbias, rbias = small_integers(torch, (m, 1), 74), small_integers(torch, (n,), 75)
    F = torch.empty(l, m, n, dtype=torch.float16, device="cuda")
    F_row_max = torch.full((n,), 1e9, device="cuda")
    E_col_max = torch.full((m, 1), 1e9, device="cuda")
    for alpha, beta in ((1.0, 1.0), (0.5, -1.0)):  # twice: the second call must start from the identity again
        D = modules["reductions"].run(A, B, C, alpha, beta, aux, cbias, rbias, F, F_row_max, E_col_max)
        expected = gpu_specs.reductions_epilogue(A.double() @ B.double(), alpha, C.double(), beta, aux.double(),
                                                 cbias.double(), rbias.double())
        for name, got, want in zip(("D", "F", "F_row_max", "E_col_max"), (D, F, F_row_max, E_col_max), expected):
            torch.testing.assert_close(got, want.to(got.dtype).view(got.shape), rtol=0, atol=0,
                                       msg=lambda text: f"{name}, alpha {alpha}: {text}")
