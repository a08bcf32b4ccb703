// src/jit/cache_entries.cpp: the kernel cache's folders and entries on disk (see cache_entries.hpp).
#include "jit/cache_entries.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include "gemmkit/errors.hpp"
#include "util/sha256.hpp"

namespace gemmkit::cache_entries {

std::atomic<int> disk_hits{0};
std::atomic<int> pack_hits{0};

namespace {
constexpr auto kStaleTmpAge = std::chrono::hours(1);
}  // namespace

// ---- layout ----------------------------------------------------------------------------------------------

fs::path v1_dir(const std::string& root) {
  return fs::path(root) / "v1";
}
fs::path entry_dir(const std::string& root, const std::string& key) {
  return v1_dir(root) / key.substr(0, 2) / key;
}

bool is_key(const std::string& key) {
  return key.size() == 64 && key.find_first_not_of("0123456789abcdef") == std::string::npos;
}

void require_key(const std::string& key) {
  if (!is_key(key)) throw Error("cache key '" + key + "' is not 64 lowercase hex digits (a SHA-256)");
}

// "<pid>.<8 random hex digits>": unique across the processes and threads sharing one cache.
std::string unique_suffix() {
  std::random_device random;
  char hex[16];
  std::snprintf(hex, sizeof hex, "%08x", static_cast<unsigned>(random()));
  return std::to_string(::getpid()) + "." + hex;
}

fs::path make_dir(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    throw Error("cannot create the cache folder " + dir.string() + ": " + ec.message() +
                "; set GEMMKIT_CACHE_DIR to a writable folder");
  }
  return dir;
}

// ---- small file helpers --------------------------------------------------------------------------------

std::optional<std::string> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return text.str();
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out)
    throw Error("cannot write " + path.string() + "; check that the cache folder is writable and the disk not full");
}

std::uint64_t folder_bytes(const fs::path& dir) {
  std::uint64_t total = 0;
  std::error_code ec;
  for (const auto& file : fs::directory_iterator(dir, ec)) {
    if (file.is_regular_file(ec)) total += file.file_size(ec);
  }
  return total;
}

// ---- the per-key advisory lock -------------------------------------------------------------------------

KeyLock::KeyLock(const std::string& root, const std::string& key) {
  std::error_code ec;
  const fs::path dir = v1_dir(root) / "locks";
  fs::create_directories(dir, ec);
  fd_ = ::open((dir / (key + ".lock")).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) return;
  while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
  }
}

KeyLock::~KeyLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the descriptor releases the flock
}

// ---- entries ---------------------------------------------------------------------------------------------

// The built file of an entry: kernel.so (a module, or a split kernel's host module) or kernel.cubin (a split kernel's
// device code).
constexpr const char* kArtifacts[] = {"kernel.so", "kernel.cubin"};

// The artifact a manifest records, or "" when it records none.
std::string artifact_of(const Json& manifest) {
  const auto files = manifest.find("files");
  if (files == manifest.end() || !files->is_object()) return "";
  for (const char* name : kArtifacts) {
    if (files->contains(name)) return name;
  }
  return "";
}

// Complete iff manifest.json parses, names `key`, and its artifact has the recorded size and SHA-256.
Probe probe_entry(const std::string& root, const std::string& key) {
  const fs::path dir = entry_dir(root, key);
  std::error_code ec;
  if (!fs::exists(dir, ec)) return {};
  Probe damaged{EntryState::damaged, {}};
  const std::optional<std::string> text = read_file(dir / "manifest.json");
  if (!text) return damaged;
  try {
    Json manifest = Json::parse(*text);
    const std::string artifact = artifact_of(manifest);
    if (artifact.empty()) return damaged;
    const Json module = manifest.at("files").at(artifact);
    if (manifest.at("key").get<std::string>() != key || !module.at("bytes").is_number_unsigned()) return damaged;
    const fs::path module_path = dir / artifact;
    const std::uintmax_t size = fs::file_size(module_path, ec);
    if (ec || size != module.at("bytes").get<std::uintmax_t>()) return damaged;
    if (sha256_file_hex(module_path.string()) != module.at("sha256").get<std::string>()) return damaged;
    return {EntryState::complete, std::move(manifest)};
  } catch (const Json::exception&) {
    return damaged;  // not JSON, or a field missing or of another type
  } catch (const Error&) {
    return damaged;  // the artifact unreadable
  }
}

std::string manifest_string(const Json& manifest, const char* name) {
  const auto value = manifest.find(name);
  return value != manifest.end() && value->is_string() ? value->get<std::string>() : std::string();
}

CacheEntry make_entry(const std::string& root, const std::string& key, const Json& manifest, bool hit) {
  CacheEntry entry;
  entry.key = key;
  entry.dir = entry_dir(root, key).string();
  entry.module_path = (entry_dir(root, key) / artifact_of(manifest)).string();
  entry.kernel_name = manifest_string(manifest, "kernel_name");
  entry.hit = hit;
  return entry;
}

// Renames `dir` into <root>/v1/trash, out of every reader's way at once; a concurrent mover may win, and in a cache
// that cannot be written the entry stays (lookups keep treating it as damaged).
void move_aside(const std::string& root, const fs::path& dir) {
  const fs::path trash = v1_dir(root) / "trash";
  std::error_code ec;
  fs::create_directories(trash, ec);
  fs::rename(dir, trash / (dir.filename().string() + "." + unique_suffix()), ec);
}

// Removes build folders older than kStaleTmpAge: those of builds that were killed (younger ones may be in progress in
// other processes).
DiskCache::TmpFolders sweep_stale_tmp(const std::string& root) {
  DiskCache::TmpFolders folders;
  std::error_code ec;
  const auto stale_before = fs::file_time_type::clock::now() - kStaleTmpAge;
  for (const auto& tmp : fs::directory_iterator(v1_dir(root) / "tmp", ec)) {
    if (tmp.path().filename().string().rfind(".probe.", 0) == 0) continue;  // unwritable_reason's, gone at once
    if (tmp.last_write_time(ec) < stale_before) {
      fs::remove_all(tmp.path(), ec);
      ++folders.removed;
    } else {
      ++folders.remaining;
    }
  }
  return folders;
}

// ---- an unwritable cache -----------------------------------------------------------------------------------

// Why nothing can be created under <root>/v1/tmp ("" when it can).
namespace {

std::string unwritable_reason(const std::string& root) {
  std::error_code ec;
  const fs::path tmp = v1_dir(root) / "tmp";
  fs::create_directories(tmp, ec);
  if (ec) return ec.message();
  const fs::path probe = tmp / (".probe." + unique_suffix());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return std::strerror(errno);
  ::close(fd);
  fs::remove(probe, ec);
  return "";
}

}  // namespace

BuildRoots::BuildRoots() : owner_(::getpid()) {}

BuildRoots::~BuildRoots() {
  if (::getpid() != owner_) return;
  std::error_code ec;
  for (const auto& [root, dir] : dirs_) {
    if (dir != root) fs::remove_all(dir, ec);
  }
}

std::string BuildRoots::for_root(const std::string& root) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = dirs_.find(root); it != dirs_.end()) return it->second;
  const std::string reason = unwritable_reason(root);
  if (reason.empty()) return dirs_[root] = root;
  std::string pattern = (fs::temp_directory_path() / "gemmkit-cache-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw Error("the kernel cache " + root + " is not writable (" + reason + ") and no private cache can be made in " +
                fs::temp_directory_path().string() + " (" + std::strerror(errno) +
                "); set GEMMKIT_CACHE_DIR to a writable folder");
  }
  std::cerr << "gemmkit: warning: the kernel cache " << root << " is not writable (" << reason
            << "); kernels built by this process go to the private cache " << pattern
            << ", removed when it exits. Set GEMMKIT_CACHE_DIR to a writable folder to keep them.\n";
  return dirs_[root] = pattern;
}

std::optional<std::string> BuildRoots::private_for(const std::string& root) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = dirs_.find(root);
  if (it == dirs_.end() || it->second == root) return std::nullopt;
  return it->second;
}

BuildRoots& build_roots() {
  static BuildRoots roots;
  return roots;
}

// A complete entry, counting a disk hit. A damaged one is moved aside (under the key's lock, so we never
// move aside an entry another process has just published) and `damaged` is set.
std::optional<CacheEntry> find_complete(const std::string& root, const std::string& key, LockHeld held, bool& damaged) {
  Probe probe = probe_entry(root, key);
  if (probe.state == EntryState::damaged) {
    // flock conflicts between two descriptors even in one process: never take the lock twice.
    std::optional<KeyLock> lock;
    if (held == LockHeld::no) lock.emplace(root, key);
    probe = probe_entry(root, key);
    if (probe.state == EntryState::damaged) {
      damaged = true;
      move_aside(root, entry_dir(root, key));
    }
  }
  if (probe.state != EntryState::complete) return std::nullopt;
  ++disk_hits;
  return make_entry(root, key, probe.manifest, true);
}

// A complete entry of a kernel pack (DiskCache::pack_roots) other than `root`. Packs are read only: a damaged entry
// there is passed over, not moved aside.
std::optional<CacheEntry> find_in_packs(const std::string& root, const std::string& key) {
  for (const std::string& pack : DiskCache::pack_roots()) {
    std::error_code ec;
    if (fs::equivalent(pack, root, ec)) continue;
    const Probe probe = probe_entry(pack, key);
    if (probe.state != EntryState::complete) continue;
    ++pack_hits;
    return make_entry(pack, key, probe.manifest, true);
  }
  return std::nullopt;
}

// A complete entry in the root, in the private cache this process builds into instead of it, or in a kernel pack.
std::optional<CacheEntry> find_built(const std::string& root, const std::string& key, bool& damaged) {
  if (std::optional<CacheEntry> entry = find_complete(root, key, LockHeld::no, damaged)) return entry;
  if (const std::optional<std::string> dir = build_roots().private_for(root)) {
    bool ignored = false;
    if (std::optional<CacheEntry> entry = find_complete(*dir, key, LockHeld::no, ignored)) return entry;
  }
  return find_in_packs(root, key);
}

}  // namespace gemmkit::cache_entries
