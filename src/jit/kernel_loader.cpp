// src/jit/kernel_loader.cpp: spec -> cached module -> loaded module; the in-process map in front of the disk cache.
#include "jit/kernel_loader.hpp"

#include <nlohmann/json.hpp>

#include <map>
#include <mutex>
#include <string>

#include "gemmkit/cache.hpp"
#include "gemmkit/codegen.hpp"
#include "gemmkit/compiler.hpp"
#include "gemmkit/jit.hpp"

namespace gemmkit {
namespace {

CompiledKernel compiled(const CacheEntry& entry) {
  return {entry.kernel_name, entry.module_path, entry.key, entry.hit, entry.build_seconds};
}

}  // namespace

CompiledKernel build_kernel(const KernelSpec& spec) {
  // The cache root is read from the environment each time, so tests can point it elsewhere.
  return compiled(DiskCache().get_or_build(Toolchain::discover(), render(spec)));
}

std::vector<CompiledKernel> compile_many(const std::vector<KernelSpec>& specs) {
  std::vector<KernelSource> sources;
  for (const KernelSpec& spec : specs) sources.push_back(render(spec));
  std::vector<CompiledKernel> out;
  for (const CacheEntry& entry : DiskCache().get_or_build_many(Toolchain::discover(), sources)) {
    out.push_back(compiled(entry));
  }
  return out;
}

void to_json(nlohmann::ordered_json& json, const CompiledKernel& kernel) {
  json = {{"kernel_name", kernel.kernel_name},
          {"cache", kernel.cache_hit ? "hit" : "miss"},
          {"seconds", kernel.build_seconds},
          {"module_path", kernel.module_path},
          {"cache_key", kernel.cache_key}};
}

namespace jit {

std::shared_ptr<KernelModule> load_kernel(const KernelSpec& spec) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<KernelModule>> loaded;
  const std::string key = spec.canonical();
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = loaded.find(key); it != loaded.end()) return it->second;
  }
  // Built outside the lock: another thread may build a different kernel meanwhile.
  auto module = KernelModule::load(build_kernel(spec).module_path);
  std::lock_guard<std::mutex> lock(mutex);
  return loaded.emplace(key, std::move(module)).first->second;
}

}  // namespace jit
}  // namespace gemmkit
