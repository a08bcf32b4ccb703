"""tests/python/test_epilogue_visitor_trace.py: epilogue visitor trees from Python (gemmkit.epilogue.trace), the
tree built from a function (the plans that take it: test_epilogue_visitor_plans.py; the GPU cases:
test_epilogue_visitor_gpu.py; what they share: epilogue_visitor_support.py).

Unit tier (no nvcc, no GPU): tracing the reference notebook's function and the reference test suite's functions
gives the expected formulas, inputs and outputs; what each example's shape becomes (a node, a reduction's kind); every
rule of the tracer raises its error; a value used twice is one node; the activation and reduction functions run
eagerly on numpy arrays (and torch tensors) and are plan activations."""
import re

import numpy as np
import pytest

import gemmkit
from epilogue_visitor_support import (L, M, N, SM90_DEFAULT, T, evt_mixed_dag, example_epilogue, f16, f32, formulas,
                                      mixed_examples, notebook_examples, sm90_plan)
from gemmkit.epilogue import (gelu, leaky_relu, max, maximum, multiply_add, permute, relu, reshape, sigmoid, sum,
                              tanh, trace)


# ---- the notebook's epilogue (04_epilogue_visitor.ipynb) ------------------------------------------------------------


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
        assert plan.kernel_name() == f"{SM90_DEFAULT}_act_at_launch"  # one kernel serves them all
        assert plan.construct().activation == gemmkit.Activation[function.name]
    plan.activation = (leaky_relu, 0.25)
    assert plan.activation == gemmkit.Activation.leaky_relu and plan.activation_parameter == 0.25
    assert {relu: 1}[gemmkit.Activation.relu] == 1 and relu != gelu
    assert set(gemmkit.epilogue.get_activations()) == set(gemmkit.Activation)
