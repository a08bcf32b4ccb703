// tests/gpu/tuning_gpu_test.cpp: Gemm::tune on the GPU writes its winner to the tuning database, and a new plan's
// run() then uses the database's kernel (counted, not timed), also when the entry names a kernel the heuristic would
// not pick. Kernels: gemmkit_gpu_prebuild --cc 90 --only tuning.
#include <gtest/gtest.h>

#include "gemmkit/device.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"
#include "gemmkit/tuning.hpp"
#include "support/gpu_cases.hpp"
#include "tuning/choice.hpp"
#include "unit/test_env.hpp"
#include "verify/device_buffer.hpp"
#include "verify/host_matrix.hpp"

namespace gemmkit {
namespace {

using gpu_cases::kTuneShape;
using verify::DeviceBuffer;
using verify::HostMatrix;

class GpuTuning : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
    if (device_info(current_device()).cc < 90) GTEST_SKIP() << "the tuning cases use SM90 kernels";
    tuning::forget_snapshot();
  }
  // The environment is restored after this; the next lookup reads whichever database it then names.
  void TearDown() override { tuning::forget_snapshot(); }
  testenv::TempDir dir;
  testenv::ScopedEnv db{"GEMMKIT_TUNING_DB", (dir.path() / "tuning.sqlite3").string()};
  HostMatrix A{DataType::f16, kTuneShape.m, kTuneShape.k, Layout::RowMajor};
  HostMatrix B{DataType::f16, kTuneShape.k, kTuneShape.n, Layout::RowMajor};
  HostMatrix D{DataType::f16, kTuneShape.m, kTuneShape.n, Layout::RowMajor};

  // Runs a fresh plan (as a later process would) `runs` times and checks D against the float64 reference; returns
  // its kernel.
  std::string run_fresh_plan(int runs = 1) {
    A.fill_integers(1, -2, 2);
    B.fill_integers(2, -2, 2);
    const DeviceBuffer dA(A), dB(B), dD(D);
    Gemm plan(gpu_cases::tuning_options(current_device_cc()));
    const KernelSpec used = plan.spec_for(dA.view_like(A), dB.view_like(B), nullptr, dD.view_like(D));
    for (int i = 0; i < runs; ++i) plan.run(dA.view_like(A), dB.view_like(B), nullptr, dD.view_like(D));
    dD.copy_to(D);
    const auto cmp = verify::compare_with_reference(A, B, nullptr, D, 1.0, 0.0, 2048);
    EXPECT_EQ(cmp.max_abs_error, 0.0) << used.name();  // small integers: exact in f16 with f32 accumulation
    return used.name();
  }
  static int current_device_cc() { return device_info(current_device()).cc; }
};

TEST_F(GpuTuning, TuneStoresTheWinnerAndANewPlanRunsIt) {
  HostMatrix a(DataType::f16, kTuneShape.m, kTuneShape.k, Layout::RowMajor);
  HostMatrix b(DataType::f16, kTuneShape.k, kTuneShape.n, Layout::RowMajor);
  HostMatrix d(DataType::f16, kTuneShape.m, kTuneShape.n, Layout::RowMajor);
  a.fill_uniform(3);
  b.fill_uniform(4);
  const DeviceBuffer dA(a), dB(b), dD(d);
  Gemm plan(gpu_cases::tuning_options(current_device_cc()));
  TuneOptions options;
  options.max_candidates = gpu_cases::kTuneCandidates;
  const TuneResult result = plan.tune(dA.view_like(a), dB.view_like(b), nullptr, dD.view_like(d), options);
  ASSERT_EQ(result.candidates.size(), static_cast<std::size_t>(gpu_cases::kTuneCandidates));
  for (const auto& c : result.candidates) EXPECT_TRUE(c.ok) << c.kernel_name << ": " << c.error;
  EXPECT_TRUE(result.stored);
  EXPECT_GT(result.winner().ms, 0.0);
  EXPECT_LE(result.winner().ms, result.heuristic_ms);
  EXPECT_LT(result.seconds, 120.0);

  const KernelSpec base = plan.spec_for(dA.view_like(a), dB.view_like(b), nullptr, dD.view_like(d));
  const auto entry = tuning::Database().lookup(tuning::identity_of(current_device()), tuning::plan_key(base),
                                               kTuneShape.m, kTuneShape.n, kTuneShape.k);
  ASSERT_TRUE(entry);
  EXPECT_EQ(entry->kernel_name, result.winner().kernel_name);
  EXPECT_EQ(entry->ms, result.winner().ms);

  const int applied = tuning::counters().applied;
  EXPECT_EQ(run_fresh_plan(), result.winner().kernel_name);
  EXPECT_GE(tuning::counters().applied, applied + 2);  // spec_for and run() both chose the database's kernel
}

TEST_F(GpuTuning, AnEntryChangesTheKernelRunUses) {
  const auto candidates = gpu_cases::tuning_specs(current_device_cc());
  ASSERT_GE(candidates.size(), 2u);
  const std::string heuristic = run_fresh_plan();
  ASSERT_EQ(heuristic, candidates[0].name());  // no entry yet: the heuristic's kernel
  tuning::Entry entry;
  entry.identity = tuning::identity_of(current_device());
  entry.plan = tuning::plan_key(candidates[1]);
  entry.m = kTuneShape.m;
  entry.n = kTuneShape.n;
  entry.k = kTuneShape.k;
  entry.tile = tuning::tile_key(candidates[1].tile);
  entry.kernel_name = candidates[1].name();
  entry.ms = 1.0;
  entry.heuristic_ms = 2.0;
  tuning::Database().put(entry);
  const tuning::Counters before = tuning::counters();
  EXPECT_EQ(run_fresh_plan(4), candidates[1].name());
  const tuning::Counters after = tuning::counters();
  EXPECT_GE(after.applied, before.applied + 5);  // spec_for and four runs chose the database's kernel
  // Only spec_for and the first run (which sees the snapshot spec_for loaded) searched the database; the other runs
  // were answered from the plan's memo (a search costs far more than a launch).
  EXPECT_LE(after.searched, before.searched + 2);
  // GEMMKIT_TUNING_DB=off: the heuristic again.
  testenv::ScopedEnv off("GEMMKIT_TUNING_DB", "off");
  tuning::forget_snapshot();
  EXPECT_EQ(run_fresh_plan(), heuristic);
}

}  // namespace
}  // namespace gemmkit
