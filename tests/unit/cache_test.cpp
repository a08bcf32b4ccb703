// tests/unit/cache_test.cpp: the disk cache with a fake builder: atomic publish and hits, damage recovery,
// concurrency (threads, processes, stale locks, publish races), many builds and their progress, list, clear, the tmp
// sweep, and the cache root. Keys: cache_keys_test.cpp; archives and kernel packs: cache_archive_test.cpp.
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
#include <ostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gemmkit/cache.hpp"
#include "gemmkit/compiler.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/jit.hpp"
#include "support/cli.hpp"
#include "unit/cache_fixture.hpp"
#include "unit/fake_build.hpp"
#include "unit/test_env.hpp"

namespace fs = std::filesystem;

namespace gemmkit {
namespace {

using testenv::read;

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

// ---- many, list, clear, sweep, root --------------------------------------------------------------------------

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

}  // namespace
}  // namespace gemmkit
