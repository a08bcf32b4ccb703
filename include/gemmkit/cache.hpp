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
#include "gemmkit/errors.hpp"

namespace gemmkit {

// Builds the module for `source` into `work_dir` (which exists and is private to this call); must leave
// work_dir/kernel.so behind. compile_module is the real one; tests pass a fake.
using ModuleBuilder = std::function<void(const KernelSource& source, const std::string& work_dir)>;

struct CacheEntry {
  std::string key;          // 64 hex digits
  std::string dir;          // <root>/v1/<aa>/<key>
  std::string module_path;  // dir/kernel.so (a split kernel's cubin entry: dir/kernel.cubin)
  std::string cubin_path;   // a split kernel (compiler.hpp): the cubin its host module launches; empty otherwise
  std::string kernel_name;
  bool hit = false;            // true if no build happened in this call
  double build_seconds = 0.0;  // time spent building in this call (0 on a hit)
};

// One step of a long build (compile_many, a pack): reported when a build starts and when it ends.
struct BuildProgress {
  std::string kernel_name;     // the kernel that started or finished
  bool finished = false;       // false: it started
  std::size_t done = 0;        // builds finished so far
  std::size_t total = 0;       // builds needed (cache misses; hits are not counted)
  double elapsed_seconds = 0;  // since the first build started
  double eta_seconds = -1;     // remaining, from the mean time per finished build and the job count (-1: unknown)
};
// Called from the building threads, one call at a time.
using ProgressCallback = std::function<void(const BuildProgress&)>;

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

  // Whether `source` is built on the split path: its family can (KernelSource::splittable) and GEMMKIT_SPLIT_BUILD is
  // on. Its entries are then two: the cubin's, whose record leaves out the host compiler (a cubin built on a machine
  // without a GPU is found on one with another host compiler), and the host module's, whose record has it.
  static bool builds_split(const KernelSource& source);
  std::string split_record(const Toolchain& toolchain, const KernelSource& source, SplitArtifact artifact) const;
  std::string split_key(const Toolchain& toolchain, const KernelSource& source, SplitArtifact artifact) const;
  // The keys of the entries `source` is built into: key(), or on the split path its cubin's and its host module's.
  std::vector<std::string> keys(const Toolchain& toolchain, const KernelSource& source) const;

  // The kernel packs searched after this cache, in order: the folders of GEMMKIT_PACK_PATH (':'-separated), then each
  // folder under the packs/ beside the library (an install's share/gemmkit/packs, the Python package's gemmkit/packs,
  // the build tree's packs/: what -DGEMMKIT_PACK builds). Each is a cache root that is only read, never written: a
  // kernel found there loads from it, and a damaged entry there is passed over.
  static std::vector<std::string> pack_roots();

  // A complete entry (manifest present and consistent) of this cache or, failing that, of a pack; or nothing. A
  // damaged entry of this cache is moved aside.
  std::optional<CacheEntry> lookup(const std::string& key) const;

  // lookup(), else build in a private temp folder and rename() it into place; manifest.json last. A split source
  // (builds_split) builds its two entries at once, and the entry returned is the host module's, with cubin_path. A root
  // this process cannot write is read but not written: new kernels go to a private temporary cache (one warning on
  // stderr).
  CacheEntry get_or_build(const Toolchain& toolchain, const KernelSource& source, const ModuleBuilder& builder);
  CacheEntry get_or_build(const Toolchain& toolchain, const KernelSource& source);

  // The complete entry for `source` in this cache (or in the private cache standing in for it, or a pack), without
  // building; nothing under GEMMKIT_ALWAYS_COMPILE.
  std::optional<CacheEntry> find(const Toolchain& toolchain, const KernelSource& source) const;

  // Several sources at once, built in parallel (max_parallel_compiles() jobs, a split source's two nvcc processes
  // counting as two). Order matches `sources`. After an
  // InterruptedError no further build starts.
  std::vector<CacheEntry> get_or_build_many(const Toolchain& toolchain, const std::vector<KernelSource>& sources,
                                            const ProgressCallback& progress = {});
  // The same with a given builder (called from several threads at once).
  std::vector<CacheEntry> get_or_build_many(const Toolchain& toolchain, const std::vector<KernelSource>& sources,
                                            const ModuleBuilder& builder, const ProgressCallback& progress = {});

  // Writes the complete entries with these keys (every entry when empty) into one tar archive at `path`: per entry
  // <key>/manifest.json, kernel.so and kernel.cu. Returns how many entries were written. Throws Error naming a key
  // that is not in the cache.
  std::size_t export_archive(const std::string& path, const std::vector<std::string>& keys = {}) const;
  struct ImportResult {
    std::size_t imported = 0;  // new entries
    std::size_t present = 0;   // already complete in this cache (left as they were)
  };
  // Reads an archive written by export_archive. Each entry is checked against its manifest (its key names its folder,
  // every file has the recorded size and SHA-256) in a private folder and then renamed into place, so a reader or
  // another importer sees it whole or not at all. Throws Error on a damaged or foreign archive (entries before the
  // damage stay imported).
  ImportResult import_archive(const std::string& path);

  // Build folders under <root>/v1/tmp: those of builds that were killed or are still running elsewhere.
  struct TmpFolders {
    std::size_t removed = 0;    // older than an hour: removed
    std::size_t remaining = 0;  // younger (perhaps in progress in another process)
  };
  // Removes the build folders older than an hour and counts the others.
  TmpFolders sweep_tmp() const;

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
  int background_builds = 0;  // of `builds`, those a background compile ran (run() did not wait for them)
  int pack_hits = 0;          // complete entries found in a kernel pack (DiskCache::pack_roots), not in the cache
};
CacheCounters cache_counters();

}  // namespace gemmkit
