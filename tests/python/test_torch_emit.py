"""tests/python/test_torch_emit.py: gemmkit.emit.pytorch. Unit: the files it writes for SM80 and SM90 kernels and
fused activations, Conv2d fprop kernels, epilogue visitor trees (run's arguments, one operand line per node, the
trees it refuses), the flags of setup.py, refused arguments (no nvcc, no GPU; no torch unless a test says so).
Compile (nvcc, torch, no GPU): the JIT build against a cached kernel, importable without a GPU, an epilogue tree's
export and its checks on meta tensors, and one AOT `setup.py build_ext` on a clean folder. GPU: the exported module
against torch.matmul and torch.nn.functional.conv2d, exactly, the reference notebook's tree (D and F) and a
reductions tree against the traced function in float64, and their errors."""
import ast
import filecmp
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import gemmkit
import gpu_specs
from gemmkit import _gemmkit
from isolated import run_isolated
from workloads import doubled_on_a_side_stream, walkthrough_shapes


def f16_plan(cc, **kwargs):
    return gemmkit.Gemm(element=np.float16, element_accumulator=np.float32, cc=cc, **kwargs)


def spec(cc, activation=None, layout_B="row"):
    plan = f16_plan(cc, layout_A="row", layout_B=layout_B, layout_C="row")
    if activation is not None:
        plan.activation = activation
    return plan.construct()


def setup_flags(path):
    """NVCC_FLAGS and the CUTLASS default of a generated setup.py, read as Python."""
    tree = ast.parse(path.read_text())
    values = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id == "NVCC_FLAGS":
                values["flags"] = ast.literal_eval(node.value)
            if node.targets[0].id == "CUTLASS":
                values["cutlass_default"] = ast.literal_eval(node.value.args[1])
    return values


# ---- unit ------------------------------------------------------------------------------------------------------

EXPORTS = [  # (cc, activation, layout_B, arch flag)
    (80, None, "row", "-gencode=arch=compute_80,code=sm_80"),
    (90, None, "row", "-gencode=arch=compute_90a,code=sm_90a"),
    (90, "relu", "col", "-gencode=arch=compute_90a,code=sm_90a"),
    (90, ("leaky_relu", 0.2), "row", "-gencode=arch=compute_90a,code=sm_90a"),
]


@pytest.mark.parametrize("cc, activation, layout_B, gencode", EXPORTS)
def test_writes_kernel_binding_setup_and_headers(tmp_path, cc, activation, layout_B, gencode):
    op = spec(cc, activation, layout_B)
    assert gemmkit.emit.pytorch(op, "my_gemm", cc, str(tmp_path / "out")) is None
    out = tmp_path / "out"
    # The kernel is exactly the source gemmkit compiles, fused epilogue included.
    assert (out / "my_gemm_kernel.cu").read_text() == _gemmkit.render(op).text
    binding = (out / "my_gemm.cpp").read_text()
    assert f"//   {op.name()}\n" in binding
    assert '#include "gemmkit/torch_module.h"' in binding
    assert "/*a=*/{GK_DTYPE_F16, GK_ROW_MAJOR, 8}," in binding
    b_layout = "GK_ROW_MAJOR" if layout_B == "row" else "GK_COLUMN_MAJOR"
    assert f"/*b=*/{{GK_DTYPE_F16, {b_layout}, 8}}," in binding
    assert "/*d=*/{GK_DTYPE_F16, GK_ROW_MAJOR, 8}," in binding
    assert "/*has_c=*/1," in binding
    assert f"// Activation {op.activation.name}." in binding
    leaky = op.activation == gemmkit.Activation.leaky_relu
    assert f"/*takes_slope=*/{int(leaky)}," in binding
    slope = ", float slope=0.01" if leaky else ""
    assert f'"run(Tensor A, Tensor B, Tensor? C=None, float alpha=1.0, float beta=0.0{slope}) -> Tensor"' in binding
    assert "GK_PYTHON_MODULE(TORCH_EXTENSION_NAME, register_op," in binding
    assert "{{" not in binding and "torch/" not in binding  # no torch header: the binding builds in a second
    # The glue headers: gemmkit's device headers as the compiler reads them, and the torch side.
    device = pathlib.Path(_gemmkit.Toolchain.find_headers().device_include_dir) / "gemmkit"
    for header in device.iterdir():
        assert filecmp.cmp(header, out / "gemmkit" / header.name, shallow=False), header.name
    for glue in ("torch_export.h", "torch_module.h", "torch_export_common.h", "torch_export_gemm.cpp",
                 "torch_export_grouped.cpp", "torch_export_conv2d.cpp"):
        assert (out / "gemmkit" / glue).is_file()
    flags = setup_flags(out / "setup.py")
    assert gencode in flags["flags"]


def test_setup_py_has_gemmkits_nvcc_flags(tmp_path):
    op = spec(90, "gelu")
    gemmkit.emit.pytorch(op, "gelu_gemm", 90, str(tmp_path))
    text = (tmp_path / "setup.py").read_text()
    values = setup_flags(tmp_path / "setup.py")
    toolchain = _gemmkit.Toolchain.find_headers()
    # Every compile flag of gemmkit's own command, in order; files, linking and include folders are setup.py's own.
    command = _gemmkit.nvcc_command(toolchain, _gemmkit.render(op), "k.cu", "k.so")
    compile_flags = [f for f in command[1:] if f not in ("k.cu", "-o", "k.so", "-shared", "-cudart", "shared")
                     and not f.startswith("-I")]
    assert values["flags"][:len(compile_flags)] == compile_flags
    for flag in ("-std=c++17", "-O3", "-DNDEBUG", "--expt-relaxed-constexpr", "-gencode=arch=compute_90a,code=sm_90a"):
        assert flag in values["flags"]
    assert "-U__CUDA_NO_HALF_OPERATORS__" in values["flags"]
    assert not any(f.startswith("-I") or f in ("-shared", "-o") for f in values["flags"])
    assert values["cutlass_default"] == toolchain.cutlass_root
    assert 'os.environ.get("CUTLASS_PATH"' in text
    assert '["gelu_gemm.cpp", "gemmkit/torch_export_gemm.cpp", "gelu_gemm_kernel.cu"]' in text
    assert "include_dirs=[HERE] + CUTLASS_INCLUDES" in text
    assert 'CUDAExtension(\n            "gelu_gemm",' in text
    assert "{{" not in text


def test_default_sourcedir_is_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    gemmkit.emit.pytorch(spec(80), "here", 80)
    assert {p.name for p in tmp_path.iterdir()} == {"here_kernel.cu", "here.cpp", "setup.py", "gemmkit"}


def test_unsupported_op_types_are_refused(tmp_path):
    plan = f16_plan(90, layout="row")
    for op in (plan, "gemm", None):
        with pytest.raises(TypeError, match=f"Operation type {type(op).__name__} is not currently supported"):
            gemmkit.emit.pytorch(op, "x", 90, str(tmp_path))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["", "1gemm", "my-gemm", "my.gemm", "class", "aten", "gemmkit", 3])
def test_bad_names_are_refused_before_writing(tmp_path, name):
    with pytest.raises(gemmkit.ConfigError, match="name"):
        gemmkit.emit.pytorch(spec(80), name, 80, str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def conv_plan(cc, kind="fprop", kernel_cc=None):
    return gemmkit.Conv2d(kind=kind, element=np.float16, element_accumulator=np.float32, cc=cc, kernel_cc=kernel_cc)


# run's parameters after the output size dgrad and wgrad take first, as the reference's run spells them.
CONV_PARAMETERS = ("Tensor A, Tensor B, Tensor? C=None, int[2] stride=1, int[2] padding=0, int[2] dilation=1, "
                   "float alpha=1.0, float beta=0.0, str split_k_mode='serial', int split_k_slices=1")
CONV_EXPORTS = [  # (kind, kernel_cc, activation, family, split-K, run's first parameter, result, what it computes)
    ("fprop", 80, None, "sm80_conv2d", "SERIAL", "", "output", "torch.nn.functional.conv2d(A, B)"),
    ("fprop", 90, ("leaky_relu", 0.25), "sm90_conv2d", "NONE", "", "output", "torch.nn.functional.conv2d(A, B)"),
    ("dgrad", 80, None, "sm80_conv2d", "SERIAL", "int[4] input_size, ", "grad_input",
     "torch.nn.grad.conv2d_input(input_size, B, A)"),
    ("dgrad", 90, "relu", "sm90_conv2d", "NONE", "int[4] input_size, ", "grad_input",
     "torch.nn.grad.conv2d_input(input_size, B, A)"),
    ("wgrad", 80, ("leaky_relu", 0.25), "sm80_conv2d", "SERIAL", "int[4] weight_size, ", "grad_weight",
     "torch.nn.grad.conv2d_weight(B, weight_size, A)"),
    ("wgrad", 90, None, "sm90_conv2d", "NONE", "int[4] weight_size, ", "grad_weight",
     "torch.nn.grad.conv2d_weight(B, weight_size, A)"),
]


@pytest.mark.parametrize("kind, kernel_cc, activation, family, split_k, size, result, formula", CONV_EXPORTS)
def test_writes_a_conv2d_kernel_its_binding_and_setup(tmp_path, kind, kernel_cc, activation, family, split_k, size,
                                                      result, formula):
    plan = conv_plan(90, kind, kernel_cc)
    if activation is not None:
        plan.activation = activation
    op = plan.construct()
    assert op.family == gemmkit.KernelFamily[family]
    assert gemmkit.emit.pytorch(op, "my_conv", 90, str(tmp_path)) is None
    assert (tmp_path / "my_conv_kernel.cu").read_text() == _gemmkit.render(op).text
    binding = (tmp_path / "my_conv.cpp").read_text()
    assert f"// {kind} kernel\n//   {op.name()}\n" in binding
    for line in (f"/*kind=*/GK_TORCH_{kind.upper()},", "/*a=*/GK_DTYPE_F16,", "/*b=*/GK_DTYPE_F16,",
                 "/*c=*/GK_DTYPE_F16,", "/*d=*/GK_DTYPE_F16,", "/*alignment_a=*/8,", "/*alignment_b=*/8,",
                 "/*alignment_c=*/8,", "/*alignment_d=*/8,", f"/*split_k=*/GK_TORCH_SPLIT_K_{split_k},",
                 f"/*kernel_cc=*/{kernel_cc},", "/*unit_stride=*/0,",
                 "gk_torch_register_conv2d_v2(ns, kSchema, &kKernel, &gemmkit::torch_module::kConv2dEntryPoints)"):
        assert line in binding
    leaky = op.activation == gemmkit.Activation.leaky_relu
    assert f"/*takes_slope=*/{int(leaky)}," in binding
    slope = ", float slope=0.01" if leaky else ""
    assert f'"run({size}{CONV_PARAMETERS}{slope}) -> Tensor"' in binding
    doc = f'"{result} = {op.activation.name}(alpha * {formula} + beta * C) by the CUTLASS kernel {op.name()}"'
    assert doc in binding
    assert "{{" not in binding and "torch/" not in binding
    text = (tmp_path / "setup.py").read_text()
    assert '["my_conv.cpp", "gemmkit/torch_export_conv2d.cpp", "my_conv_kernel.cu"]' in text
    assert f"-gencode=arch=compute_90a,code={op.arch_flag()}" in setup_flags(tmp_path / "setup.py")["flags"]
    glue = (tmp_path / "gemmkit" / "torch_export_conv2d.cpp").read_text()
    assert 'extern "C" const char* gk_torch_register_conv2d_v2(' in glue
    assert '#include "gemmkit/torch_export_common.h"' in glue


def test_a_parallel_split_k_module_and_a_unit_stride_dgrad_kernel_say_so(tmp_path):
    """The glue refuses the split-K mode or the stride the exported kernel does not compute: the binding says which."""
    plan = conv_plan(80)
    plan.set_split_k("parallel", 3)
    x, w, y = (np.zeros(s, np.float16) for s in ((1, 7, 7, 256), (64, 1, 1, 256), (1, 7, 7, 64)))
    parallel = plan.spec_for(x, w, None, y)
    assert parallel.split_k_mode == gemmkit.SplitKMode.parallel
    gemmkit.emit.pytorch(parallel, "parallel_conv", 80, str(tmp_path / "parallel"))
    binding = (tmp_path / "parallel" / "parallel_conv.cpp").read_text()
    assert "/*split_k=*/GK_TORCH_SPLIT_K_PARALLEL," in binding and f"//   {parallel.name()}\n" in binding
    dgrad = conv_plan(80, "dgrad")
    dgrad.stride_support = "unity"
    gemmkit.emit.pytorch(dgrad.construct(), "unity_dgrad", 80, str(tmp_path / "unity"))
    binding = (tmp_path / "unity" / "unity_dgrad.cpp").read_text()
    assert "/*unit_stride=*/1," in binding and "/*split_k=*/GK_TORCH_SPLIT_K_SERIAL," in binding


def grouped_spec(cc, kernel_cc=None, activation=None, layout_B="row"):
    plan = gemmkit.GroupedGemm(element=np.float16, layout_A="row", layout_B=layout_B, layout_C="row",
                               element_accumulator=np.float32, cc=cc, kernel_cc=kernel_cc)
    if activation is not None:
        plan.activation = activation
    return plan.construct()


GROUPED_EXPORTS = [  # (cc, kernel_cc, activation, layout_B, family)
    (90, None, None, "row", gemmkit.KernelFamily.sm90_grouped),
    (90, 80, "relu", "col", gemmkit.KernelFamily.sm80_grouped),
    (80, None, ("leaky_relu", 0.2), "row", gemmkit.KernelFamily.sm80_grouped),
]


@pytest.mark.parametrize("cc, kernel_cc, activation, layout_B, family", GROUPED_EXPORTS)
def test_writes_a_grouped_kernel_its_binding_and_setup(tmp_path, cc, kernel_cc, activation, layout_B, family):
    op = grouped_spec(cc, kernel_cc, activation, layout_B)
    assert op.family == family
    assert gemmkit.emit.pytorch(op, "my_grouped", cc, str(tmp_path)) is None
    # The kernel is the very source gemmkit runs (ptr-array SM90 or GemmGrouped SM80), fused activation included.
    assert (tmp_path / "my_grouped_kernel.cu").read_text() == _gemmkit.render(op).text
    binding = (tmp_path / "my_grouped.cpp").read_text()
    assert f"//   {op.name()}\n" in binding
    leaky = op.activation == gemmkit.Activation.leaky_relu
    slope = ", float slope=0.01" if leaky else ""
    assert (f'"run(Tensor[] As, Tensor[] Bs, Tensor[]? Cs=None, float alpha=1.0, float beta=0.0{slope}) -> Tensor[]"'
            in binding)
    assert f"/*takes_slope=*/{int(leaky)}," in binding
    assert "gk_torch_register_grouped_v1(ns, kSchema" in binding and "kGroupedEntryPoints" in binding
    assert f'"D[g] = {op.activation.name}(alpha * As[g] @ Bs[g] + beta * Cs[g])' in binding
    assert "{{" not in binding and "torch/" not in binding and "kGemmEntryPoints" not in binding
    # The glue declares the grouped registration; setup.py builds the same three sources with the kernel's flags.
    assert "gk_torch_register_grouped_v1" in (tmp_path / "gemmkit" / "torch_export.h").read_text()
    assert "gk_grouped_pack" in (tmp_path / "gemmkit" / "torch_module.h").read_text()
    assert (tmp_path / "gemmkit" / "grouped_entry.hpp").is_file()
    text = (tmp_path / "setup.py").read_text()
    assert '["my_grouped.cpp", "gemmkit/torch_export_grouped.cpp", "my_grouped_kernel.cu"]' in text
    assert f"-gencode=arch=compute_{op.arch_flag()[3:]},code={op.arch_flag()}" in setup_flags(tmp_path / "setup.py")[
        "flags"]


def test_grouped_and_gemm_bindings_differ_only_where_the_kernels_do(tmp_path):
    gemmkit.emit.pytorch(grouped_spec(90), "g", 90, str(tmp_path / "grouped"))
    gemmkit.emit.pytorch(spec(90), "g", 90, str(tmp_path / "gemm"))
    grouped, dense = ((tmp_path / kind / "g.cpp").read_text() for kind in ("grouped", "gemm"))
    assert "-> Tensor[]" in grouped and "-> Tensor\"" in dense
    assert "gk_torch_register_gemm_v1" in dense and "gk_torch_register_grouped_v1" not in dense
    # Both extensions carry the same glue files; each setup.py compiles its own kind's.
    for glue in ("torch_export_common.h", "torch_export_gemm.cpp", "torch_export_grouped.cpp"):
        assert filecmp.cmp(tmp_path / "grouped" / "gemmkit" / glue, tmp_path / "gemm" / "gemmkit" / glue, shallow=False)
    assert "gemmkit/torch_export_grouped.cpp" in (tmp_path / "grouped" / "setup.py").read_text()
    assert "gemmkit/torch_export_gemm.cpp" in (tmp_path / "gemm" / "setup.py").read_text()


def test_bias_kernels_are_refused_before_writing(tmp_path):
    plan = f16_plan(90, layout="row")
    plan.bias = "column"
    with pytest.raises(gemmkit.ConfigError, match="adds a bias vector"):
        gemmkit.emit.pytorch(plan.construct(), "biased", 90, str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_cc_must_be_the_ops(tmp_path):
    with pytest.raises(gemmkit.ConfigError, match="constructed for cc 90"):
        gemmkit.emit.pytorch(spec(90), "x", 80, str(tmp_path))


def test_setup_py_refuses_a_missing_cutlass(tmp_path):
    pytest.importorskip("torch")
    gemmkit.emit.pytorch(spec(80), "nocutlass", 80, str(tmp_path))
    env = dict(os.environ, CUTLASS_PATH=str(tmp_path / "nowhere"))
    result = subprocess.run([sys.executable, "setup.py", "--name"], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode != 0
    assert "nocutlass: CUTLASS headers not found under" in result.stderr
    ok = subprocess.run([sys.executable, "setup.py", "--name"], cwd=tmp_path, capture_output=True, text=True,
                        timeout=120)
    assert ok.returncode == 0 and ok.stdout.strip().endswith("nocutlass"), ok.stderr


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

# A JIT test's start: the walk-through's f16 plan (Gemm or GroupedGemm) for SM80, its kernel in gemmkit's cache.
JIT_SETUP = """
    import json, os, time, torch, numpy as np, gemmkit
    plan = gemmkit.{plan}(element=np.float16, layout="row", element_accumulator=np.float32, cc=80)
    op = plan.construct()
    cached = plan.compile()  # the kernel as gemmkit's cache holds it
    builds = gemmkit.cache_counters().builds
    out = os.environ["OUT_DIR"]
"""

JIT_BUILD = JIT_SETUP.format(plan="Gemm") + """
    first = gemmkit.emit.pytorch(op, "jit_gemm", 80, out + "/first", jit=True)  # also builds gemmkit's torch glue
    start = time.perf_counter()
    mod = gemmkit.emit.pytorch(op, "jit_gemm2", 80, out + "/second", jit=True)  # the usual case: all cached
    seconds = time.perf_counter() - start
    A = torch.empty(64, 32, dtype=torch.float16, device="meta")
    B = torch.empty(32, 48, dtype=torch.float16, device="meta")
    D = mod.run(A, B)
    errors = []
    host = (torch.zeros(64, 32, dtype=torch.float16), torch.zeros(32, 48, dtype=torch.float16))
    for args in [(A.float(), B), (A, B.mT), (A, B, None, 1.0, 2.0), host]:
        try:
            mod.run(*args)
        except ValueError as error:
            errors.append(str(error).splitlines()[0])
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():  # how torch.compile sees the op: its meta path, no GPU
        fake = mod.run(torch.empty(4, 64, 32, dtype=torch.float16, device="cuda"),
                       torch.empty(32, 48, dtype=torch.float16, device="cuda"))
    traced = torch.compile(lambda a, b: mod.run(a, b) + 1, fullgraph=True, backend="aot_eager")(A, B)
    again = gemmkit.emit.pytorch(op, "jit_gemm2", 80, out + "/again", jit=True) is mod  # loaded: no rebuild
    plan.activation = "relu"
    try:  # another kernel under a namespace this process registered already
        gemmkit.emit.pytorch(plan.construct(), "jit_gemm2", 80, out + "/other", jit=True)
        refused = ""
    except gemmkit.ConfigError as error:
        refused = str(error)
    build = mod.gemmkit_build
    print(json.dumps({"fake": [list(fake.shape), str(fake.device)], "traced": list(traced.shape), "again": again,
                      "refused": refused,"seconds": seconds, "binding_seconds": build.binding_seconds,
                      "first_glue_seconds": first.gemmkit_build.glue_seconds, "glue_seconds": build.glue_seconds,
                      "hit": build.kernel.cache_hit, "builds": gemmkit.cache_counters().builds - builds,
                      "kernel_name": mod.kernel_name, "op_name": op.name(),
                      "same_module": build.kernel.module_path == cached.module_path,
                      "library": build.kernel_library, "glue": build.glue_library, "extension": mod.__file__,
                      "shape": list(D.shape), "dtype": str(D.dtype), "device": str(D.device),
                      "ops_run": mod.run is torch.ops.jit_gemm2.run, "errors": errors}))
"""


@pytest.mark.compile
def test_jit_links_the_cached_kernel_and_compiles_only_the_binding(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "out"
    # A ninja that does not run (as on the GPU machine) must not matter: the JIT build does not use ninja.
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "ninja").write_text("#!/bin/sh\nexit 1\n")
    (fake_bin / "ninja").chmod(0o755)
    result = json.loads(run_isolated(JIT_BUILD, timeout=900, GEMMKIT_CACHE_DIR=str(tmp_path / "cache"),
                                     OUT_DIR=str(out), PATH=f"{fake_bin}:{os.environ['PATH']}"))
    print(f"\nJIT build with the kernel and gemmkit's torch glue cached: {result['seconds']:.1f} s (binding "
          f"{result['binding_seconds']:.1f} s); the glue's one-time build took {result['first_glue_seconds']:.1f} s")
    assert result["hit"] and result["builds"] == 0 and result["same_module"]
    assert result["first_glue_seconds"] > 0 and result["glue_seconds"] == 0
    assert result["kernel_name"] == result["op_name"]
    assert result["ops_run"]
    assert (result["shape"], result["dtype"], result["device"]) == ([64, 48], "torch.float16", "meta")
    assert result["fake"] == [[4, 64, 48], "cuda:0"] and result["traced"] == [64, 48]
    assert result["again"]
    assert "torch.ops.jit_gemm2 was registered in this process by another kernel" in result["refused"]
    assert "A has dtype Float but the kernel was built for Half" in result["errors"][0]
    assert "the kernel reads it row-major" in result["errors"][1]
    assert "beta is 2 but no C was given" in result["errors"][2]
    assert "A is on cpu; the kernel runs on CUDA tensors" in result["errors"][3]
    assert_only_the_binding_was_compiled(result, out / "second" / "build-jit", "jit_gemm2", tmp_path / "cache")


def assert_only_the_binding_was_compiled(result, build, name, cache):
    """No CUDA object was built: the binding links copies of the cached kernel and glue via $ORIGIN, and never
    libgemmkit."""
    assert sorted(p.name for p in build.rglob("*.o")) == [f"{name}.o"]
    library, glue = pathlib.Path(result["library"]), pathlib.Path(result["glue"])
    assert library.parent == build and glue.parent == build
    assert filecmp.cmp(library, next(cache.rglob("kernel.so")), shallow=False)
    dynamic = subprocess.run(["readelf", "-d", result["extension"]], capture_output=True, text=True).stdout
    assert f"Shared library: [{library.name}]" in dynamic and f"Shared library: [{glue.name}]" in dynamic
    assert "[$ORIGIN]" in dynamic
    assert "libgemmkit" not in dynamic and "_gemmkit" not in dynamic
    # Nothing the binding defines is shared with another extension: a GNU unique symbol (an inline variable) is one
    # object for the whole process, and a second exported kernel then ran the first one's entry points.
    symbols = subprocess.run(["readelf", "-sW", "--dyn-syms", result["extension"]], capture_output=True, text=True)
    assert " UNIQUE " not in symbols.stdout, symbols.stdout


GROUPED_JIT_BUILD = JIT_SETUP.format(plan="GroupedGemm") + """
    gemmkit.emit.pytorch(op, "jit_grouped", 80, out + "/first", jit=True)  # also builds gemmkit's torch glue
    start = time.perf_counter()
    mod = gemmkit.emit.pytorch(op, "jit_grouped2", 80, out + "/second", jit=True)  # the usual case: all cached
    seconds = time.perf_counter() - start
    half = lambda *shape, device="meta": torch.empty(*shape, dtype=torch.float16, device=device)
    Ds = mod.run([half(64, 32), half(0, 16), half(24, 8)], [half(32, 48), half(16, 8), half(8, 0)])
    errors = []
    for args in [([half(64, 32), half(64, 32).float()], [half(32, 48)] * 2),
                 ([half(64, 32)], [half(48, 32).mT]),
                 ([half(64, 32)] * 2, [half(32, 48)]),
                 ([half(64, 32)], [half(32, 48)], [half(64, 48)] * 2),
                 ([half(64, 32)], [half(32, 48)], None, 1.0, 2.0),
                 ([half(64, 32)] * 2, [half(32, 48), half(31, 48)]),
                 ([half(64, 32), half(64, 0)], [half(32, 48), half(0, 48)]),
                 ([half(2, 64, 32)], [half(32, 48)]),
                 ([half(64, 32, device="cpu")], [half(32, 48, device="cpu")]),
                 ([half(64, 32)], [half(32, 48, device="cpu")]),
                 ([], [])]:
        try:
            mod.run(*args)
            errors.append("")
        except ValueError as error:
            errors.append(str(error).splitlines()[0])
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():  # how torch.compile sees the op: its meta path, no GPU
        fake = mod.run([half(64, 32, device="cuda")], [half(32, 48, device="cuda")], [half(64, 48, device="cuda")],
                       1.0, 1.0)
    traced = torch.compile(lambda a, b: [d + 1 for d in mod.run(a, b)], fullgraph=True, backend="aot_eager")(
        [half(64, 32), half(16, 8)], [half(32, 48), half(8, 24)])
    build = mod.gemmkit_build
    print(json.dumps({"fake": [[list(d.shape), str(d.device)] for d in fake], "traced": [list(d.shape) for d in traced],
                      "seconds": seconds, "binding_seconds": build.binding_seconds, "glue_seconds": build.glue_seconds,
                      "hit": build.kernel.cache_hit, "builds": gemmkit.cache_counters().builds - builds,
                      "kernel_name": mod.kernel_name, "op_name": op.name(),
                      "same_module": build.kernel.module_path == cached.module_path,
                      "library": build.kernel_library, "glue": build.glue_library, "extension": mod.__file__,
                      "shapes": [list(d.shape) for d in Ds], "dtypes": sorted({str(d.dtype) for d in Ds}),
                      "devices": sorted({str(d.device) for d in Ds}),
                      "ops_run": mod.run is torch.ops.jit_grouped2.run, "errors": errors}))
"""


@pytest.mark.compile
def test_grouped_jit_links_the_cached_kernel_and_compiles_only_the_binding(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "out"
    result = json.loads(run_isolated(GROUPED_JIT_BUILD, timeout=900, GEMMKIT_CACHE_DIR=str(tmp_path / "cache"),
                                     OUT_DIR=str(out)))
    print(f"\ngrouped JIT build with the kernel and gemmkit's torch glue cached: {result['seconds']:.1f} s (binding "
          f"{result['binding_seconds']:.1f} s)")
    assert result["hit"] and result["builds"] == 0 and result["same_module"]
    assert result["glue_seconds"] == 0
    assert result["kernel_name"] == result["op_name"] and result["ops_run"]
    # Empty groups are allowed: their D is empty.
    assert result["shapes"] == [[64, 48], [0, 8], [24, 0]]
    assert (result["dtypes"], result["devices"]) == (["torch.float16"], ["meta"])
    assert result["fake"] == [[[64, 48], "cuda:0"]] and result["traced"] == [[64, 48], [16, 24]]
    errors = result["errors"]
    assert "As[1] has dtype Float but the kernel was built for Half" in errors[0]
    assert "Bs[0] has shape [32, 48] and strides [1, 32] but the kernel reads it row-major" in errors[1]
    assert "As has 2 tensors, Bs 1; pass one A, B per group" in errors[2]
    assert "As has 1 tensors, Bs 1, Cs 2; pass one A, B and C per group" in errors[3]
    assert "beta is 2 but no Cs were given" in errors[4]
    assert "As[1] is 64 x 32 (M x K) but Bs[1] is 31 x 48 (K x N)" in errors[5]
    assert "As[1] and Bs[1]: K is 0 but D[1] is 64 x 48; the kernel needs K >= 1" in errors[6]
    assert "As[0] must be a matrix (rank 2): a grouped kernel takes one matrix per group" in errors[7]
    assert "As[0] is on cpu; the kernel runs on CUDA tensors" in errors[8]
    assert "Bs[0] is on cpu but As[0] is on meta" in errors[9]
    assert "As is empty; pass at least one group" in errors[10]
    assert_only_the_binding_was_compiled(result, out / "second" / "build-jit", "jit_grouped2", tmp_path / "cache")


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


AOT_IMPORT = """
    import json, sys, torch
    sys.path.insert(0, sys.argv[1])
    import aot_gemm
    D = aot_gemm.run(torch.empty(2, 64, 32, dtype=torch.float16, device="meta"),
                     torch.empty(32, 48, dtype=torch.float16, device="meta"))
    print(json.dumps({"kernel_name": aot_gemm.kernel_name, "shape": list(D.shape)}))
"""


@pytest.mark.compile
def test_setup_py_builds_on_a_clean_folder(tmp_path):
    """The reference's extension does not build for SM90 kernels with fused epilogues; ours does, from source."""
    pytest.importorskip("torch")
    op = spec(90, "relu")
    out = tmp_path / "aot"
    gemmkit.emit.pytorch(op, "aot_gemm", 90, str(out))
    env = dict(os.environ, MAX_JOBS="2")
    result = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=out, env=env,
                            capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    built = list(out.glob("aot_gemm*.so"))
    assert len(built) == 1
    imported = subprocess.run([sys.executable, "-c", AOT_IMPORT.replace("\n    ", "\n"), str(out)],
                              capture_output=True, text=True, timeout=300)
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout.splitlines()[-1]) == {"kernel_name": op.name(), "shape": [2, 64, 48]}


GROUPED_AOT_IMPORT = """
    import json, sys, torch
    sys.path.insert(0, sys.argv[1])
    import aot_grouped
    half = lambda *shape: torch.empty(*shape, dtype=torch.float16, device="meta")
    Ds = aot_grouped.run([half(64, 32), half(8, 16)], [half(32, 48), half(16, 8)], [half(64, 48), half(8, 8)], 1.0, 1.0)
    print(json.dumps({"kernel_name": aot_grouped.kernel_name, "shapes": [list(d.shape) for d in Ds]}))
"""


@pytest.mark.compile
def test_grouped_setup_py_builds_on_a_clean_folder(tmp_path):
    """The grouped extension from source: the CUTLASS 2.x GemmGrouped kernel with a fused ReLU, the glue, the
    binding."""
    pytest.importorskip("torch")
    op = grouped_spec(80, activation="relu")
    out = tmp_path / "aot"
    gemmkit.emit.pytorch(op, "aot_grouped", 80, str(out))
    result = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=out,
                            env=dict(os.environ, MAX_JOBS="2"), capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert len(list(out.glob("aot_grouped*.so"))) == 1
    imported = subprocess.run([sys.executable, "-c", GROUPED_AOT_IMPORT.replace("\n    ", "\n"), str(out)],
                              capture_output=True, text=True, timeout=300)
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout.splitlines()[-1]) == {"kernel_name": op.name(), "shapes": [[64, 48], [8, 8]]}


CONV_JIT_BUILD = """
    import json, os, torch, numpy as np, gemmkit
    out = os.environ["OUT_DIR"]
    def plan(kind, kernel_cc):
        return gemmkit.Conv2d(kind=kind, element=np.float16, element_accumulator=np.float32, cc=90,
                              kernel_cc=kernel_cc)
    ops = {"wgrad80": plan("wgrad", 80).construct(), "dgrad90": plan("dgrad", 90).construct()}
    gemmkit.compile_many(list(ops.values()))
    mods = {key: gemmkit.emit.pytorch(op, "jit_" + key, 90, out + "/" + key, jit=True) for key, op in ops.items()}
    half = lambda *shape: torch.empty(*shape, dtype=torch.float16, device="meta").to(
        memory_format=torch.channels_last)
    dy, x, w = half(2, 24, 8, 8), half(2, 16, 8, 8), half(24, 16, 3, 3)
    dw = mods["wgrad80"].run((24, 16, 3, 3), dy, x, None, 1, 1, split_k_mode="serial", split_k_slices=3)
    dx = mods["dgrad90"].run([2, 16, 8, 8], dy, w, half(2, 16, 8, 8), padding=1, beta=1.0)
    errors = []
    for key, args, kwargs in [
            ("wgrad80", ((24, 16, 3, 3), half(2, 24, 7, 8), x), dict(padding=1)),
            ("wgrad80", ((24, 8, 3, 3), dy, x), dict(padding=1)),
            ("wgrad80", ((24, 16, 3, 3), dy, x), dict(padding=1, split_k_mode="parallel", split_k_slices=2)),
            ("wgrad80", ((24, 16, 3, 3), dy, x), dict(padding=1, split_k_mode="banana")),
            ("wgrad80", ((24, 16, 3, 3), half(0, 24, 8, 8), half(0, 16, 8, 8)), dict(padding=1)),
            ("dgrad90", ((2, 16, 16, 16), dy, w), dict(stride=2, padding=1)),
            ("dgrad90", ((2, 16, 8, 8), dy, w), dict(padding=1, split_k_slices=2)),
            ("dgrad90", ((2, 16, 8), dy, w), dict(padding=1)),
            ("dgrad90", ((2, 16, 8, 8), dy, w.contiguous()), dict(padding=1)),
            ("dgrad90", ((2, 16, 8, 8), dy, w, half(2, 16, 8, 7)), dict(padding=1, beta=1.0))]:
        try:
            mods[key].run(*args, **kwargs)
            errors.append("")
        except ValueError as error:
            errors.append(str(error).splitlines()[0])
    print(json.dumps({"dw": [list(dw.shape), dw.is_contiguous(memory_format=torch.channels_last)],
                      "dx": [list(dx.shape), dx.is_contiguous(memory_format=torch.channels_last)],
                      "names": {key: mod.kernel_name == ops[key].name() for key, mod in mods.items()},
                      "errors": errors}))
"""


@pytest.mark.compile
def test_conv2d_dgrad_and_wgrad_exports_build_and_check_their_arguments(tmp_path):
    """The SM80 wgrad and SM90 dgrad exports built with jit=True (the conv glue compiled for this torch), run on meta
    tensors: the outputs' shapes and memory format, and the glue's refusals, which come before anything runs."""
    pytest.importorskip("torch")
    result = json.loads(run_isolated(CONV_JIT_BUILD, timeout=1200, GEMMKIT_CACHE_DIR=str(tmp_path / "cache"),
                                     OUT_DIR=str(tmp_path / "out")))
    assert result["names"] == {"wgrad80": True, "dgrad90": True}
    assert result["dw"] == [[24, 16, 3, 3], True] and result["dx"] == [[2, 16, 8, 8], True]
    errors = result["errors"]
    assert ("A (grad_output) has shape [2, 24, 7, 8] but the convolution of an input (2, 16, 8, 8) with a filter "
            "(24, 16, 3, 3) (stride 1x1, padding 1x1, dilation 1x1) gives (2, 24, 8, 8)") in errors[0]
    assert "B (input) has 16 channels but weight_size 8; the kernel computes groups = 1" in errors[1]
    assert "split_k_mode 'parallel' needs the parallel split-K kernel" in errors[2]
    assert "split_k_mode is 'banana'; pass 'serial' or 'parallel'" in errors[3]
    assert "B (input) has an empty batch, over which grad_weight sums nothing" in errors[4]
    assert "computes dgrad at unit stride only" in errors[5] and "kernel_cc=80" in errors[5]
    assert "which has no split-K; split_k_slices is 2" in errors[6] and "kernel_cc=80" in errors[6]
    assert "input_size must be 4 extents" in errors[7]
    assert ("B (weight) has shape [24, 16, 3, 3] and strides [144, 9, 3, 1] but the kernel reads channels_last"
            in errors[8])
    assert "C has shape [2, 16, 8, 7] but the grad_input is (2, 16, 8, 8)" in errors[9]


# ---- gpu tier: the exported module on the device --------------------------------------------------------------


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The walk-through's f16 Gemm (and a fused-ReLU one) for this GPU, exported and built with jit=True."""
    torch = pytest.importorskip("torch")
    cc = gemmkit.device_cc()
    out = tmp_path_factory.mktemp("exported")
    plain = gemmkit.emit.pytorch(spec(cc), "gk_test_gemm", cc, str(out / "gemm"), jit=True)
    relu = gemmkit.emit.pytorch(spec(cc, "relu"), "gk_test_gemm_relu", cc, str(out / "relu"), jit=True)
    return torch, plain, relu


def small_integers(torch, shape, seed, low=-3, high=3):
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(low, high, shape, generator=generator).half().cuda()


def exact(torch, A, B, C=None, alpha=1.0, beta=0.0, relu=False):
    """alpha * A @ B + beta * C in float64, rounded once to f16 as the kernel's f32 epilogue does (every value here
    is an integer below 2^24, so the f32 sums are exact)."""
    z = alpha * torch.matmul(A.double(), B.double()) + (beta * C.double() if C is not None else 0.0)
    return (torch.relu(z) if relu else z).half()


@pytest.mark.gpu
def test_exported_gemm_matches_matmul(exported):
    """The reference's test_gemm: every call form of run against A @ B, and 2 A @ B - C."""
    torch, mod, _ = exported
    A, B, C = (small_integers(torch, s, i) for i, s in enumerate([(1024, 512), (512, 256), (1024, 256)]))
    for D in (mod.run(A, B), mod.run(A, B, C), mod.run(A, B, C, 1.0), mod.run(A, B, C, 1.0, 0.0)):
        assert D.dtype == torch.float16 and D.device == A.device
        torch.testing.assert_close(D, exact(torch, A, B), rtol=0, atol=0)
        torch.testing.assert_close(D, torch.matmul(A, B))
    torch.testing.assert_close(mod.run(A, B, C, 2.0, -1.0), exact(torch, A, B, C, 2.0, -1.0), rtol=0, atol=0)
    torch.testing.assert_close(mod.run(A, B, C=C, beta=1.0), exact(torch, A, B, C, 1.0, 1.0), rtol=0, atol=0)


@pytest.mark.gpu
def test_exported_fused_relu_and_batches(exported):
    torch, mod, relu = exported
    A, B = small_integers(torch, (3, 128, 64), 5), small_integers(torch, (64, 96), 6)
    C = small_integers(torch, (3, 128, 96), 7)
    torch.testing.assert_close(relu.run(A, B, C, 1.0, 1.0), exact(torch, A, B, C, 1.0, 1.0, relu=True), rtol=0, atol=0)
    B3 = small_integers(torch, (3, 64, 96), 8)
    torch.testing.assert_close(mod.run(A, B3), exact(torch, A, B3), rtol=0, atol=0)
    torch.testing.assert_close(mod.run(A[0], B3), exact(torch, A[0], B3), rtol=0, atol=0)  # A broadcast


@pytest.mark.gpu
def test_exported_gemm_refuses_what_its_kernel_cannot_read(exported):
    torch, mod, _ = exported
    A, B = small_integers(torch, (128, 64), 9), small_integers(torch, (64, 96), 10)
    cases = [((A.float(), B), "A has dtype Float but the kernel was built for Half"),
             ((A, B.cpu()), "B is on cpu but A is on cuda"),
             ((A, B.mT.contiguous().mT), "the kernel reads it row-major"),
             ((small_integers(torch, (128, 66), 11)[:, 1:65], B), "multiples of 8 elements"),
             ((A, B, small_integers(torch, (127, 96), 12)), "C is 127 x 96 but A @ B is 128 x 96"),
             ((A, small_integers(torch, (63, 96), 13)), "their K extents must agree")]
    for args, message in cases:
        with pytest.raises(ValueError, match=message):
            mod.run(*args)


@pytest.mark.gpu
def test_exported_gemm_on_the_current_stream_in_a_cuda_graph_and_torch_compile(exported):
    torch, mod, _ = exported
    A, B = small_integers(torch, (256, 128), 14), small_integers(torch, (128, 64), 15)
    mod.run(A, B)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # captured on torch's capture stream, the op's current stream
        D = mod.run(A, B)
    A.copy_(small_integers(torch, (256, 128), 16))
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(D, exact(torch, A, B), rtol=0, atol=0)
    # torch.compile traces the op through its meta path (no graph break) and runs the kernel.
    compiled = torch.compile(lambda a, b: mod.run(a, b) * 2, fullgraph=True)
    torch.testing.assert_close(compiled(A, B), exact(torch, A, B, alpha=2.0), rtol=0, atol=0)


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


# ---- gpu tier: the exported grouped module (the reference's grouped walk-through) -------------------------------


@pytest.fixture(scope="module")
def exported_grouped(tmp_path_factory):
    """The walk-through's f16 GroupedGemm exported with jit=True: SM90 ptr-array on an SM90 GPU, the SM80
    GemmGrouped (kernel_cc=80), and the SM90 one with a fused ReLU."""
    torch = pytest.importorskip("torch")
    cc = gemmkit.device_cc()
    out = tmp_path_factory.mktemp("exported_grouped")
    modules = {}
    for key, kernel_cc, activation in [("native", None, None), ("sm80", 80, None), ("relu", None, "relu")]:
        op = grouped_spec(cc, kernel_cc, activation)
        modules[key] = gemmkit.emit.pytorch(op, f"gk_test_grouped_{key}", cc, str(out / key), jit=True)
    return torch, modules


def walkthrough_operands(torch, count=50, seed=2023):
    """The reference's workload (M, N, K from {128, 256, 512, 1024}) in small integers."""
    shapes = walkthrough_shapes(count, seed)
    As = [small_integers(torch, (m, k), 3 * g) for g, (m, n, k) in enumerate(shapes)]
    Bs = [small_integers(torch, (k, n), 3 * g + 1) for g, (m, n, k) in enumerate(shapes)]
    return As, Bs


@pytest.mark.gpu
@pytest.mark.parametrize("key", ["native", "sm80"])
def test_exported_grouped_walkthrough_matches_matmul(exported_grouped, key):
    """GroupedGemm -> emit.pytorch(jit=True) -> run -> compared with [a @ b ...], on both grouped families."""
    torch, modules = exported_grouped
    mod = modules[key]
    As, Bs = walkthrough_operands(torch)
    Ds = mod.run(As, Bs)
    assert len(Ds) == 50
    for g, (a, b, d) in enumerate(zip(As, Bs, Ds)):
        assert d.dtype == torch.float16 and d.device == a.device and d.is_contiguous(), g
        torch.testing.assert_close(d, exact(torch, a, b), rtol=0, atol=0, msg=lambda m: f"group {g}: {m}")
        torch.testing.assert_close(d, a @ b, msg=lambda m: f"group {g}: {m}")
    Cs = [small_integers(torch, (a.shape[0], b.shape[1]), 100 + g) for g, (a, b) in enumerate(zip(As, Bs))]
    for a, b, c, d in zip(As, Bs, Cs, mod.run(As, Bs, Cs, 2.0, -1.0)):
        torch.testing.assert_close(d, exact(torch, a, b, c, 2.0, -1.0), rtol=0, atol=0)


@pytest.mark.gpu
def test_exported_grouped_fused_relu_and_empty_groups(exported_grouped):
    torch, modules = exported_grouped
    shapes = [(128, 64, 96), (0, 64, 96), (64, 32, 0), (8, 16, 24), (256, 128, 64)]  # (m, k, n)
    As = [small_integers(torch, (m, k), g) for g, (m, k, n) in enumerate(shapes)]
    Bs = [small_integers(torch, (k, n), 10 + g) for g, (m, k, n) in enumerate(shapes)]
    Cs = [small_integers(torch, (m, n), 20 + g) for g, (m, k, n) in enumerate(shapes)]
    Ds = modules["relu"].run(As, Bs, Cs, 1.0, 1.0)
    assert [tuple(d.shape) for d in Ds] == [(m, n) for m, k, n in shapes]
    for a, b, c, d in zip(As, Bs, Cs, Ds):
        torch.testing.assert_close(d, exact(torch, a, b, c, 1.0, 1.0, relu=True), rtol=0, atol=0)
    # Every group empty: nothing is launched, the outputs are still there.
    assert [tuple(d.shape) for d in modules["native"].run(As[1:3], Bs[1:3])] == [(0, 96), (64, 0)]


@pytest.mark.gpu
def test_exported_grouped_refuses_with_the_group_and_the_operand(exported_grouped):
    torch, modules = exported_grouped
    mod = modules["native"]
    A, B = small_integers(torch, (128, 64), 30), small_integers(torch, (64, 96), 31)
    cases = [(([A, A.float()], [B, B]), "As\\[1\\] has dtype Float but the kernel was built for Half"),
             (([A, A], [B, B.cpu()]), "Bs\\[1\\] is on cpu but As\\[0\\] is on cuda"),
             (([A], [B.mT.contiguous().mT]), "Bs\\[0\\] has shape .* but the kernel reads it row-major"),
             (([A, small_integers(torch, (128, 66), 32)[:, 1:65]], [B, B]), "As\\[1\\]: its leading dimension 66"),
             (([A], [B], [small_integers(torch, (127, 96), 33)]), "Cs\\[0\\] is 127 x 96 but As\\[0\\] @ Bs\\[0\\]"),
             (([A, A], [B]), "As has 2 tensors, Bs 1"),
             (([A, small_integers(torch, (128, 0), 34)], [B, small_integers(torch, (0, 96), 35)]), "K is 0")]
    for args, message in cases:
        with pytest.raises(ValueError, match=message):
            mod.run(*args)
    # The SM80 kernel reads whole vectors: a row of 100 halves is refused, not read past its end.
    with pytest.raises(ValueError, match="Bs\\[0\\] is 64 x 100: its rows \\(100 elements\\) must be a multiple of 8"):
        modules["sm80"].run([A], [small_integers(torch, (64, 104), 36)[:, :100]])


@pytest.mark.gpu
def test_exported_grouped_on_the_current_stream_in_a_cuda_graph_and_torch_compile(exported_grouped):
    torch, modules = exported_grouped
    mod = modules["native"]
    As, Bs = walkthrough_operands(torch, count=8, seed=7)
    for a, b, d in zip(As, Bs, doubled_on_a_side_stream(torch, mod.run, As, Bs)):
        torch.testing.assert_close(d, exact(torch, a, b, alpha=2.0), rtol=0, atol=0)
    mod.run(As, Bs)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # the metadata copy and the launch are captured; the copy's pinned buffer is kept
        Ds = mod.run(As, Bs)
    for replay in range(3):
        for g, a in enumerate(As):
            a.copy_(small_integers(torch, tuple(a.shape), 1000 * replay + g))
        graph.replay()
        torch.cuda.synchronize()
        for g, (a, b, d) in enumerate(zip(As, Bs, Ds)):
            torch.testing.assert_close(d, exact(torch, a, b), rtol=0, atol=0, msg=lambda m: f"replay {replay}: {m}")
    compiled = torch.compile(lambda a, b: [d * 2 for d in mod.run(a, b)], fullgraph=True)
    for a, b, d in zip(As, Bs, compiled(As, Bs)):
        torch.testing.assert_close(d, exact(torch, a, b, alpha=2.0), rtol=0, atol=0)


# ---- gpu tier: exported Conv2d kernels, fprop, dgrad and wgrad, CUTLASS 2.x (kernel_cc=80) and SM90 ------------


@pytest.fixture(scope="module")
def exported_convs(tmp_path_factory):
    """f16 Conv2d kernels of each kind for this GPU, kernel_cc=80 (fprop with the optimized iterators: the export
    takes them) and the GPU's own (SM90 on an H200), plus a kernel_cc=80 parallel split-K wgrad module, exported
    and built with jit=True; keyed (kind, kernel_cc) and "wgrad_parallel"."""
    torch = pytest.importorskip("torch")
    cc = gemmkit.device_cc()
    ops = {}
    for kind in ("fprop", "dgrad", "wgrad"):
        for kernel_cc in sorted({80, cc if cc == 90 else 80}):
            plan = gemmkit.Conv2d(kind=kind, element=torch.float16, element_accumulator=torch.float32, cc=cc,
                                  kernel_cc=kernel_cc)
            if (kind, kernel_cc) == ("fprop", 80):
                plan.iterator_algorithm = "optimized"
            ops[kind, kernel_cc] = plan.construct()
    parallel = gemmkit.Conv2d(kind="wgrad", element=torch.float16, element_accumulator=torch.float32, cc=cc,
                              kernel_cc=80)
    parallel.set_split_k("parallel", 3)
    dy, x, dw = (np.zeros(s, np.float16) for s in ((2, 13, 11, 24), (2, 13, 11, 16), (24, 3, 3, 16)))  # NHWC, KRSC
    ops["wgrad_parallel"] = parallel.spec_for(dy, x, None, dw, padding=1)
    assert ops["wgrad_parallel"].split_k_mode == gemmkit.SplitKMode.parallel
    gemmkit.compile_many(list(ops.values()))  # in parallel; the exports below find them in the cache
    out = tmp_path_factory.mktemp("convs")
    modules = {}
    for key, op in ops.items():
        name = "gk_test_conv_" + ("_".join(map(str, key)) if isinstance(key, tuple) else key)
        modules[key] = gemmkit.emit.pytorch(op, name, cc, str(out / name), jit=True)
    return torch, modules


def conv_integers(torch, shape, seed, low=-2, high=3):
    """Small integers in channels_last memory: every sum here is exact in the kernels' f32 accumulators and the
    float64 reference, and both round it once to f16, so results compare exactly."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(low, high, shape, generator=generator).half().cuda().to(memory_format=torch.channels_last)


def conv_geometry(args):
    """(pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w) of run's keyword arguments."""
    pair = lambda value: (value, value) if isinstance(value, int) else tuple(value)  # noqa: E731
    return (*pair(args.get("padding", 0)), *pair(args.get("stride", 1)), *pair(args.get("dilation", 1)))


def conv_problem(x_size, w_size, args):
    """The gemmkit.shape problem of an input (N, C, H, W) and a filter (K, C, R, S) under run's keyword arguments."""
    n, c, h, w = x_size
    k, _, r, s = w_size
    return gemmkit.shape.Conv2DProblemSize(n, h, w, c, k, r, s, c, *conv_geometry(args))


@pytest.mark.gpu
@pytest.mark.parametrize("kernel_cc", [80, 90])
def test_exported_conv2d_fprop_matches_torch_conv2d(exported_convs, kernel_cc):
    torch, modules = exported_convs
    mod = modules.get(("fprop", kernel_cc))
    if mod is None:
        pytest.skip(f"kernel_cc={kernel_cc} conv kernels need an SM90 GPU")
    x, w = conv_integers(torch, (2, 16, 13, 11), 1), conv_integers(torch, (24, 16, 3, 3), 2)
    for args in (dict(), dict(padding=1), dict(stride=2, padding=(1, 2)), dict(stride=(1, 2), dilation=2)):
        y = mod.run(x, w, **args)
        expected = torch.nn.functional.conv2d(x.double(), w.double(), **args)
        assert y.dtype == torch.float16 and y.is_contiguous(memory_format=torch.channels_last)
        torch.testing.assert_close(y, expected.half(), rtol=0, atol=0, msg=lambda m: f"{args}: {m}")
    C = conv_integers(torch, (2, 24, 13, 11), 3)
    y = mod.run(x, w, C, 1, 1, alpha=2.0, beta=-1.0)
    expected = 2.0 * torch.nn.functional.conv2d(x.double(), w.double(), padding=1) - C.double()
    torch.testing.assert_close(y, expected.half(), rtol=0, atol=0)
    if kernel_cc == 80:  # serial split-K: the slices add into the output in turn, exactly here
        for slices in (2, 3):
            split = mod.run(x, w, C, 1, 1, alpha=1.0, beta=1.0, split_k_mode="serial", split_k_slices=slices)
            expected = torch.nn.functional.conv2d(x.double(), w.double(), padding=1) + C.double()
            torch.testing.assert_close(split, expected.half(), rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel_cc", [80, 90])
def test_exported_conv2d_dgrad_matches_conv2d_input(exported_convs, kernel_cc):
    torch, modules = exported_convs
    mod = modules.get(("dgrad", kernel_cc))
    if mod is None:
        pytest.skip(f"kernel_cc={kernel_cc} conv kernels need an SM90 GPU")
    input_size, w = (2, 16, 13, 11), conv_integers(torch, (24, 16, 3, 3), 4)
    geometries = [dict(), dict(padding=1), dict(padding=(1, 2))]
    # CUTLASS 2.x strided dgrad takes strides (not dilations); SM90's TMA im2col dgrad takes dilations (unit stride).
    geometries += [dict(stride=2, padding=(1, 2)), dict(stride=(1, 2))] if kernel_cc == 80 else [
        dict(dilation=2, padding=2)]
    for seed, args in enumerate(geometries):
        ps = conv_problem(input_size, w.shape, args)
        dy = conv_integers(torch, (ps.N, ps.K, ps.P, ps.Q), 10 + seed)
        dx = mod.run(input_size, dy, w, **args)
        expected = torch.nn.grad.conv2d_input(input_size, w.double(), dy.double(), **args)
        assert dx.dtype == torch.float16 and dx.is_contiguous(memory_format=torch.channels_last)
        torch.testing.assert_close(dx, expected.half(), rtol=0, atol=0, msg=lambda m: f"{args}: {m}")
    dy = conv_integers(torch, (2, 24, 13, 11), 5)
    C = conv_integers(torch, input_size, 6)
    dx = mod.run(input_size, dy, w, C, 1, 1, alpha=2.0, beta=-1.0)
    expected = 2.0 * torch.nn.grad.conv2d_input(input_size, w.double(), dy.double(), padding=1) - C.double()
    torch.testing.assert_close(dx, expected.half(), rtol=0, atol=0)
    if kernel_cc == 80:
        split = mod.run(input_size, dy, w, C, 1, 1, beta=1.0, split_k_mode="serial", split_k_slices=3)
        expected = torch.nn.grad.conv2d_input(input_size, w.double(), dy.double(), padding=1) + C.double()
        torch.testing.assert_close(split, expected.half(), rtol=0, atol=0)
    else:
        with pytest.raises(ValueError, match="unit stride only.*kernel_cc=80"):
            mod.run((2, 16, 26, 22), dy, w, stride=2, padding=1)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel_cc", [80, 90])
def test_exported_conv2d_wgrad_matches_conv2d_weight(exported_convs, kernel_cc):
    torch, modules = exported_convs
    mod = modules.get(("wgrad", kernel_cc))
    if mod is None:
        pytest.skip(f"kernel_cc={kernel_cc} conv kernels need an SM90 GPU")
    x, weight_size = conv_integers(torch, (2, 16, 13, 11), 7), (24, 16, 3, 3)
    for seed, args in enumerate((dict(), dict(padding=1), dict(stride=2, padding=(1, 2)),
                                 dict(stride=(1, 2), dilation=2))):
        ps = conv_problem(x.shape, weight_size, args)
        dy = conv_integers(torch, (ps.N, ps.K, ps.P, ps.Q), 20 + seed)
        dw = mod.run(weight_size, dy, x, **args)
        expected = torch.nn.grad.conv2d_weight(x.double(), weight_size, dy.double(), **args)
        assert dw.dtype == torch.float16 and dw.is_contiguous(memory_format=torch.channels_last)
        torch.testing.assert_close(dw, expected.half(), rtol=0, atol=0, msg=lambda m: f"{args}: {m}")
    dy = conv_integers(torch, (2, 24, 13, 11), 8)
    C = conv_integers(torch, weight_size, 9)
    dw = mod.run(weight_size, dy, x, C, 1, 1, alpha=2.0, beta=-1.0)
    expected = 2.0 * torch.nn.grad.conv2d_weight(x.double(), weight_size, dy.double(), padding=1) - C.double()
    torch.testing.assert_close(dw, expected.half(), rtol=0, atol=0)
    expected = torch.nn.grad.conv2d_weight(x.double(), weight_size, dy.double(), padding=1) + C.double()
    if kernel_cc == 80:
        for slices in (2, 3, 7):
            split = mod.run(weight_size, dy, x, C, 1, 1, beta=1.0, split_k_mode="serial", split_k_slices=slices)
            torch.testing.assert_close(split, expected.half(), rtol=0, atol=0)
    else:
        with pytest.raises(ValueError, match="no split-K.*kernel_cc=80"):
            mod.run(weight_size, dy, x, C, 1, 1, beta=1.0, split_k_slices=3)


@pytest.mark.gpu
def test_exported_parallel_split_k_wgrad_matches_conv2d_weight(exported_convs):
    """The parallel split-K module: the conv kernel's partial sums, then the reduction kernel with the epilogue."""
    torch, modules = exported_convs
    mod = modules["wgrad_parallel"]
    x, weight_size = conv_integers(torch, (2, 16, 13, 11), 30), (24, 16, 3, 3)
    dy, C = conv_integers(torch, (2, 24, 13, 11), 31), conv_integers(torch, weight_size, 32)
    expected = 2.0 * torch.nn.grad.conv2d_weight(x.double(), weight_size, dy.double(), padding=1) - C.double()
    for slices in (1, 3, 7):
        dw = mod.run(weight_size, dy, x, C, 1, 1, 1, 2.0, -1.0, "parallel", slices)
        torch.testing.assert_close(dw, expected.half(), rtol=0, atol=0, msg=lambda m: f"{slices}: {m}")
    with pytest.raises(ValueError, match="is a parallel split-K module; pass split_k_mode='parallel'"):
        mod.run(weight_size, dy, x, C, 1, 1, beta=1.0, split_k_mode="serial", split_k_slices=3)
    with pytest.raises(ValueError, match="split_k_mode 'parallel' needs the parallel split-K kernel"):
        modules["wgrad", 80].run(weight_size, dy, x, padding=1, split_k_mode="parallel", split_k_slices=3)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel_cc", [80, 90])
def test_exported_conv2d_runs_the_references_problem(exported_convs, kernel_cc):
    """The reference's own export test: Conv2DProblemSize(1, 4, 4, 16, 8, 3, 3, 16, 0, 0, 3, 3, 1, 1), called as it
    calls run, alpha 1 and beta 0.5, on integers in [-4, 3]."""
    torch, modules = exported_convs
    if ("fprop", kernel_cc) not in modules:
        pytest.skip(f"kernel_cc={kernel_cc} conv kernels need an SM90 GPU")
    ps = gemmkit.shape.Conv2DProblemSize(1, 4, 4, 16, 8, 3, 3, 16, 0, 0, 3, 3, 1, 1)
    stride, padding = (ps.stride_h, ps.stride_w), (ps.pad_h, ps.pad_w)
    x_size, w_size, y_size = (ps.N, ps.C, ps.H, ps.W), (ps.K, ps.C, ps.R, ps.S), (ps.N, ps.K, ps.P, ps.Q)
    alpha, beta = 1.0, 0.5
    x, w = conv_integers(torch, x_size, 40, -4, 4), conv_integers(torch, w_size, 41, -4, 4)
    dy = conv_integers(torch, y_size, 42, -4, 4)
    geometry = dict(stride=stride, padding=padding)
    # Per kind: C, the expected result and the call, as the reference's test makes it.
    C = {kind: conv_integers(torch, size, seed, -4, 4)
         for seed, (kind, size) in enumerate((("fprop", y_size), ("dgrad", x_size), ("wgrad", w_size)), 43)}
    convs = {"fprop": torch.nn.functional.conv2d(x.double(), w.double(), **geometry),
             "dgrad": torch.nn.grad.conv2d_input(x_size, w.double(), dy.double(), **geometry),
             "wgrad": torch.nn.grad.conv2d_weight(x.double(), w_size, dy.double(), **geometry)}
    expected = {kind: (alpha * conv + beta * C[kind].double()).half() for kind, conv in convs.items()}
    operands = {"fprop": (x, w), "dgrad": (x_size, dy, w), "wgrad": (w_size, dy, x)}

    def run(kind, **split):
        return modules[kind, kernel_cc].run(*operands[kind], C[kind], stride, padding, alpha=alpha, beta=beta, **split)

    kinds = ["fprop", "wgrad"]
    if kernel_cc == 90:  # stride 3: SM90's TMA im2col dgrad takes unit strides only
        with pytest.raises(ValueError, match="unit stride only.*kernel_cc=80"):
            run("dgrad")
    else:
        kinds.append("dgrad")
    for kind in kinds:
        torch.testing.assert_close(run(kind), expected[kind], rtol=0, atol=0, msg=lambda m: f"{kind}: {m}")
    if kernel_cc == 80:  # serial split-K as the reference's test calls it (fprop and wgrad)
        for kind in ("fprop", "wgrad"):
            for slices in (3, 7):
                torch.testing.assert_close(run(kind, split_k_mode="serial", split_k_slices=slices), expected[kind],
                                           rtol=0, atol=0, msg=lambda m: f"{kind}, {slices} slices: {m}")


@pytest.mark.gpu
def test_exported_conv2d_refuses_what_its_kernel_cannot_read(exported_convs):
    torch, modules = exported_convs
    mod = modules["fprop", 80]
    x, w = conv_integers(torch, (2, 16, 8, 8), 4), conv_integers(torch, (24, 16, 3, 3), 5)
    cases = [((x.contiguous(), w), "channels_last"),
             ((x.float(), w), "A \\(input\\) has dtype Float but the kernel was built for Half"),
             ((x, conv_integers(torch, (24, 8, 3, 3), 6)), "groups = 1"),
             ((conv_integers(torch, (2, 12, 8, 8), 7), conv_integers(torch, (24, 12, 3, 3), 8)), "multiples of 8"),
             ((x, w, conv_integers(torch, (2, 24, 8, 8), 9)), r"C has shape \[2, 24, 8, 8\] but the output is"),
             ((x, conv_integers(torch, (24, 16, 11, 11), 10)), "larger than the padded input"),
             ((x, w, None, 1, 0, 1, 1.0, 0.0, "serial", 0), "split_k_slices is 0"),
             ((x.cpu(), w.cpu()), "A is on cpu; the kernel runs on CUDA tensors")]
    for args, message in cases:
        with pytest.raises(ValueError, match=message):
            mod.run(*args)
