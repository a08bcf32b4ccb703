// src/jit/disk_cache.cpp: the content-addressed kernel cache. An entry appears only by rename() of a
// complete private build folder whose manifest.json was written last; a per-key flock merely saves
// duplicate nvcc work, so a crashed holder (the kernel drops its lock) or a missing lock costs nothing.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "gemmkit/cache.hpp"
#include "gemmkit/errors.hpp"
#include "jit/process.hpp"
#include "jit/progress.hpp"
#include "jit/tar.hpp"
#include "jit/toolchain_detail.hpp"
#include "util/knobs.hpp"
#include "util/sha256.hpp"

#ifndef GEMMKIT_VERSION
#error "GEMMKIT_VERSION must be defined by the build"
#endif

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace gemmkit {
namespace {

constexpr const char* kKeySchema = "2";  // bump when record() changes shape
constexpr auto kStaleTmpAge = std::chrono::hours(1);
constexpr int kPublishAttempts = 3;
constexpr std::size_t kRecentBuilds = 9;  // the build-time estimate is the median of this many recent builds

std::atomic<int> g_builds{0};
std::atomic<int> g_disk_hits{0};
std::atomic<int> g_rebuilt_damaged{0};
std::atomic<int> g_background_builds{0};
std::atomic<int> g_pack_hits{0};

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

std::string iso_time_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
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

// Held while one process checks, builds and publishes a key. Best effort: if the lock cannot be taken we
// build anyway, since publishing is atomic without it.
class KeyLock {
 public:
  KeyLock(const std::string& root, const std::string& key) {
    std::error_code ec;
    const fs::path dir = v1_dir(root) / "locks";
    fs::create_directories(dir, ec);
    fd_ = ::open((dir / (key + ".lock")).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) return;
    while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  ~KeyLock() {
    if (fd_ >= 0) ::close(fd_);  // closing the descriptor releases the flock
  }
  KeyLock(const KeyLock&) = delete;
  KeyLock& operator=(const KeyLock&) = delete;

 private:
  int fd_ = -1;
};

// ---- entries ---------------------------------------------------------------------------------------------

enum class EntryState { absent, complete, damaged };

struct Probe {
  EntryState state = EntryState::absent;
  Json manifest;
};

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

// The folder this process builds into for a cache root: the root itself, or, when it cannot be written (read-only,
// no permission, a path through a regular file), a private temporary cache made on first need, announced by one
// warning and removed when the process that made it exits. Reading the root's existing entries still works.
class BuildRoots {
 public:
  ~BuildRoots() {
    if (::getpid() != owner_) return;  // a forked child leaves its parent's folders alone
    std::error_code ec;
    for (const auto& [root, dir] : dirs_) {
      if (dir != root) fs::remove_all(dir, ec);
    }
  }
  std::string for_root(const std::string& root) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = dirs_.find(root); it != dirs_.end()) return it->second;
    const std::string reason = unwritable_reason(root);
    if (reason.empty()) return dirs_[root] = root;
    std::string pattern = (fs::temp_directory_path() / "gemmkit-cache-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw Error("the kernel cache " + root + " is not writable (" + reason +
                  ") and no private cache can be made in " + fs::temp_directory_path().string() + " (" +
                  std::strerror(errno) + "); set GEMMKIT_CACHE_DIR to a writable folder");
    }
    std::cerr << "gemmkit: warning: the kernel cache " << root << " is not writable (" << reason
              << "); kernels built by this process go to the private cache " << pattern
              << ", removed when it exits. Set GEMMKIT_CACHE_DIR to a writable folder to keep them.\n";
    return dirs_[root] = pattern;
  }
  // The private cache standing in for `root`, if one was made.
  std::optional<std::string> private_for(const std::string& root) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = dirs_.find(root);
    if (it == dirs_.end() || it->second == root) return std::nullopt;
    return it->second;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, std::string> dirs_;
  const pid_t owner_ = ::getpid();
};

BuildRoots& build_roots() {
  static BuildRoots roots;
  return roots;
}

enum class LockHeld { no, yes };

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
  ++g_disk_hits;
  return make_entry(root, key, probe.manifest, true);
}

Json file_record(const fs::path& path) {
  std::error_code ec;
  return {{"bytes", static_cast<std::uint64_t>(fs::file_size(path, ec))}, {"sha256", sha256_file_hex(path.string())}};
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// How the entry was built: the builder's record (compile_module's nvcc argv and phase times) and the cache's own
// phase times.
Json build_record(const fs::path& dir, const Json& cache_seconds) {
  const fs::path path = dir / kBuildRecordFile;
  const std::optional<std::string> text = read_file(path);
  Json record = text ? Json::parse(*text, nullptr, /*allow_exceptions=*/false) : Json::object();
  if (!record.is_object()) record = Json::object();  // a builder that wrote no record, or a broken one
  record["seconds"].update(cache_seconds);
  std::error_code ec;
  fs::remove(path, ec);  // the manifest holds it now
  return record;
}

// What one build makes: its artifact (kernel.so or kernel.cubin) and fields the manifest adds (a split kernel's host
// module names its cubin's key).
struct Output {
  std::string artifact = "kernel.so";
  Json manifest_fields = Json::object();
};

// What an entry holds, from its artifact and its manifest's fields: "module" (one module) or a split kernel's "cubin"
// or "host" module (which names its cubin's key).
std::string artifact_kind(const std::string& artifact, const Json& fields) {
  if (artifact == "kernel.cubin") return "cubin";
  return fields.contains("cubin_key") ? "host" : "module";
}

// Per artifact kind, the median builder seconds of the kRecentBuilds newest entries in `root` of the source's family
// and arch (older manifests, which name no family, are left out).
std::map<std::string, double> usual_builder_seconds(const std::string& root, const KernelSource& source) {
  static const Json::json_pointer kBuilderSeconds("/build/seconds/builder");
  std::map<std::string, std::vector<std::pair<std::string, double>>> built;  // kind -> (created, seconds)
  std::error_code ec;
  for (const auto& shard : fs::directory_iterator(v1_dir(root), ec)) {
    if (shard.path().filename().string().size() != 2) continue;
    for (const auto& dir : fs::directory_iterator(shard.path(), ec)) {
      const std::optional<std::string> text = read_file(dir.path() / "manifest.json");
      if (!text) continue;
      const Json manifest = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
      if (!manifest.is_object() || !manifest.contains("family") ||
          manifest_string(manifest, "family") != source.family ||
          manifest_string(manifest, "arch") != source.arch_flag || !manifest.contains(kBuilderSeconds) ||
          !manifest.at(kBuilderSeconds).is_number()) {
        continue;
      }
      built[artifact_kind(artifact_of(manifest), manifest)].emplace_back(manifest_string(manifest, "created"),
                                                                         manifest.at(kBuilderSeconds).get<double>());
    }
  }
  std::map<std::string, double> usual;
  for (auto& [kind, builds] : built) {
    std::sort(builds.begin(), builds.end(), std::greater<>());  // newest first ("created" is ISO 8601)
    std::vector<double> seconds;
    for (std::size_t i = 0; i < builds.size() && i < kRecentBuilds; ++i) seconds.push_back(builds[i].second);
    std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2, seconds.end());
    usual[kind] = seconds[seconds.size() / 2];
  }
  return usual;
}

void write_manifest(const fs::path& dir, const std::string& key, const Toolchain& toolchain, const KernelSource& source,
                    const Json& cache_seconds, const Output& output) {
  Json manifest;
  manifest["key"] = key;
  manifest["kernel_name"] = source.kernel_name;
  manifest["family"] = source.family;
  manifest["arch"] = source.arch_flag;
  manifest["created"] = iso_time_now();
  manifest["gemmkit_version"] = GEMMKIT_VERSION;
  manifest["cutlass_version"] = toolchain.cutlass_version;
  manifest["nvcc_version"] = toolchain.nvcc_version;
  manifest["host_compiler"] = toolchain.host_compiler;  // not in the key: which machine's g++ built it
  manifest.update(output.manifest_fields);
  manifest["build"] = build_record(dir, cache_seconds);
  manifest["files"] = {{output.artifact, file_record(dir / output.artifact)},
                       {"kernel.cu", file_record(dir / "kernel.cu")}};
  write_file(dir / "manifest.json", manifest.dump(2) + "\n");
}

// Runs the builder in a private temp folder; returns it complete (the artifact, kernel.cu, manifest.json).
fs::path build_private(const std::string& root, const std::string& key, const Toolchain& toolchain,
                       const KernelSource& source, const ModuleBuilder& builder, const Output& output, Json seconds) {
  const fs::path tmp = make_dir(v1_dir(root) / "tmp" / (key + "." + unique_suffix()));
  std::error_code ec;
  const auto start = std::chrono::steady_clock::now();
  try {
    builder(source, tmp.string());
  } catch (const CompileError&) {
    throw;  // keep the folder: the error message points the user at its kernel.cu and compile.log
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  ++g_builds;
  if (is_background_thread()) ++g_background_builds;
  seconds["builder"] = seconds_since(start);
  try {
    if (!fs::is_regular_file(tmp / output.artifact, ec)) {
      throw Error("building kernel " + source.kernel_name + " left no " + output.artifact +
                  " behind (module builder bug)");
    }
    if (!fs::exists(tmp / "kernel.cu", ec)) write_file(tmp / "kernel.cu", source.text);
    write_manifest(tmp, key, toolchain, source, seconds, output);  // last: a complete manifest means a complete entry
  } catch (...) {
    fs::remove_all(tmp, ec);  // e.g. a full disk: nothing half-written stays behind
    throw;
  }
  return tmp;
}

CacheEntry build_and_publish(const std::string& root, const std::string& key, const Toolchain& toolchain,
                             const KernelSource& source, const ModuleBuilder& builder, bool damaged,
                             const Output& output = {}) {
  const auto start = std::chrono::steady_clock::now();
  KeyLock lock(root, key);
  const bool always_compile = knobs::flag("GEMMKIT_ALWAYS_COMPILE");
  if (!always_compile) {
    if (std::optional<CacheEntry> entry = find_complete(root, key, LockHeld::yes, damaged)) {
      return *entry;  // another process or thread built it while we waited for the lock
    }
  }
  const Json seconds = {{"wait_for_lock", seconds_since(start)}};
  const auto build_start = std::chrono::steady_clock::now();
  sweep_stale_tmp(root);
  const fs::path tmp = build_private(root, key, toolchain, source, builder, output, seconds);
  const fs::path final_dir = entry_dir(root, key);
  if (always_compile) move_aside(root, final_dir);  // the fresh build replaces the entry (we hold the key's lock)
  std::error_code ec;
  for (int attempt = 0; attempt < kPublishAttempts; ++attempt) {
    make_dir(final_dir.parent_path());
    fs::rename(tmp, final_dir, ec);
    Probe published = ec ? probe_entry(root, key) : Probe{EntryState::complete, {}};
    if (published.state == EntryState::damaged) {
      move_aside(root, final_dir);
      continue;
    }
    if (published.state == EntryState::absent) continue;  // e.g. clear() removed the parent meanwhile
    if (ec) fs::remove_all(tmp, ec);                      // another process published first: theirs is as good as ours
    if (damaged) ++g_rebuilt_damaged;
    CacheEntry entry;
    entry.key = key;
    entry.dir = final_dir.string();
    entry.module_path = (final_dir / output.artifact).string();
    entry.kernel_name = source.kernel_name;
    entry.hit = false;
    entry.build_seconds = seconds_since(build_start);
    return entry;
  }
  const std::string reason = ec.message();
  fs::remove_all(tmp, ec);
  throw Error("cannot publish kernel " + source.kernel_name + " into " + final_dir.string() + ": " + reason +
              "; check that the cache folder is writable (or set GEMMKIT_CACHE_DIR)");
}

// "name: value\n" with backslashes and newlines escaped, so the record stays one field per line.
std::string record_field(const std::string& name, const std::string& value) {
  std::string line = name + ": ";
  for (const char c : value) {
    if (c == '\\')
      line += "\\\\";
    else if (c == '\n')
      line += "\\n";
    else
      line += c;
  }
  return line + "\n";
}

// A complete entry of a kernel pack (DiskCache::pack_roots) other than `root`. Packs are read only: a damaged entry
// there is passed over, not moved aside.
std::optional<CacheEntry> find_in_packs(const std::string& root, const std::string& key) {
  for (const std::string& pack : DiskCache::pack_roots()) {
    std::error_code ec;
    if (fs::equivalent(pack, root, ec)) continue;
    const Probe probe = probe_entry(pack, key);
    if (probe.state != EntryState::complete) continue;
    ++g_pack_hits;
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

ModuleBuilder nvcc_builder(const Toolchain& toolchain) {
  return [&toolchain](const KernelSource& source, const std::string& work_dir) {
    compile_module(toolchain, source, work_dir);
  };
}

}  // namespace

std::string DiskCache::default_root() {
  auto env = [](const char* name) -> std::string {
    const char* value = std::getenv(name);
    return value ? value : "";
  };
  if (const std::string dir = knobs::value("GEMMKIT_CACHE_DIR"); !dir.empty()) return dir;
  if (const std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty()) return (fs::path(xdg) / "gemmkit").string();
  if (const std::string home = env("HOME"); !home.empty()) return (fs::path(home) / ".cache" / "gemmkit").string();
  throw Error(
      "cannot choose a kernel cache folder: none of GEMMKIT_CACHE_DIR, XDG_CACHE_HOME, HOME is set; "
      "set GEMMKIT_CACHE_DIR");
}

DiskCache::DiskCache(std::string root) : root_(std::move(root)) {}

std::vector<std::string> DiskCache::pack_roots() {
  std::vector<std::string> roots;
  const std::string path = knobs::value("GEMMKIT_PACK_PATH");
  for (std::size_t start = 0; start <= path.size();) {
    const std::size_t end = std::min(path.find(':', start), path.size());
    if (end > start) roots.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  for (const std::string& data_dir : toolchain_detail::own_data_dirs()) {
    std::vector<std::string> installed;
    std::error_code ec;
    for (const auto& pack : fs::directory_iterator(fs::path(data_dir) / "packs", ec)) {
      if (pack.is_directory(ec)) installed.push_back(pack.path().string());
    }
    std::sort(installed.begin(), installed.end());
    roots.insert(roots.end(), installed.begin(), installed.end());
  }
  return roots;
}

namespace {

// The toolchain with machine-specific paths replaced, so that equal toolkits hit on different machines.
Toolchain without_paths(const Toolchain& toolchain) {
  Toolchain placeholders = toolchain;
  placeholders.nvcc = "<nvcc>";
  placeholders.cutlass_root = "<cutlass>";
  placeholders.device_include_dir = "<device_include>";
  return placeholders;
}

// A key record: what every artifact depends on (the record's schema, gemmkit, its device headers, CUTLASS, nvcc),
// then `fields` (the host target, for what the host compiler compiles), the target, the flags and the source.
std::string make_record(const Toolchain& toolchain, const KernelSource& source, const std::string& fields,
                        const std::vector<std::string>& flags) {
  std::string out = record_field("gemmkit-cache-key-schema", kKeySchema);
  out += record_field("gemmkit-version", GEMMKIT_VERSION);
  out += record_field("device-headers-sha256", toolchain.device_headers_hash);
  out += record_field("cutlass-version", toolchain.cutlass_version);
  out += record_field("nvcc-version", toolchain.nvcc_version);
  out += record_field("nvcc-build", toolchain.nvcc_build);
  out += fields;
  out += record_field("arch", source.arch_flag);
  out += record_field("kernel-name", source.kernel_name);
  for (const std::string& flag : flags) out += record_field("flag", flag);
  out += record_field("source-bytes", std::to_string(source.text.size()));
  return out + source.text;
}

}  // namespace

std::string DiskCache::record(const Toolchain& toolchain, const KernelSource& source) const {
  return make_record(toolchain, source, record_field("host-target", toolchain.host_target),
                     nvcc_command(without_paths(toolchain), source, "<source>", "<output>"));
}

bool DiskCache::builds_split(const KernelSource& source) {
  return source.splittable && knobs::flag("GEMMKIT_SPLIT_BUILD");
}

std::string DiskCache::split_record(const Toolchain& toolchain, const KernelSource& source,
                                    SplitArtifact artifact) const {
  const std::vector<std::string> flags =
      split_command(without_paths(toolchain), source, artifact, "<source>", "<output>");
  if (artifact == SplitArtifact::cubin) return make_record(toolchain, source, record_field("artifact", "cubin"), flags);
  // The host module compiles the wrapper, and launches a cubin of this same source.
  return make_record(toolchain, source,
                     record_field("artifact", "host") + record_field("host-target", toolchain.host_target) +
                         record_field("host-wrapper", kSplitHostWrapper),
                     flags);
}

std::string DiskCache::split_key(const Toolchain& toolchain, const KernelSource& source, SplitArtifact artifact) const {
  return sha256_hex(split_record(toolchain, source, artifact));
}

std::string DiskCache::key(const Toolchain& toolchain, const KernelSource& source) const {
  return sha256_hex(record(toolchain, source));
}

std::vector<std::string> DiskCache::keys(const Toolchain& toolchain, const KernelSource& source) const {
  if (!builds_split(source)) return {key(toolchain, source)};
  return {split_key(toolchain, source, SplitArtifact::cubin), split_key(toolchain, source, SplitArtifact::host)};
}

std::optional<CacheEntry> DiskCache::lookup(const std::string& key) const {
  require_key(key);
  bool damaged = false;
  if (std::optional<CacheEntry> entry = find_complete(root_, key, LockHeld::no, damaged)) return entry;
  return find_in_packs(root_, key);
}

std::optional<CacheEntry> DiskCache::find(const Toolchain& toolchain, const KernelSource& source) const {
  if (knobs::flag("GEMMKIT_ALWAYS_COMPILE")) return std::nullopt;
  bool damaged = false;
  if (!builds_split(source)) return find_built(root_, key(toolchain, source), damaged);
  std::optional<CacheEntry> host = find_built(root_, split_key(toolchain, source, SplitArtifact::host), damaged);
  if (!host) return std::nullopt;
  const std::optional<CacheEntry> cubin =
      find_built(root_, split_key(toolchain, source, SplitArtifact::cubin), damaged);
  if (!cubin) return std::nullopt;
  host->cubin_path = cubin->module_path;
  return host;
}

namespace {

// One build of get_or_build(_many): a source, its key, its builder and what the builder makes.
struct BuildJob {
  const KernelSource* source;
  std::string key;
  ModuleBuilder builder;
  Output output;
};

ModuleBuilder split_builder(const Toolchain& toolchain, SplitArtifact artifact) {
  return [&toolchain, artifact](const KernelSource& source, const std::string& work_dir) {
    compile_split(toolchain, source, artifact, work_dir);
  };
}

// How long the missing builds of one source usually take: the slowest of their kinds' usual times when they run side by
// side, else their sum; unknown when a kind has no earlier build of the family and arch.
std::optional<double> usual_wait(const std::string& root, const std::vector<const BuildJob*>& missing,
                                 bool side_by_side) {
  const std::map<std::string, double> usual = usual_builder_seconds(root, *missing.front()->source);
  double wait = 0;
  for (const BuildJob* job : missing) {
    const auto seconds = usual.find(artifact_kind(job->output.artifact, job->output.manifest_fields));
    if (seconds == usual.end()) return std::nullopt;
    wait = side_by_side ? std::max(wait, seconds->second) : wait + seconds->second;
  }
  if (wait < 1) return std::nullopt;  // "usually ~0 s" tells nothing
  return wait;
}

// Builds the jobs' misses, `progress` hearing of each; `waited`: the jobs are one source's, which the caller waits for
// and which reports itself (jit::WaitedBuild).
std::vector<CacheEntry> build_jobs(const std::string& root, const Toolchain& toolchain,
                                   const std::vector<BuildJob>& sources, const ProgressCallback& progress,
                                   bool waited) {
  std::vector<CacheEntry> entries(sources.size());
  std::vector<std::string> keys;
  std::map<std::string, std::size_t> first_with_key;
  struct Miss {
    std::size_t index;
    bool damaged;
  };
  std::vector<Miss> misses;
  for (std::size_t i = 0; i < sources.size(); ++i) {
    keys.push_back(sources[i].key);
    if (!first_with_key.emplace(keys[i], i).second) continue;  // a duplicate is served by its first copy
    bool damaged = false;
    std::optional<CacheEntry> entry;
    if (!knobs::flag("GEMMKIT_ALWAYS_COMPILE")) entry = find_built(root, keys[i], damaged);
    if (entry)
      entries[i] = *entry;
    else
      misses.push_back({i, damaged});
  }
  const std::string build_root = misses.empty() ? root : build_roots().for_root(root);

  std::vector<std::exception_ptr> errors(misses.size());
  std::atomic<std::size_t> next{0};
  std::atomic<bool> interrupted{false};
  // A background build is one of the background pool's jobs, which max_parallel_compiles() already bounds: its
  // artifacts (a split kernel's two) are built one after the other.
  const int cap = is_background_thread() ? 1 : max_parallel_compiles();
  const std::size_t jobs = std::min<std::size_t>(misses.size(), static_cast<std::size_t>(cap));
  std::optional<jit::WaitedBuild> waited_build;  // reports until the end of this call, or says that it failed
  if (waited && !misses.empty() && jit::WaitedBuild::wanted()) {
    std::vector<const BuildJob*> missing;
    for (const Miss& miss : misses) missing.push_back(&sources[miss.index]);
    waited_build.emplace(missing.front()->source->kernel_name, missing.front()->key,
                         usual_wait(root, missing, jobs > 1));
  }
  std::mutex progress_mutex;
  std::size_t done = 0;
  const auto start = std::chrono::steady_clock::now();
  auto report = [&](const BuildJob& job, bool finished) {
    if (!progress) return;
    std::lock_guard<std::mutex> lock(progress_mutex);
    BuildProgress step{job.source->kernel_name, finished, done += finished ? 1 : 0, misses.size(),
                       seconds_since(start)};
    if (done > 0) {
      // Builds run `jobs` at a time: the rest take about their share of the mean time per build so far.
      const std::size_t left = misses.size() - done;
      step.eta_seconds = step.elapsed_seconds / static_cast<double>(done) * static_cast<double>(left);
    }
    progress(step);
  };
  auto work = [&] {
    for (std::size_t m = next++; m < misses.size() && !interrupted; m = next++) {
      const std::size_t i = misses[m].index;
      try {
        report(sources[i], false);
        entries[i] = build_and_publish(build_root, keys[i], toolchain, *sources[i].source, sources[i].builder,
                                       misses[m].damaged, sources[i].output);
        report(sources[i], true);
      } catch (const InterruptedError&) {
        interrupted = true;  // no further build starts
        errors[m] = std::current_exception();
      } catch (...) {
        errors[m] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> workers;
  for (std::size_t t = 1; t < jobs; ++t) workers.emplace_back(work);
  work();
  for (std::thread& worker : workers) worker.join();
  for (const std::exception_ptr& error : errors) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const InterruptedError&) {
      throw;
    } catch (...) {
      if (!interrupted) throw;  // after an interrupt the interrupt is the news, not what it broke
    }
  }

  for (std::size_t i = 0; i < sources.size(); ++i) {
    if (const std::size_t first = first_with_key.at(keys[i]); first != i) entries[i] = entries[first];
  }
  return entries;
}

// The sources' entries, a split source (builds_split) built as two jobs (its cubin's and its host module's, which the
// job cap counts apart) and returned as its host module's entry with cubin_path.
std::vector<CacheEntry> build_sources(const DiskCache& cache, const Toolchain& toolchain,
                                      const std::vector<KernelSource>& sources, const ProgressCallback& progress,
                                      bool waited) {
  std::vector<BuildJob> jobs;
  std::vector<std::size_t> first_job;  // per source
  for (const KernelSource& source : sources) {
    first_job.push_back(jobs.size());
    if (!DiskCache::builds_split(source)) {
      jobs.push_back({&source, cache.key(toolchain, source), nvcc_builder(toolchain), {}});
      continue;
    }
    const std::string cubin_key = cache.split_key(toolchain, source, SplitArtifact::cubin);
    jobs.push_back({&source, cubin_key, split_builder(toolchain, SplitArtifact::cubin), {"kernel.cubin"}});
    jobs.push_back({&source,
                    cache.split_key(toolchain, source, SplitArtifact::host),
                    split_builder(toolchain, SplitArtifact::host),
                    {"kernel.so", Json{{"cubin_key", cubin_key}}}});
  }
  const std::vector<CacheEntry> built = build_jobs(cache.root(), toolchain, jobs, progress, waited);
  std::vector<CacheEntry> entries;
  for (std::size_t i = 0; i < sources.size(); ++i) {
    CacheEntry entry = built[first_job[i]];
    if (DiskCache::builds_split(sources[i])) {
      const CacheEntry& cubin = entry;
      CacheEntry host = built[first_job[i] + 1];
      host.cubin_path = cubin.module_path;
      host.hit = host.hit && cubin.hit;
      host.build_seconds = std::max(host.build_seconds, cubin.build_seconds);  // built side by side
      entry = host;
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

}  // namespace

CacheEntry DiskCache::get_or_build(const Toolchain& toolchain, const KernelSource& source,
                                   const ModuleBuilder& builder) {
  return build_jobs(root_, toolchain, {{&source, key(toolchain, source), builder, {}}}, {}, /*waited=*/true).front();
}

CacheEntry DiskCache::get_or_build(const Toolchain& toolchain, const KernelSource& source) {
  return build_sources(*this, toolchain, {source}, {}, /*waited=*/true).front();
}

std::vector<CacheEntry> DiskCache::get_or_build_many(const Toolchain& toolchain,
                                                     const std::vector<KernelSource>& sources,
                                                     const ProgressCallback& progress) {
  return build_sources(*this, toolchain, sources, progress, /*waited=*/false);
}

std::vector<CacheEntry> DiskCache::get_or_build_many(const Toolchain& toolchain,
                                                     const std::vector<KernelSource>& sources,
                                                     const ModuleBuilder& builder, const ProgressCallback& progress) {
  std::vector<BuildJob> jobs;
  for (const KernelSource& source : sources) jobs.push_back({&source, key(toolchain, source), builder, {}});
  return build_jobs(root_, toolchain, jobs, progress, /*waited=*/false);
}

std::vector<CacheListing> DiskCache::list() const {
  std::vector<CacheListing> listing;
  std::error_code ec;
  for (const auto& shard : fs::directory_iterator(v1_dir(root_), ec)) {
    if (shard.path().filename().string().size() != 2 || !shard.is_directory(ec)) continue;
    for (const auto& dir : fs::directory_iterator(shard.path(), ec)) {
      const std::string key = dir.path().filename().string();
      if (!is_key(key)) continue;
      const std::optional<std::string> text = read_file(dir.path() / "manifest.json");
      if (!text) continue;
      try {
        const Json manifest = Json::parse(*text);
        listing.push_back({key, manifest_string(manifest, "kernel_name"), dir.path().string(),
                           manifest_string(manifest, "created"), folder_bytes(dir.path())});
      } catch (const Json::exception&) {
        continue;  // damaged; lookup() deals with it
      }
    }
  }
  std::sort(listing.begin(), listing.end(), [](const auto& a, const auto& b) { return a.key < b.key; });
  return listing;
}

std::size_t DiskCache::clear() {
  std::size_t removed = 0;
  std::error_code ec;
  const fs::path v1 = v1_dir(root_);
  for (const auto& shard : fs::directory_iterator(v1, ec)) {
    if (shard.path().filename().string().size() != 2 || !shard.is_directory(ec)) continue;
    std::vector<fs::path> dirs;
    for (const auto& dir : fs::directory_iterator(shard.path(), ec)) dirs.push_back(dir.path());
    for (const fs::path& dir : dirs) {
      // Rename first, so a concurrent reader sees the entry whole or not at all.
      if (is_key(dir.filename().string())) ++removed;
      move_aside(root_, dir);
    }
    fs::remove(shard.path(), ec);  // only if empty; a publisher recreates it
  }
  fs::remove_all(v1 / "trash", ec);
  fs::remove_all(v1 / "locks", ec);
  sweep_stale_tmp(root_);
  return removed;
}

namespace {

// An entry in an archive: manifest.json, kernel.cu and its artifact (kernel.so or kernel.cubin).
constexpr const char* kArchiveFiles[] = {"manifest.json", "kernel.so", "kernel.cubin", "kernel.cu"};

bool is_archive_file(const std::string& name) {
  return std::any_of(std::begin(kArchiveFiles), std::end(kArchiveFiles), [&](const char* f) { return name == f; });
}

// The files of an entry whose manifest records `artifact`.
std::vector<std::string> entry_files(const std::string& artifact) {
  return {"manifest.json", artifact, "kernel.cu"};
}

// Why the entry's files (name -> bytes) do not match its manifest, or "" when they do.
std::string entry_mismatch(const std::string& key, const std::map<std::string, std::string>& files) {
  if (!files.count("manifest.json")) return "it has no manifest.json";
  try {
    const Json manifest = Json::parse(files.at("manifest.json"));
    if (manifest.at("key").get<std::string>() != key) return "its manifest names another key";
    const std::string artifact = artifact_of(manifest);
    if (artifact.empty()) return "its manifest records neither kernel.so nor kernel.cubin";
    for (const std::string& name : entry_files(artifact)) {
      if (!files.count(name)) return "it has no " + name;
    }
    for (const std::string& name : {artifact, std::string("kernel.cu")}) {
      const Json& record = manifest.at("files").at(name);
      const std::string& data = files.at(name);
      if (record.at("bytes").get<std::uint64_t>() != data.size() ||
          record.at("sha256").get<std::string>() != sha256_hex(data)) {
        return name + " does not match the size and SHA-256 its manifest records";
      }
    }
  } catch (const Json::exception& e) {
    return std::string("its manifest is not a gemmkit manifest (") + e.what() + ")";
  }
  return "";
}

}  // namespace

std::size_t DiskCache::export_archive(const std::string& path, const std::vector<std::string>& keys) const {
  std::vector<std::string> wanted = keys;
  if (wanted.empty()) {
    for (const CacheListing& listing : list()) wanted.push_back(listing.key);
  }
  std::vector<tar::File> files;
  for (const std::string& key : wanted) {
    const std::optional<CacheEntry> entry = lookup(key);
    if (!entry) throw Error("cannot export " + key + ": no complete entry with that key in " + root_);
    for (const std::string& name : entry_files(fs::path(entry->module_path).filename().string())) {
      const std::optional<std::string> data = read_file(entry_dir(root_, key) / name);
      if (!data) throw Error("cannot read " + (entry_dir(root_, key) / name).string() + " to export it");
      files.push_back({key + "/" + name, *data});
    }
  }
  // Written beside the target and renamed over it: a reader never sees half an archive.
  const fs::path target(path);
  const fs::path partial = target.string() + ".partial." + unique_suffix();
  try {
    write_file(partial, tar::write(files));
  } catch (...) {
    std::error_code ec;
    fs::remove(partial, ec);
    throw;
  }
  std::error_code ec;
  fs::rename(partial, target, ec);
  if (ec) {
    fs::remove(partial, ec);
    throw Error("cannot write the archive " + path + ": " + ec.message());
  }
  return wanted.size();
}

DiskCache::ImportResult DiskCache::import_archive(const std::string& path) {
  const std::optional<std::string> bytes = read_file(path);
  if (!bytes) throw Error("cannot read the archive " + path);
  std::map<std::string, std::map<std::string, std::string>> entries;  // key -> file name -> bytes
  for (tar::File& file : tar::read(*bytes, "the archive " + path)) {
    const std::size_t slash = file.name.find('/');
    const std::string key = file.name.substr(0, slash);
    const std::string name = slash == std::string::npos ? "" : file.name.substr(slash + 1);
    if (!is_key(key) || !is_archive_file(name)) {
      throw Error("the archive " + path + " holds " + file.name +
                  ", which is not <key>/manifest.json, kernel.so, kernel.cubin or kernel.cu: it was not written by "
                  "gemmkit cache "
                  "export");
    }
    entries[key][name] = std::move(file.data);
  }
  const std::string root = build_roots().for_root(root_);
  ImportResult result;
  for (const auto& [key, files] : entries) {
    if (const std::string why = entry_mismatch(key, files); !why.empty()) {
      throw Error("the archive " + path + " has a damaged entry " + key + ": " + why);
    }
    KeyLock lock(root, key);
    bool damaged = false;
    if (find_complete(root, key, LockHeld::yes, damaged)) {
      ++result.present;
      continue;
    }
    const fs::path tmp = make_dir(v1_dir(root) / "tmp" / (key + ".import." + unique_suffix()));
    std::error_code ec;
    try {
      for (const auto& [name, data] : files) write_file(tmp / name, data);
      make_dir(entry_dir(root, key).parent_path());
      fs::rename(tmp, entry_dir(root, key), ec);
      if (ec) throw Error("cannot import " + key + " into " + entry_dir(root, key).string() + ": " + ec.message());
    } catch (...) {
      fs::remove_all(tmp, ec);
      throw;
    }
    ++result.imported;
  }
  return result;
}

DiskCache::TmpFolders DiskCache::sweep_tmp() const {
  return sweep_stale_tmp(root_);
}

void to_json(Json& json, const CacheListing& listing) {
  json = {{"key", listing.key},
          {"kernel_name", listing.kernel_name},
          {"dir", listing.dir},
          {"created", listing.created},
          {"bytes", listing.bytes}};
}

CacheCounters cache_counters() {
  CacheCounters counters;
  counters.builds = g_builds.load();
  counters.disk_hits = g_disk_hits.load();
  counters.rebuilt_damaged = g_rebuilt_damaged.load();
  counters.background_builds = g_background_builds.load();
  counters.pack_hits = g_pack_hits.load();
  return counters;
}

}  // namespace gemmkit
