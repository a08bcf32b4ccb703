// tests/unit/cache_test.cpp: cache keys, atomic publish, damage recovery and concurrency, with a fake builder.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <vector>

#include "gemmkit/cache.hpp"
#include "gemmkit/compiler.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/jit.hpp"
#include "support/cli.hpp"
#include "unit/fake_build.hpp"
#include "unit/test_env.hpp"

namespace fs = std::filesystem;

namespace gemmkit {
namespace {

using testenv::read;

std::size_t count_entries(const fs::path& root) {
  std::size_t n = 0;
  for (const auto& shard : fs::directory_iterator(root / "v1")) {
    if (shard.path().filename().string().size() != 2) continue;
    n += std::distance(fs::directory_iterator(shard.path()), fs::directory_iterator());
  }
  return n;
}

std::size_t count_children(const fs::path& dir) {
  if (!fs::exists(dir)) return 0;
  return std::distance(fs::directory_iterator(dir), fs::directory_iterator());
}

class CacheTest : public ::testing::Test {
 protected:
  testenv::TempDir dir_;
  DiskCache cache_{dir_.str()};
  Toolchain tc_ = fake_toolchain();
  KernelSource source_ = fake_source();
  CacheCounters before_ = cache_counters();

  int builds() const { return cache_counters().builds - before_.builds; }
  int disk_hits() const { return cache_counters().disk_hits - before_.disk_hits; }
  int rebuilt_damaged() const { return cache_counters().rebuilt_damaged - before_.rebuilt_damaged; }
};

// ---- keys --------------------------------------------------------------------------------------------------

TEST_F(CacheTest, KeyIsStableAndHex) {
  const std::string key = cache_.key(tc_, source_);
  EXPECT_EQ(key, cache_.key(fake_toolchain(), fake_source()));
  EXPECT_EQ(key, DiskCache("/elsewhere").key(tc_, source_));
  ASSERT_EQ(key.size(), 64u);
  EXPECT_EQ(key.find_first_not_of("0123456789abcdef"), std::string::npos);
}

// One change to each field of a cache key's record, by name.
std::vector<std::pair<const char*, std::function<void(Toolchain&, KernelSource&)>>> record_changes() {
  return {
      {"device headers", [](Toolchain& t, KernelSource&) { t.device_headers_hash = std::string(64, 'e'); }},
      {"cutlass version", [](Toolchain& t, KernelSource&) { t.cutlass_version = "4.2.1"; }},
      {"nvcc version", [](Toolchain& t, KernelSource&) { t.nvcc_version = "12.8"; }},
      {"nvcc build", [](Toolchain& t, KernelSource&) { t.nvcc_build = "Build cuda_13.0.r13.0/compiler.1_0"; }},
      {"host target", [](Toolchain& t, KernelSource&) { t.host_target = "aarch64-linux-gnu"; }},
      {"arch", [](Toolchain&, KernelSource& s) { s.arch_flag = "sm_90"; }},
      {"kernel name", [](Toolchain&, KernelSource& s) { s.kernel_name += "_x"; }},
      {"source text", [](Toolchain&, KernelSource& s) { s.text += " "; }},
  };
}

TEST_F(CacheTest, EveryRecordFieldChangesTheKey) {
  const std::string base = cache_.key(tc_, source_);
  const auto changes = record_changes();
  for (const auto& [what, change] : changes) {
    Toolchain tc = tc_;
    KernelSource source = source_;
    change(tc, source);
    EXPECT_NE(cache_.key(tc, source), base) << what;
  }
}

TEST_F(CacheTest, PathsAndTheHostCompilersVersionDoNotChangeTheKey) {
  const std::string base = cache_.key(tc_, source_);
  // A module built by another g++ for the same target is the same kernel behind the same C interface.
  Toolchain other_host = tc_;
  other_host.host_compiler = "g++ (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0";
  EXPECT_EQ(cache_.key(other_host, source_), base);
  Toolchain moved = tc_;
  moved.nvcc = "/usr/local/cuda-13.0/bin/nvcc";
  moved.cuda_home = "/usr/local/cuda-13.0";
  moved.cutlass_root = "/srv/cutlass";
  moved.device_include_dir = "/usr/share/gemmkit/device/include";
  EXPECT_EQ(cache_.key(moved, source_), base);
}

TEST_F(CacheTest, RecordHoldsFlagsWithPlaceholdersAndTheSource) {
  const std::string record = cache_.record(tc_, source_);
  EXPECT_NE(record.find("flag: -DNDEBUG\n"), std::string::npos);
  EXPECT_NE(record.find("flag: -gencode=arch=compute_90a,code=sm_90a\n"), std::string::npos);
  EXPECT_NE(record.find("flag: -I<cutlass>/include\n"), std::string::npos);
  EXPECT_NE(record.find("nvcc-version: 13.0\n"), std::string::npos);
  EXPECT_EQ(record.find(tc_.cutlass_root), std::string::npos);
  EXPECT_EQ(record.find(tc_.nvcc), std::string::npos);
  EXPECT_EQ(record.substr(record.size() - source_.text.size()), source_.text);
}

// ---- the split path's two keys (compiler.hpp) ------------------------------------------------------------------

TEST_F(CacheTest, TheCubinKeyLeavesOutTheHostTargetAndTheHostKeyHasIt) {
  const std::string cubin = cache_.split_key(tc_, source_, SplitArtifact::cubin);
  const std::string host = cache_.split_key(tc_, source_, SplitArtifact::host);
  const std::string single = cache_.key(tc_, source_);
  EXPECT_NE(cubin, host);
  EXPECT_NE(cubin, single);
  EXPECT_NE(host, single);

  // Another host target (an aarch64 host with the same toolkit): its cubin hits, its host module is its own.
  Toolchain other_target = tc_;
  other_target.host_target = "aarch64-linux-gnu";
  EXPECT_EQ(cache_.split_key(other_target, source_, SplitArtifact::cubin), cubin);
  EXPECT_NE(cache_.split_key(other_target, source_, SplitArtifact::host), host);
  EXPECT_NE(cache_.key(other_target, source_), single);
  // Another g++ version or other paths change neither.
  Toolchain moved = tc_;
  moved.host_compiler = "g++ (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0";
  moved.nvcc = "/usr/local/cuda-13.0/bin/nvcc";
  moved.cutlass_root = "/srv/cutlass";
  moved.device_include_dir = "/usr/share/gemmkit/device/include";
  EXPECT_EQ(cache_.split_key(moved, source_, SplitArtifact::cubin), cubin);
  EXPECT_EQ(cache_.split_key(moved, source_, SplitArtifact::host), host);
}

TEST_F(CacheTest, TheCubinKeyCoversWhatTheCubinDependsOn) {
  // Every field of the record but the host target, which a cubin does not depend on.
  auto changes = record_changes();
  std::erase_if(changes, [](const auto& change) { return std::string_view(change.first) == "host target"; });
  for (const SplitArtifact artifact : {SplitArtifact::cubin, SplitArtifact::host}) {
    const std::string base = cache_.split_key(tc_, source_, artifact);
    for (const auto& [what, change] : changes) {
      Toolchain tc = tc_;
      KernelSource source = source_;
      change(tc, source);
      EXPECT_NE(cache_.split_key(tc, source, artifact), base) << what;
    }
  }
}

TEST_F(CacheTest, SplitRecordsHoldTheirOwnFlags) {
  const std::string cubin = cache_.split_record(tc_, source_, SplitArtifact::cubin);
  EXPECT_NE(cubin.find("flag: -cubin\n"), std::string::npos);
  EXPECT_NE(cubin.find("flag: -DGEMMKIT_SPLIT_DEVICE\n"), std::string::npos);
  EXPECT_NE(cubin.find("flag: -gencode=arch=compute_90a,code=sm_90a\n"), std::string::npos);
  EXPECT_EQ(cubin.find("host-target"), std::string::npos);
  EXPECT_EQ(cubin.find("-shared"), std::string::npos);
  EXPECT_EQ(cubin.substr(cubin.size() - source_.text.size()), source_.text);
  const std::string host = cache_.split_record(tc_, source_, SplitArtifact::host);
  EXPECT_NE(host.find("flag: -DGEMMKIT_SPLIT_HOST\n"), std::string::npos);
  EXPECT_NE(host.find("flag: -shared\n"), std::string::npos);
  EXPECT_NE(host.find("host-target: " + tc_.host_target + "\n"), std::string::npos);
  EXPECT_EQ(host.find(tc_.host_compiler), std::string::npos);
  EXPECT_EQ(host.find("-cubin"), std::string::npos);
}

// The fields of a record, up to the source text (which follows "source-bytes").
std::set<std::string> record_fields(const std::string& record) {
  std::set<std::string> fields;
  std::istringstream lines(record);
  for (std::string line; std::getline(lines, line);) {
    fields.insert(line.substr(0, line.find(':')));
    if (line.rfind("source-bytes:", 0) == 0) break;
  }
  return fields;
}

// A cubin built on a machine without a GPU must hit on the GPU machine: the split keys hold the toolchain, the exact
// arch, the flags and the source, nothing the building machine's devices could change.
TEST_F(CacheTest, TheSplitKeysHoldNothingOfTheBuildingMachinesGpu) {
  const std::set<std::string> common = {"gemmkit-cache-key-schema",
                                        "gemmkit-version",
                                        "device-headers-sha256",
                                        "cutlass-version",
                                        "nvcc-version",
                                        "nvcc-build",
                                        "artifact",
                                        "arch",
                                        "kernel-name",
                                        "flag",
                                        "source-bytes"};
  EXPECT_EQ(record_fields(cache_.split_record(tc_, source_, SplitArtifact::cubin)), common);
  std::set<std::string> host = common;
  host.insert({"host-target", "host-wrapper"});
  EXPECT_EQ(record_fields(cache_.split_record(tc_, source_, SplitArtifact::host)), host);
  const std::vector<std::string> keys = {cache_.split_key(tc_, source_, SplitArtifact::cubin),
                                         cache_.split_key(tc_, source_, SplitArtifact::host)};
  testenv::ScopedEnv no_devices("CUDA_VISIBLE_DEVICES", "");
  EXPECT_EQ(cache_.split_key(tc_, source_, SplitArtifact::cubin), keys[0]);
  EXPECT_EQ(cache_.split_key(tc_, source_, SplitArtifact::host), keys[1]);
}

TEST_F(CacheTest, SplittableSourcesBuildSplitUnlessTurnedOff) {
  KernelSource splittable = source_;
  splittable.splittable = true;
  {
    testenv::ScopedEnv off("GEMMKIT_SPLIT_BUILD", "0");
    EXPECT_FALSE(DiskCache::builds_split(splittable));
    EXPECT_EQ(cache_.keys(tc_, splittable), std::vector<std::string>{cache_.key(tc_, splittable)});
  }
  testenv::ScopedEnv by_default("GEMMKIT_SPLIT_BUILD", std::nullopt);
  EXPECT_TRUE(DiskCache::builds_split(splittable));
  EXPECT_FALSE(DiskCache::builds_split(source_));
  EXPECT_EQ(cache_.keys(tc_, splittable),
            (std::vector<std::string>{cache_.split_key(tc_, splittable, SplitArtifact::cubin),
                                      cache_.split_key(tc_, splittable, SplitArtifact::host)}));
  // A builder given by the caller builds one module, whatever the knob says.
  const CacheEntry built = cache_.get_or_build(tc_, splittable, fake_builder());
  EXPECT_EQ(built.key, cache_.key(tc_, splittable));
  EXPECT_TRUE(built.cubin_path.empty());
}

// ---- publish and hit ---------------------------------------------------------------------------------------

TEST_F(CacheTest, TheBuildersRecordJoinsTheManifest) {
  const ModuleBuilder builder = [](const KernelSource& source, const std::string& work_dir) {
    fake_builder()(source, work_dir);
    std::ofstream(fs::path(work_dir) / kBuildRecordFile) << R"({"nvcc_argv": ["nvcc", "-O3"], "seconds": {"nvcc": 2}})";
  };
  const CacheEntry built = cache_.get_or_build(tc_, source_, builder);
  const auto manifest = nlohmann::ordered_json::parse(read(fs::path(built.dir) / "manifest.json"));
  EXPECT_EQ(manifest.at("build").at("nvcc_argv"), nlohmann::ordered_json({"nvcc", "-O3"}));
  EXPECT_EQ(manifest.at("build").at("seconds").at("nvcc").get<double>(), 2.0);
  EXPECT_TRUE(manifest.at("build").at("seconds").contains("builder"));
  EXPECT_FALSE(fs::exists(fs::path(built.dir) / kBuildRecordFile));  // the manifest holds it
}

TEST_F(CacheTest, AlwaysCompileRebuildsWhatTheCacheHolds) {
  const CacheEntry first = cache_.get_or_build(tc_, source_, fake_builder());
  testenv::ScopedEnv always("GEMMKIT_ALWAYS_COMPILE", "1");
  const CacheEntry again = cache_.get_or_build(tc_, source_, fake_builder());
  EXPECT_FALSE(again.hit);
  EXPECT_EQ(builds(), 2);
  EXPECT_EQ(again.dir, first.dir);
  EXPECT_TRUE(cache_.lookup(again.key).has_value());
  EXPECT_EQ(count_entries(dir_.path()), 1u);
}

TEST_F(CacheTest, BuildThenHit) {
  const CacheEntry built = cache_.get_or_build(tc_, source_, fake_builder());
  EXPECT_FALSE(built.hit);
  EXPECT_EQ(builds(), 1);
  const std::string key = cache_.key(tc_, source_);
  EXPECT_EQ(built.key, key);
  EXPECT_EQ(fs::path(built.dir), dir_.path() / "v1" / key.substr(0, 2) / key);
  EXPECT_EQ(fs::path(built.module_path), fs::path(built.dir) / "kernel.so");
  EXPECT_EQ(built.kernel_name, source_.kernel_name);
  EXPECT_EQ(read(fs::path(built.dir) / "kernel.cu"), source_.text);
  EXPECT_EQ(count_children(dir_.path() / "v1" / "tmp"), 0u);

  const auto manifest = nlohmann::ordered_json::parse(read(fs::path(built.dir) / "manifest.json"));
  EXPECT_EQ(manifest.at("key").get<std::string>(), key);
  EXPECT_EQ(manifest.at("arch").get<std::string>(), "sm_90a");
  EXPECT_EQ(manifest.at("nvcc_version").get<std::string>(), "13.0");
  EXPECT_EQ(manifest.at("cutlass_version").get<std::string>(), "4.2.0");
  EXPECT_FALSE(manifest.at("created").get<std::string>().empty());
  EXPECT_FALSE(manifest.at("gemmkit_version").get<std::string>().empty());
  EXPECT_EQ(manifest.at("files").at("kernel.so").at("bytes").get<std::uintmax_t>(), fs::file_size(built.module_path));
  EXPECT_TRUE(manifest.at("build").at("seconds").contains("builder"));
  EXPECT_TRUE(manifest.at("build").at("seconds").contains("wait_for_lock"));

  const CacheEntry again = cache_.get_or_build(tc_, source_, fake_builder());
  EXPECT_TRUE(again.hit);
  EXPECT_EQ(again.dir, built.dir);
  EXPECT_EQ(again.kernel_name, source_.kernel_name);
  EXPECT_EQ(again.build_seconds, 0.0);
  EXPECT_EQ(builds(), 1);
  EXPECT_EQ(disk_hits(), 1);
  EXPECT_TRUE(cache_.lookup(key).has_value());
}

TEST_F(CacheTest, LookupOfUnknownKeyIsEmptyAndBadKeyThrows) {
  EXPECT_FALSE(cache_.lookup(std::string(64, 'a')).has_value());
  EXPECT_THROW(cache_.lookup("../../etc"), Error);
}

TEST_F(CacheTest, FailedBuildPublishesNothing) {
  auto failing = [](const KernelSource&, const std::string&) { throw std::runtime_error("boom"); };
  EXPECT_THROW(cache_.get_or_build(tc_, source_, failing), std::runtime_error);
  EXPECT_FALSE(cache_.lookup(cache_.key(tc_, source_)).has_value());
  EXPECT_EQ(count_children(dir_.path() / "v1" / "tmp"), 0u);

  auto no_module = [](const KernelSource&, const std::string&) {};
  EXPECT_THROW(cache_.get_or_build(tc_, source_, no_module), Error);
  EXPECT_EQ(count_children(dir_.path() / "v1" / "tmp"), 0u);
}

TEST_F(CacheTest, CompileErrorKeepsTheBuildFolderForTheUser) {
  auto failing = [](const KernelSource& source, const std::string& work_dir) {
    std::ofstream(fs::path(work_dir) / "kernel.cu") << source.text;
    throw CompileError("nvcc failed", {"nvcc"}, 1, "error", work_dir + "/kernel.cu");
  };
  try {
    cache_.get_or_build(tc_, source_, failing);
    FAIL() << "expected CompileError";
  } catch (const CompileError& error) {
    EXPECT_TRUE(fs::exists(error.source_path));
  }
  EXPECT_FALSE(cache_.lookup(cache_.key(tc_, source_)).has_value());
}

// ---- damage ----------------------------------------------------------------------------------------------

struct Damage {
  const char* name;
  std::function<void(const fs::path& entry)> apply;
};

void PrintTo(const Damage& d, std::ostream* os) {
  *os << d.name;  // ctest lists the test by it, not by a dump of the struct's bytes
}

class DamagedEntryTest : public CacheTest, public ::testing::WithParamInterface<Damage> {};

TEST_P(DamagedEntryTest, IsMovedAsideAndRebuilt) {
  const CacheEntry built = cache_.get_or_build(tc_, source_, fake_builder());
  GetParam().apply(built.dir);

  EXPECT_FALSE(cache_.lookup(built.key).has_value());
  EXPECT_EQ(count_children(dir_.path() / "v1" / "trash"), 1u);
  EXPECT_FALSE(fs::exists(built.dir));

  const CacheEntry rebuilt = cache_.get_or_build(tc_, source_, fake_builder());
  EXPECT_FALSE(rebuilt.hit);
  EXPECT_EQ(builds(), 2);
  EXPECT_TRUE(cache_.lookup(built.key).has_value());
}

TEST_P(DamagedEntryTest, GetOrBuildRebuildsAndCounts) {
  const CacheEntry built = cache_.get_or_build(tc_, source_, fake_builder());
  GetParam().apply(built.dir);
  const CacheEntry rebuilt = cache_.get_or_build(tc_, source_, fake_builder());
  EXPECT_FALSE(rebuilt.hit);
  EXPECT_EQ(rebuilt.dir, built.dir);
  EXPECT_EQ(builds(), 2);
  EXPECT_EQ(rebuilt_damaged(), 1);
  EXPECT_TRUE(cache_.get_or_build(tc_, source_, fake_builder()).hit);
}

void write(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, DamagedEntryTest,
    ::testing::Values(Damage{"ManifestMissing", [](const fs::path& e) { fs::remove(e / "manifest.json"); }},
                      Damage{"ManifestGarbage",
                             [](const fs::path& e) { write(e / "manifest.json", "{\"key\": \"abc"); }},
                      Damage{"ManifestNotObject", [](const fs::path& e) { write(e / "manifest.json", "[1, 2]"); }},
                      Damage{"ManifestOtherKey",
                             [](const fs::path& e) {
                               std::string text = read(e / "manifest.json");
                               const std::string key = e.filename().string();
                               text.replace(text.find(key), key.size(), std::string(64, '0'));
                               write(e / "manifest.json", text);
                             }},
                      Damage{"ModuleMissing", [](const fs::path& e) { fs::remove(e / "kernel.so"); }},
                      Damage{"ModuleTruncated", [](const fs::path& e) { fs::resize_file(e / "kernel.so", 100); }},
                      Damage{"ModuleSameSizeOtherBytes",
                             [](const fs::path& e) {
                               std::string bytes = read(e / "kernel.so");
                               bytes[bytes.size() / 2] ^= 1;
                               write(e / "kernel.so", bytes);
                             }}),
    [](const ::testing::TestParamInfo<Damage>& info) { return std::string(info.param.name); });

// ---- concurrency -------------------------------------------------------------------------------------------

TEST_F(CacheTest, EightThreadsOneKeyBuildOnce) {
  std::atomic<int> failures{0};
  std::vector<CacheEntry> entries(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      try {
        entries[t] = cache_.get_or_build(tc_, source_, fake_builder(std::chrono::milliseconds(100)));
      } catch (...) {
        ++failures;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(builds(), 1);
  EXPECT_EQ(count_entries(dir_.path()), 1u);
  EXPECT_EQ(count_children(dir_.path() / "v1" / "tmp"), 0u);
  for (const CacheEntry& entry : entries) EXPECT_EQ(entry.dir, entries[0].dir);
}

TEST_F(CacheTest, FourProcessesOneKeyBuildOnce) {
  const fs::path build_log = dir_.path() / "builds.log";
  auto logging_builder = fake_builder(std::chrono::milliseconds(200), [build_log] {
    const int fd = ::open(build_log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0 && ::write(fd, "x", 1) == 1) ::close(fd);
  });
  std::vector<pid_t> children;
  for (int p = 0; p < 4; ++p) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int code = 1;
      try {
        DiskCache cache(dir_.str());
        code = fs::exists(cache.get_or_build(tc_, source_, logging_builder).module_path) ? 0 : 2;
      } catch (...) {
        code = 3;
      }
      ::_exit(code);
    }
    children.push_back(pid);
  }
  for (const pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  }
  EXPECT_EQ(read(build_log), "x");  // the per-key lock spared the other three processes the build
  EXPECT_EQ(count_entries(dir_.path()), 1u);
  EXPECT_EQ(count_children(dir_.path() / "v1" / "tmp"), 0u);
  EXPECT_TRUE(cache_.lookup(cache_.key(tc_, source_)).has_value());
}

TEST_F(CacheTest, StaleLockFromACrashedProcessDoesNotBlock) {
  const std::string key = cache_.key(tc_, source_);
  const fs::path lock = dir_.path() / "v1" / "locks" / (key + ".lock");
  fs::create_directories(lock.parent_path());
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // take the lock and die holding it, as a crashed build would
    const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT, 0644);
    ::_exit(fd >= 0 && ::flock(fd, LOCK_EX) == 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(fs::exists(lock));
  EXPECT_FALSE(cache_.get_or_build(tc_, source_, fake_builder()).hit);
  EXPECT_EQ(builds(), 1);
}

TEST_F(CacheTest, LosingThePublishRaceUsesTheWinnersEntry) {
  // While we build, "another process" publishes the same key; our rename must fail and we must use theirs.
  testenv::TempDir other;
  const std::string key = cache_.key(tc_, source_);
  const fs::path final_dir = dir_.path() / "v1" / key.substr(0, 2) / key;
  auto racing_builder = fake_builder(std::chrono::milliseconds(0), [&] {
    const CacheEntry theirs = DiskCache(other.str()).get_or_build(tc_, source_, fake_builder());
    fs::create_directories(final_dir.parent_path());
    fs::rename(theirs.dir, final_dir);
    write(final_dir / "winner", "theirs");
  });
  const CacheEntry entry = cache_.get_or_build(tc_, source_, racing_builder);
  EXPECT_EQ(fs::path(entry.dir), final_dir);
  EXPECT_TRUE(fs::exists(final_dir / "winner"));
  EXPECT_EQ(count_children(dir_.path() / "v1" / "tmp"), 0u);
  EXPECT_TRUE(cache_.lookup(key).has_value());
}

// ---- many, list, clear, root -----------------------------------------------------------------------------

TEST_F(CacheTest, GetOrBuildManyBuildsEachKeyOnceInOrder) {
  const std::vector<KernelSource> sources = {fake_source("a"), fake_source("b"), fake_source("a"), fake_source("c"),
                                             fake_source("d")};
  const std::vector<CacheEntry> entries =
      cache_.get_or_build_many(tc_, sources, fake_builder(std::chrono::milliseconds(20)));
  ASSERT_EQ(entries.size(), sources.size());
  EXPECT_EQ(builds(), 4);
  for (std::size_t i = 0; i < sources.size(); ++i) {
    EXPECT_EQ(entries[i].key, cache_.key(tc_, sources[i]));
    EXPECT_EQ(entries[i].kernel_name, sources[i].kernel_name);
  }
  EXPECT_EQ(entries[0].dir, entries[2].dir);

  const std::vector<CacheEntry> again = cache_.get_or_build_many(tc_, sources, fake_builder());
  EXPECT_EQ(builds(), 4);
  for (const CacheEntry& entry : again) EXPECT_TRUE(entry.hit);
}

TEST_F(CacheTest, GetOrBuildManyReportsAFailure) {
  auto failing_b = [](const KernelSource& source, const std::string& work_dir) {
    if (source.kernel_name == "b") throw std::runtime_error("b failed");
    fake_builder()(source, work_dir);
  };
  EXPECT_THROW(cache_.get_or_build_many(tc_, {fake_source("a"), fake_source("b")}, failing_b), std::runtime_error);
  EXPECT_TRUE(cache_.lookup(cache_.key(tc_, fake_source("a"))).has_value());
}

TEST_F(CacheTest, ListAndClear) {
  for (const char* name : {"k1", "k2", "k3"}) cache_.get_or_build(tc_, fake_source(name), fake_builder());
  const std::vector<CacheListing> listing = cache_.list();
  ASSERT_EQ(listing.size(), 3u);
  for (const CacheListing& item : listing) {
    EXPECT_GT(item.bytes, 4096u);
    EXPECT_FALSE(item.created.empty());
    EXPECT_EQ(item.key, cache_.key(tc_, fake_source(item.kernel_name)));
  }
  EXPECT_EQ(cache_.clear(), 3u);
  EXPECT_TRUE(cache_.list().empty());
  EXPECT_EQ(count_entries(dir_.path()), 0u);
  EXPECT_EQ(count_children(dir_.path() / "v1" / "trash"), 0u);
  EXPECT_FALSE(cache_.get_or_build(tc_, fake_source("k1"), fake_builder()).hit);
}

TEST_F(CacheTest, ClearOnAnEmptyRootIsZero) {
  EXPECT_EQ(DiskCache((dir_.path() / "none").string()).clear(), 0u);
}

TEST(CacheRoot, EnvironmentPrecedence) {
  testenv::ScopedEnv cache_dir("GEMMKIT_CACHE_DIR", "/c/gemmkit");
  testenv::ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
  testenv::ScopedEnv home("HOME", "/home/me");
  EXPECT_EQ(DiskCache::default_root(), "/c/gemmkit");
  {
    testenv::ScopedEnv unset("GEMMKIT_CACHE_DIR", std::nullopt);
    EXPECT_EQ(DiskCache::default_root(), "/xdg/gemmkit");
    testenv::ScopedEnv unset_xdg("XDG_CACHE_HOME", std::nullopt);
    EXPECT_EQ(DiskCache::default_root(), "/home/me/.cache/gemmkit");
  }
}

// ---- export and import -----------------------------------------------------------------------------------------

TEST_F(CacheTest, ExportImportRoundTripNeedsNoBuild) {
  const CacheEntry a = cache_.get_or_build(tc_, fake_source("k1"), fake_builder());
  const CacheEntry b = cache_.get_or_build(tc_, fake_source("k2"), fake_builder());
  const fs::path archive = dir_.path() / "pack.tar";
  EXPECT_EQ(cache_.export_archive(archive.string()), 2u);

  testenv::TempDir other_dir;
  DiskCache other(other_dir.str());
  const DiskCache::ImportResult imported = other.import_archive(archive.string());
  EXPECT_EQ(imported.imported, 2u);
  EXPECT_EQ(imported.present, 0u);
  const int builds_before = builds();
  for (const CacheEntry& entry : {a, b}) {
    const std::optional<CacheEntry> found = other.lookup(entry.key);
    ASSERT_TRUE(found) << entry.kernel_name;
    EXPECT_EQ(read(found->module_path), read(entry.module_path));
    EXPECT_TRUE(other.get_or_build(tc_, fake_source(entry.kernel_name), fake_builder()).hit);
  }
  EXPECT_EQ(builds(), builds_before);  // the imported entries serve without a build
  EXPECT_EQ(count_children(other_dir.path() / "v1" / "tmp"), 0u);

  // Importing again changes nothing; exporting one key writes one entry.
  EXPECT_EQ(other.import_archive(archive.string()).present, 2u);
  EXPECT_EQ(other.export_archive((dir_.path() / "one.tar").string(), {a.key}), 1u);
  EXPECT_EQ(DiskCache((dir_.path() / "third").string()).import_archive((dir_.path() / "one.tar").string()).imported,
            1u);
  EXPECT_THROW(cache_.export_archive((dir_.path() / "x.tar").string(), {std::string(64, 'a')}), Error);
}

TEST_F(CacheTest, ImportRefusesATamperedOrForeignArchive) {
  const CacheEntry built = cache_.get_or_build(tc_, source_, fake_builder());
  const fs::path archive = dir_.path() / "pack.tar";
  cache_.export_archive(archive.string());
  std::string bytes = read(archive);
  const std::size_t module = bytes.find("ELF-ish module");
  ASSERT_NE(module, std::string::npos);
  bytes[module] = 'X';  // kernel.so no longer matches the SHA-256 its manifest records
  const fs::path tampered = dir_.path() / "tampered.tar";
  std::ofstream(tampered, std::ios::binary) << bytes;

  testenv::TempDir other_dir;
  DiskCache other(other_dir.str());
  try {
    other.import_archive(tampered.string());
    ADD_FAILURE() << "a tampered archive was imported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kernel.so does not match"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(other.lookup(built.key));

  const fs::path foreign = dir_.path() / "foreign.tar";
  std::ofstream(foreign, std::ios::binary) << std::string(2048, 'z');
  EXPECT_THROW(other.import_archive(foreign.string()), Error);
  EXPECT_THROW(other.import_archive((dir_.path() / "missing.tar").string()), Error);
  EXPECT_EQ(count_children(other_dir.path() / "v1" / "tmp"), 0u);
}

TEST_F(CacheTest, ConcurrentImportersPublishEachEntryOnce) {
  cache_.get_or_build(tc_, source_, fake_builder());
  const fs::path archive = dir_.path() / "pack.tar";
  cache_.export_archive(archive.string());
  testenv::TempDir other_dir;
  std::atomic<int> imported{0}, present{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      const auto result = DiskCache(other_dir.str()).import_archive(archive.string());
      imported += static_cast<int>(result.imported);
      present += static_cast<int>(result.present);
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(imported.load(), 1);
  EXPECT_EQ(present.load(), 3);
  EXPECT_EQ(count_entries(other_dir.path()), 1u);
}

TEST_F(CacheTest, SweepRemovesBuildFoldersOlderThanAnHour) {
  const fs::path tmp = dir_.path() / "v1" / "tmp";
  fs::create_directories(tmp / "old.123.abc");
  std::ofstream(tmp / "old.123.abc" / "tmpxft_0001.cpp") << "left by a killed nvcc";
  fs::create_directories(tmp / "young.456.def");
  fs::last_write_time(tmp / "old.123.abc", fs::file_time_type::clock::now() - std::chrono::hours(2));
  const DiskCache::TmpFolders swept = cache_.sweep_tmp();
  EXPECT_EQ(swept.removed, 1u);
  EXPECT_EQ(swept.remaining, 1u);
  EXPECT_FALSE(fs::exists(tmp / "old.123.abc"));
  EXPECT_TRUE(fs::exists(tmp / "young.456.def"));

  // The CLI's cache info reports them (and removes the stale ones) too.
  fs::create_directories(tmp / "old2.1.a");
  fs::last_write_time(tmp / "old2.1.a", fs::file_time_type::clock::now() - std::chrono::hours(3));
  const auto info = nlohmann::json::parse(testing::run_cli("cache info --json", dir_.str()).out);
  EXPECT_EQ(info.at("tmp_removed").get<int>(), 1);
  EXPECT_EQ(info.at("tmp_remaining").get<int>(), 1);
  EXPECT_FALSE(fs::exists(tmp / "old2.1.a"));
}

TEST_F(CacheTest, CliExportsAndImportsTheCache) {
  const CacheEntry built = cache_.get_or_build(tc_, source_, fake_builder());
  const std::string archive = (dir_.path() / "all.tar").string();
  const auto exported = testing::run_cli("cache export " + archive + " --json", dir_.str());
  ASSERT_EQ(exported.status, 0) << exported.out;
  EXPECT_EQ(nlohmann::json::parse(exported.out).at("exported").get<int>(), 1);
  testenv::TempDir other_dir;
  const auto imported = testing::run_cli("cache import " + archive + " --json", other_dir.str());
  ASSERT_EQ(imported.status, 0) << imported.out;
  EXPECT_EQ(nlohmann::json::parse(imported.out).at("imported").get<int>(), 1);
  EXPECT_TRUE(DiskCache(other_dir.str()).lookup(built.key));
  EXPECT_EQ(testing::run_cli("cache import", other_dir.str()).status, 2);  // the file is required
}

// ---- kernel packs ------------------------------------------------------------------------------------------

TEST_F(CacheTest, APackOnThePackPathServesAMissWithoutABuildAndIsOnlyRead) {
  testenv::TempDir pack_dir;
  const CacheEntry shipped = DiskCache(pack_dir.str()).get_or_build(tc_, source_, fake_builder());
  const std::string key = cache_.key(tc_, source_);
  ASSERT_FALSE(cache_.lookup(key).has_value());  // the pack path is unset

  testenv::ScopedEnv pack_path("GEMMKIT_PACK_PATH", "/no/such/pack:" + pack_dir.str());
  EXPECT_EQ(DiskCache::pack_roots().front(), "/no/such/pack");
  EXPECT_EQ(DiskCache::pack_roots().at(1), pack_dir.str());
  const int pack_hits_before = cache_counters().pack_hits;
  const CacheEntry entry = cache_.get_or_build(tc_, source_, fake_builder());
  EXPECT_TRUE(entry.hit);
  EXPECT_EQ(entry.dir, shipped.dir);
  EXPECT_EQ(entry.module_path, shipped.module_path);
  EXPECT_EQ(builds(), 1);  // the pack's own build above, nothing since
  EXPECT_EQ(cache_counters().pack_hits - pack_hits_before, 1);
  EXPECT_EQ(cache_.find(tc_, source_)->dir, shipped.dir);
  EXPECT_EQ(cache_.lookup(key)->dir, shipped.dir);
  EXPECT_FALSE(fs::exists(dir_.path() / "v1" / key.substr(0, 2)));  // nothing copied into the cache

  // A damaged pack entry is passed over and left where it is; the kernel is built into the cache.
  std::ofstream(shipped.module_path, std::ios::binary | std::ios::app) << "damage";
  const CacheEntry rebuilt = cache_.get_or_build(tc_, source_, fake_builder());
  EXPECT_FALSE(rebuilt.hit);
  EXPECT_EQ(fs::path(rebuilt.dir), dir_.path() / "v1" / key.substr(0, 2) / key);
  EXPECT_TRUE(fs::exists(shipped.dir));
  EXPECT_EQ(count_children(pack_dir.path() / "v1" / "trash"), 0u);
}

TEST_F(CacheTest, TheCacheWinsOverAPackAndAPackIsNotItsOwnFallback) {
  testenv::TempDir pack_dir;
  DiskCache(pack_dir.str()).get_or_build(tc_, source_, fake_builder());
  const CacheEntry own = cache_.get_or_build(tc_, source_, fake_builder());
  testenv::ScopedEnv pack_path("GEMMKIT_PACK_PATH", pack_dir.str() + ":" + dir_.str());
  const int pack_hits_before = cache_counters().pack_hits;
  EXPECT_EQ(cache_.get_or_build(tc_, source_, fake_builder()).dir, own.dir);
  EXPECT_EQ(cache_counters().pack_hits, pack_hits_before);
  // With its own entry gone, the cache's root on the pack path is skipped and the other pack serves it.
  cache_.clear();
  EXPECT_EQ(fs::path(cache_.lookup(own.key)->dir).parent_path().parent_path().parent_path(), pack_dir.path());
}

TEST_F(CacheTest, CliCacheInfoListsThePacks) {
  testenv::TempDir pack_dir;
  DiskCache(pack_dir.str()).get_or_build(tc_, source_, fake_builder());
  testenv::ScopedEnv pack_path("GEMMKIT_PACK_PATH", pack_dir.str());
  const auto info = testing::run_cli("cache info --json", dir_.str());
  ASSERT_EQ(info.status, 0) << info.out;
  const auto packs = nlohmann::json::parse(info.out).at("packs");
  ASSERT_FALSE(packs.empty());
  EXPECT_EQ(packs.front().at("root").get<std::string>(), pack_dir.str());
  EXPECT_EQ(packs.front().at("entries").get<int>(), 1);
  const auto text = testing::run_cli("cache info", dir_.str());
  EXPECT_NE(text.out.find("pack " + pack_dir.str() + ": 1 entries"), std::string::npos) << text.out;
}

TEST_F(CacheTest, ManyBuildsReportProgressWithCountsAndAnEta) {
  cache_.get_or_build(tc_, fake_source("already"), fake_builder());  // a hit: not counted as work
  std::vector<BuildProgress> steps;
  const std::vector<KernelSource> sources = {fake_source("already"), fake_source("p1"), fake_source("p2"),
                                             fake_source("p3")};
  cache_.get_or_build_many(tc_, sources, fake_builder(std::chrono::milliseconds(20)),
                           [&](const BuildProgress& p) { steps.push_back(p); });
  ASSERT_EQ(steps.size(), 6u);  // a start and an end per build
  EXPECT_EQ(std::count_if(steps.begin(), steps.end(), [](const auto& p) { return p.finished; }), 3);
  for (const BuildProgress& p : steps) {
    EXPECT_EQ(p.total, 3u);
    EXPECT_NE(p.kernel_name, "already");
    if (p.finished) {
      EXPECT_GE(p.eta_seconds, 0.0);
    }
  }
  EXPECT_EQ(steps.back().done, 3u);
  EXPECT_EQ(steps.back().eta_seconds, 0.0);

  // Off a terminal: one plain line per finished kernel with the counts; quiet prints nothing.
  ::testing::internal::CaptureStderr();
  progress_printer(ProgressStyle::Lines)(steps.back());
  if (auto quiet = progress_printer(ProgressStyle::Quiet)) quiet(steps.back());
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.rfind("gemmkit: built " + steps.back().kernel_name + " [3/3] ", 0), 0u) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1);
}

}  // namespace
}  // namespace gemmkit
