"""python/gemmkit/emit/_torch_files.py: the files of a gemmkit.emit.pytorch export besides the kernel's source: its
templates rendered ({{key}} placeholders), setup.py with gemmkit's nvcc flags for the kernel, and gemmkit/ (the device
headers and the torch glue) copied. Each file is written whole, by rename: another process may read an earlier export.
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile

from .. import _gemmkit
from .._gemmkit import KernelSource, KernelSpec, Toolchain
from ._torch_bindings import _BINDINGS

_TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")

# gemmkit's torch glue, written into gemmkit/ beside the device headers: these headers and one source per op kind
# (_Binding.glue); a kind's library is built from its source and _GLUE_HEADERS (torch_export.h includes the device
# header abi.h); torch_module.h goes into every binding.
_GLUE_TEMPLATE_HEADERS = ("torch_export.h", "torch_module.h", "torch_export_common.h")
_GLUE_HEADERS = ("abi.h", "torch_export.h", "torch_export_common.h")

# The files that nvcc_command() names itself, which setup.py replaces with its own.
_SOURCE, _OUTPUT = "kernel.cu", "kernel.so"
# torch's CUDAExtension defines these for every nvcc call; gemmkit compiles without them.
_UNDO_TORCH_NVCC_DEFINES = ["-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
                            "-U__CUDA_NO_BFLOAT16_CONVERSIONS__", "-U__CUDA_NO_HALF2_OPERATORS__"]


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
