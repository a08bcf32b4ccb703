// tests/unit/kernel_slots_test.cpp: run()'s choice of a module while kernels build (module_for_run, built_module),
// with fake modules and builders: stand-ins, quick twins, background builds and their failures.
#include <gtest/gtest.h>

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "selection/kernel_slots.hpp"
#include "unit/background_gate.hpp"
#include "unit/test_env.hpp"

namespace gemmkit {
namespace {

struct FakeModule {
  std::size_t tile;
};

class KernelSlotsTest : public ::testing::Test {
 protected:
  // No build the test queued may outlive the fixture's gate and cache.
  void TearDown() override {
    gate_.open();
    twin_gate_.open();
    jit::wait_for_background_builds();
  }

  // Tile 0 built and expected 10x slower than every other tile; tile 2's quick twin is tile 3. Background builds are
  // recorded in requested_: tile 3's waits at twin_gate_, the others at gate_ (failing when fail_wanted_).
  ModuleSources<FakeModule> twin_sources() {
    built_ = {0};
    twins_ = {{2, 3}};
    auto weighed = sources();
    weighed.expected_time = [](std::size_t i) { return i == 0 ? 10.0 : 1.0; };
    weighed.in_background = [this](std::size_t i) {
      requested_.push_back(i);
      return i == 3 ? jit::build_in_background(cache_, fake_toolchain(), twin_source_, twin_gate_.builder())
                    : jit::build_in_background(cache_, fake_toolchain(), source_, gate_.builder(fail_wanted_));
    };
    return weighed;
  }

  // Lets tile 2's interim twin (tile 3, twin_sources) finish building, and marks it built.
  void finish_twin_build() {
    twin_gate_.open();
    wait_until_finished(*slots_.interim_build[2]);
    built_.insert(3);
  }

  // Tile i is built when built_[i]; `build` counts the compiles run() asked for (or made) on its own thread.
  ModuleSources<FakeModule> sources() {
    return {[this](std::size_t i) { return built_.count(i) ? std::make_shared<FakeModule>(FakeModule{i}) : nullptr; },
            [this](std::size_t i) {
              ++foreground_builds_;
              built_.insert(i);
              return std::make_shared<FakeModule>(FakeModule{i});
            },
            [this](std::size_t i) {
              ++background_requests_;
              const auto build = jit::build_in_background(cache_, fake_toolchain(), source_, gate_.builder());
              built_tile_ = i;
              return build;
            },
            [this](std::size_t i) { return twins_.count(i) ? twins_.at(i) : KernelSlots<FakeModule>::kNone; },
            {}};
  }

  testenv::TempDir dir_;
  DiskCache cache_{dir_.str()};
  Gate gate_;
  KernelSource source_ = unique_source("slot");
  std::set<std::size_t> built_;
  int foreground_builds_ = 0, background_requests_ = 0;
  std::size_t built_tile_ = 99;
  std::map<std::size_t, std::size_t> twins_;  // a tile's quick twin
  Gate twin_gate_;
  KernelSource twin_source_ = unique_source("twin");
  std::vector<std::size_t> requested_;
  bool fail_wanted_ = false;
  KernelSlots<FakeModule> slots_;
  std::mutex mutex_;
};

TEST_F(KernelSlotsTest, ANewShapeRunsABuiltKernelAndBuildsTheWantedOneInTheBackground) {
  slots_.resize(4);
  built_ = {0};  // the plan's default is built; the shape wants tile 2 (e.g. Stream-K)
  const int builds_before = cache_counters().builds;
  EXPECT_EQ(module_for_run(slots_, mutex_, 2, false, sources()).tile, 0u);
  EXPECT_EQ(foreground_builds_, 0);
  EXPECT_EQ(background_requests_, 1);
  EXPECT_EQ(built_tile_, 2u);
  EXPECT_EQ(cache_counters().builds, builds_before);  // run() returned before any build
  // Later runs keep the stand-in while the build runs, and ask for nothing more.
  EXPECT_EQ(module_for_run(slots_, mutex_, 2, false, sources()).tile, 0u);
  EXPECT_EQ(background_requests_, 1);
  EXPECT_EQ(foreground_builds_, 0);
  gate_.open();
  jit::wait_for_background_builds();
  EXPECT_EQ(cache_counters().builds, builds_before + 1);
  built_.insert(2);  // what the background build put in the cache
  // Once it is done, run() takes it (a cache hit through the build path) and keeps it.
  EXPECT_EQ(module_for_run(slots_, mutex_, 2, false, sources()).tile, 2u);
  EXPECT_EQ(module_for_run(slots_, mutex_, 2, false, sources()).tile, 2u);
  EXPECT_EQ(foreground_builds_, 1);
}

TEST_F(KernelSlotsTest, WithNothingBuiltOrWhenAskedToWaitRunCompiles) {
  slots_.resize(3);
  EXPECT_EQ(module_for_run(slots_, mutex_, 1, false, sources()).tile, 1u);  // nothing built: the first compile
  EXPECT_EQ(foreground_builds_, 1);
  EXPECT_EQ(background_requests_, 0);
  EXPECT_EQ(module_for_run(slots_, mutex_, 2, /*wait=*/true, sources()).tile, 2u);  // wait_for_best
  EXPECT_EQ(foreground_builds_, 2);
  EXPECT_EQ(background_requests_, 0);
  gate_.open();
}

// With nothing built, a configuration that has a quick twin (the same tile on the lean epilogue) compiles the twin,
// runs it, and builds itself in the background; asked to wait, it compiles itself.
TEST_F(KernelSlotsTest, WithNothingBuiltTheQuickTwinRunsWhileTheWantedKernelBuilds) {
  slots_.resize(4);
  twins_ = {{0, 3}};
  EXPECT_EQ(module_for_run(slots_, mutex_, 0, false, sources()).tile, 3u);
  EXPECT_EQ(foreground_builds_, 1);  // the twin
  EXPECT_EQ(background_requests_, 1);
  EXPECT_EQ(built_tile_, 0u);
  EXPECT_EQ(module_for_run(slots_, mutex_, 0, false, sources()).tile, 3u);  // while the build runs
  EXPECT_EQ(background_requests_, 1);
  gate_.open();
  jit::wait_for_background_builds();
  built_.insert(0);
  EXPECT_EQ(module_for_run(slots_, mutex_, 0, false, sources()).tile, 0u);
  // A configuration without a twin, asked to wait, compiles itself as before.
  EXPECT_EQ(module_for_run(slots_, mutex_, 1, /*wait=*/true, sources()).tile, 1u);
  EXPECT_EQ(background_requests_, 1);
}

// At a new shape, a stand-in expected to run far slower than the wanted kernel (the default's big tile on a few-row
// problem) gives way to the wanted kernel's quick twin, built beside it, as soon as the twin is built; the wanted
// kernel replaces both once built. Near the wanted kernel's speed, no twin is built; a built twin stands in first.
TEST_F(KernelSlotsTest, ASlowStandInGivesWayToTheWantedKernelsQuickTwinOnceItIsBuilt) {
  slots_.resize(4);
  auto weighed = twin_sources();
  std::vector<std::size_t>& requested = requested_;
  EXPECT_EQ(module_for_run(slots_, mutex_, 2, false, weighed).tile, 0u);
  EXPECT_EQ(requested, (std::vector<std::size_t>{3, 2}));                 // the twin first: it builds sooner
  EXPECT_EQ(module_for_run(slots_, mutex_, 2, false, weighed).tile, 0u);  // the twin is still building
  finish_twin_build();
  EXPECT_EQ(module_for_run(slots_, mutex_, 2, false, weighed).tile, 3u);
  EXPECT_EQ(module_for_run(slots_, mutex_, 2, false, weighed).tile, 3u);
  gate_.open();
  jit::wait_for_background_builds();
  built_.insert(2);
  EXPECT_EQ(module_for_run(slots_, mutex_, 2, false, weighed).tile, 2u);
  EXPECT_EQ(requested.size(), 2u);
  EXPECT_EQ(foreground_builds_, 2);  // cache hits of the twin and the wanted kernel, through the build path

  // Tile 1's stand-in (the default) is expected within twice its time: no twin is built for it.
  weighed.expected_time = [](std::size_t i) { return i == 0 ? 1.5 : 1.0; };
  twins_ = {{1, 3}};
  slots_ = {};
  slots_.resize(4);
  built_ = {0};
  requested.clear();
  EXPECT_EQ(module_for_run(slots_, mutex_, 1, false, weighed).tile, 0u);
  EXPECT_EQ(requested, (std::vector<std::size_t>{1}));
  // With its twin built, the twin stands in, however fast the default is expected to be.
  built_.insert(3);
  slots_ = {};
  slots_.resize(4);
  EXPECT_EQ(module_for_run(slots_, mutex_, 1, false, weighed).tile, 3u);
}

// A stand-in is the built configuration expected to run the problem fastest, not the first built; unweighed sources
// keep the plan's default first. While a kernel of another list builds, the lent one is weighed once.
TEST_F(KernelSlotsTest, AStandInIsTheBuiltConfigurationOfLeastExpectedTime) {
  built_ = {0, 2, 3};
  auto weighed = sources();
  weighed.expected_time = [](std::size_t i) { return std::vector<double>{10, 1, 3, 5, 2}[i]; };
  slots_.resize(5);
  EXPECT_EQ(module_for_run(slots_, mutex_, 1, false, weighed).tile, 2u);  // 4 would be faster, but is not built
  slots_ = {};
  slots_.resize(5);
  EXPECT_EQ(module_for_run(slots_, mutex_, 1, false, sources()).tile, 0u);

  slots_ = {};
  slots_.resize(5);
  int lookups = 0;
  auto counted = weighed;
  counted.if_built = [&](std::size_t i) {
    ++lookups;
    return built_.count(i) ? std::make_shared<FakeModule>(FakeModule{i}) : nullptr;
  };
  EXPECT_EQ(built_module(slots_, mutex_, 1, counted)->tile, 2u);
  const int first = lookups;
  built_.insert(4);  // built meanwhile: the lent kernel stays the one weighed first
  EXPECT_EQ(built_module(slots_, mutex_, 1, counted)->tile, 2u);
  EXPECT_EQ(lookups, first);           // weighed once: no lookup per run
  EXPECT_EQ(background_requests_, 2);  // the two module_for_run calls' wanted builds; built_module queues none
  gate_.open();
}

// While a kernel of another list builds, a lent kernel expected kSlowStandIn times slower than the wanted one has the
// wanted one's quick twin built, and the twin is lent once built (at once, when it is built already).
TEST_F(KernelSlotsTest, BuiltModuleBuildsAndLendsTheTwinForASlowLentKernel) {
  slots_.resize(4);
  auto weighed = twin_sources();
  std::vector<std::size_t>& requested = requested_;
  EXPECT_EQ(built_module(slots_, mutex_, 2, weighed)->tile, 0u);
  EXPECT_EQ(requested, (std::vector<std::size_t>{3}));  // the twin; never the wanted kernel itself
  EXPECT_EQ(built_module(slots_, mutex_, 2, weighed)->tile, 0u);
  finish_twin_build();
  EXPECT_EQ(built_module(slots_, mutex_, 2, weighed)->tile, 3u);
  EXPECT_EQ(requested.size(), 1u);
  // A twin built already is lent at once.
  slots_ = {};
  slots_.resize(4);
  EXPECT_EQ(built_module(slots_, mutex_, 2, weighed)->tile, 3u);
  EXPECT_EQ(requested.size(), 1u);
  gate_.open();
}

// When the wanted kernel's build fails while its twin builds, run() keeps the stand-in until the twin is done, then
// runs the twin for good, not the slow stand-in.
TEST_F(KernelSlotsTest, AFailedBuildGivesWayToItsTwinOnceTheTwinIsBuilt) {
  slots_.resize(4);
  fail_wanted_ = true;
  auto weighed = twin_sources();
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(module_for_run(slots_, mutex_, 2, false, weighed).tile, 0u);
  gate_.open();
  wait_until_finished(*slots_.pending[2]);
  EXPECT_EQ(module_for_run(slots_, mutex_, 2, false, weighed).tile, 0u);  // the twin is still building
  finish_twin_build();
  EXPECT_EQ(module_for_run(slots_, mutex_, 2, false, weighed).tile, 3u);
  EXPECT_EQ(module_for_run(slots_, mutex_, 2, false, weighed).tile, 3u);
  jit::wait_for_background_builds();
  (void)::testing::internal::GetCapturedStderr();
}

// Weighing a stand-in looks up at most kStandInLookups configurations that are not loaded, fastest first, and falls
// back to the fastest loaded one.
TEST_F(KernelSlotsTest, WeighingAStandInLooksUpFewConfigurations) {
  constexpr std::size_t kTiles = 40;
  slots_.resize(kTiles);
  built_ = {0};
  EXPECT_EQ(module_for_run(slots_, mutex_, 0, false, sources()).tile, 0u);  // the default, loaded
  int lookups = 0;
  auto weighed = sources();
  weighed.expected_time = [](std::size_t i) { return i == 0 ? 100.0 : static_cast<double>(i); };
  weighed.if_built = [&](std::size_t i) {
    ++lookups;
    return built_.count(i) ? std::make_shared<FakeModule>(FakeModule{i}) : nullptr;
  };
  EXPECT_EQ(module_for_run(slots_, mutex_, 39, false, weighed).tile, 0u);
  EXPECT_EQ(lookups, 1 + static_cast<int>(kStandInLookups));  // the wanted kernel's, then the fastest few
  gate_.open();
}

TEST_F(KernelSlotsTest, AFailedBackgroundBuildLeavesTheStandInForGood) {
  slots_.resize(2);
  built_ = {0};
  auto failing = sources();
  failing.in_background = [this](std::size_t) {
    ++background_requests_;
    return jit::build_in_background(cache_, fake_toolchain(), source_, gate_.builder(/*fail=*/true));
  };
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(module_for_run(slots_, mutex_, 1, false, failing).tile, 0u);
  gate_.open();
  jit::wait_for_background_builds();
  EXPECT_EQ(module_for_run(slots_, mutex_, 1, false, failing).tile, 0u);
  EXPECT_EQ(module_for_run(slots_, mutex_, 1, false, failing).tile, 0u);
  (void)::testing::internal::GetCapturedStderr();
  EXPECT_EQ(background_requests_, 1);
  EXPECT_EQ(foreground_builds_, 0);
}

// While run() waits for a kernel of another list (the parallel split-K one), the serial list only lends what is
// built: no compile, no background build of a kernel that would be dropped once the other one is ready.
TEST_F(KernelSlotsTest, BuiltModuleLendsWhatIsBuiltAndBuildsNothing) {
  slots_.resize(3);
  EXPECT_EQ(built_module(slots_, mutex_, 2, sources()), nullptr);  // nothing built: nothing to lend
  built_ = {1};
  FakeModule* lent = built_module(slots_, mutex_, 2, sources());
  ASSERT_NE(lent, nullptr);
  EXPECT_EQ(lent->tile, 1u);
  built_.insert(2);
  EXPECT_EQ(built_module(slots_, mutex_, 2, sources())->tile, 2u);  // the wanted one, once built
  EXPECT_EQ(foreground_builds_, 0);
  EXPECT_EQ(background_requests_, 0);
  EXPECT_EQ(slots_.pending[2], nullptr);
  gate_.open();
}

}  // namespace
}  // namespace gemmkit
