// tests/gpu/gemm_gpu_test.cpp: numerical checks on a CUDA device against a float64 host reference: every element
// type x all 8 layouts, odd shapes, alpha/beta, batched and broadcast, host-staged and device paths, SIMT,
// Stream-K. Skips itself with the reason when no device is present.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "gemmkit/device.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"
#include "support/gpu_cases.hpp"
#include "support/gpu_test.hpp"
#include "verify/device_buffer.hpp"
#include "verify/host_matrix.hpp"

namespace gk = gemmkit;
using gk::verify::DeviceBuffer;
using gk::verify::HostMatrix;
namespace cases = gk::gpu_cases;

namespace {

struct Operands {
  HostMatrix A, B, C, D;
  Operands(const gk::Gemm& plan, const cases::Shape& s, long batch_a = 1, long batch_b = 1, long batch_c = 1)
      : A(plan.element_a(), s.m, s.k, plan.layout_a(), batch_a),
        B(plan.element_b(), s.k, s.n, plan.layout_b(), batch_b),
        C(plan.element_c(), s.m, s.n, plan.layout_c(), batch_c),
        D(plan.element_d(), s.m, s.n, plan.layout_c(), std::max(batch_a, batch_b)) {}
  void fill_integers() {
    A.fill_integers(11, -4, 4);
    B.fill_integers(12, -4, 4);
    C.fill_integers(13, -4, 4);
  }
  void fill_uniform() {
    A.fill_uniform(21);
    B.fill_uniform(22);
    C.fill_uniform(23);
  }
};

// Runs through device tensors and returns the comparison with the float64 reference.
gk::verify::Comparison run_on_device(gk::Gemm& plan, Operands& o, double alpha, double beta) {
  DeviceBuffer dA(o.A), dB(o.B), dC(o.C), dD(o.D);
  plan.run(dA.view_like(o.A), dB.view_like(o.B), dC.view_like(o.C), dD.view_like(o.D), alpha, beta);
  dD.copy_to(o.D);
  return gk::verify::compare_with_reference(o.A, o.B, &o.C, o.D, alpha, beta);
}

double tolerance(gk::DataType t) {
  switch (t) {
    case gk::DataType::f16: return 1e-2;
    case gk::DataType::bf16: return 4e-2;
    case gk::DataType::f32: return 1e-2;  // tf32 tensor cores round inputs to 10 mantissa bits
    case gk::DataType::f64: return 1e-12;
    default: return 0.0;
  }
}

}  // namespace

// Small-integer data makes every product and sum exact, so D must equal the reference exactly.
class TypesAndLayouts : public ::testing::TestWithParam<std::tuple<cases::TypeCase, cases::LayoutCase>> {};

TEST_P(TypesAndLayouts, ExactOnSmallIntegers) {
  REQUIRE_GPU();
  const auto& [t, l] = GetParam();
  gk::Gemm plan(cases::options(t, l, device_cc()));
  Operands o(plan, cases::kMatrixShape);
  o.fill_integers();
  const auto cmp = run_on_device(plan, o, 1.0, 1.0);
  EXPECT_EQ(cmp.max_abs_error, 0.0) << plan.spec_for(o.A.view(), o.B.view(), o.C.view(), o.D.view(), 1.0).name();
}

TEST_P(TypesAndLayouts, RelativeErrorOnRandomDataWithAlphaBeta) {
  REQUIRE_GPU();
  const auto& [t, l] = GetParam();
  if (gk::is_integer(t.ab)) GTEST_SKIP() << "integer types are covered exactly by ExactOnSmallIntegers";
  gk::Gemm plan(cases::options(t, l, device_cc()));
  Operands o(plan, cases::kMatrixShape);
  o.fill_uniform();
  const auto cmp = run_on_device(plan, o, 1.5, -0.5);
  EXPECT_LE(cmp.max_rel_error, tolerance(t.cd)) << t.name << " " << l.name();
}

std::string case_name(const ::testing::TestParamInfo<TypesAndLayouts::ParamType>& info) {
  return std::string(std::get<0>(info.param).name) + "_" + std::get<1>(info.param).name();
}

INSTANTIATE_TEST_SUITE_P(Gpu, TypesAndLayouts,
                         ::testing::Combine(::testing::ValuesIn(cases::type_cases()),
                                            ::testing::ValuesIn(cases::layout_cases())),
                         case_name);

TEST(GpuShapes, OddMNKOnAlignmentOneKernels) {
  REQUIRE_GPU();
  const cases::LayoutCase rrr{gk::Layout::RowMajor, gk::Layout::RowMajor, gk::Layout::RowMajor};
  for (const auto& t : cases::type_cases()) {
    if (t.ab != gk::DataType::f32 && t.ab != gk::DataType::f64) continue;
    gk::Gemm plan(cases::options(t, rrr, device_cc()));
    Operands o(plan, cases::kOddShape);
    o.fill_integers();
    EXPECT_EQ(run_on_device(plan, o, 2.0, -1.0).max_abs_error, 0.0) << t.name;
  }
  gk::Gemm simt(cases::options(cases::type_cases()[0], rrr, device_cc()));
  simt.set_opclass(gk::OpClass::Simt);
  Operands o(simt, cases::kOddShape);
  o.fill_integers();
  EXPECT_EQ(run_on_device(simt, o, 1.0, 1.0).max_abs_error, 0.0);
}

// Left to gemmkit, f16 and bf16 plans run odd leading dimensions on CUTLASS 2.x tensor-op kernels of a two-stage
// mainloop (element-by-element loads), exactly (cases::odd_leading_dimension_cases), a GFLOP in one wave of tiles on
// the Stream-K kernel of its tile (partial tiles summed through the workspace, C added once); told to use tensor cores
// (the SM90 family, whose loads are 4 bytes or more), a plan refuses them before anything runs, naming the fix.
TEST(GpuShapes, OddLeadingDimensionsRunOnTwoStageTensorOpKernelsUnlessTensorOpIsChosen) {
  REQUIRE_GPU();
  for (const auto& [t, l] : cases::odd_leading_dimension_cases()) {
    gk::Gemm unpinned(cases::options(t, l, device_cc()));
    for (const cases::Shape& shape : {cases::kOddShape, cases::kOddOneWaveShape}) {
      Operands odd(unpinned, shape);
      odd.fill_integers();
      const gk::KernelSpec spec = unpinned.spec_for(odd.A.view(), odd.B.view(), odd.C.view(), odd.D.view(), 1.0);
      EXPECT_EQ(spec.opclass, gk::OpClass::TensorOp) << spec.name();
      EXPECT_EQ(spec.tile.stages, 2) << spec.name();
      EXPECT_EQ(spec.swizzle == gk::Swizzle::StreamK, shape.m == cases::kOddOneWaveShape.m) << spec.name();
      EXPECT_EQ(run_on_device(unpinned, odd, 1.0, 1.0).max_abs_error, 0.0)
          << t.name << " " << l.name() << " " << spec.name();
    }
  }
  const cases::LayoutCase rrr{gk::Layout::RowMajor, gk::Layout::RowMajor, gk::Layout::RowMajor};
  gk::Gemm plan(cases::options(cases::type_cases()[0], rrr, device_cc()));
  plan.set_opclass(gk::OpClass::TensorOp);
  Operands o(plan, cases::kOddShape);
  o.fill_integers();
  try {
    run_on_device(plan, o, 1.0, 0.0);
    FAIL() << "expected a TensorError";
  } catch (const gk::TensorError& e) {
    EXPECT_NE(std::string(e.what()).find("set opclass = Simt"), std::string::npos) << e.what();
  }
}

TEST(GpuPaths, HostStagedTensorsLandInDWhenRunReturns) {
  REQUIRE_GPU();
  const cases::LayoutCase rcr{gk::Layout::RowMajor, gk::Layout::ColumnMajor, gk::Layout::RowMajor};
  gk::Gemm plan(cases::options(cases::type_cases()[0], rcr, device_cc()));
  Operands o(plan, cases::kMatrixShape);
  o.fill_integers();
  plan.run(o.A.view(), o.B.view(), o.C.view(), o.D.view(), 1.0, 2.0);
  EXPECT_EQ(gk::verify::compare_with_reference(o.A, o.B, &o.C, o.D, 1.0, 2.0).max_abs_error, 0.0);
}

TEST(GpuPaths, BetaZeroNeedsNoC) {
  REQUIRE_GPU();
  const cases::LayoutCase rrr{gk::Layout::RowMajor, gk::Layout::RowMajor, gk::Layout::RowMajor};
  gk::Gemm plan(cases::options(cases::type_cases()[0], rrr, device_cc()));
  Operands o(plan, cases::kMatrixShape);
  o.fill_integers();
  plan.run(o.A.view(), o.B.view(), nullptr, o.D.view(), 1.0, 0.0);
  EXPECT_EQ(gk::verify::compare_with_reference(o.A, o.B, nullptr, o.D, 1.0, 0.0).max_abs_error, 0.0);
}

TEST(GpuPaths, StridedHostDKeepsItsPadding) {
  REQUIRE_GPU();
  const cases::LayoutCase rrr{gk::Layout::RowMajor, gk::Layout::RowMajor, gk::Layout::RowMajor};
  gk::Gemm plan(cases::options(cases::type_cases()[0], rrr, device_cc()));
  const long m = 64, n = 64, k = 64, ld = 72;
  HostMatrix A(gk::DataType::f16, m, k, gk::Layout::RowMajor), B(gk::DataType::f16, k, n, gk::Layout::RowMajor);
  A.fill_integers(1, -4, 4);
  B.fill_integers(2, -4, 4);
  HostMatrix padded(gk::DataType::f16, m, ld, gk::Layout::RowMajor);
  padded.fill_integers(3, 7, 7);  // the padding columns must still hold 7 afterwards
  const auto D = gk::TensorView::strided(padded.data(), gk::DataType::f16, {m, n}, {ld, 1});
  plan.run(A.view(), B.view(), nullptr, D, 1.0, 0.0);
  for (long r = 0; r < m; ++r) {
    for (long c = 0; c < n; ++c)
      ASSERT_EQ(padded.get(0, r, c), gk::verify::reference_element(A, B, nullptr, 1, 0, 0, r, c));
    for (long c = n; c < ld; ++c) ASSERT_EQ(padded.get(0, r, c), 7.0);
  }
}

TEST(GpuBatched, EveryOperandBatched) {
  REQUIRE_GPU();
  for (auto layout : {gk::Layout::RowMajor, gk::Layout::ColumnMajor}) {
    const cases::LayoutCase l{layout, layout, layout};
    gk::Gemm plan(cases::options(cases::type_cases()[0], l, device_cc()));
    Operands o(plan, cases::kMatrixShape, 3, 3, 3);
    o.fill_integers();
    EXPECT_EQ(run_on_device(plan, o, 1.0, 1.0).max_abs_error, 0.0) << l.name();
  }
}

TEST(GpuBatched, RankTwoOperandsBroadcast) {
  REQUIRE_GPU();
  const cases::LayoutCase rrr{gk::Layout::RowMajor, gk::Layout::RowMajor, gk::Layout::RowMajor};
  gk::Gemm plan(cases::options(cases::type_cases()[0], rrr, device_cc()));
  Operands batched_a(plan, cases::kMatrixShape, 4, 1, 1);
  batched_a.fill_integers();
  EXPECT_EQ(run_on_device(plan, batched_a, 1.0, 1.0).max_abs_error, 0.0) << "B and C broadcast";
  Operands batched_b(plan, cases::kMatrixShape, 1, 4, 4);
  batched_b.fill_integers();
  EXPECT_EQ(run_on_device(plan, batched_b, 1.0, 1.0).max_abs_error, 0.0) << "A broadcast";
}

TEST(GpuSwizzle, StreamKMatchesTheReference) {
  REQUIRE_GPU();
  const cases::LayoutCase rrr{gk::Layout::RowMajor, gk::Layout::RowMajor, gk::Layout::RowMajor};
  gk::Gemm plan(cases::options(cases::type_cases()[0], rrr, device_cc()));
  plan.set_swizzling_functor(gk::Swizzle::StreamK);
  // K much larger than M and N: Stream-K splits K across SMs and reduces the partial tiles.
  Operands o(plan, {256, 256, 8192});
  o.fill_integers();
  EXPECT_EQ(run_on_device(plan, o, 1.0, 1.0).max_abs_error, 0.0) << plan.kernel_name();
}

// run()'s own scheduler swizzle (8 on 24 x 24 clusters of 128 x 256 tiles), and a set one that pads tiles (8 at
// M = 1024, where CUTLASS rounds 8 CTA rows up to 16): both exact, the padded tiles writing nothing.
TEST(GpuSwizzle, ChosenAndPaddingSwizzlesAreExact) {
  REQUIRE_GPU();
  if (device_cc() < 90) GTEST_SKIP() << "scheduler swizzles are arguments of SM90 persistent kernels";
  const cases::LayoutCase rrr{gk::Layout::RowMajor, gk::Layout::RowMajor, gk::Layout::RowMajor};
  gk::Gemm plan(cases::options(cases::type_cases()[0], rrr, device_cc()));
  {
    const auto [A, B, D] = plan.stand_in_tensors(6144, 6144, 32);
    ASSERT_EQ(plan.max_swizzle_for(A, B, nullptr, D), 8) << plan.spec_for(A, B, nullptr, D).name();
  }
  Operands large(plan, {6144, 6144, 32});
  large.fill_integers();
  EXPECT_EQ(run_on_device(plan, large, 1.0, 1.0).max_abs_error, 0.0);
  plan.set_max_swizzle_size(8);
  Operands padded(plan, {1024, 6144, 32});
  padded.fill_integers();
  EXPECT_EQ(run_on_device(plan, padded, 1.0, 1.0).max_abs_error, 0.0);
}

TEST(GpuRepeat, SecondRunWithTheSameTensorsTakesTheCachedLaunch) {
  REQUIRE_GPU();
  const cases::LayoutCase rrr{gk::Layout::RowMajor, gk::Layout::RowMajor, gk::Layout::RowMajor};
  gk::Gemm plan(cases::options(cases::type_cases()[0], rrr, device_cc()));
  Operands o(plan, cases::kMatrixShape);
  o.fill_integers();
  DeviceBuffer dA(o.A), dB(o.B), dC(o.C), dD(o.D);
  for (double beta : {1.0, 1.0, 3.0, 3.0}) {  // a changed scalar must not reuse stale launch parameters
    plan.run(dA.view_like(o.A), dB.view_like(o.B), dC.view_like(o.C), dD.view_like(o.D), 1.0, beta);
    dD.copy_to(o.D);
    EXPECT_EQ(gk::verify::compare_with_reference(o.A, o.B, &o.C, o.D, 1.0, beta).max_abs_error, 0.0) << beta;
  }
}
