// src/jit/cache_entries.hpp: the kernel cache's folders and entries on disk, shared by the cache (disk_cache.cpp) and
// its archives (cache_archive.cpp): the layout, the per-key lock, an entry's probe, the private stand-in for a root
// that cannot be written, and the lookups (the root, its stand-in, the packs).
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "gemmkit/cache.hpp"

namespace gemmkit::cache_entries {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// Complete entries found in a root (or its stand-in) and in a pack: the counters of cache_counters().
extern std::atomic<int> disk_hits;
extern std::atomic<int> pack_hits;

// ---- layout: <root>/v1/<aa>/<key>, v1/tmp (build folders), v1/locks, v1/trash
fs::path v1_dir(const std::string& root);
fs::path entry_dir(const std::string& root, const std::string& key);
bool is_key(const std::string& key);
// Throws Error unless `key` is 64 lowercase hex digits.
void require_key(const std::string& key);
// "<pid>.<8 random hex digits>": unique across the processes and threads sharing one cache.
std::string unique_suffix();
// Creates `dir` (and its parents); Error naming it otherwise.
fs::path make_dir(const fs::path& dir);

std::optional<std::string> read_file(const fs::path& path);
void write_file(const fs::path& path, const std::string& text);
std::uint64_t folder_bytes(const fs::path& dir);

// Held while one process checks, builds and publishes a key. Best effort: if the lock cannot be taken we
// build anyway, since publishing is atomic without it.
class KeyLock {
 public:
  KeyLock(const std::string& root, const std::string& key);
  ~KeyLock();
  KeyLock(const KeyLock&) = delete;
  KeyLock& operator=(const KeyLock&) = delete;

 private:
  int fd_ = -1;
};

enum class EntryState { absent, complete, damaged };

struct Probe {
  EntryState state = EntryState::absent;
  Json manifest;
};

// The artifact a manifest records (kernel.so or kernel.cubin), or "" when it records none.
std::string artifact_of(const Json& manifest);
// Complete iff manifest.json parses, names `key`, and its artifact has the recorded size and SHA-256.
Probe probe_entry(const std::string& root, const std::string& key);
std::string manifest_string(const Json& manifest, const char* name);
CacheEntry make_entry(const std::string& root, const std::string& key, const Json& manifest, bool hit);
// Renames `dir` into <root>/v1/trash, out of every reader's way at once.
void move_aside(const std::string& root, const fs::path& dir);
// Removes build folders older than an hour: those of builds that were killed.
DiskCache::TmpFolders sweep_stale_tmp(const std::string& root);

// The folder this process builds into for a cache root: the root itself, or, when it cannot be written (read-only,
// no permission, a path through a regular file), a private temporary cache made on first need, announced by one
// warning and removed when the process that made it exits. Reading the root's existing entries still works.
class BuildRoots {
 public:
  BuildRoots();
  ~BuildRoots();
  BuildRoots(const BuildRoots&) = delete;
  BuildRoots& operator=(const BuildRoots&) = delete;
  std::string for_root(const std::string& root);
  // The private cache standing in for `root`, if one was made.
  std::optional<std::string> private_for(const std::string& root);

 private:
  std::mutex mutex_;
  std::map<std::string, std::string> dirs_;
  pid_t owner_;  // the process that made it: a forked child leaves its parent's folders alone
};
BuildRoots& build_roots();

enum class LockHeld { no, yes };
// A complete entry, counting a disk hit. A damaged one is moved aside (under the key's lock) and `damaged` is set.
std::optional<CacheEntry> find_complete(const std::string& root, const std::string& key, LockHeld held, bool& damaged);
// A complete entry of a kernel pack (DiskCache::pack_roots) other than `root`; a damaged one there is passed over.
std::optional<CacheEntry> find_in_packs(const std::string& root, const std::string& key);
// A complete entry in the root, in the private cache this process builds into instead of it, or in a kernel pack.
std::optional<CacheEntry> find_built(const std::string& root, const std::string& key, bool& damaged);

}  // namespace gemmkit::cache_entries
