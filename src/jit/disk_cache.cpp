// src/jit/disk_cache.cpp: the content-addressed kernel cache. An entry appears only by rename() of a
// complete private build folder whose manifest.json was written last; a per-key flock merely saves
// duplicate nvcc work, so a crashed holder (the kernel drops its lock) or a missing lock costs nothing.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "gemmkit/cache.hpp"
#include "gemmkit/errors.hpp"
#include "jit/cache_entries.hpp"
#include "jit/process.hpp"
#include "jit/progress.hpp"
#include "jit/toolchain_detail.hpp"
#include "util/knobs.hpp"
#include "util/sha256.hpp"
#include "util/utc_time.hpp"

#ifndef GEMMKIT_VERSION
#error "GEMMKIT_VERSION must be defined by the build"
#endif

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace gemmkit {

using namespace cache_entries;

namespace {

constexpr const char* kKeySchema = "3";  // bump when record() changes shape
constexpr int kPublishAttempts = 3;
constexpr std::size_t kRecentBuilds = 9;  // the build-time estimate is the median of this many recent builds

std::atomic<int> g_builds{0};
std::atomic<int> g_rebuilt_damaged{0};
std::atomic<int> g_background_builds{0};

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
  manifest["created"] = utc_now_iso8601();
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

// A key record: what every artifact depends on (the record's schema, gemmkit, the device headers the source includes,
// CUTLASS, nvcc), then `fields` (the host target, for what the host compiler compiles), the target, the flags and the
// source.
std::string make_record(const Toolchain& toolchain, const KernelSource& source, const std::string& fields,
                        const std::vector<std::string>& flags) {
  std::string out = record_field("gemmkit-cache-key-schema", kKeySchema);
  out += record_field("gemmkit-version", GEMMKIT_VERSION);
  out += record_field("included-device-headers-sha256", included_headers_digest(toolchain, source.text));
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
  counters.disk_hits = cache_entries::disk_hits.load();
  counters.rebuilt_damaged = g_rebuilt_damaged.load();
  counters.background_builds = g_background_builds.load();
  counters.pack_hits = cache_entries::pack_hits.load();
  return counters;
}

}  // namespace gemmkit
