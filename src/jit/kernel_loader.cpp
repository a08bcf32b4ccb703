// src/jit/kernel_loader.cpp: the in-process map in front of the disk cache.
#include "jit/kernel_loader.hpp"

#include <map>
#include <mutex>
#include <string>

#include "gemmkit/codegen.hpp"
#include "gemmkit/compiler.hpp"

namespace gemmkit::runtime {

CacheEntry build_kernel(const KernelSpec& spec) {
  const Toolchain& toolchain = Toolchain::discover();
  DiskCache cache;  // the root is read from the environment each time, so tests can point it elsewhere
  return cache.get_or_build(toolchain, render(spec));
}

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

}  // namespace gemmkit::runtime
