// include/gemmkit/cache.hpp: the content-addressed on-disk kernel cache, safe for many processes at once.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gemmkit/codegen.hpp"
#include "gemmkit/compiler.hpp"

namespace gemmkit {

// Builds the module for `source` into `work_dir` (which exists and is private to this call); must leave
// work_dir/kernel.so behind. compile_module is the real one; tests pass a fake.
using ModuleBuilder = std::function<void(const KernelSource& source, const std::string& work_dir)>;

struct CacheEntry {
  std::string key;          // 64 hex digits
  std::string dir;          // <root>/v1/<aa>/<key>
  std::string module_path;  // dir/kernel.so
  std::string kernel_name;
  bool hit = false;            // true if no build happened in this call
  double build_seconds = 0.0;  // time spent building in this call (0 on a hit)
};

struct CacheListing {
  std::string key, kernel_name, dir, created;
  std::uint64_t bytes = 0;
};
void to_json(nlohmann::ordered_json& json, const CacheListing& listing);

class DiskCache {
 public:
  // root = GEMMKIT_CACHE_DIR, else $XDG_CACHE_HOME/gemmkit, else ~/.cache/gemmkit.
  static std::string default_root();

  explicit DiskCache(std::string root = default_root());
  const std::string& root() const { return root_; }

  // The canonical record hashed into the key: key-schema version, gemmkit version, device-header hash,
  // CUTLASS version, nvcc version and build, host compiler, full flag list, arch, generated source.
  std::string record(const Toolchain& toolchain, const KernelSource& source) const;
  std::string key(const Toolchain& toolchain, const KernelSource& source) const;

  // A complete entry (manifest present and consistent) or nothing; a damaged entry is moved aside.
  std::optional<CacheEntry> lookup(const std::string& key) const;

  // lookup(), else build in a private temp folder and rename() it into place; manifest.json last. A root this process
  // cannot write is read but not written: new kernels go to a private temporary cache (one warning on stderr).
  CacheEntry get_or_build(const Toolchain& toolchain, const KernelSource& source, const ModuleBuilder& builder);
  CacheEntry get_or_build(const Toolchain& toolchain, const KernelSource& source);

  // Several sources at once, built in parallel (max_parallel_compiles() jobs). Order matches `sources`.
  std::vector<CacheEntry> get_or_build_many(const Toolchain& toolchain, const std::vector<KernelSource>& sources);
  // The same with a given builder (called from several threads at once).
  std::vector<CacheEntry> get_or_build_many(const Toolchain& toolchain, const std::vector<KernelSource>& sources,
                                            const ModuleBuilder& builder);

  std::vector<CacheListing> list() const;
  // Removes every entry; returns how many were removed.
  std::size_t clear();

 private:
  std::string root_;
};

// Process-wide counters, so tests can tell a cache hit from a build without a clock.
struct CacheCounters {
  int builds = 0;     // modules built (nvcc or fake builder ran)
  int disk_hits = 0;  // complete entries found on disk
  int rebuilt_damaged = 0;
};
CacheCounters cache_counters();

}  // namespace gemmkit
