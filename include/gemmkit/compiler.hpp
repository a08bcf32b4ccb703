// include/gemmkit/compiler.hpp: finding nvcc and CUTLASS, and turning one KernelSource into one shared object.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "gemmkit/codegen.hpp"
#include "gemmkit/errors.hpp"

namespace gemmkit {

// Everything about the build environment that can change a compiled module. All of it enters the cache key but the
// host compiler's version: a module's interface is C and its code the same kernel, so a module built by another
// g++ for the same host target is reused (a pack built on a machine without a GPU hits on the GPU machine).
struct Toolchain {
  std::string nvcc;                // absolute path of nvcc
  std::string cuda_home;           // its toolkit root
  std::string nvcc_version;        // "13.0"
  std::string nvcc_build;          // nvcc's full build line, e.g. "Build cuda_13.0.r13.0/compiler.36424714_0"
  std::string host_compiler;       // e.g. "g++ (Debian 12.2.0-14) 12.2.0" (recorded in manifests, not in keys)
  std::string host_target;         // the host compiler's `-dumpmachine`, e.g. "x86_64-linux-gnu"
  std::string cutlass_root;        // holds include/ and tools/util/include
  std::string cutlass_version;     // "4.2.0"
  std::string device_include_dir;  // gemmkit's device/include
  // gemmkit's device headers by include path ("gemmkit/abi.h"): a kernel's cache key hashes only those its source
  // includes, directly or through one another (included_headers_digest), so editing one glue header leaves the
  // kernels that do not include it, and the packs that hold them, valid.
  struct DeviceHeader {
    std::string sha256;                 // of its contents
    std::vector<std::string> includes;  // the gemmkit headers it includes, by include path
    bool operator==(const DeviceHeader&) const = default;
  };
  std::map<std::string, DeviceHeader> device_headers;

  // Finds the toolkit (CUDA_HOME, `which nvcc`, /usr/local/cuda) and CUTLASS (CUTLASS_PATH, then the
  // configured default). Cached after the first call. Throws ToolchainError saying how to fix it.
  static const Toolchain& discover();
  // The same search, uncached: reads the environment again (tests; a program that changed CUTLASS_PATH).
  static Toolchain discover_uncached();
  // The part of the search that runs no program: CUTLASS (cutlass_root, cutlass_version) and gemmkit's device
  // headers (device_include_dir, device_headers); the nvcc and host-compiler fields (host_target too) stay empty.
  // Exporters (gemmkit.emit) write build files with it on machines without the CUDA toolkit. Throws ToolchainError.
  static Toolchain find_headers();
};

// SHA-256 over the include paths and hashes of the gemmkit device headers `source_text` includes, directly or
// through one another (an include path the toolchain lacks counts as missing): what a kernel's cache key holds of
// gemmkit's device headers.
std::string included_headers_digest(const Toolchain& toolchain, const std::string& source_text);

// The full nvcc command line that builds `source_path` into the shared object `output_path`.
std::vector<std::string> nvcc_command(const Toolchain& toolchain, const KernelSource& source,
                                      const std::string& source_path, const std::string& output_path);

// The split path (GEMMKIT_SPLIT_BUILD, families that support it): one kernel source built as two artifacts by two nvcc
// processes, which may run at once. The cubin holds only the kernel (nvcc -cubin, -DGEMMKIT_SPLIT_DEVICE) and depends
// on no host compiler; the host module (a .so exporting abi.h's entry points, -DGEMMKIT_SPLIT_HOST) builds the
// kernel's Params and launches the cubin through the driver API. The host module compiles kSplitHostWrapper, which
// hides kernel.cu from the device compiler, so no device code is compiled for it.
enum class SplitArtifact { cubin, host };
inline constexpr const char* kSplitHostWrapper =
    "// host.cu: gemmkit's split host pass; the device compiler sees nothing, the host compiler kernel.cu.\n"
    "#if !defined(__CUDA_ARCH__)\n"
    "#include \"kernel.cu\"\n"
    "#endif\n";
std::vector<std::string> split_command(const Toolchain& toolchain, const KernelSource& source, SplitArtifact artifact,
                                       const std::string& source_path, const std::string& output_path);
// Builds work_dir/kernel.cubin or work_dir/kernel.so (from work_dir/host.cu) for `source`, as compile_module does.
void compile_split(const Toolchain& toolchain, const KernelSource& source, SplitArtifact artifact,
                   const std::string& work_dir);

// What a module builder may leave in its work_dir for the cache's manifest: a JSON object ("nvcc_argv", "seconds" per
// phase), merged into the manifest's "build" record.
inline constexpr const char* kBuildRecordFile = "build.json";

// Writes kernel.cu into work_dir and builds work_dir/kernel.so with one nvcc pass, and the build record. The debug
// knobs GEMMKIT_KEEP_TEMP (nvcc's intermediates in work_dir/nvcc) and GEMMKIT_DUMP_SASS (work_dir/kernel.sass) apply
// here, outside the cache key. Throws CompileError
// (argv, exit code, full log, kept source path) on failure.
void compile_module(const Toolchain& toolchain, const KernelSource& source, const std::string& work_dir);

// How many nvcc processes may run at once: bounded by cores and by available memory (~4 GB per SM90 job).
int max_parallel_compiles();

}  // namespace gemmkit
