// tests/gpu/latency_gpu_test.cpp: run() at a new shape class launches the plan's built kernel without compiling
// (the cache's counter of foreground builds stays put), and a later run uses the better kernel once its background
// compile is done. A fresh cache, so the better kernel is really built in the background (one SM90 compile).
#include <gtest/gtest.h>

#include "gemmkit/cache.hpp"
#include "gemmkit/device.hpp"
#include "gemmkit/gemm.hpp"
#include "support/cli.hpp"
#include "unit/test_env.hpp"
#include "verify/device_buffer.hpp"
#include "verify/host_matrix.hpp"

namespace gk = gemmkit;

namespace {

int foreground_builds() {
  const gk::CacheCounters c = gk::cache_counters();
  return c.builds - c.background_builds;
}

}  // namespace

TEST(GpuLatency, ANewShapeClassRunsWithoutACompileAndLaterUsesTheBetterKernel) {
  if (gk::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  gk::testenv::TempDir cache;
  gk::testenv::ScopedEnv env("GEMMKIT_CACHE_DIR", cache.str());
  gk::testenv::ScopedEnv no_wait("GEMMKIT_WAIT_FOR_BEST", std::nullopt);
  gk::Gemm plan(gk::testing::f16_row(gk::device_info(gk::current_device()).cc));
  // Few output tiles and a long K: the run-time choice wants Stream-K (or another tile), not the default.
  const long m = 512, n = 512, k = 16384;
  gk::verify::HostMatrix A(gk::DataType::f16, m, k, gk::Layout::RowMajor);
  gk::verify::HostMatrix B(gk::DataType::f16, k, n, gk::Layout::RowMajor);
  gk::verify::HostMatrix D(gk::DataType::f16, m, n, gk::Layout::RowMajor);
  A.fill_integers(1, -2, 2);
  B.fill_integers(2, -2, 2);
  gk::verify::DeviceBuffer dA(A), dB(B), dD(D);
  const auto a = dA.view_like(A), b = dB.view_like(B), d = dD.view_like(D);
  const gk::KernelSpec wanted = plan.spec_for(a, b, nullptr, d);
  if (wanted.name() == plan.kernel_name()) GTEST_SKIP() << "this GPU's run-time choice keeps the default here";

  plan.compile();  // the plan's kernel is built: from now on run() has one
  const int before = foreground_builds();
  plan.run(a, b, nullptr, d);
  EXPECT_EQ(foreground_builds(), before) << "run() compiled the kernel the new shape asked for";
  EXPECT_EQ(plan.running_kernel_name(a, b, nullptr, d), plan.kernel_name());  // the stand-in, while it builds
  dD.copy_to(D);
  EXPECT_EQ(gk::verify::compare_with_reference(A, B, nullptr, D, 1.0, 0.0, 4096).max_abs_error, 0.0);

  gk::Gemm::wait_for_background();
  EXPECT_EQ(gk::cache_counters().background_builds > 0, true);
  plan.run(a, b, nullptr, d);
  EXPECT_EQ(plan.running_kernel_name(a, b, nullptr, d), wanted.name());
  EXPECT_EQ(foreground_builds(), before);  // the better kernel came from the cache, built in the background
  dD.copy_to(D);
  EXPECT_EQ(gk::verify::compare_with_reference(A, B, nullptr, D, 1.0, 0.0, 4096).max_abs_error, 0.0);
}
