// tests/gpu/cache_gpu_test.cpp: the real cache under real processes: a damaged entry is rebuilt and still gives
// the right answer; two processes compiling the same kernel at once both succeed and leave one entry.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <future>
#include <string>

#include "gemmkit/device.hpp"
#include "support/cli.hpp"
#include "unit/test_env.hpp"

namespace fs = std::filesystem;

namespace {

using Result = gemmkit::testing::CliResult;

Result cli(const std::string& cache_dir, const std::string& arguments) {
  return gemmkit::testing::run_cli(arguments, cache_dir);
}

// A cheap kernel (CUTLASS 2.x SIMT) so these tests compile in seconds.
const std::string kPlan = "--element f32 --layout row --opclass simt";

}  // namespace

TEST(GpuCache, DamagedEntryIsRebuiltAndStillCorrect) {
  if (gemmkit::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  gemmkit::testenv::TempDir cache;
  auto first = cli(cache.str(), "run " + kPlan + " --m 96 --n 80 --k 72 --check --json");
  ASSERT_EQ(first.status, 0) << first.out;
  auto entries = nlohmann::ordered_json::parse(cli(cache.str(), "cache ls --json").out).at("list");
  ASSERT_EQ(entries.size(), 1u);
  const fs::path module = fs::path(entries[0].at("dir").get<std::string>()) / "kernel.so";
  const auto truncated = fs::file_size(module) / 2;
  fs::resize_file(module, truncated);  // a crash mid-copy, a full disk, ...

  auto second = cli(cache.str(), "run " + kPlan + " --m 96 --n 80 --k 72 --check --json");
  ASSERT_EQ(second.status, 0) << second.out;
  EXPECT_EQ(nlohmann::ordered_json::parse(second.out).at("check").get<std::string>(), "pass");
  auto after = nlohmann::ordered_json::parse(cli(cache.str(), "cache ls --json").out).at("list");
  ASSERT_EQ(after.size(), 1u);
  EXPECT_GT(fs::file_size(fs::path(after[0].at("dir").get<std::string>()) / "kernel.so"), truncated);
}

TEST(GpuCache, TwoProcessesCompilingTheSameKernelBothSucceedWithOneEntry) {
  if (gemmkit::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  gemmkit::testenv::TempDir cache;
  auto compile = [&] { return cli(cache.str(), "compile " + kPlan + " --json"); };
  auto one = std::async(std::launch::async, compile);
  auto two = std::async(std::launch::async, compile);
  const Result a = one.get(), b = two.get();
  ASSERT_EQ(a.status, 0) << a.out;
  ASSERT_EQ(b.status, 0) << b.out;
  const auto ja = nlohmann::ordered_json::parse(a.out), jb = nlohmann::ordered_json::parse(b.out);
  EXPECT_EQ(ja.at("module_path").get<std::string>(), jb.at("module_path").get<std::string>());
  auto info = nlohmann::ordered_json::parse(cli(cache.str(), "cache info --json").out);
  EXPECT_EQ(info.at("entries").get<std::uint64_t>(), 1u);
}
