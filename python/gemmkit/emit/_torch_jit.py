"""python/gemmkit/emit/_torch_jit.py: gemmkit.emit.pytorch(jit=True), the exported extension built and loaded in this
process: the kernel as one shared object from gemmkit's cache, the op kind's torch glue from a per-torch cache (built
once per machine), both copied beside the extension, then the binding compiled against them and imported. torch
cannot register a torch.ops namespace twice, so the modules this process loaded are kept by name.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import fcntl
import hashlib
import importlib.util
import os
import shutil
import subprocess
import tempfile
import threading
import time
import types

from .. import _gemmkit
from .._gemmkit import CompiledKernel, ConfigError, KernelSpec
from ._torch_files import _GLUE_HEADERS, _copy_file

# A C++ runtime that the compiler links statically (the GPU machine's g++ does) stays private to each library, as
# in gemmkit's own extension: two exported copies of its state in one process crashed there.
_PRIVATE_RUNTIME = "-Wl,--exclude-libs,ALL"
_loaded: dict[str, tuple[str, types.ModuleType]] = {}  # torch.ops namespaces this process registered: name -> module
_loaded_lock = threading.Lock()


@dataclasses.dataclass(frozen=True)
class JitBuild:
    """How a jit=True export was built (the module's `gemmkit_build` attribute)."""

    kernel: CompiledKernel  # gemmkit's cache entry of the kernel (cache_hit, build_seconds)
    kernel_library: str  # its copy next to the extension, which the extension links
    glue_library: str  # the copy of gemmkit's torch glue the extension links
    glue_seconds: float  # its build; 0 when it came from the cache (built once per torch installation)
    binding_seconds: float  # torch's build of <name>.cpp, linking both libraries
    total_seconds: float


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


# Built with torch's BuildExtension, as setup.py builds, but without ninja (one source per library, nothing to
# schedule; and a ninja that does not run, as on the GPU machine, would stop torch.utils.cpp_extension.load).
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
