"""python/gemmkit/emit/pytorch.py: gemmkit.emit.pytorch, a kernel as a PyTorch CUDA extension.

It writes <name>_kernel.cu (the very source gemmkit compiles), <name>.cpp (the binding, which includes no torch
header: a Gemm or Conv2d kernel's description, or a grouped kernel's run schema, since grouped kernels describe
themselves),
gemmkit/ (gemmkit's device headers and its torch glue, torch_export_<kind>.cpp: checks, launch, op registration) and
setup.py (an ahead-of-time build of all three, with gemmkit's nvcc flags for the kernel). With jit=True it builds in seconds: the kernel library comes from gemmkit's cache (built there when
missing) and the glue library from a per-torch cache, both placed next to the extension, so that only the binding
is compiled.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import fcntl
import hashlib
import importlib.util
import keyword
import math
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import types
from typing import Callable, Optional

from .. import _gemmkit
from .._gemmkit import (Activation, BiasMode, CompiledKernel, ConfigError, ConvKind, DataType, KernelFamily,
                        KernelSource, KernelSpec, LayoutType, ScaleMode, SplitKMode, StrideSupport, Toolchain)

_TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# Namespaces torch or gemmkit already register ops under: an extension of that name could not register its own.
_RESERVED_NAMES = frozenset({"aten", "prim", "prims", "torch", "gemmkit"})

# gemmkit's element types and layouts as abi.h spells them (the glue maps them to torch's).
_ABI_DTYPES = {
    DataType.f16: "GK_DTYPE_F16", DataType.bf16: "GK_DTYPE_BF16", DataType.f32: "GK_DTYPE_F32",
    DataType.tf32: "GK_DTYPE_TF32", DataType.f64: "GK_DTYPE_F64", DataType.s8: "GK_DTYPE_S8",
    DataType.u8: "GK_DTYPE_U8", DataType.s32: "GK_DTYPE_S32",
}
_ABI_LAYOUTS = {LayoutType.RowMajor: "GK_ROW_MAJOR", LayoutType.ColumnMajor: "GK_COLUMN_MAJOR"}
# gemmkit's torch glue, written into gemmkit/ beside the device headers: these headers and one source per op kind
# (_Binding.glue); a kind's library is built from its source and _GLUE_HEADERS (torch_export.h includes the device
# header abi.h); torch_module.h goes into every binding.
_GLUE_TEMPLATE_HEADERS = ("torch_export.h", "torch_module.h", "torch_export_common.h")
_GLUE_HEADERS = ("abi.h", "torch_export.h", "torch_export_common.h")
_DEFAULT_SLOPE = "0.01"  # gemmkit.Gemm.set_activation's default leaky_relu slope

# The files that nvcc_command() names itself, which setup.py replaces with its own.
_SOURCE, _OUTPUT = "kernel.cu", "kernel.so"
# torch's CUDAExtension defines these for every nvcc call; gemmkit compiles without them.
_UNDO_TORCH_NVCC_DEFINES = ["-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
                            "-U__CUDA_NO_BFLOAT16_CONVERSIONS__", "-U__CUDA_NO_HALF2_OPERATORS__"]


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


@dataclasses.dataclass(frozen=True)
class JitBuild:
    """How a jit=True export was built (the module's `gemmkit_build` attribute)."""

    kernel: CompiledKernel  # gemmkit's cache entry of the kernel (cache_hit, build_seconds)
    kernel_library: str  # its copy next to the extension, which the extension links
    glue_library: str  # the copy of gemmkit's torch glue the extension links
    glue_seconds: float  # its build; 0 when it came from the cache (built once per torch installation)
    binding_seconds: float  # torch's build of <name>.cpp, linking both libraries
    total_seconds: float


def pytorch(op: KernelSpec, name: str, cc: int, sourcedir: str = "", jit: bool = False) -> Optional[types.ModuleType]:
    """Writes `op` (a plan's construct() result) as the PyTorch extension `name` into `sourcedir`:
    <name>_kernel.cu, <name>.cpp, setup.py and gemmkit/ (headers, torch glue). `cc` must be the op's.
    With jit=True, builds and returns the module; its `run` is torch.ops.<name>.run:
    Gemm: run(A, B, C=None, alpha=1.0, beta=0.0) -> D;
    Gemm with an epilogue visitor tree (plan.epilogue_visitor): run(A, B, C=None, alpha=1.0, beta=0.0, <the tree's
    named inputs, then its outputs>) -> D, the tree's arguments in the order of Epilogue.inputs then Epilogue.outputs
    (gemmkit.epilogue.trace's inputs and outputs), by position or by name: scalars as floats (the tree's alpha and
    beta are run's own alpha and beta, not repeated), tensors as torch tensors. Each is required (its default None
    only lets it follow alpha and beta) and checked before anything runs as gemmkit's run checks visitor_args: its
    dtype, its shape ((m, n) for a matrix, (1, n) or (n,) for a row vector, (m, 1) for a column vector, (1,) for a
    scalar reduction, each also one per batch: (L, m, n), (L, 1, n), (L, m, 1), (L,)), contiguity, 16-byte rows and
    address for matrices on SM90 (C's vectors on CUTLASS 2.x kernels) and its device, a ValueError naming the argument
    otherwise. The outputs (stores and reductions) are given, not returned: run writes them in place (a reduction's
    output first set to 0 for a sum, to all-ones bytes for a max) and returns D. C is required when the tree reads it
    and refused when it does not; an alpha or beta other than 1 and 0 is refused when the tree has no such scalar.
    A tree whose node the export cannot express (a tensor of a type torch has no dtype for here, a name that cannot
    name one of run's parameters) is refused before any file is written;
    GroupedGemm: run(As, Bs, Cs=None, alpha=1.0, beta=0.0) -> [D[0], ...], all groups in one launch;
    Conv2d fprop: run(A, B, C=None, stride=1, padding=0, dilation=1, alpha=1.0, beta=0.0, split_k_mode='serial',
    split_k_slices=1) -> output, A the input (N, C, H, W), B the weight (K, C, R, S); dgrad: run(input_size, A, B, ...)
    -> grad_input of input_size (N, C, H, W), A the grad_output (N, K, P, Q), B the weight; wgrad: run(weight_size, A,
    B, ...) -> grad_weight of weight_size (K, C, R, S), A the grad_output, B the input (dgrad and wgrad take the output
    size because several H / W or R / S give the same P / Q). All tensors torch's, in channels_last memory; stride /
    padding / dilation ints or (h, w). split_k_slices > 1 splits the reduction as the exported kernel does: the direct
    kernel (plan.construct()) with split_k_mode='serial', a parallel split-K module (what plan.spec_for(...) returns
    after plan.set_split_k('parallel', slices): partial sums, then a reduction kernel) with split_k_mode='parallel';
    the other mode is refused with what to export. SM90 conv kernels (kernel_cc=90) split nothing and compute dgrad
    at unit stride only; run refuses the rest, naming kernel_cc=80.
    Leaky_relu kernels also take slope=0.01, last. The outputs are new tensors on the operands' device, allocated and
    computed on its current stream. run is not differentiable (gemmkit.torch.gemm is).
    Without jit nothing is compiled (no nvcc, no torch needed) and None is returned."""
    binding = _binding_for(op)
    _check_name(name)
    if cc != op.cc:
        raise ConfigError(f"cc={cc} but the kernel {op.name()} was constructed for cc {op.cc} ({op.arch_flag()}); pass "
                          "the plan's cc (plan.cc) or construct the op for this cc.")
    # Everything rendered before anything is written: a refused op leaves no files behind.
    source = _gemmkit.render(op)
    binding_text = _render(binding.template, binding.placeholders(op, name))
    toolchain = Toolchain.find_headers()
    setup_text = _setup_py(op, name, source, toolchain, binding.glue)
    sourcedir = os.path.abspath(sourcedir or os.curdir)
    os.makedirs(sourcedir, exist_ok=True)
    _write_text(os.path.join(sourcedir, f"{name}_kernel.cu"), source.text)
    binding_path = os.path.join(sourcedir, f"{name}.cpp")
    _write_text(binding_path, binding_text)
    _write_text(os.path.join(sourcedir, "setup.py"), setup_text)
    _copy_headers(toolchain.device_include_dir, os.path.join(sourcedir, "gemmkit"))
    return _jit_build(op, name, sourcedir, binding_path, binding.glue) if jit else None


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


def _one_module(op: KernelSpec) -> CompiledKernel:
    """The kernel as one shared object (host code and device code together), the library the extension links: a
    split build's host module needs its cubin bound at load time, which gemmkit's loader does and torch's does not.
    The split build is turned off for this one compile (other threads' compiles meanwhile may build in one pass too,
    which is correct, only slower)."""
    with _split_build_lock:
        previous = os.environ.get("GEMMKIT_SPLIT_BUILD")
        os.environ["GEMMKIT_SPLIT_BUILD"] = "0"
        try:
            kernel: CompiledKernel = _gemmkit.compile_many([op])[0]
        finally:
            if previous is None:
                del os.environ["GEMMKIT_SPLIT_BUILD"]
            else:
                os.environ["GEMMKIT_SPLIT_BUILD"] = previous
    return kernel


_split_build_lock = threading.Lock()


def _check_name(name: object) -> None:
    if not isinstance(name, str) or not _NAME.match(name) or keyword.iskeyword(name):
        raise ConfigError(f"name {name!r} must be a Python identifier (letters, digits, underscores; not a "
                          "keyword): it names the module, the files and the torch.ops namespace.")
    if name in _RESERVED_NAMES:
        raise ConfigError(f"name {name!r} is a torch.ops namespace torch or gemmkit registers already; choose "
                          "another.")


# ---- files ---------------------------------------------------------------------------------------------------


def _render(template: str, values: dict[str, str]) -> str:
    """{{key}} substitution; like gemmkit's kernel templates, every placeholder set and every value used."""
    with open(os.path.join(_TEMPLATES, template), encoding="utf-8") as f:
        text = f.read()
    used = set(re.findall(r"\{\{(\w+)\}\}", text))
    if used != set(values):
        raise AssertionError(f"template {template}: unset {sorted(used - set(values))}, unused "
                             f"{sorted(set(values) - used)}")
    return re.sub(r"\{\{(\w+)\}\}", lambda match: values[match.group(1)], text)


def _nvcc_flags(toolchain: Toolchain, source: KernelSource) -> list[str]:
    """gemmkit's nvcc command for the kernel without what setup.py sets itself: the compiler, the files, linking
    a standalone shared object (-shared, -cudart) and the include folders."""
    argv = _gemmkit.nvcc_command(toolchain, source, _SOURCE, _OUTPUT)[1:]
    flags: list[str] = []
    skip_next = False
    for flag in argv:
        if skip_next:
            skip_next = False
        elif flag in ("-o", "-cudart"):
            skip_next = True
        elif flag not in (_SOURCE, "-shared") and not flag.startswith("-I"):
            flags.append(flag)
    return flags + _UNDO_TORCH_NVCC_DEFINES


def _setup_py(op: KernelSpec, name: str, source: KernelSource, toolchain: Toolchain, glue: str) -> str:
    flags = _nvcc_flags(toolchain, source)
    return _render("setup.py.in", {
        "name": name,
        "glue": glue,
        "version": _gemmkit.__version__,
        "kernel_name": op.name(),
        "cutlass_default": toolchain.cutlass_root,
        "nvcc_flags": "[\n" + "".join(f"    {flag!r},\n" for flag in flags) + "]",
    })


def _write_text(path: str, text: str) -> None:
    """Written whole or not at all (another process may be reading an earlier export)."""
    folder = os.path.dirname(path)
    with tempfile.NamedTemporaryFile("w", dir=folder, delete=False, encoding="utf-8", suffix=".tmp") as f:
        f.write(text)
    os.replace(f.name, path)


def _copy_file(source: str, destination: str) -> None:
    handle, temporary = tempfile.mkstemp(dir=os.path.dirname(destination), suffix=".tmp")
    os.close(handle)
    shutil.copyfile(source, temporary)
    os.replace(temporary, destination)


def _copy_headers(device_include_dir: str, destination: str) -> None:
    """gemmkit's device headers (those the kernel's cache key hashes) and its torch glue."""
    os.makedirs(destination, exist_ok=True)
    device_headers = os.path.join(device_include_dir, "gemmkit")
    for header in sorted(os.listdir(device_headers)):
        _copy_file(os.path.join(device_headers, header), os.path.join(destination, header))
    for glue in (*_GLUE_TEMPLATE_HEADERS, *sorted({binding.glue for binding in _BINDINGS.values()})):
        _copy_file(os.path.join(_TEMPLATES, glue), os.path.join(destination, glue))


# ---- jit -----------------------------------------------------------------------------------------------------
# Built with torch's BuildExtension, as setup.py builds, but without ninja (one source per library, nothing to
# schedule; and a ninja that does not run, as on the GPU machine, would stop torch.utils.cpp_extension.load).

# A C++ runtime that the compiler links statically (the GPU machine's g++ does) stays private to each library, as
# in gemmkit's own extension: two exported copies of its state in one process crashed there.
_PRIVATE_RUNTIME = "-Wl,--exclude-libs,ALL"
_loaded: dict[str, tuple[str, types.ModuleType]] = {}  # torch.ops namespaces this process registered: name -> module
_loaded_lock = threading.Lock()


def _build_library(name: str, source: str, include_dir: str, build_dir: str, cuda: bool, compile_args: list[str],
                   link_args: list[str]) -> str:
    """Compiles `source` into <build_dir>/<name><EXT_SUFFIX> with torch's flags (and CUDA's with `cuda`)."""
    from setuptools import Distribution
    from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension

    extension = (CUDAExtension if cuda else CppExtension)(
        name, [source], include_dirs=[include_dir],
        extra_compile_args={"cxx": compile_args}, extra_link_args=link_args)
    distribution = Distribution({"name": name, "ext_modules": [extension],
                                 "cmdclass": {"build_ext": BuildExtension.with_options(use_ninja=False)}})
    distribution.verbose = 0
    command = distribution.get_command_obj("build_ext")
    command.build_lib = build_dir
    command.build_temp = os.path.join(build_dir, "objects")
    command.force = True  # its inputs include libraries setuptools does not track
    command.ensure_finalized()
    command.run()
    return command.get_ext_fullpath(name)


def _glue_library(sourcedir: str, glue: str) -> tuple[str, float]:
    """One op kind's torch glue (gemmkit/<glue>) built for this torch, compiler and glue source, once per machine:
    the library and the seconds its build took (0 when cached)."""
    import torch
    from torch.utils import cpp_extension

    compiler = os.environ.get("CXX", "c++")  # the compiler torch's build uses
    compiler_version = subprocess.run([compiler, "--version"], capture_output=True, text=True).stdout
    digest = hashlib.sha256()
    for part in (torch.__version__, str(torch.version.cuda), str(cpp_extension.CUDA_HOME), compiler, compiler_version):
        digest.update(part.encode() + b"\0")
    for file in (*_GLUE_HEADERS, glue):
        with open(os.path.join(sourcedir, "gemmkit", file), "rb") as f:
            digest.update(file.encode() + b"\0" + f.read() + b"\0")
    name = f"gemmkit_torch_{digest.hexdigest()[:16]}"
    folder = os.path.join(_gemmkit.cache_dir(), "torch-glue", name)
    library = os.path.join(folder, f"{name}.so")
    if os.path.isfile(library):  # published by rename: complete when present
        return library, 0.0
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build per machine; the others wait and find it
        if os.path.isfile(library):
            return library, 0.0
        start = time.perf_counter()
        with tempfile.TemporaryDirectory(dir=folder) as work:
            include = os.path.join(work, "gemmkit")
            os.makedirs(include)
            for file in (*_GLUE_HEADERS, glue):
                shutil.copyfile(os.path.join(sourcedir, "gemmkit", file), os.path.join(include, file))
            # -O2: the run path of every exported op; built once, so its build time matters little.
            built = _build_library(name, os.path.join(include, glue), work, work, cuda=True,
                                   compile_args=["-O2"], link_args=[_PRIVATE_RUNTIME])
            os.replace(built, library)
        return library, time.perf_counter() - start


def _jit_build(op: KernelSpec, name: str, sourcedir: str, binding_path: str, glue_source: str) -> types.ModuleType:
    try:
        import torch.utils.cpp_extension  # noqa: F401
    except ImportError as error:
        raise ImportError("gemmkit.emit.pytorch(jit=True) builds with torch.utils.cpp_extension; install "
                          "torch") from error
    with open(binding_path, encoding="utf-8") as f:
        binding = f.read()
    with _loaded_lock:
        if name in _loaded:
            if _loaded[name][0] == binding:
                return _loaded[name][1]
            raise ConfigError(f"torch.ops.{name} was registered in this process by another kernel, and torch cannot "
                              "register a namespace twice; export this one under another name.")
        start = time.perf_counter()
        # Both usually come from their caches; when not, the glue builds while nvcc builds the kernel.
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            glue_build = pool.submit(_glue_library, sourcedir, glue_source)
            kernel = _one_module(op)
            glue, glue_seconds = glue_build.result()
        build_dir = os.path.join(sourcedir, "build-jit")
        os.makedirs(build_dir, exist_ok=True)
        # Both libraries beside the extension, which finds them through $ORIGIN. The kernel's copy is named after
        # its cache key: the dynamic loader reuses an already loaded library of the same file name.
        kernel_library = os.path.join(build_dir, f"lib{name}_{kernel.cache_key[:16]}.so")
        glue_library = os.path.join(build_dir, os.path.basename(glue))
        for source, copy in ((kernel.module_path, kernel_library), (glue, glue_library)):
            if not os.path.isfile(copy):
                _copy_file(source, copy)
        binding_start = time.perf_counter()
        # No -O: the binding only fills a struct.
        path = _build_library(name, binding_path, sourcedir, build_dir, cuda=False, compile_args=[], link_args=[
            f"-L{build_dir}", f"-l:{os.path.basename(kernel_library)}", f"-l:{os.path.basename(glue_library)}",
            "-Wl,-rpath,$ORIGIN", _PRIVATE_RUNTIME])
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        end = time.perf_counter()
        module.gemmkit_build = JitBuild(kernel, kernel_library, glue_library, glue_seconds, end - binding_start,
                                        end - start)
        _loaded[name] = (binding, module)
        return module
