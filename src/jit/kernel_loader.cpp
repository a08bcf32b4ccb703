// src/jit/kernel_loader.cpp: spec -> cached module -> loaded module; the in-process map in front of the disk cache.
#include "jit/kernel_loader.hpp"

#include <nlohmann/json.hpp>

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "gemmkit/cache.hpp"
#include "gemmkit/codegen.hpp"
#include "gemmkit/compiler.hpp"
#include "gemmkit/jit.hpp"
#include "util/knobs.hpp"

namespace gemmkit {
namespace {

std::atomic<int> g_build_ahead{-1};     // set_build_ahead(): 0 or 1; -1: GEMMKIT_BUILD_AHEAD decides
thread_local int t_no_build_ahead = 0;  // NoBuildAhead scopes open on this thread

CompiledKernel compiled(const CacheEntry& entry) {
  return {entry.kernel_name, entry.module_path, entry.cubin_path, entry.key, entry.hit, entry.build_seconds};
}

}  // namespace

CompiledKernel build_kernel(const KernelSpec& spec) {
  // The cache root is read from the environment each time, so tests can point it elsewhere.
  return compiled(DiskCache().get_or_build(Toolchain::discover(), render(spec)));
}

std::vector<CompiledKernel> compile_many(const std::vector<KernelSpec>& specs, const ProgressCallback& progress) {
  std::vector<KernelSource> sources;
  for (const KernelSpec& spec : specs) sources.push_back(render(spec));
  std::vector<CompiledKernel> out;
  for (const CacheEntry& entry : DiskCache().get_or_build_many(Toolchain::discover(), sources, progress)) {
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
  if (!kernel.cubin_path.empty()) json["cubin_path"] = kernel.cubin_path;
}

namespace jit {

namespace {

struct Loaded {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<KernelModule>> modules;  // by KernelSpec::canonical()
};

Loaded& loaded() {
  static Loaded* modules = new Loaded();  // never destroyed: modules stay mapped while other statics go
  return *modules;
}

std::shared_ptr<KernelModule> remember(const std::string& key, std::shared_ptr<KernelModule> module) {
  Loaded& l = loaded();
  std::lock_guard<std::mutex> lock(l.mutex);
  return l.modules.emplace(key, std::move(module)).first->second;
}

std::shared_ptr<KernelModule> find_loaded(const std::string& key) {
  Loaded& l = loaded();
  std::lock_guard<std::mutex> lock(l.mutex);
  auto it = l.modules.find(key);
  return it != l.modules.end() ? it->second : nullptr;
}

}  // namespace

std::shared_ptr<KernelModule> load_kernel(const KernelSpec& spec) {
  const std::string key = spec.canonical();
  if (auto module = find_loaded(key)) return module;
  // Built outside the lock: another thread may build a different kernel meanwhile.
  const CompiledKernel built = build_kernel(spec);
  return remember(key, KernelModule::load(built.module_path, built.cubin_path));
}

std::shared_ptr<KernelModule> load_kernel_if_built(const KernelSpec& spec) {
  const std::string key = spec.canonical();
  if (auto module = find_loaded(key)) return module;
  const std::optional<CacheEntry> entry = DiskCache().find(Toolchain::discover(), render(spec));
  if (!entry) return nullptr;
  return remember(key, KernelModule::load(entry->module_path, entry->cubin_path));
}

std::shared_ptr<const BackgroundBuild> build_kernel_in_background(const KernelSpec& spec) {
  return build_in_background(DiskCache(), Toolchain::discover(), render(spec));
}

NoBuildAhead::NoBuildAhead() {
  ++t_no_build_ahead;
}
NoBuildAhead::~NoBuildAhead() {
  --t_no_build_ahead;
}

bool build_ahead_on() {
  if (t_no_build_ahead > 0) return false;
  const int chosen = g_build_ahead.load();
  if (chosen == 0 || (chosen < 0 && knobs::value("GEMMKIT_BUILD_AHEAD") != "1")) return false;
  return !knobs::flag("GEMMKIT_ALWAYS_COMPILE");
}

void build_ahead(const std::function<KernelSpec()>& spec) {
  if (!build_ahead_on()) return;
  try {
    const Toolchain& toolchain = Toolchain::discover();
    const KernelSource source = render(spec());
    DiskCache cache;
    if (cache.find(toolchain, source)) return;
    build_in_background(cache, toolchain, source);
  } catch (const Error&) {
    // Declaring a plan needs no toolchain; the build a caller waits for reports what is missing.
  }
}

}  // namespace jit

void set_build_ahead(bool enabled) {
  g_build_ahead.store(enabled ? 1 : 0);
}

}  // namespace gemmkit
