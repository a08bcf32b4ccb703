"""tests/python/test_epilogue_visitor_plans.py: traced epilogue visitor trees on plans (the tracer itself:
test_epilogue_visitor_trace.py; the GPU cases: test_epilogue_visitor_gpu.py; what they share:
epilogue_visitor_support.py).

Unit tier (no nvcc, no GPU): setting a traced tree on a plan (CUTLASS 3.x and 2.x kernels) names and renders its
kernel, a plain tree runs the kernel of the same settings, the traced C and D must be the plan's; run() hands
visitor_args to the C++ plan; the reference's evt_layout cases (permute() and reshape() undone at trace time, the
tensors read through views); gemmkit.Tensor; CUDAEventProfiler."""
import re

import numpy as np
import pytest

import gemmkit
from epilogue_visitor_support import (L, M, N, SM80_DEFAULT, SM90_DEFAULT, T, evt_dead_input, evt_layout_permute,
                                      evt_layout_permute_back, evt_layout_reshape_batch, evt_layout_reshape_input,
                                      evt_mixed_dag, example_epilogue, f16, formulas, mixed_examples,
                                      notebook_examples, sm90_plan)
from gemmkit import _gemmkit
from gemmkit.epilogue import relu, trace


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
