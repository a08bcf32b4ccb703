"""python/gemmkit/emit/_torch_bindings.py: the binding gemmkit.emit.pytorch writes for each kind of kernel (Gemm,
Gemm with an epilogue visitor tree, GroupedGemm, Conv2d): its template, the values of its placeholders (run's
signature and torch schema, the kernel's operands as abi.h spells them, a tree's table of nodes) and the op kind's
torch glue source. A kernel the exported run cannot take is refused here, before any file is written.
"""
from __future__ import annotations

import dataclasses
import keyword
import math
import re
from typing import Callable, Optional

from .. import _gemmkit
from .._gemmkit import (Activation, BiasMode, BlockScaling, ConfigError, ConvKind, DataType, KernelFamily, KernelSpec,
                        LayoutType, ScaleMode, SplitKMode, StrideSupport)

# A Python identifier: what the export's name and each of run's parameters must be.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

# gemmkit's element types and layouts as abi.h spells them (the glue maps them to torch's).
_ABI_DTYPES = {
    DataType.f16: "GK_DTYPE_F16", DataType.bf16: "GK_DTYPE_BF16", DataType.f32: "GK_DTYPE_F32",
    DataType.tf32: "GK_DTYPE_TF32", DataType.f64: "GK_DTYPE_F64", DataType.s8: "GK_DTYPE_S8",
    DataType.u8: "GK_DTYPE_U8", DataType.s32: "GK_DTYPE_S32",
}
_ABI_LAYOUTS = {LayoutType.RowMajor: "GK_ROW_MAJOR", LayoutType.ColumnMajor: "GK_COLUMN_MAJOR"}
_DEFAULT_SLOPE = "0.01"  # gemmkit.Gemm.set_activation's default leaky_relu slope


@dataclasses.dataclass(frozen=True)
class Parameter:
    """One parameter of the exported `run`, as its torch schema and its Python signature spell it."""

    name: str
    schema_type: str
    default: Optional[str] = None

    def schema(self) -> str:
        return f"{self.schema_type} {self.name}" + (f"={self.default}" if self.default is not None else "")

    def python(self) -> str:
        return self.name + (f"={self.default}" if self.default is not None else "")


# ---- one binding per operation kind: a row of _BINDINGS per kernel family -------------------------------------


@dataclasses.dataclass(frozen=True)
class _Binding:
    template: str  # file in templates/
    placeholders: Callable[[KernelSpec, str], dict[str, str]]
    glue: str  # the op kind's torch glue source in templates/ and gemmkit/, compiled beside the binding


def _abi_dtype(element: DataType) -> str:
    if element not in _ABI_DTYPES:
        raise ConfigError(f"element type {element.name} has no torch dtype; export a kernel with f16, bf16, f32, f64, "
                          "s8, u8 or s32 operands.")
    return _ABI_DTYPES[element]


# A Gemm's operands and every kind's epilogue scalars, as run's signature spells them.
_GEMM_OPERANDS = [Parameter("A", "Tensor"), Parameter("B", "Tensor"), Parameter("C", "Tensor?", "None")]
_EPILOGUE_SCALARS = [Parameter("alpha", "float", "1.0"), Parameter("beta", "float", "0.0")]


def _placeholders(spec: KernelSpec, name: str, operands: list[Parameter], returns: str,
                  refusals: tuple[tuple[bool, str], ...] = (), options: tuple[Parameter, ...] = ()) -> dict[str, str]:
    """What every binding shares. Refuses the kernel with the first of `refusals` that holds (a condition and why
    the exported run cannot take the kernel, said after "kernel <its name>"); then the placeholders every template
    has: the names, run's signature (`operands`, the epilogue's scalars alpha and beta, the kind's `options`, then a
    leaky_relu slope, returning `returns`) and the activation."""
    for refused, reason in refusals:
        if refused:
            raise ConfigError(f"kernel {spec.name()} {reason}")
    leaky = spec.activation == Activation.leaky_relu  # the slope is a run-time argument of the kernel
    parameters = operands + _EPILOGUE_SCALARS + list(options)
    if leaky:
        parameters.append(Parameter("slope", "float", _DEFAULT_SLOPE))
    return {
        "name": name,
        "version": _gemmkit.__version__,
        "kernel_name": spec.name(),
        "run_arguments": ", ".join(p.python() for p in parameters),
        "schema": "run(" + ", ".join(p.schema() for p in parameters) + f") -> {returns}",
        "takes_slope": "1" if leaky else "0",
        "activation": spec.activation.name,
    }


def _gemm_refusals(spec: KernelSpec) -> tuple[tuple[bool, str], ...]:
    return (
        (spec.bias != BiasMode.none, "adds a bias vector, which the exported run does not take yet; export a plan "
         "without a bias (plan.bias = 'none') and add the bias with C (beta=1)."),
        (spec.scale != ScaleMode.none, "takes scale vectors, which the exported run does not take yet; export a plan "
         "without them (plan.scale = 'none')."),
        (spec.block_scaling != BlockScaling.none, "takes block scales, which the exported run does not take yet; "
         "use gemmkit.torch.scaled_mm, or export a plan without them (plan.block_scaling = 'none')."),
    )


def _gemm_placeholders(spec: KernelSpec, name: str) -> dict[str, str]:
    return {**_placeholders(spec, name, _GEMM_OPERANDS, "Tensor", _gemm_refusals(spec)), **_gemm_kernel(spec)}


def _gemm_kernel(spec: KernelSpec) -> dict[str, str]:
    """A Gemm kernel's operands as its binding declares them (gk_torch_gemm_kernel)."""
    has_c = spec.element_C != DataType.void
    return {
        "dtype_a": _abi_dtype(spec.element_A),
        "dtype_b": _abi_dtype(spec.element_B),
        "dtype_c": _abi_dtype(spec.element_C if has_c else spec.element_D),
        "dtype_d": _abi_dtype(spec.element_D),
        "layout_a": _ABI_LAYOUTS[spec.layout_A],
        "layout_b": _ABI_LAYOUTS[spec.layout_B],
        "layout_c": _ABI_LAYOUTS[spec.layout_C],
        "alignment_a": str(spec.alignment_A),
        "alignment_b": str(spec.alignment_B),
        "alignment_c": str(spec.alignment_C),
        "alignment_d": str(spec.alignment_D),
        "has_c": "1" if has_c else "0",
        # What a kernel that takes its epilogue at launch applies (gk_activation).
        "abi_activation": "GK_ACTIVATION_" + spec.activation.name.upper(),
    }


# ---- Gemm kernels with an epilogue visitor tree: run takes the tree's tensors and scalars after its own ----------

# run's own parameters (in the glue's order, torch_export_gemm.cpp's RunArgument) and torch's receiver name: no tree
# argument may take one of these names, but for the tree's alpha and beta, which are run's own.
_RUN_NAMES = frozenset(p.name for p in _GEMM_OPERANDS + _EPILOGUE_SCALARS) | {"self"}
# Node kinds by the operand the launch takes for them (the glue's gk_torch_visitor_kind).
_TENSOR_KINDS = {
    "matrix": "GK_TORCH_VISITOR_MATRIX", "store": "GK_TORCH_VISITOR_MATRIX",
    "row_broadcast": "GK_TORCH_VISITOR_ROW", "row_reduction": "GK_TORCH_VISITOR_ROW",
    "column_broadcast": "GK_TORCH_VISITOR_COLUMN", "column_reduction": "GK_TORCH_VISITOR_COLUMN",
    "scalar_reduction": "GK_TORCH_VISITOR_PER_BATCH",
}
_VALUE_KINDS = ("scalar", "constant")
_NO_DATA_KINDS = ("accumulator", "source", "compute")
_OUTPUT_KINDS = ("store", "row_reduction", "column_reduction", "scalar_reduction")
# The atomics accumulate into a reduction's output, which run first fills with these bytes, as gemmkit's run does:
# zeros start a sum; all-ones bytes start a maximum (the f32 atomic maximum compares bits as integers, and 0xffffffff
# loses to every value both ways).
_REDUCTION_FILLS = {"sum": "0x00", "max": "0xff"}
_ELEMENT_BYTES = {DataType.f16: 2, DataType.bf16: 2, DataType.f32: 4, DataType.tf32: 4, DataType.f64: 8,
                  DataType.s8: 1, DataType.u8: 1, DataType.s32: 4}
assert set(_ELEMENT_BYTES) == set(_ABI_DTYPES), "an ABI dtype needs its size here"

Node = dict[str, object]


def _check_visitor_node(spec: KernelSpec, index: int, node: Node) -> None:
    """Refuses a node the exported run cannot take, before anything is written."""
    kind, name = str(node["kind"]), str(node["name"])
    where = f"kernel {spec.name()}: its epilogue tree's node {index} ({kind}{' ' + repr(name) if name else ''})"
    if kind not in (*_TENSOR_KINDS, *_VALUE_KINDS, *_NO_DATA_KINDS):
        raise ConfigError(f"{where} is of a kind the PyTorch export does not know yet; run the plan through gemmkit.")
    if kind in _TENSOR_KINDS and node["element"] not in _ABI_DTYPES:
        element = node["element"]
        raise ConfigError(f"{where} is a tensor of {element.name if isinstance(element, DataType) else element}, "
                          "which has no torch dtype the export takes; give it f16, bf16, f32, f64, s8, u8 or s32.")
    if kind.endswith("_reduction") and node["reduce"] not in _REDUCTION_FILLS:
        raise ConfigError(f"{where} reduces by {node['reduce']}; the export fills sum and max reductions only.")
    if kind in _TENSOR_KINDS or kind == "scalar":
        if not _NAME.match(name) or keyword.iskeyword(name):
            raise ConfigError(f"{where} is named {name!r}, which cannot name a parameter of run; name it with a "
                              "Python identifier that is not a keyword.")
        if name in _RUN_NAMES and not (kind == "scalar" and name in ("alpha", "beta")):
            raise ConfigError(f"{where} is named {name!r} like a parameter of run itself; rename it.")


def _visitor_parameters(tree: _gemmkit.Epilogue, nodes: list[Node]) -> list[Parameter]:
    """The tree's named inputs, then its outputs, as run's parameters after its own (the tree's alpha and beta are
    run's). Each defaults to None only so that it may follow alpha and beta: the glue refuses a missing one by name.
    Outputs are written in place, which their alias annotations tell torch."""
    kinds = {str(node["name"]): str(node["kind"]) for node in nodes if node["name"]}
    parameters = []
    for name in tree.inputs:
        if name not in ("alpha", "beta"):
            parameters.append(Parameter(name, "float?" if kinds[name] == "scalar" else "Tensor?", "None"))
    for position, name in enumerate(tree.outputs):
        parameters.append(Parameter(name, f"Tensor(a{position}!)?", "None"))
    return parameters


def _access_bytes(spec: KernelSpec, node: Node) -> int:
    """The vector the kernel moves a tensor in, as gemmkit's run checks it (the families' visitor_access_bytes): TMA's
    16 bytes for SM90 matrices, C's vector in the tensor's elements (at most 16 bytes) for CUTLASS 2.x matrices and
    row vectors, else 0 (element by element)."""
    kind = node["kind"]
    matrix = kind in ("matrix", "store")
    if spec.family == KernelFamily.sm80_universal:
        element = node["element"]
        assert isinstance(element, DataType)
        return min(16, spec.alignment_C * _ELEMENT_BYTES[element]) if matrix or kind == "row_broadcast" else 0
    return 16 if matrix else 0


def _cpp_double(value: float) -> str:
    if math.isnan(value):
        return "std::numeric_limits<double>::quiet_NaN()"
    if math.isinf(value):
        return ("-" if value < 0 else "") + "std::numeric_limits<double>::infinity()"
    return repr(value)  # the shortest text that reads back as this double, in C++ as in Python


def _visitor_node_call(spec: KernelSpec, node: Node, positions: dict[str, int]) -> str:
    """One node as the binding lists it: where the launch's operand for it comes from."""
    kind, name = str(node["kind"]), str(node["name"])
    if kind == "constant":
        value = node["value"]
        assert isinstance(value, float)
        call = f"visitor::constant({_cpp_double(value)})"
    elif kind == "scalar":
        call = f'visitor::scalar("{name}", {positions[name]})'
    elif kind in _TENSOR_KINDS:
        element = node["element"]
        assert isinstance(element, DataType) and isinstance(node["layout"], LayoutType)
        tensor = f'"{name}", {positions[name]}, {_ABI_DTYPES[element]}'
        if kind == "store":
            call = f"visitor::store({tensor}, {_ABI_LAYOUTS[node['layout']]}, {_access_bytes(spec, node)})"
        elif kind in _OUTPUT_KINDS:
            call = f"visitor::reduction({_TENSOR_KINDS[kind]}, {tensor}, {_REDUCTION_FILLS[str(node['reduce'])]})"
        else:
            call = (f"visitor::input({_TENSOR_KINDS[kind]}, {tensor}, {_ABI_LAYOUTS[node['layout']]}, "
                    f"{_access_bytes(spec, node)})")
    else:
        call = "visitor::none()"
    return call + ","


def _visitor_node_lines(spec: KernelSpec, nodes: list[Node], positions: dict[str, int]) -> str:
    """The binding's table of nodes: one line each, with a comment that says which node it is."""
    calls = [_visitor_node_call(spec, node, positions) for node in nodes]
    width = max(map(len, calls))
    return "\n".join(f"    {call:<{width}}  // {index}: {_describe_node(node)}"
                     for index, (call, node) in enumerate(zip(calls, nodes)))


def _describe_node(node: Node) -> str:
    """A node as the binding's comments name it: its kind and name, or its operation and inputs (by index)."""
    kind = str(node["kind"])
    if kind in ("accumulator", "source"):
        return "accum" if kind == "accumulator" else "C"
    if kind == "compute":
        activation = node["activation"]
        op = activation.name if node["op"] == "activation" and isinstance(activation, Activation) else node["op"]
        inputs = node["inputs"]
        assert isinstance(inputs, list)
        return f"{op}({', '.join(map(str, inputs))})"
    if kind.endswith("_reduction"):
        return f"{kind} {node['reduce']} {node['name']}"
    return f"{kind} {node['name']}" if node["name"] else kind


def _visitor_placeholders(spec: KernelSpec, name: str) -> dict[str, str]:
    tree = spec.epilogue_visitor
    assert tree is not None  # _binding_for chose this binding for it
    nodes = tree.nodes
    for index, node in enumerate(nodes):
        _check_visitor_node(spec, index, node)
    tree_parameters = _visitor_parameters(tree, nodes)
    common = _placeholders(spec, name, _GEMM_OPERANDS, "Tensor", _gemm_refusals(spec), tuple(tree_parameters))
    del common["activation"]  # the tree replaces the kernel's activation
    positions = {p.name: i for i, p in enumerate(_GEMM_OPERANDS + _EPILOGUE_SCALARS + tree_parameters)}
    formulas = str(tree).splitlines()
    return {
        **common,
        **_gemm_kernel(spec),
        "formulas": "\n".join(f"//   {formula}" for formula in formulas),
        "outputs": ", ".join(tree.outputs) or "none",
        "visitor_nodes": _visitor_node_lines(spec, nodes, positions),
        "visitor_count": str(len(nodes)),
        "reads_c": "1" if tree.reads_source else "0",
        "doc": "; ".join(formulas) + f" by the CUTLASS kernel {spec.name()}",
    }


def _grouped_placeholders(spec: KernelSpec, name: str) -> dict[str, str]:
    """A grouped kernel describes its operands itself (gk_grouped_describe); its binding only names run's schema."""
    for element in (spec.element_A, spec.element_B, spec.element_C, spec.element_D):
        _abi_dtype(element)  # refused here, before anything is written, rather than when the extension loads
    operands = [Parameter("As", "Tensor[]"), Parameter("Bs", "Tensor[]"), Parameter("Cs", "Tensor[]?", "None")]
    return _placeholders(spec, name, operands, "Tensor[]")


@dataclasses.dataclass(frozen=True)
class _ConvKindExport:
    """How one conv kind's exported run reads: the output size it takes first (dgrad, wgrad), what it returns, what it
    computes (for the module's doc) and the glue's name of the kind."""

    size: Optional[str]
    result: str
    formula: str
    abi: str


_CONV_KINDS = {
    ConvKind.fprop: _ConvKindExport(None, "output", "torch.nn.functional.conv2d(A, B)", "GK_TORCH_FPROP"),
    ConvKind.dgrad: _ConvKindExport("input_size", "grad_input", "torch.nn.grad.conv2d_input(input_size, B, A)",
                                    "GK_TORCH_DGRAD"),
    ConvKind.wgrad: _ConvKindExport("weight_size", "grad_weight", "torch.nn.grad.conv2d_weight(B, weight_size, A)",
                                    "GK_TORCH_WGRAD"),
}
_CONV_OPERANDS = [Parameter("A", "Tensor"), Parameter("B", "Tensor"), Parameter("C", "Tensor?", "None"),
                  Parameter("stride", "int[2]", "1"), Parameter("padding", "int[2]", "0"),
                  Parameter("dilation", "int[2]", "1")]
_SPLIT_K_OPTIONS = (Parameter("split_k_mode", "str", "'serial'"), Parameter("split_k_slices", "int", "1"))


def _conv2d_placeholders(spec: KernelSpec, name: str) -> dict[str, str]:
    assert spec.conv_kind is not None  # the conv families' kernels have one
    kind = _CONV_KINDS[spec.conv_kind]
    sm90 = spec.family == KernelFamily.sm90_conv2d
    operands = ([Parameter(kind.size, "int[4]")] if kind.size else []) + _CONV_OPERANDS
    common = _placeholders(spec, name, operands, "Tensor", options=_SPLIT_K_OPTIONS)
    parallel = spec.split_k_mode == SplitKMode.parallel
    return {
        **common,
        "kind": spec.conv_kind.name,
        "result": kind.result,
        "formula": kind.formula,
        "conv_kind": kind.abi,
        "dtype_a": _abi_dtype(spec.element_A),
        "dtype_b": _abi_dtype(spec.element_B),
        "dtype_c": _abi_dtype(spec.element_C),
        "dtype_d": _abi_dtype(spec.element_D),
        "alignment_a": str(spec.alignment_A),
        "alignment_b": str(spec.alignment_B),
        "alignment_c": str(spec.alignment_C),
        "alignment_d": str(spec.alignment_D),
        "split_k": ("GK_TORCH_SPLIT_K_NONE" if sm90 else
                    "GK_TORCH_SPLIT_K_PARALLEL" if parallel else "GK_TORCH_SPLIT_K_SERIAL"),
        "kernel_cc": "90" if sm90 else "80",
        "unit_stride": "1" if spec.conv_kind == ConvKind.dgrad and spec.stride_support == StrideSupport.unity else "0",
    }


_GEMM = _Binding("gemm.cpp.in", _gemm_placeholders, "torch_export_gemm.cpp")
_GEMM_VISITOR = _Binding("gemm_visitor.cpp.in", _visitor_placeholders, "torch_export_gemm.cpp")
_GROUPED = _Binding("grouped.cpp.in", _grouped_placeholders, "torch_export_grouped.cpp")
_CONV2D = _Binding("conv2d.cpp.in", _conv2d_placeholders, "torch_export_conv2d.cpp")
_BINDINGS: dict[KernelFamily, _Binding] = {
    KernelFamily.sm80_universal: _GEMM,
    KernelFamily.sm90_collective: _GEMM,
    KernelFamily.sm80_grouped: _GROUPED,
    KernelFamily.sm90_grouped: _GROUPED,
    KernelFamily.sm80_conv2d: _CONV2D,
    KernelFamily.sm90_conv2d: _CONV2D,
}


def _binding_for(op: object) -> _Binding:
    if not isinstance(op, KernelSpec):
        raise TypeError(f"Operation type {type(op).__name__} is not currently supported for PyTorch emission; pass "
                        "the op a plan's construct() returns (e.g. gemmkit.Gemm(...).construct()).")
    if op.family not in _BINDINGS:
        raise NotImplementedError(f"PyTorch emission of {op.family.name} kernels ({op.name()}) is not implemented "
                                  "yet; Gemm, GroupedGemm and Conv2d kernels export.")
    binding = _BINDINGS[op.family]
    return _GEMM_VISITOR if binding is _GEMM and op.epilogue_visitor is not None else binding
