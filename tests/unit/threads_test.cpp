// tests/unit/threads_test.cpp: what the README promises about threads, without a GPU: plans created at once, one plan
// asked for kernels by many threads, and the cache's parallel build called from two threads at once.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gemmkit/cache.hpp"
#include "gemmkit/compiler.hpp"
#include "gemmkit/gemm.hpp"
#include "unit/test_env.hpp"

namespace gemmkit {
namespace {

GemmOptions f16_options(Layout layout, int cc) {
  GemmOptions o;
  o.element = DataType::f16;
  o.element_accumulator = DataType::f32;
  o.layout = layout;
  o.cc = cc;
  return o;
}

// A device view of a packed matrix at a fake, 256-byte aligned address: enough for spec_for, which never reads it.
TensorView probe(long rows, long cols, Layout layout) {
  alignas(256) static char base[256];
  return TensorView::on_gpu(base, DataType::f16, {rows, cols}, layout, 0);
}

TEST(Threads, PlansCreatedConcurrentlyAgreeWithOneCreatedAlone) {
  const std::string alone = Gemm(f16_options(Layout::ColumnMajor, 90)).spec().canonical();
  std::mutex mutex;
  std::set<std::string> seen;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        Gemm plan(f16_options(i % 2 ? Layout::RowMajor : Layout::ColumnMajor, t % 2 ? 80 : 90));
        (void)plan.tile_descriptions();
        if (i % 2 == 0 && t % 2 == 0) {
          std::lock_guard<std::mutex> lock(mutex);
          seen.insert(plan.spec().canonical());
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(seen, std::set<std::string>{alone});
}

// spec_for is run()'s check-and-choose step; eight threads resolving different alignments and shapes of one plan
// must each get what a single thread gets.
TEST(Threads, OnePlanResolvesKernelsForEightThreads) {
  Gemm shared(f16_options(Layout::RowMajor, 90));
  Gemm alone(f16_options(Layout::RowMajor, 90));
  const long shapes[8][3] = {{128, 128, 64}, {4096, 4096, 4096}, {512, 512, 16384}, {264, 520, 72},
                             {2, 4, 6},      {8192, 256, 1024},  {136, 200, 272},   {3000, 3000, 3000}};
  std::vector<std::string> expected;
  for (const auto& s : shapes) {
    expected.push_back(alone
                           .spec_for(probe(s[0], s[2], Layout::RowMajor), probe(s[2], s[1], Layout::RowMajor), nullptr,
                                     probe(s[0], s[1], Layout::RowMajor))
                           .canonical());
  }
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const auto& s = shapes[(t + i) % 8];
        const KernelSpec got = shared.spec_for(probe(s[0], s[2], Layout::RowMajor), probe(s[2], s[1], Layout::RowMajor),
                                               nullptr, probe(s[0], s[1], Layout::RowMajor));
        if (got.canonical() != expected[(t + i) % 8]) ++mismatches;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

// Two threads each ask for the same set of kernels at once: every kernel is built once and both get every entry.
TEST(Threads, ParallelBuildsFromTwoThreadsBuildEachKernelOnce) {
  testenv::TempDir dir;
  DiskCache cache(dir.str());
  Toolchain toolchain;
  toolchain.nvcc_version = "13.0";
  std::vector<KernelSource> sources;
  for (const char* name : {"k1", "k2", "k3", "k4", "k5"})
    sources.push_back({name, "sm_90a", std::string("// ") + name});
  std::atomic<int> builds{0};
  const ModuleBuilder builder = [&](const KernelSource& source, const std::string& work_dir) {
    ++builds;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ofstream(std::filesystem::path(work_dir) / "kernel.so") << source.text;
  };
  std::vector<CacheEntry> first, second;
  std::thread a([&] { first = cache.get_or_build_many(toolchain, sources, builder); });
  std::thread b([&] { second = cache.get_or_build_many(toolchain, sources, builder); });
  a.join();
  b.join();
  EXPECT_EQ(builds.load(), 5);
  ASSERT_EQ(first.size(), sources.size());
  ASSERT_EQ(second.size(), sources.size());
  for (std::size_t i = 0; i < sources.size(); ++i) {
    EXPECT_EQ(first[i].key, second[i].key);
    EXPECT_EQ(first[i].kernel_name, sources[i].kernel_name);
    EXPECT_TRUE(std::filesystem::exists(first[i].module_path));
  }
}

}  // namespace
}  // namespace gemmkit
