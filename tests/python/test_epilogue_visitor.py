"""tests/python/test_epilogue_visitor.py: epilogue visitor trees from Python (gemmkit.epilogue.trace).

Unit tier (no nvcc, no GPU): tracing the reference notebook's function and the reference test suite's functions
gives the expected formulas, inputs and outputs; every rule of the tracer raises its error; a value used twice is one
node; the activation and reduction functions run eagerly on numpy arrays; setting a traced tree on a plan (CUTLASS
3.x and 2.x kernels) names and renders its kernel; gemmkit.Tensor; run() hands visitor_args to the C++ plan;
CUDAEventProfiler.
GPU tier (marker gpu, torch on CUDA): the reference's compute, load, store and mixed-DAG cases (evt_*_sm80_90.py)
on both kernel generations, each against a float64 torch reference of the same inputs, run through the traced
function itself; host (numpy) tensors; refused visitor tensors leave D untouched."""
import dataclasses
import re
from typing import Callable, Optional

import numpy as np
import pytest

import gemmkit
import gpu_specs
from gemmkit import _gemmkit
from gemmkit.epilogue import (gelu, leaky_relu, max, maximum, multiply_add, permute, relu, reshape, sigmoid, sum,
                              tanh, trace)

T = gemmkit.Tensor
L, M, N = 6, 512, 256  # the examples' (L, M, N) in the unit tier, as the reference's interface tests
SM90_DEFAULT = "cutlass3x_sm90_tensorop_s0x0x0gemm_f16_f16_f32_f16_f16_256x256x64_2x1x1_0_ttt_align8"
SM80_DEFAULT = "cutlass_tensorop_f16_s16816gemm_f16_256x128_64x3_tt_align8"


def f16(*shape, **kwargs):
    return T(element=np.float16, shape=shape, **kwargs)


def f32(*shape):
    return T(element=np.float32, shape=shape)


def sm90_plan(**kwargs):
    return gemmkit.Gemm(element=np.float16, layout=gemmkit.LayoutType.RowMajor, element_accumulator=np.float32,
                        cc=90, **kwargs)


def formulas(visitor):
    return str(visitor).splitlines()


# ---- the notebook's epilogue (04_epilogue_visitor.ipynb) ------------------------------------------------------------


# The notebook's function and the reference's mixed DAG, as the Python tier's prebuild list (gpu_specs) has them.
example_epilogue = gpu_specs.notebook_epilogue
evt_mixed_dag = gpu_specs.reductions_epilogue


def notebook_examples(m=M, n=N, tensors=np):
    half = getattr(tensors, "float16")  # numpy's or torch's: each module's zeros takes its own dtype
    return {"accum": T(element=np.float32, shape=(m, n), layout_tag=gemmkit.LayoutType.RowMajor), "alpha": 0.5,
            "C": tensors.zeros((m, n), dtype=half), "beta": 0.5, "aux": tensors.zeros((m, n), dtype=half),
            "bias": tensors.zeros((m, 1), dtype=half), "D": tensors.zeros((m, n), dtype=half),
            "F": tensors.zeros((m, n), dtype=half)}


def test_the_notebook_epilogue_traces_to_its_formulas():
    visitor = trace(example_epilogue, notebook_examples())
    assert formulas(visitor) == ["F = ((alpha * accum) + ((beta * C) + aux))",
                                 "D = ((relu((F + 1)) + bias) + F)"]
    assert visitor.inputs == ["alpha", "beta", "aux", "bias"]
    assert visitor.outputs == ["F"]
    assert visitor.return_names == ("D", "F")
    assert visitor.epilogue.reads_source
    canonical = visitor.epilogue.canonical()
    assert "matrix,aux,f16,RowMajor" in canonical and "column_broadcast,bias,f16" in canonical
    assert "store,F,f16,RowMajor" in canonical
    assert repr(visitor).startswith(f"<gemmkit.epilogue.trace(notebook_epilogue) {visitor.epilogue.digest}:")


def test_the_notebook_epilogue_traces_from_torch_tensors():
    torch = pytest.importorskip("torch")
    visitor = trace(example_epilogue, notebook_examples(tensors=torch))
    assert visitor.epilogue == trace(example_epilogue, notebook_examples()).epilogue


def test_the_traced_function_runs_eagerly_as_its_reference():
    rng = np.random.default_rng(0)
    accum, C, aux = (rng.integers(-4, 5, (4, 8)).astype(np.float64) for _ in range(3))
    bias = rng.integers(-4, 5, (4, 1)).astype(np.float64)
    visitor = trace(example_epilogue, notebook_examples(4, 8))
    D, F = visitor(accum, 0.5, C, 0.5, aux, bias)
    np.testing.assert_array_equal(F, 0.5 * accum + 0.5 * C + aux)
    np.testing.assert_array_equal(D, np.maximum(F + 1, 0) + bias + F)


def mixed_examples(l=L, m=M, n=N, batched=True):
    full = (l, m, n) if batched else (m, n)
    return {"accum": f16(*full), "alpha": 1.0, "C": f16(*full), "beta": 1.0, "aux": f16(*full),
            "cbias": f16(m, 1), "rbias": f16(n), "D": f16(*full), "F": f16(*full), "F_row_max": f32(n),
            "E_col_max": f32(m, 1)}


@pytest.mark.parametrize("batched", [True, False])
def test_the_mixed_dag_traces_to_stores_and_reductions(batched):
    visitor = trace(evt_mixed_dag, mixed_examples(batched=batched))
    assert formulas(visitor) == [
        "F = ((alpha * accum) + ((beta * C) + aux))",
        "F_row_max = row_reduction_max(F)",
        "E_col_max = column_reduction_max(((relu((F + 1)) + cbias) + rbias))",
        "D = (((relu((F + 1)) + cbias) + rbias) + F)"]
    assert visitor.inputs == ["alpha", "beta", "aux", "cbias", "rbias"]
    assert visitor.outputs == ["F", "F_row_max", "E_col_max"]


# ---- shapes: what each example becomes ------------------------------------------------------------------------------


def evt_load(accum, C, aux):
    D = accum + C + aux
    return D


@pytest.mark.parametrize("example, node", [
    (f16(M, N), "matrix,aux,f16,RowMajor"),
    (f16(L, M, N), "matrix,aux,f16,RowMajor"),
    (T(element=np.float32, shape=(L, M, N), layout_tag=gemmkit.LayoutType.ColumnMajor), "matrix,aux,f32,ColumnMajor"),
    (np.zeros((M, N), np.float16, order="F"), "matrix,aux,f16,ColumnMajor"),
    (f16(N), "row_broadcast,aux,f16"),
    (f16(1, N), "row_broadcast,aux,f16"),
    (T(element=np.float32, shape=(L, 1, N)), "row_broadcast,aux,f32"),
    (f16(M, 1), "column_broadcast,aux,f16"),
    (f16(M, 1, stride=(1, 0)), "column_broadcast,aux,f16"),
    (f16(L, M, 1), "column_broadcast,aux,f16"),
    (0.5, "scalar,aux"),
])
def test_example_shapes_pick_the_node(example, node):
    examples = {"accum": f16(L, M, N), "C": f16(L, M, N), "aux": example, "D": f16(L, M, N)}
    assert node in trace(evt_load, examples).epilogue.canonical()


def evt_reductions(accum, alpha, C):
    acc_red = max(accum, dim=[1])
    F = alpha * accum
    F_red = sum(F, dim=[0, 1])
    D = F + C
    return D, F_red, acc_red


@pytest.mark.parametrize("example, kind", [
    (f32(N), "row_reduction"), (f32(1, N), "row_reduction"), (f32(L, 1, N), "row_reduction"),
    (f32(M, 1), "column_reduction"), (f32(L, M, 1), "column_reduction"),
    (f32(1), "scalar_reduction"), (f32(L, 1, 1), "scalar_reduction"), (0.0, "scalar_reduction"),
])
def test_reduction_kinds_come_from_the_output_example(example, kind):
    examples = {"accum": f16(L, M, N), "alpha": 2.0, "C": f16(L, M, N), "D": f16(L, M, N), "F_red": example,
                "acc_red": example}
    canonical = trace(evt_reductions, examples).epilogue.canonical()
    assert re.search(rf"{kind},F_red,(f32,)?sum\(", canonical) and re.search(rf"{kind},acc_red,(f32,)?max\(", canonical)


# ---- the tracer's rules ---------------------------------------------------------------------------------------------

FULL = {"accum": f16(L, M, N), "C": f16(L, M, N), "D": f16(L, M, N), "F": f16(L, M, N), "alpha": 1.5}


def evt_redefine(accum, C, alpha):
    F = accum + C
    F = F * alpha
    D = F
    return D, F


def evt_undefine(accum, alpha):
    F = accum + C  # noqa: F821 (the undefined name is the case)
    D = F * alpha
    return D, F


def evt_assign_argument(accum, alpha):
    alpha = accum * 2
    D = alpha
    return D


def evt_no_accum(alpha, C):
    D = alpha * C
    return D


def evt_return_expression(accum, C):
    return accum + C


def evt_root_not_d(accum, alpha):
    F = accum * alpha
    return F


def evt_d_read(accum):
    D = accum
    F = D + 1
    return D, F


def evt_return_argument(accum, C):
    D = accum + C
    return D, C


def evt_unassigned_output(accum):
    D = accum
    return D, F  # noqa: F821


def evt_exp(accum):
    D = exp(accum)  # noqa: F821
    return D


def evt_permute(accum):
    D = permute(accum, indices=(0, 2, 1))
    return D


def evt_reshape(accum, C):
    D = accum + reshape(C, new_shape=(L, M, N))
    return D


def evt_permute_batch(accum):
    D = permute(accum, indices=(1, 0, 2))
    return D


def evt_permute_one_side(accum, C):
    D = permute(accum, indices=(0, 2, 1)) + accum
    return D


def evt_reshape_rows(accum):
    D = reshape(accum, new_shape=(L, M * 2, N // 2))
    return D


def evt_reshape_size(accum, C):
    D = accum + reshape(C, new_shape=(7, 1))
    return D


def evt_power(accum):
    D = accum ** 2
    return D


def evt_attribute_call(accum):
    D = np.exp(accum)
    return D


def evt_augmented(accum):
    D = accum
    D += 1
    return D


def evt_runtime_slope(accum, alpha):
    D = leaky_relu(accum, alpha)
    return D


def evt_nested_reduction(accum):
    D = accum + max(accum, dim=[1])
    return D


def evt_unreturned_reduction(accum):
    F_max = max(accum, dim=[1])
    D = accum
    return D


def evt_read_reduction(accum):
    F_max = max(accum, dim=[1])
    D = accum + F_max
    return D, F_max


def evt_full_reduction(accum):
    F = max(accum, dim=[1])
    D = accum
    return D, F


def evt_vector_store(accum):
    F_max = accum * 2
    D = accum
    return D, F_max


def evt_subscript(accum):
    D = accum[0]
    return D


@pytest.mark.parametrize("fn, examples, error, message", [
    (evt_redefine, FULL, SyntaxError, "Variable 'F' cannot be defined twice."),
    (evt_undefine, FULL, SyntaxError, "Variable 'C' is undefined."),
    (evt_assign_argument, FULL, SyntaxError, "Variable 'alpha' cannot be defined twice."),
    (evt_no_accum, FULL, SyntaxError, "Cannot find 'accum' in the argument list."),
    (evt_return_expression, FULL, SyntaxError, "Return value cannot be an expression"),
    (evt_root_not_d, FULL, SyntaxError, "must return D .*'D' is not found in the return values"),
    (evt_d_read, FULL, RuntimeError, "D is expected to be an output node with 0 users, but got 1"),
    (evt_return_argument, FULL, SyntaxError, "returns its argument 'C'"),
    (evt_unassigned_output, FULL, SyntaxError, "Variable 'F' is undefined."),
    (evt_load, {**FULL, "aux": f16(L, M, N)}, None, None),  # the control: the same examples trace
    (evt_load, {k: v for k, v in FULL.items() if k != "D"} | {"aux": f16(M, N)}, RuntimeError,
     "Example input for D is not provided."),
    (evt_load, {k: v for k, v in FULL.items() if k != "C"} | {"aux": f16(M, N)}, RuntimeError,
     "Example input for C is not provided."),
    (evt_load, {**FULL, "aux": f16(M, N), "C": f16(L, N, N)}, gemmkit.ConfigError,
     r"Tensor C has shape \(6, 256, 256\).*accum's shape \(6, 512, 256\)"),
    (evt_load, {**FULL, "aux": f16(M, N + 1)}, gemmkit.ConfigError, r"Tensor aux has shape \(512, 257\)"),
    (evt_load, {**FULL, "aux": f16(M)}, gemmkit.ConfigError, r"Tensor aux has shape \(512,\)"),
    (evt_load, {**FULL, "aux": f16(L, 1, 1)}, gemmkit.ConfigError, "aux .*tensor scalars are not supported yet"),
    (evt_load, {**FULL, "aux": f16(1)}, gemmkit.ConfigError, "tensor scalars are not supported yet"),
    (evt_load, {**FULL, "aux": f16(M, N, stride=(2 * N, 2))}, gemmkit.ConfigError, "neither row- nor column-major"),
    (evt_load, {**FULL, "aux": "bias"}, gemmkit.ConfigError, "Example for 'aux': expected a number"),
    (evt_load, {**FULL, "accum": f16(M), "aux": f16(M)}, gemmkit.ConfigError, r"accum's example must be .*\(M, N\)"),
    (evt_exp, FULL, gemmkit.ConfigError, "'exp' is not an epilogue function; there are identity, relu"),
    (evt_permute, FULL, gemmkit.ConfigError, r"Tensor D has shape \(6, 512, 256\), which the epilogue's permute\(\) / reshape\(\) make \(6, 256, 512\)"),
    (evt_reshape, FULL, None, None),
    (evt_permute_batch, FULL, gemmkit.ConfigError, r"moves a batch axis"),
    (evt_permute_one_side, FULL, gemmkit.ConfigError, r"different shapes or axis orders"),
    (evt_reshape_rows, FULL, gemmkit.ConfigError, r"may only split or join its batch extent"),
    (evt_reshape_size, FULL, gemmkit.ConfigError, r"cannot take the shape \(7, 1\)"),
    (evt_power, FULL, SyntaxError, r"operators are \+ - \* /"),
    (evt_attribute_call, FULL, SyntaxError, "by their bare name"),
    (evt_augmented, FULL, SyntaxError, "Unsupported statement `D \\+= 1`"),
    (evt_subscript, FULL, SyntaxError, "Unsupported expression `accum\\[0\\]`"),
    (evt_runtime_slope, FULL, gemmkit.ConfigError, "slope must be a number written in the function"),
    (evt_nested_reduction, FULL, SyntaxError, r"max\(\) reduces into an output"),
    (evt_unreturned_reduction, FULL, SyntaxError, r"max\(\) reduces into an output"),
    (evt_read_reduction, {**FULL, "F_max": f32(M, 1)}, SyntaxError, "'F_max' is a reduction's output"),
    (evt_full_reduction, FULL, gemmkit.ConfigError, "reduces, but F's example has the full shape"),
    (evt_vector_store, {**FULL, "F_max": f32(N)}, gemmkit.ConfigError, "assign it a reduction"),
])
def test_tracer_rules(fn, examples, error, message):
    if error is None:
        trace(fn, examples)
        return
    with pytest.raises(error, match=message):
        trace(fn, examples)


def test_trace_keyword_arguments():
    traced = trace(evt_load, {**FULL, "aux": 1.0}, cc=90, element_compute=np.float32)
    assert traced.inputs == ["aux"]
    assert trace(evt_load, {**FULL, "aux": 1.0}, cc=80).epilogue == traced.epilogue  # one tree for both generations
    with pytest.raises(gemmkit.ConfigError, match="computes in f32"):
        trace(evt_load, {**FULL, "aux": 1.0}, element_compute="f16")
    with pytest.raises(TypeError, match="epilogue_stages"):
        trace(evt_load, {**FULL, "aux": 1.0}, epilogue_stages=2)
    with pytest.raises(TypeError, match="Python function"):
        trace("D = accum", FULL)
    with pytest.raises(TypeError, match="defined with def"):
        trace(lambda accum: accum, FULL)


def test_a_value_used_twice_is_one_node():
    def twice(accum):
        z0 = relu(accum)
        D = z0 + z0
        return z0, D

    def spelled_out(accum):
        D = relu(accum) + relu(accum)
        return D

    def named(accum):
        x = relu(accum)
        D = x + x
        return D

    examples = {"accum": f16(L, M, N), "z0": f16(L, M, N), "D": f16(L, M, N)}
    assert trace(twice, examples).epilogue.canonical() == (
        "0:accumulator();1:compute,activation,relu(0);2:store,z0,f16,RowMajor(1);3:compute,add(2,2);")
    assert trace(spelled_out, examples).epilogue.canonical() == trace(named, examples).epilogue.canonical()
    assert trace(spelled_out, examples).epilogue.canonical().count("relu") == 1


def test_constants_and_calls():
    def calls(accum, alpha, C, beta):
        D = multiply_add(maximum(-accum, 0.0) + tanh(C), alpha / 2, leaky_relu(beta * 3 - 1, 0.25))
        return D

    visitor = trace(calls, {**FULL, "beta": 0.5})
    # leaky_relu is built as max(x, 0) + slope * min(x, 0) (the slope is part of the tree).
    assert formulas(visitor) == ["D = multiply_add((maximum(-accum, 0) + tanh(C)), (alpha / 2), "
                                 "(maximum(((beta * 3) - 1), 0) + (0.25 * minimum(((beta * 3) - 1), 0))))"]
    assert "leaky" not in visitor.epilogue.canonical()


# ---- eager functions ------------------------------------------------------------------------------------------------


def test_activation_functions_run_on_numpy_arrays_and_numbers():
    x = np.array([-2.0, -0.5, 0.0, 0.5, 3.0], np.float16)
    assert relu(x).dtype == np.float16
    np.testing.assert_array_equal(relu(x), np.maximum(x, 0))
    np.testing.assert_array_equal(leaky_relu(x, 0.5), np.where(x > 0, x, 0.5 * x))
    np.testing.assert_allclose(sigmoid(x), 1 / (1 + np.exp(-x.astype(np.float64))), rtol=1e-3)
    np.testing.assert_allclose(gelu(x), [-0.0455, -0.1543, 0.0, 0.3457, 2.996], rtol=1e-3)
    assert tanh(0.5) == pytest.approx(np.tanh(0.5))
    np.testing.assert_array_equal(maximum(x, 0.0), np.maximum(x, 0))
    np.testing.assert_array_equal(multiply_add(x, 2.0, 1.0), x * 2 + 1)
    y = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(max(y, dim=[0, 1]), y.max(axis=(0, 1)))
    np.testing.assert_array_equal(sum(y, dim=[0, 2]), y.sum(axis=(0, 2)))
    assert max(y) == 23 and permute(y, (0, 2, 1)).shape == (2, 4, 3) and reshape(y, (6, 4)).shape == (6, 4)
    with pytest.raises(TypeError, match="only leaky_relu takes a slope"):
        relu(x, 0.5)


def test_activation_functions_run_on_torch_tensors():
    torch = pytest.importorskip("torch")
    x = torch.tensor([-2.0, 0.5, 3.0], dtype=torch.float64)
    assert torch.equal(relu(x), torch.relu(x))
    assert torch.equal(leaky_relu(x, 0.1), torch.nn.functional.leaky_relu(x, 0.1))
    assert torch.equal(maximum(x, 0.0), torch.relu(x))
    assert torch.equal(max(x.reshape(1, 3), dim=[0]), x)


def test_activation_functions_are_plan_activations():
    plan = sm90_plan()
    for function in (relu, gelu, gemmkit.epilogue.gelu_tanh, sigmoid):
        plan.activation = function
        assert plan.activation == function and function == plan.activation
        assert plan.kernel_name() == f"{SM90_DEFAULT}_{function.name}"
    plan.activation = (leaky_relu, 0.25)
    assert plan.activation == gemmkit.Activation.leaky_relu and plan.activation_parameter == 0.25
    assert {relu: 1}[gemmkit.Activation.relu] == 1 and relu != gelu
    assert set(gemmkit.epilogue.get_activations()) == set(gemmkit.Activation)


# ---- plans ----------------------------------------------------------------------------------------------------------


def test_a_traced_tree_names_and_renders_the_sm90_kernel():
    visitor = trace(evt_mixed_dag, mixed_examples())
    plan = sm90_plan()
    plan.epilogue_visitor = visitor
    assert plan.epilogue_visitor is visitor
    name = plan.kernel_name()
    assert re.fullmatch(re.escape(SM90_DEFAULT) + r"_evt[0-9a-f]{8}", name), name
    spec = plan.spec_for_problem(768, 504, 128, 3)
    assert spec.name().startswith(SM90_DEFAULT.split("_256x256")[0]) and "_evt" in spec.name()
    source = gemmkit.render(spec).text
    assert "Sm90TopologicalVisitor" in source and "Sm90RowReduction" in source and "Sm90ColReduction" in source
    assert "Sm90TopologicalVisitor" in plan.render_source().text
    other = sm90_plan()
    other.epilogue_visitor = trace(example_epilogue, notebook_examples())
    assert other.kernel_name() != name and other.kernel_name().startswith(SM90_DEFAULT + "_evt")
    plan.epilogue_visitor = None
    assert plan.epilogue_visitor is None and plan.kernel_name() == SM90_DEFAULT


def test_a_bare_epilogue_is_a_visitor_too():
    accum = _gemmkit._evt_accumulator()
    tree = _gemmkit.Epilogue(_gemmkit._evt_activation(gemmkit.Activation.relu, accum * accum))
    plan = sm90_plan()
    plan.epilogue_visitor = tree
    assert plan.epilogue_visitor == tree and isinstance(plan.epilogue_visitor, _gemmkit.Epilogue)
    assert plan.kernel_name().startswith(SM90_DEFAULT + "_evt")
    assert plan.epilogue == tree


def test_a_plain_tree_runs_the_kernel_of_the_same_settings():
    def epilogue(accum, alpha, C, beta, bias):
        D = relu(alpha * accum + beta * C + bias)
        return D
    examples = {"accum": gemmkit.Tensor(element=np.float32, shape=(256, 128)),
                "C": gemmkit.Tensor(element=np.float16, shape=(256, 128)),
                "bias": gemmkit.Tensor(element=np.float16, shape=(256, 1)),
                "alpha": 1.0, "beta": 0.0, "D": gemmkit.Tensor(element=np.float16, shape=(256, 128))}
    plan = sm90_plan()
    plan.epilogue_visitor = trace(epilogue, examples)
    settings = sm90_plan()
    settings.activation = gemmkit.Activation.relu
    settings.bias = gemmkit.BiasMode.row
    assert plan.kernel_name() == settings.kernel_name() and "_evt" not in plan.kernel_name()
    assert plan.bias == gemmkit.BiasMode.row and plan.activation == gemmkit.Activation.relu
    assert settings.epilogue == _gemmkit.plain_epilogue(gemmkit.Activation.relu, gemmkit.BiasMode.row)
    with pytest.raises(gemmkit.ConfigError, match="visitor tree sets its activation"):
        plan.activation = gemmkit.Activation.gelu
    plan.epilogue_visitor = None
    assert plan.kernel_name() == SM90_DEFAULT and plan.bias == gemmkit.BiasMode.none


@pytest.mark.parametrize("cc", [80, 90])
def test_a_traced_tree_on_cutlass_2x_kernels(cc):
    visitor = trace(evt_mixed_dag, mixed_examples())
    plan = gemmkit.Gemm(element=np.float16, layout=gemmkit.LayoutType.RowMajor, element_accumulator=np.float32,
                        cc=cc, kernel_cc=80)
    plan.epilogue_visitor = visitor
    assert plan.epilogue_visitor is visitor
    assert re.fullmatch(re.escape(SM80_DEFAULT) + r"_evt[0-9a-f]{8}", plan.kernel_name()), plan.kernel_name()
    source = plan.render_source().text
    assert "Sm80TopologicalVisitor" in source and "DefaultGemmWithVisitor" in source
    simt = gemmkit.Gemm(element=np.float16, layout="row", element_accumulator=np.float32, cc=cc, kernel_cc=80)
    simt.opclass = "simt"
    with pytest.raises(gemmkit.ConfigError, match="tensor-core kernels"):
        simt.epilogue_visitor = visitor
    assert simt.epilogue_visitor is None


def test_the_traced_c_and_d_must_be_the_plans():
    plan = gemmkit.Gemm(element=np.float32, layout="row", element_accumulator=np.float32, cc=90)
    with pytest.raises(gemmkit.ConfigError, match="the traced C is f16 RowMajor, the plan's C f32"):
        plan.epilogue_visitor = trace(example_epilogue, notebook_examples())
    column = {**notebook_examples(), "D": T(element=np.float16, shape=(M, N), layout_tag="col")}
    with pytest.raises(gemmkit.ConfigError, match="the traced D is f16 ColumnMajor"):
        sm90_plan().epilogue_visitor = trace(example_epilogue, column)


def evt_dead_input(accum, bias):
    E = relu(accum)
    F = E + bias  # noqa: F841 (dead: the reference's test_no_lca)
    tmp_2 = E + 2
    D = tmp_2 + E
    return D


def test_run_hands_visitor_args_to_the_cpp_plan(monkeypatch):
    calls = []
    monkeypatch.setattr(_gemmkit.Gemm, "run", lambda plan, *args: calls.append(args))
    plan = sm90_plan()
    plan.epilogue_visitor = trace(evt_dead_input, {"accum": f16(L, M, N), "bias": f16(M, 1), "D": f16(L, M, N)})
    A, B, D = object(), object(), object()
    plan.run(A, B, None, visitor_args={"accum": object(), "bias": object(), "D": D, "scale": np.float32(2)})
    (args,) = calls
    assert args[:4] == (A, B, None, D) and args[4:6] == (1.0, 0.0)
    assert args[-1] == {"D": D, "scale": 2.0} and type(args[-1]["scale"]) is float  # unknown names: C++ refuses


# The reference's evt_layout cases: permute() of the last two axes and reshape() are undone at trace time, so the
# kernel's tree has neither; the tensors they touch are read and written through views of the same memory.
def evt_layout_permute_back(accum, alpha, C):
    F = alpha * accum
    F_permute = permute(F, indices=(0, 2, 1))
    D_permute = F_permute + permute(C, indices=(0, 2, 1))
    D = permute(D_permute, indices=(0, 2, 1))
    return D, F


def evt_layout_permute(accum, alpha, C):
    F = alpha * accum
    F_permute = permute(F, indices=(0, 2, 1))
    D = F_permute + C
    return D, F


def evt_layout_reshape_input(accum, alpha, TensorE):
    F = alpha * accum
    E_reshape = reshape(TensorE, new_shape=(512, 1))
    D = F + E_reshape
    return D


def evt_layout_reshape_batch(accum, alpha, TensorE):
    F = alpha * accum
    F_reshape = reshape(F, new_shape=(2, 3, 512, 256))
    D = F_reshape + TensorE
    return D


def test_permutes_that_cancel_leave_the_plain_tree():
    examples = {"accum": f16(L, M, N), "alpha": 0.5, "C": f16(L, M, N), "F": f16(L, M, N), "D": f16(L, M, N)}
    visitor = trace(evt_layout_permute_back, examples)
    assert formulas(visitor) == ["F = (alpha * accum)", "D = (F + C)"]
    assert visitor.transforms == {}
    assert visitor.operands == {"C": (gemmkit.DataType.f16, gemmkit.LayoutType.RowMajor),
                                "D": (gemmkit.DataType.f16, gemmkit.LayoutType.RowMajor)}


def test_a_permuted_c_and_d_are_column_major():
    examples = {"accum": f16(L, M, N), "alpha": 0.5, "C": f16(L, N, M), "F": f16(L, M, N), "D": f16(L, N, M)}
    visitor = trace(evt_layout_permute, examples)
    assert formulas(visitor) == ["F = (alpha * accum)", "D = (F + C)"]
    assert "store,F,f16,RowMajor" in visitor.epilogue.canonical()
    column = (gemmkit.DataType.f16, gemmkit.LayoutType.ColumnMajor)
    assert visitor.operands == {"C": column, "D": column}
    assert visitor.transforms == {"C": (None, True), "D": (None, True)}
    D = np.zeros((L, N, M), dtype=np.float16)
    view = visitor.kernel_view("D", D)
    assert view.shape == (L, M, N) and np.shares_memory(view, D) and view.strides[-2:] == (2, 2 * M)
    # A row-major plan's C is not the traced one; a plan with column-major C and D takes it.
    with pytest.raises(gemmkit.ConfigError, match="the traced C is f16 ColumnMajor"):
        sm90_plan().epilogue_visitor = visitor
    plan = gemmkit.Gemm(element=np.float16, element_accumulator=np.float32, layout_A=gemmkit.LayoutType.RowMajor,
                        layout_B=gemmkit.LayoutType.RowMajor, layout_C=gemmkit.LayoutType.ColumnMajor, cc=90)
    plan.epilogue_visitor = visitor
    assert "_evt" in plan.kernel_name()


def test_a_reshaped_input_is_read_in_its_new_shape():
    examples = {"accum": f16(L, 512, N), "alpha": 0.5, "TensorE": f16(16, 32), "D": f16(L, 512, N)}
    visitor = trace(evt_layout_reshape_input, examples)
    assert "column_broadcast,TensorE,f16" in visitor.epilogue.canonical()
    assert visitor.transforms == {"TensorE": ((512, 1), False)}
    E = np.arange(512, dtype=np.float16).reshape(16, 32)
    view = visitor.kernel_view("TensorE", E)
    assert view.shape == (512, 1) and np.shares_memory(view, E)
    with pytest.raises((AttributeError, ValueError)):  # no view of a strided tensor: refused, not copied
        visitor.kernel_view("TensorE", np.zeros((32, 16), dtype=np.float16).T)


def test_a_split_batch_carries_into_the_inputs_and_d():
    examples = {"accum": f16(6, 512, 256), "alpha": 0.5, "TensorE": f16(2, 3, 1, 256), "D": f16(2, 3, 512, 256)}
    visitor = trace(evt_layout_reshape_batch, examples)
    assert "row_broadcast,TensorE,f16" in visitor.epilogue.canonical()
    assert visitor.transforms == {"TensorE": ((6, 1, 256), False), "D": ((6, 512, 256), False)}


def test_tensor_examples():
    t = T(element="f16", shape=(L, M, N))
    assert t.element == gemmkit.DataType.f16 and t.stride == (M * N, N, 1)
    assert T(element=np.float32, shape=(L, M, N), layout_tag=gemmkit.LayoutType.ColumnMajor).stride == (M * N, 1, M)
    assert T(element=gemmkit.DataType.bf16, shape=(M, 1), stride=(1, 0)).stride == (1, 0)
    assert T(element=np.float16, shape=(N,), layout_tag="col").stride == (1,)
    assert "shape=(6, 512, 256)" in repr(t)
    with pytest.raises(gemmkit.ConfigError, match="not both"):
        T(element="f16", shape=(M, N), stride=(N, 1), layout_tag="row")
    with pytest.raises(gemmkit.ConfigError, match="does not match shape"):
        T(element="f16", shape=(M, N), stride=(1,))
    with pytest.raises(gemmkit.ConfigError, match="No available conversion"):
        T(element="f17", shape=(M, N))


class RecordingOp:
    def __init__(self):
        self.calls = []

    def run(self, *args, **kwargs):
        self.calls.append((args, kwargs))


def test_the_profiler_runs_once_when_made():
    op = RecordingOp()
    profiler = gemmkit.utils.profiler.CUDAEventProfiler(op, 3, 4, "A", "B", visitor_args={"x": 1.0})
    assert op.calls == [(("A", "B"), {"visitor_args": {"x": 1.0}})]
    assert profiler.warmup_iterations == 3 and profiler.iterations == 4
    try:
        import torch  # noqa: F401
    except ImportError:
        with pytest.raises(RuntimeError, match="install torch"):
            profiler()


# ---- GPU tier: the reference's cases against float64 torch references ----------------------------------------------


@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    return torch


def evt_arith(accum, C, alpha, beta, gamma):
    D = ((accum + C) * alpha - gamma) / beta
    return D


def evt_func_call(accum, C, alpha, beta, gamma):
    D = multiply_add(relu(accum + alpha) + C, beta, gamma)
    return D


def evt_func_call2(accum, C, alpha, beta):
    D = maximum(alpha * accum + beta * C, 0.0)
    return D


def evt_tanh(accum):
    D = tanh(accum)
    return D


def evt_sigmoid(accum):
    D = sigmoid(accum)
    return D


def evt_gelu(accum):
    D = gelu(accum)
    return D


def evt_tensor_load(accum, C, aux, aux_batch):
    D = accum + C + aux + aux_batch
    return D


def evt_row_broadcast(accum, C, bias, bias_batch):
    D = accum + C + bias + bias_batch
    return D


def evt_scalar_broadcast(accum, C, alpha):
    D = accum + C + alpha
    return D


def evt_aux_store(accum, alpha, C):
    F = alpha * accum
    D = F + C
    return D, F


def evt_col_reduce(accum, alpha, C):
    acc_row_max = max(accum, dim=[2])
    F = alpha * accum
    F_row_max = max(F, dim=[0, 2])
    D = F + C
    return D, F_row_max, acc_row_max


def evt_row_reduce(accum, alpha, C):
    acc_col_max = max(accum, dim=[1])
    F = alpha * accum
    F_col_max = max(F, dim=[0, 1])
    D = F + C
    return D, F_col_max, acc_col_max


def evt_scalar_reduce(accum, alpha, C):
    acc_max = max(accum, dim=[1, 2])
    F = alpha * accum
    F_max = max(F, dim=[0, 1, 2])
    D = F + C
    return D, F_max, acc_max


def evt_col_sum(accum, alpha, C):
    acc_row_sum = sum(accum, dim=[2])
    F = alpha * accum
    F_row_sum = sum(F, dim=[0, 2])
    D = F + C
    return D, F_row_sum, acc_row_sum


def evt_row_sum(accum, alpha, C):
    acc_col_sum = sum(accum, dim=[1])
    F = alpha * accum
    F_col_sum = sum(F, dim=[0, 1])
    D = F + C
    return D, F_col_sum, acc_col_sum


def evt_scalar_sum(accum, alpha, C):
    acc_sum = sum(accum, dim=[1, 2])
    F = alpha * accum
    F_sum = sum(F, dim=[0, 1, 2])
    D = F + C
    return D, F_sum, acc_sum


def evt_same_variable(accum):
    z0 = relu(accum)
    D = z0 + z0
    return z0, D


@dataclasses.dataclass
class Case:
    """One of the reference's cases: the function, its examples for a problem, what visitor_args holds (inputs, then
    the outputs it writes), and whether the float64 reference is exact through f16 (else: within one f16 ulp)."""

    fn: Callable
    examples: Callable  # (l, m, n) -> {name: example}
    inputs: tuple
    results: tuple
    exact: bool = True
    batched: bool = True
    sizes: Optional[list] = None  # (m, n, k, l) problems, where the function fixes them (its reshape sizes); else SIZES
    layout_C: gemmkit.LayoutType = gemmkit.LayoutType.RowMajor


def l3(l, m, n):
    return f16(l, m, n)


def compute_examples(*scalars, C=True):
    def examples(l, m, n):
        out = {"accum": l3(l, m, n), "D": l3(l, m, n), **dict(scalars)}
        return {**out, "C": l3(l, m, n)} if C else out
    return examples


def reduce_examples(**outputs):
    """The reduction cases' examples; each output's shape is spelled by its extents: "m1" is (m, 1), "l1n" (l, 1, n)."""
    def examples(l, m, n):
        shapes = {"n": n, "m": m, "l": l}
        return {"accum": l3(l, m, n), "alpha": 2.0, "C": l3(l, m, n), "D": l3(l, m, n),
                **{name: f32(*(shapes.get(d, 1) for d in dims)) for name, dims in outputs.items()}}
    return examples


CASES = {
    "arith": Case(evt_arith, compute_examples(("alpha", 1.5), ("beta", 0.5), ("gamma", 2.5)),
                  ("C", "alpha", "beta", "gamma"), ("D",)),
    "func_call": Case(evt_func_call, compute_examples(("alpha", 1.5), ("beta", 0.5), ("gamma", 2.5)),
                      ("C", "alpha", "beta", "gamma"), ("D",)),
    "func_call2": Case(evt_func_call2, compute_examples(("alpha", 1.5), ("beta", 0.5)), ("C", "alpha", "beta"),
                       ("D",)),
    "tanh": Case(evt_tanh, compute_examples(C=False), (), ("D",), exact=False),
    "sigmoid": Case(evt_sigmoid, compute_examples(C=False), (), ("D",), exact=False),
    "gelu": Case(evt_gelu, compute_examples(C=False), (), ("D",), exact=False),
    "tensor_load": Case(evt_tensor_load, lambda l, m, n: {**compute_examples()(l, m, n), "aux": f16(m, n),
                                                          "aux_batch": T(element=np.float32, shape=(l, m, n))},
                        ("C", "aux", "aux_batch"), ("D",)),
    "row_broadcast": Case(evt_row_broadcast, lambda l, m, n: {**compute_examples()(l, m, n), "bias": f16(n),
                                                              "bias_batch": T(element=np.float32, shape=(l, 1, n))},
                          ("C", "bias", "bias_batch"), ("D",)),
    "column_broadcast": Case(evt_row_broadcast, lambda l, m, n: {**compute_examples()(l, m, n), "bias": f16(m, 1),
                                                                 "bias_batch": T(element=np.float32, shape=(l, m, 1))},
                             ("C", "bias", "bias_batch"), ("D",)),
    "scalar_broadcast": Case(evt_scalar_broadcast, compute_examples(("alpha", 0.5)), ("C", "alpha"), ("D",)),
    "aux_store": Case(evt_aux_store, lambda l, m, n: {**compute_examples(("alpha", 0.5))(l, m, n), "F": l3(l, m, n)},
                      ("C", "alpha"), ("D", "F")),
    "col_reduce_max": Case(evt_col_reduce, reduce_examples(F_row_max="m1", acc_row_max="lm1"), ("alpha", "C"),
                           ("D", "F_row_max", "acc_row_max")),
    "row_reduce_max": Case(evt_row_reduce, reduce_examples(F_col_max="n", acc_col_max="l1n"), ("alpha", "C"),
                           ("D", "F_col_max", "acc_col_max")),
    "scalar_reduce_max": Case(evt_scalar_reduce, reduce_examples(F_max="1", acc_max="l11"), ("alpha", "C"),
                              ("D", "F_max", "acc_max")),
    "col_reduce_sum": Case(evt_col_sum, reduce_examples(F_row_sum="m1", acc_row_sum="lm1"), ("alpha", "C"),
                           ("D", "F_row_sum", "acc_row_sum")),
    "row_reduce_sum": Case(evt_row_sum, reduce_examples(F_col_sum="n", acc_col_sum="l1n"), ("alpha", "C"),
                           ("D", "F_col_sum", "acc_col_sum")),
    "scalar_reduce_sum": Case(evt_scalar_sum, reduce_examples(F_sum="1", acc_sum="l11"), ("alpha", "C"),
                              ("D", "F_sum", "acc_sum")),
    "mixed_dag": Case(evt_mixed_dag, mixed_examples, ("alpha", "C", "beta", "aux", "cbias", "rbias"),
                      ("D", "F", "F_row_max", "E_col_max")),
    "mixed_dag_no_batch": Case(evt_mixed_dag, lambda l, m, n: mixed_examples(l, m, n, batched=False),
                               ("alpha", "C", "beta", "aux", "cbias", "rbias"), ("D", "F", "F_row_max", "E_col_max"),
                               batched=False),
    "same_variable": Case(evt_same_variable, lambda l, m, n: {"accum": l3(l, m, n), "z0": l3(l, m, n),
                                                              "D": l3(l, m, n)}, ("accum",), ("z0", "D")),
    "no_lca": Case(evt_dead_input, lambda l, m, n: {"accum": l3(l, m, n), "D": l3(l, m, n),
                                                    "bias": f16(m, 1, stride=(1, 0))}, ("accum", "bias"), ("D",)),
    # evt_layout's: permute() of the last two axes and reshape(), undone at trace time.
    "permute_back": Case(evt_layout_permute_back, lambda l, m, n: {"accum": l3(l, m, n), "alpha": 0.5,
                                                                   "C": l3(l, m, n), "F": l3(l, m, n),
                                                                   "D": l3(l, m, n)}, ("C", "alpha"), ("D", "F")),
    "permute": Case(evt_layout_permute, lambda l, m, n: {"accum": l3(l, m, n), "alpha": 0.5, "C": f16(l, n, m),
                                                         "F": l3(l, m, n), "D": f16(l, n, m)}, ("C", "alpha"),
                    ("D", "F"), layout_C=gemmkit.LayoutType.ColumnMajor),
    "reshape_input": Case(evt_layout_reshape_input, lambda l, m, n: {"accum": l3(l, m, n), "alpha": 0.5,
                                                                     "TensorE": f16(16, 32), "D": l3(l, m, n)},
                          ("alpha", "TensorE"), ("D",), sizes=[(512, 256, 128, 3)]),
    "reshape_batch": Case(evt_layout_reshape_batch, lambda l, m, n: {"accum": l3(l, m, n), "alpha": 0.5,
                                                                     "TensorE": f16(2, 3, 1, n),
                                                                     "D": f16(2, 3, m, n)},
                          ("alpha", "TensorE"), ("D",), sizes=[(512, 256, 128, 6)]),
}
# The reference's get_problem_sizes(8): m in {8, 488, 768}, n in {8, 504, 768}, k 128, l 3.
SIZES = [(m, n, 128, 3) for m in (8, 488, 768) for n in (8, 504, 768)]
# Each case runs on one kernel per generation (kernel_cc 90: CUTLASS 3.x, 80: 2.x) with the default tile set, so that
# selection cannot pick another per shape; the mixed DAG also runs on the kernels run() chooses for each shape.
GENERATIONS = [90, 80]
CHOSEN_PER_SHAPE = "mixed_dag"
# Scalar reductions run on SM90 kernels only: a 2.x plan refuses the tree (its sum over batches measured wrong).
SM90_ONLY = {"scalar_reduce_max", "scalar_reduce_sum"}
# A permuted C and D are column-major, which 2.x visitor trees do not read or write.
SM90_ONLY_LAYOUT = {"permute"}


def case_sizes(name):
    return CASES[name].sizes or SIZES


def case_plan(name, kernel_cc, pinned=True):
    case = CASES[name]
    row = gemmkit.LayoutType.RowMajor
    plan = gemmkit.Gemm(element=np.float16, layout_A=row, layout_B=row, layout_C=case.layout_C,
                        element_accumulator=np.float32, kernel_cc=kernel_cc)
    m, n, _, l = case_sizes(name)[0]
    visitor = trace(case.fn, case.examples(l, m, n))  # the tree is the same for every size
    plan.epilogue_visitor = visitor
    if pinned:
        plan.tile_description = plan.tile_descriptions()[0]
    return plan, visitor


@pytest.fixture(scope="module")
def plans(torch, request):
    """The plans of the cases the selected tests use (all of them, unless -k picks some), their kernels built in
    parallel first (a build that fails is reported by its case)."""
    selected = [item.name for item in request.session.items]
    names = {name for name in CASES if any(f"[{name}-" in test for test in selected)}
    if any(test.startswith("test_refused_visitor_tensors") for test in selected):
        names.add("mixed_dag")
    chosen_per_shape = any(test.startswith("test_the_mixed_dag_on_the_kernels_run_chooses") for test in selected)
    out = {(name, cc, True): case_plan(name, cc) for name in CASES for cc in GENERATIONS
           if name in names and (cc == 90 or name not in SM90_ONLY | SM90_ONLY_LAYOUT)}
    for cc in GENERATIONS if chosen_per_shape else []:
        out[(CHOSEN_PER_SHAPE, cc, False)] = case_plan(CHOSEN_PER_SHAPE, cc, pinned=False)
    specs = [plan.construct() for plan, _ in out.values()]
    for cc in GENERATIONS if chosen_per_shape else []:
        chosen, _ = out[(CHOSEN_PER_SHAPE, cc, False)]
        specs += [chosen.spec_for_problem(m, n, k, l) for m, n, k, l in SIZES]
    try:
        gemmkit.compile_many(list({spec.canonical(): spec for spec in specs}.values()))
    except gemmkit.Error:
        pass
    return out


def integers(torch, shape, dtype, seed):
    generator = torch.Generator(device="cuda").manual_seed(seed)
    values = torch.empty(shape, dtype=torch.float32, device="cuda").uniform_(-4.5, 3.5, generator=generator)
    return torch.ceil(values).to(dtype)


def torch_dtype(torch, element):
    return {gemmkit.DataType.f16: torch.float16, gemmkit.DataType.f32: torch.float32}[element]


def f16_ulp(torch, x):
    """One f16 ulp at each element of x (float64), subnormals included."""
    exponent = torch.floor(torch.log2(x.abs().clamp(min=2.0 ** -14)))
    return torch.pow(2.0, exponent - 10)


def check_case(torch, name, plan, visitor, m, n, k, l, host=False):
    case = CASES[name]
    examples = case.examples(l, m, n)
    A = integers(torch, (l, m, k) if case.batched else (m, k), torch.float16, 1)
    B = integers(torch, (l, k, n) if case.batched else (k, n), torch.float16, 2)
    args = {}
    for seed, key in enumerate(case.inputs):
        example = examples[key]
        args[key] = example if isinstance(example, float) else integers(torch, example.shape,
                                                                         torch_dtype(torch, example.element), 3 + seed)
    for key in case.results:
        example = examples[key]
        args[key] = torch.zeros(example.shape, dtype=torch_dtype(torch, example.element), device="cuda")
    if host:
        A, B = A.cpu().numpy(), B.cpu().numpy()
        args = {key: value if isinstance(value, float) else value.cpu().numpy() for key, value in args.items()}
    plan.run(A, B, args.get("C"), args["D"], visitor_args=args)  # no C where the tree reads none

    def as_f64(value):
        return value if isinstance(value, float) else torch.as_tensor(value, device="cuda").double()
    # The traced function itself is the reference, on the real accumulator (an `accum` in visitor_args is unused).
    # (L, M, N) as the reference's test bed has it, also without a batch: max(F, dim=[0, 1]) reduces over L and M.
    accum = (as_f64(A) @ as_f64(B)).reshape(l, m, n)
    refs = visitor(accum=accum, **{key: as_f64(args[key]) for key in case.inputs if key != "accum"})
    refs = refs if isinstance(refs, tuple) else (refs,)
    returned = visitor.return_names if isinstance(visitor.return_names, tuple) else (visitor.return_names,)
    for key, ref in zip(returned, refs):
        out = torch.as_tensor(args[key], device="cuda").flatten()
        expected = ref.flatten().to(out.dtype)
        if case.exact:
            assert torch.equal(out, expected), f"{name} {key} at {(m, n, k, l)}: {(out != expected).sum()} differ"
        else:
            error = (out.double() - ref.flatten()).abs()
            assert bool((error <= f16_ulp(torch, ref.flatten())).all()), f"{name} {key}: max error {error.max()}"


@pytest.mark.gpu
@pytest.mark.parametrize("kernel_cc", GENERATIONS)
@pytest.mark.parametrize("name", list(CASES))
def test_cases_match_the_float64_reference(torch, plans, name, kernel_cc):
    if kernel_cc < 90 and name in SM90_ONLY:
        with pytest.raises(gemmkit.ConfigError, match="scalar reductions run on SM90"):
            case_plan(name, kernel_cc)
        return
    if kernel_cc < 90 and name in SM90_ONLY_LAYOUT:
        with pytest.raises(gemmkit.ConfigError, match="2.x visitor trees store a row-major D"):
            case_plan(name, kernel_cc)
        return
    plan, visitor = plans[(name, kernel_cc, True)]
    for m, n, k, l in case_sizes(name):
        check_case(torch, name, plan, visitor, m, n, k, l if CASES[name].batched else 1)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel_cc", GENERATIONS)
def test_the_mixed_dag_on_the_kernels_run_chooses(torch, plans, kernel_cc):
    plan, visitor = plans[(CHOSEN_PER_SHAPE, kernel_cc, False)]
    for m, n, k, l in SIZES:
        check_case(torch, CHOSEN_PER_SHAPE, plan, visitor, m, n, k, l)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel_cc", GENERATIONS)
@pytest.mark.parametrize("name", ["aux_store", "mixed_dag"])
def test_host_tensors_in_visitor_args(torch, plans, name, kernel_cc):
    plan, visitor = plans[(name, kernel_cc, True)]
    check_case(torch, name, plan, visitor, 488, 504, 128, 3, host=True)


@pytest.mark.gpu
def test_the_notebook_epilogue_on_the_gpu(torch):
    m, n, k = 512, 768, 512
    A, B = integers(torch, (m, k), torch.float16, 1), integers(torch, (k, n), torch.float16, 2)
    C, aux = integers(torch, (m, n), torch.float16, 3), integers(torch, (m, n), torch.float16, 4)
    bias = integers(torch, (m, 1), torch.float16, 5)
    D, F = torch.zeros_like(C), torch.zeros_like(C)
    examples = {**notebook_examples(m, n), "C": C, "aux": aux, "bias": bias, "D": D, "F": F}
    visitor = trace(example_epilogue, examples)
    plan = gemmkit.Gemm(element=torch.float16, layout=gemmkit.LayoutType.RowMajor, element_accumulator=torch.float32)
    plan.epilogue_visitor = visitor
    args = {"alpha": 0.5, "C": C, "beta": 0.5, "aux": aux, "bias": bias, "D": D, "F": F}
    plan.run(A, B, C, D, visitor_args=args)
    D_ref, F_ref = visitor(A.double() @ B.double(), 0.5, C.double(), 0.5, aux.double(), bias.double())
    assert torch.equal(D, D_ref.half()) and torch.equal(F, F_ref.half())
    ms = gemmkit.utils.profiler.CUDAEventProfiler(plan, 2, 5, A, B, C, D, visitor_args=args)()
    assert ms > 0
    assert torch.equal(D, D_ref.half())  # the profiler's launches rewrite the same values


@pytest.mark.gpu
@pytest.mark.parametrize("change, message", [
    (lambda args, torch: args.pop("aux"), "Visitor argument 'aux' .*is missing"),
    (lambda args, torch: args.update(aux=torch.zeros((3, 488, 512), dtype=torch.float16, device="cuda")),
     r"'aux'.*\(3, 488, 512\)"),
    (lambda args, torch: args.update(aux=args["aux"].float()), "Visitor argument 'aux' .*element type f32"),
    (lambda args, torch: args.update(cbias=torch.zeros((489, 1), dtype=torch.float16, device="cuda")),
     "Visitor argument 'cbias'"),
    (lambda args, torch: args.update(F_row_max=torch.zeros((504,), dtype=torch.float16, device="cuda")),
     "Visitor argument 'F_row_max'"),
    (lambda args, torch: args.update(nope=1.0), "Visitor argument 'nope': the epilogue has no tensor or scalar"),
    (lambda args, torch: args.update(beta=args["aux"]), "Visitor argument 'beta' .*pass a number"),
])
def test_refused_visitor_tensors_leave_d_untouched(torch, plans, change, message):
    plan, visitor = plans[("mixed_dag", 90, True)]
    m, n, k, l = 488, 504, 128, 3
    examples = mixed_examples(l, m, n)
    args = {"alpha": 1.0, "beta": 1.0}
    for seed, key in enumerate(("C", "aux", "cbias", "rbias", "F", "F_row_max", "E_col_max")):
        example = examples[key]
        args[key] = integers(torch, example.shape, torch_dtype(torch, example.element), seed)
    D = torch.full((l, m, n), 7.0, dtype=torch.float16, device="cuda")
    args["D"] = D
    change(args, torch)
    A, B = integers(torch, (l, m, k), torch.float16, 1), integers(torch, (l, k, n), torch.float16, 2)
    with pytest.raises(gemmkit.TensorError, match=message):
        plan.run(A, B, args["C"], D, visitor_args=args)
    torch.cuda.synchronize()
    assert bool((D == 7.0).all())
