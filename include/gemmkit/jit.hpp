// include/gemmkit/jit.hpp: KernelSpec -> compiled module in the on-disk kernel cache, one kernel or many at once.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <vector>

#include "gemmkit/kernel_spec.hpp"

namespace gemmkit {

// What a build produced: which kernel, where it is cached, and whether nvcc ran.
struct CompiledKernel {
  std::string kernel_name;
  std::string module_path;
  std::string cache_key;
  bool cache_hit = false;
  double build_seconds = 0.0;
};

// JSON as `gemmkit compile --json` prints it: kernel_name, cache ("hit" or "miss"), seconds, module_path, cache_key.
void to_json(nlohmann::ordered_json& json, const CompiledKernel& kernel);

// Renders the spec and builds (or finds) its module in the cache (DiskCache::default_root(), read on every call).
// Needs nvcc on a miss, never a GPU. Throws ConfigError for an invalid spec, CompileError when nvcc fails.
CompiledKernel build_kernel(const KernelSpec& spec);

// build_kernel for many specs, as many nvcc processes at once as max_parallel_compiles() allows; a spec given twice
// is built once. The result's order matches `specs`.
std::vector<CompiledKernel> compile_many(const std::vector<KernelSpec>& specs);

}  // namespace gemmkit
