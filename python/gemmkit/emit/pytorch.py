"""python/gemmkit/emit/pytorch.py: gemmkit.emit.pytorch, a kernel as a PyTorch CUDA extension.

It writes <name>_kernel.cu (the very source gemmkit compiles), <name>.cpp (the binding, which includes no torch
header: a Gemm or Conv2d kernel's description, or a grouped kernel's run schema, since grouped kernels describe
themselves), gemmkit/ (gemmkit's device headers and its torch glue, torch_export_<kind>.cpp: checks, launch, op
registration) and setup.py (an ahead-of-time build of all three, with gemmkit's nvcc flags for the kernel). With
jit=True it builds in seconds: the kernel library comes from gemmkit's cache (built there when missing) and the glue
library from a per-torch cache, both placed next to the extension, so that only the binding is compiled.
Its parts: _torch_bindings (the binding of each kernel kind), _torch_files (the other files), _torch_jit (the
jit build).
"""
from __future__ import annotations

import keyword
import os
import types
from typing import Optional

from .. import _gemmkit
from .._gemmkit import ConfigError, KernelSpec, Toolchain
from ._torch_bindings import _NAME, Parameter, _binding_for
from ._torch_files import _copy_headers, _render, _setup_py, _write_text
from ._torch_jit import JitBuild, _jit_build

__all__ = ["Parameter", "JitBuild", "pytorch"]

# Namespaces torch or gemmkit already register ops under: an extension of that name could not register its own.
_RESERVED_NAMES = frozenset({"aten", "prim", "prims", "torch", "gemmkit"})


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


def _check_name(name: object) -> None:
    if not isinstance(name, str) or not _NAME.match(name) or keyword.iskeyword(name):
        raise ConfigError(f"name {name!r} must be a Python identifier (letters, digits, underscores; not a "
                          "keyword): it names the module, the files and the torch.ops namespace.")
    if name in _RESERVED_NAMES:
        raise ConfigError(f"name {name!r} is a torch.ops namespace torch or gemmkit registers already; choose "
                          "another.")
