// tests/gpu/fp8_gpu_test.cpp: FP8 (e4m3, e5m2) GEMMs on SM90 against a float64 reference of the dequantized
// inputs: exact on values FP8 represents exactly (small integers and halves), per-tensor scales folded into alpha
// (alpha = scale_a * scale_b), D in bf16, f16 and f32, device and host-staged tensors. Skips itself without an SM90
// device. Also gemmkit's FP8 mainloop with the promotion overlapped. Kernels: gemmkit_gpu_prebuild --only fp8 (the
// split-path test builds its own two artifacts).
#include <gtest/gtest.h>

#include "gemmkit/gemm.hpp"
#include "gemmkit/jit.hpp"
#include "support/gpu_cases.hpp"
#include "support/gpu_test.hpp"
#include "unit/test_env.hpp"
#include "verify/device_buffer.hpp"
#include "verify/host_matrix.hpp"

namespace gk = gemmkit;
using gk::verify::DeviceBuffer;
using gk::verify::HostMatrix;
namespace cases = gk::gpu_cases;

namespace {

struct Fp8Operands {
  HostMatrix A, B, C, D;
  Fp8Operands(const gk::Gemm& plan, const cases::Shape& s)
      : A(plan.element_a(), s.m, s.k, plan.layout_a()),
        B(plan.element_b(), s.k, s.n, plan.layout_b()),
        C(plan.element_c() == gk::DataType::void_t ? plan.element_d() : plan.element_c(), s.m, s.n,
          plan.layout_c()),  // a plan without C: never passed
        D(plan.element_d(), s.m, s.n, plan.layout_c()) {}
};

gk::verify::Comparison run_on_device(gk::Gemm& plan, Fp8Operands& o, double alpha, double beta) {
  DeviceBuffer dA(o.A), dB(o.B), dC(o.C), dD(o.D);
  plan.run(dA.view_like(o.A), dB.view_like(o.B), dC.view_like(o.C), dD.view_like(o.D), alpha, beta);
  dD.copy_to(o.D);
  return gk::verify::compare_with_reference(o.A, o.B, &o.C, o.D, alpha, beta);
}

}  // namespace

class Fp8Types : public ::testing::TestWithParam<cases::Fp8Case> {};

TEST_P(Fp8Types, ExactOnSmallIntegers) {
  REQUIRE_CC(90, "FP8 GEMMs");
  gk::Gemm plan(cases::fp8_options(GetParam(), device_cc()));
  Fp8Operands o(plan, cases::kMatrixShape);
  o.A.fill_integers(31, -4, 4);
  o.B.fill_integers(32, -4, 4);
  o.C.fill_integers(33, -4, 4);
  const auto cmp = run_on_device(plan, o, 1.0, 1.0);
  EXPECT_GT(cmp.checked, 0);
  EXPECT_EQ(cmp.max_abs_error, 0.0) << plan.spec_for(o.A.view(), o.B.view(), o.C.view(), o.D.view(), 1.0).name();
}

// Per-tensor dequantization scales: D = (scale_a * scale_b) * A@B + beta * C, with powers of two so that the
// reference stays exact.
TEST_P(Fp8Types, PerTensorScalesFoldedIntoAlphaAreExact) {
  REQUIRE_CC(90, "FP8 GEMMs");
  gk::Gemm plan(cases::fp8_options(GetParam(), device_cc()));
  Fp8Operands o(plan, cases::kMatrixShape);
  fill_halves(o.A, 41);
  fill_halves(o.B, 42);
  o.C.fill_integers(43, -4, 4);
  const double scale_a = 0.5, scale_b = 0.25;
  const auto cmp = run_on_device(plan, o, scale_a * scale_b, -1.0);
  EXPECT_GT(cmp.checked, 0);
  EXPECT_EQ(cmp.max_abs_error, 0.0);
}

// Random values in [-1, 1] (rounded to FP8 on the host, so the reference sees exactly what the GPU reads): the only
// errors left are D's rounding and the FP8 tensor cores' accumulation, which keeps about 13 mantissa bits inside each
// 128-deep K block before the mainloop promotes it into f32. On the H200 that reached 0.59 % of max(1, |D|) here
// (K = 272 and alpha 2, so |D| is of order 10) for f16 and f32 D alike, ten times f16's own rounding; a wrong
// scale, operand or layout errs by order 1.
TEST_P(Fp8Types, RandomDataWithinOutputPrecision) {
  REQUIRE_CC(90, "FP8 GEMMs");
  gk::Gemm plan(cases::fp8_options(GetParam(), device_cc()));
  Fp8Operands o(plan, cases::kMatrixShape);
  o.A.fill_uniform(51);
  o.B.fill_uniform(52);
  o.C.fill_uniform(53);
  const auto cmp = run_on_device(plan, o, 2.0, 0.5);
  const double bound = 1.5e-2;
  EXPECT_LE(cmp.max_rel_error, bound);
}

INSTANTIATE_TEST_SUITE_P(Sm90, Fp8Types, ::testing::ValuesIn(cases::fp8_cases()),
                         [](const auto& info) { return info.param.label; });

// Host tensors are staged through the device like any other element type.
TEST(Fp8Staging, HostTensorsAreStagedExactly) {
  REQUIRE_CC(90, "FP8 GEMMs");
  gk::Gemm plan(cases::fp8_options(cases::fp8_cases().front(), device_cc()));
  Fp8Operands o(plan, cases::kMatrixShape);
  o.A.fill_integers(61, -4, 4);
  o.B.fill_integers(62, -4, 4);
  plan.run(o.A.view(), o.B.view(), nullptr, o.D.view(), 0.5, 0.0);
  const auto cmp = gk::verify::compare_with_reference(o.A, o.B, nullptr, o.D, 0.5, 0.0);
  EXPECT_EQ(cmp.max_abs_error, 0.0);
}

// Per-row and per-column scale vectors in the epilogue: powers of two (and 3 / 4), so the reference stays exact;
// with C, beta, and in some cases a per-row or per-column bias and ReLU (on CUTLASS's epilogue and on the lean one);
// one plan without C (element_C void, beta = 0, a bias of D's type).
namespace {

// Runs the scale case on the device (the kernel chosen for the shape: compiled and waited for if needed) and checks it
// against the reference.
void expect_scale_case_exact(const cases::Fp8ScaleCase& c) {
  gk::Gemm plan = cases::fp8_scale_plan(c, device_cc());
  const cases::Shape s = cases::kMatrixShape;
  Fp8Operands o(plan, s);
  fill_halves(o.A, 71);
  fill_halves(o.B, 72);
  o.C.fill_integers(73, -4, 4);
  HostMatrix rows(gk::DataType::f32, 1, s.m, gk::Layout::RowMajor),
      columns(gk::DataType::f32, 1, s.n, gk::Layout::RowMajor);
  const double factors[] = {0.25, 0.5, 0.75, 1.0, 2.0, 4.0};
  for (long i = 0; i < s.m; ++i) rows.set(0, 0, i, factors[i % 6]);
  for (long j = 0; j < s.n; ++j) columns.set(0, 0, j, factors[(j * 5 + 1) % 6]);
  HostMatrix bias(o.C.dtype(), 1, c.bias == gk::BiasMode::PerRow ? s.m : s.n, gk::Layout::RowMajor);
  bias.fill_integers(74, -8, 8);
  const bool by_rows = c.scale != gk::ScaleMode::PerColumn, by_columns = c.scale != gk::ScaleMode::PerRow;

  DeviceBuffer dA(o.A), dB(o.B), dC(o.C), dD(o.D), dRows(rows), dColumns(columns), dBias(bias);
  const auto rows_view = dRows.view_like(rows), columns_view = dColumns.view_like(columns);
  const auto bias_view = dBias.view_like(bias);
  gk::RunOptions options;
  options.row_scale = by_rows ? &rows_view : nullptr;
  options.column_scale = by_columns ? &columns_view : nullptr;
  options.bias = c.bias != gk::BiasMode::None ? &bias_view : nullptr;
  options.wait_for_best = true;
  const double alpha = 0.5, beta = c.no_c ? 0.0 : 1.0;
  const gk::TensorView C = dC.view_like(o.C);
  plan.run(dA.view_like(o.A), dB.view_like(o.B), c.no_c ? nullptr : &C, dD.view_like(o.D), alpha, beta, options);
  dD.copy_to(o.D);

  gk::verify::Epilogue epilogue;
  epilogue.activation = c.activation;
  epilogue.bias = &bias;
  epilogue.bias_mode = c.bias;
  epilogue.row_scale = by_rows ? &rows : nullptr;
  epilogue.column_scale = by_columns ? &columns : nullptr;
  const auto cmp =
      gk::verify::compare_with_reference(o.A, o.B, c.no_c ? nullptr : &o.C, o.D, alpha, beta, 0, 1, epilogue);
  EXPECT_GT(cmp.checked, 0);
  EXPECT_EQ(cmp.max_abs_error, 0.0) << plan.kernel_name();
}

}  // namespace

class Fp8ScaleVectors : public ::testing::TestWithParam<cases::Fp8ScaleCase> {};

TEST_P(Fp8ScaleVectors, ExactAgainstTheDequantizedReference) {
  REQUIRE_CC(90, "FP8 GEMMs");
  expect_scale_case_exact(GetParam());
}

// The same on the split path (GEMMKIT_SPLIT_BUILD=1: a cubin launched by a host module through the driver API), whose
// host module must pass the scale vectors, the bias and the activation to the kernel's Params as the one-pass module
// does. Alone in its process (ctest runs each test apart): a module loaded earlier for the same kernel would be reused.
TEST(Fp8ScaleVectorsSplitBuild, RowsColumnsBiasReluExactOnTheSplitPath) {
  REQUIRE_CC(90, "FP8 GEMMs");
  gk::testenv::ScopedEnv split("GEMMKIT_SPLIT_BUILD", "1");
  const cases::Fp8ScaleCase c = cases::fp8_scale_cases().back();
  ASSERT_EQ(c.scale, gk::ScaleMode::RowAndColumn);
  ASSERT_EQ(c.bias, gk::BiasMode::PerColumn);
  gk::Gemm plan = cases::fp8_scale_plan(c, device_cc());
  const gk::CompiledKernel built = gk::build_kernel(cases::spec_for_shape(plan, cases::kMatrixShape));
  ASSERT_FALSE(built.cubin_path.empty()) << built.kernel_name << " was not built on the split path";
  expect_scale_case_exact(c);
}

INSTANTIATE_TEST_SUITE_P(Sm90, Fp8ScaleVectors, ::testing::ValuesIn(cases::fp8_scale_cases()),
                         [](const auto& info) { return info.param.label; });

// gemmkit's FP8 mainloops with the promotion overlapped, on each of their configurations: exact on small integers (D
// in f32, so even the long K is exact) at one partial K tile, exactly one, two, three with a partial last one, and 32,
// on ragged extents; so every path of both loops (the first batches, the loop, each way out of it) runs.
class Fp8OverlappedPromotion : public ::testing::TestWithParam<cases::Fp8OverlapCase> {};

TEST_P(Fp8OverlappedPromotion, ExactOnSmallIntegersAtEveryKTileCount) {
  REQUIRE_CC(90, "FP8 GEMMs");
  gk::Gemm plan = cases::fp8_overlap_plan(GetParam(), device_cc());
  for (const cases::Shape& s : {cases::Shape{136, 200, 16}, cases::Shape{130, 392, 128}, cases::Shape{200, 136, 256},
                                cases::kMatrixShape, cases::Shape{300, 400, 4096}}) {
    Fp8Operands o(plan, s);
    o.A.fill_integers(81, -4, 4);
    o.B.fill_integers(82, -4, 4);
    o.C.fill_integers(83, -4, 4);
    const auto cmp = run_on_device(plan, o, 1.0, 1.0);
    EXPECT_GT(cmp.checked, 0);
    EXPECT_EQ(cmp.max_abs_error, 0.0) << plan.kernel_name() << " at " << s.m << "x" << s.n << "x" << s.k;
  }
}

INSTANTIATE_TEST_SUITE_P(Sm90, Fp8OverlappedPromotion, ::testing::ValuesIn(cases::fp8_overlap_cases(90)),
                         [](const auto& info) { return info.param.label; });

// Few rows over a long K: the default plan splits K in parallel, and the partial-sum GEMMs run gemmkit's alternating
// loop (ping-pong 64 x 128); exact on small integers with beta != 0 (C read by the reduction), the parallel kernel
// itself (wait_for_best), not a serial stand-in.
TEST(Fp8OverlappedPromotionParallelSplitK, ExactOnSmallIntegers) {
  REQUIRE_CC(90, "FP8 GEMMs");
  gk::Gemm plan(gk::testing::fp8_tn(device_cc(), gk::DataType::e4m3, gk::DataType::f32));
  const cases::Shape s = cases::kFp8ParallelSplitKShape;
  const gk::KernelSpec spec = plan.spec_for_problem(s.m, s.n, s.k);
  ASSERT_EQ(spec.split_k_mode, gk::SplitKMode::Parallel) << spec.name();
  ASSERT_EQ(spec.tile.kernel_schedule, gk::KernelSchedule::TmaWarpSpecializedPingpongFP8AlternatingPromotion)
      << spec.name();
  Fp8Operands o(plan, s);
  o.A.fill_integers(91, -4, 4);
  o.B.fill_integers(92, -4, 4);
  o.C.fill_integers(93, -4, 4);
  DeviceBuffer dA(o.A), dB(o.B), dC(o.C), dD(o.D);
  gk::RunOptions options;
  options.wait_for_best = true;
  const gk::TensorView C = dC.view_like(o.C);
  plan.run(dA.view_like(o.A), dB.view_like(o.B), &C, dD.view_like(o.D), 1.0, 2.0, options);
  dD.copy_to(o.D);
  const auto cmp = gk::verify::compare_with_reference(o.A, o.B, &o.C, o.D, 1.0, 2.0);
  EXPECT_GT(cmp.checked, 0);
  EXPECT_EQ(cmp.max_abs_error, 0.0) << spec.name();
  EXPECT_EQ(plan.running_kernel_name(dA.view_like(o.A), dB.view_like(o.B), &C, dD.view_like(o.D), 2.0), spec.name());
}
