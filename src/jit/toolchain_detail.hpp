// src/jit/toolchain_detail.hpp: the pieces of Toolchain::discover(), taking their inputs as arguments so
// tests can drive them without touching the environment.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "gemmkit/compiler.hpp"

namespace gemmkit::toolchain_detail {

// CUDA_HOME/bin/nvcc, else the first nvcc on `path_env`, else `fallback`; null/empty inputs are skipped.
// Throws ToolchainError saying where it looked and how to fix it.
std::string find_nvcc(const char* cuda_home, const char* path_env, const std::string& fallback);

struct NvccVersion {
  std::string version;  // "13.0"
  std::string build;    // "Build cuda_13.0.r13.0/compiler.36424714_0"
};
// Parses `nvcc --version`; throws ToolchainError when unparsable or older than 12.4.
NvccVersion parse_nvcc_version(const std::string& output);

// The CUTLASS root: `cutlass_path_env` if set, else the first of `candidates` (the installed copies, then the
// configured default) that holds include/cutlass/cutlass.h, include/cutlass/version.h and tools/util/include.
// Throws ToolchainError naming where it looked, with the fix.
std::string find_cutlass(const char* cutlass_path_env, const std::vector<std::string>& candidates);

// The folders an installed gemmkit keeps its data in (device/include, cutlass/), given the folder of the binary
// that holds gemmkit's code: the CMake install's <libdir>/`data_from_lib` (share/gemmkit) and, for the Python
// package, the binary's own folder (the package, beside _gemmkit*.so and libgemmkit.so). Empty for an empty input.
std::vector<std::string> installed_data_dirs(const std::string& binary_dir, const std::string& data_from_lib);
// installed_data_dirs of the binary this code is linked into (libgemmkit.so, or the Python extension).
const std::vector<std::string>& own_data_dirs();

// "MAJOR.MINOR.PATCH" from the text of include/cutlass/version.h; empty if the defines are missing.
std::string parse_cutlass_version(const std::string& version_h);

// Every regular file below `dir` (gemmkit's device/include), by its path relative to `dir` ("gemmkit/abi.h"): the
// SHA-256 of its contents and the gemmkit headers it includes.
std::map<std::string, Toolchain::DeviceHeader> scan_device_headers(const std::string& dir);

// The gemmkit headers a text includes ("gemmkit/..." in quotes or angle brackets), in order of appearance.
std::vector<std::string> gemmkit_includes(const std::string& text);

// The host compiler nvcc will use: NVCC_CCBIN (a compiler, or a folder holding g++), else "g++".
std::string host_compiler_command(const char* nvcc_ccbin);

}  // namespace gemmkit::toolchain_detail
