"""tests/python/test_epilogue_visitor_gpu.py: epilogue visitor trees from Python on the GPU (the tracer:
test_epilogue_visitor_trace.py; trees on plans: test_epilogue_visitor_plans.py; what they share:
epilogue_visitor_support.py).

GPU tier (marker gpu, torch on CUDA): the reference's compute, load, store, layout and mixed-DAG cases
(evt_*_sm80_90.py) on both kernel generations, each against a float64 torch reference of the same inputs, run through
the traced function itself; the mixed DAG on the kernels run() chooses; host (numpy) tensors; the notebook's epilogue
and the profiler; refused visitor tensors leave D untouched. The cases' plans are one module-scoped fixture, their
kernels built in parallel first."""
import dataclasses
from typing import Callable, Optional

import numpy as np
import pytest

import gemmkit
from epilogue_visitor_support import (T, evt_dead_input, evt_layout_permute, evt_layout_permute_back,
                                      evt_layout_reshape_batch, evt_layout_reshape_input, evt_mixed_dag,
                                      example_epilogue, f16, f32, mixed_examples, notebook_examples)
from gemmkit.epilogue import gelu, max, maximum, multiply_add, relu, sigmoid, sum, tanh, trace


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
