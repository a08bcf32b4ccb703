// tests/gpu/config_gpu_test.cpp: the configuration tier: every SM90 schedule/scheduler configuration, SM80 tiles and
// stage counts, SIMT, each 2.x swizzle and Stream-K on both generations, checked exactly on small-integer data.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>

#include "gemmkit/device.hpp"
#include "gemmkit/gemm.hpp"
#include "support/gpu_cases.hpp"
#include "verify/host_matrix.hpp"

namespace gk = gemmkit;
using gk::verify::HostMatrix;
namespace cases = gk::gpu_cases;

namespace {

int device_cc() {
  return gk::cuda_device_count() ? gk::device_info(gk::current_device()).cc : 90;
}

double exact_error(gk::Gemm& plan, const cases::Shape& s) {
  HostMatrix A(plan.element_a(), s.m, s.k, gk::Layout::RowMajor), B(plan.element_b(), s.k, s.n, gk::Layout::RowMajor);
  HostMatrix C(plan.element_c(), s.m, s.n, gk::Layout::RowMajor), D(plan.element_d(), s.m, s.n, gk::Layout::RowMajor);
  A.fill_integers(51, -3, 3);
  B.fill_integers(52, -3, 3);
  C.fill_integers(53, -3, 3);
  plan.run(A.view(), B.view(), C.view(), D.view(), 1.0, 1.0);
  const long samples = s.m * s.n > (1 << 18) ? 8192 : 0;
  return gk::verify::compare_with_reference(A, B, &C, D, 1.0, 1.0, samples).max_abs_error;
}

}  // namespace

class Configurations : public ::testing::TestWithParam<cases::ConfigCase> {};

TEST_P(Configurations, MatchTheReferenceExactly) {
  if (gk::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  gk::Gemm plan = cases::config_plan(GetParam(), device_cc());
  EXPECT_EQ(exact_error(plan, cases::kMatrixShape), 0.0) << plan.kernel_name() << "\n" << plan.spec().tile.to_string();
}

INSTANTIATE_TEST_SUITE_P(Gpu, Configurations, ::testing::ValuesIn(cases::config_cases(device_cc())),
                         [](const auto& info) { return info.param.label; });

TEST(GpuStreamK, WaveQuantizedAndLongKShapesOnBothGenerations) {
  if (gk::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  const int sms = gk::device_info(gk::current_device()).sm_count;
  for (int kernel_cc : cases::kernel_generations(device_cc())) {
    gk::Gemm plan(cases::epilogue_options(gk::DataType::f16, device_cc(), kernel_cc));
    plan.set_swizzling_functor(gk::Swizzle::StreamK);
    const auto cta = plan.spec().tile.cta_tile();
    // One output tile more than a whole number of waves, and a K much larger than M and N.
    const long tiles_n = 8;
    const long tiles_m = (sms + 1 + tiles_n - 1) / tiles_n;
    const cases::Shape wave{tiles_m * cta[0], tiles_n * cta[1], 1024};
    EXPECT_EQ(exact_error(plan, wave), 0.0) << plan.kernel_name() << " " << wave.m << "x" << wave.n;
    EXPECT_EQ(exact_error(plan, {128, 128, 16384}), 0.0) << plan.kernel_name() << " long K";
  }
}
