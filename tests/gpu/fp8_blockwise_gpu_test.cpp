// tests/gpu/fp8_blockwise_gpu_test.cpp: block-scaled FP8 GEMMs (the DeepSeek-V3 format) on SM90 against a float64
// reference of the dequantized operands: A's element (m, k) times its scale (m, k / 128), B's (k, n) times its scale
// (n / 128, k / 128). Exact on halves and power-of-two scales (every product and partial sum is a short binary
// fraction); within output precision on random data and random scales. Skips itself without an SM90 device.
// Kernels: gemmkit_gpu_prebuild --only fp8.
#include <gtest/gtest.h>

#include <cstdint>

#include "gemmkit/gemm.hpp"
#include "support/fp8_blockwise_cases.hpp"
#include "support/gpu_test.hpp"
#include "verify/device_buffer.hpp"
#include "verify/host_matrix.hpp"

namespace gk = gemmkit;
using gk::verify::DeviceBuffer;
using gk::verify::HostMatrix;
namespace cases = gk::gpu_cases;

namespace {

// Operands, their scales as the kernel reads them (A's: ceil(K/128) rows of M, i.e. M-major; B's: ceil(N/128) rows of
// ceil(K/128)) and the dequantized f32 operands the reference multiplies.
struct BlockwiseOperands {
  cases::BlockwiseShape s;
  long batch, k_blocks, n_blocks;
  HostMatrix A, B, C, D, scale_a, scale_b, dequantized_a, dequantized_b;
  BlockwiseOperands(const gk::Gemm& plan, long batch_, cases::BlockwiseShape shape = {})
      : s(shape),
        batch(batch_),
        k_blocks((s.k + 127) / 128),
        n_blocks((s.n + 127) / 128),
        A(plan.element_a(), s.m, s.k, gk::Layout::RowMajor, batch),
        B(plan.element_b(), s.k, s.n, gk::Layout::ColumnMajor, batch),
        C(plan.element_c(), s.m, s.n, gk::Layout::RowMajor, batch),
        D(plan.element_d(), s.m, s.n, gk::Layout::RowMajor, batch),
        scale_a(gk::DataType::f32, k_blocks, s.m, gk::Layout::RowMajor, batch),
        scale_b(gk::DataType::f32, n_blocks, k_blocks, gk::Layout::RowMajor, batch),
        dequantized_a(gk::DataType::f32, s.m, s.k, gk::Layout::RowMajor, batch),
        dequantized_b(gk::DataType::f32, s.k, s.n, gk::Layout::ColumnMajor, batch) {}

  void dequantize() {
    for (long b = 0; b < batch; ++b) {
      for (long m = 0; m < s.m; ++m)
        for (long k = 0; k < s.k; ++k) dequantized_a.set(b, m, k, A.get(b, m, k) * scale_a.get(b, k / 128, m));
      for (long k = 0; k < s.k; ++k)
        for (long n = 0; n < s.n; ++n) dequantized_b.set(b, k, n, B.get(b, k, n) * scale_b.get(b, n / 128, k / 128));
    }
  }

  // Runs on device copies, with the scales as strided views in the layouts run() checks.
  void run(gk::Gemm& plan, double alpha, double beta) {
    DeviceBuffer dA(A), dB(B), dC(C), dD(D), dScaleA(scale_a), dScaleB(scale_b);
    const int device = dA.view_like(A).device;
    const long m = s.m;
    const gk::TensorView sa =
        batch > 1 ? gk::TensorView::strided(dScaleA.get(), gk::DataType::f32, {batch, m, k_blocks},
                                            {m * k_blocks, 1, m}, device)
                  : gk::TensorView::strided(dScaleA.get(), gk::DataType::f32, {m, k_blocks}, {1, m}, device);
    const gk::TensorView sb =
        batch > 1
            ? gk::TensorView::strided(dScaleB.get(), gk::DataType::f32, {batch, n_blocks, k_blocks},
                                      {n_blocks * k_blocks, k_blocks, 1}, device)
            : gk::TensorView::strided(dScaleB.get(), gk::DataType::f32, {n_blocks, k_blocks}, {k_blocks, 1}, device);
    gk::RunOptions options;
    options.scale_a = &sa;
    options.scale_b = &sb;
    options.wait_for_best = true;
    plan.run(dA.view_like(A), dB.view_like(B), dC.view_like(C), dD.view_like(D), alpha, beta, options);
    dD.copy_to(D);
  }
};

// Powers of two from 1/4 to 4, varying along both extents.
void fill_powers_of_two(HostMatrix& m, long offset) {
  const double factors[] = {0.25, 0.5, 1.0, 2.0, 4.0};
  for (std::int64_t b = 0; b < m.batch(); ++b)
    for (std::int64_t r = 0; r < m.rows(); ++r)
      for (std::int64_t c = 0; c < m.cols(); ++c) m.set(b, r, c, factors[(r * 3 + c + b + offset) % 5]);
}

}  // namespace

class Fp8Blockwise : public ::testing::TestWithParam<cases::Fp8BlockwiseCase> {};

TEST_P(Fp8Blockwise, ExactOnHalvesWithPowerOfTwoScales) {
  REQUIRE_CC(90, "block-scaled FP8 GEMMs");
  const cases::Fp8BlockwiseCase& c = GetParam();
  gk::Gemm plan = cases::fp8_blockwise_plan(c, device_cc());
  BlockwiseOperands o(plan, c.batch, c.shape);
  fill_halves(o.A, 81);
  fill_halves(o.B, 82);
  o.C.fill_integers(83, -4, 4);
  fill_powers_of_two(o.scale_a, 0);
  fill_powers_of_two(o.scale_b, 2);
  o.dequantize();
  const double alpha = 0.5, beta = 1.0;
  o.run(plan, alpha, beta);
  gk::verify::Epilogue epilogue;
  epilogue.activation = c.activation;
  const auto cmp =
      gk::verify::compare_with_reference(o.dequantized_a, o.dequantized_b, &o.C, o.D, alpha, beta, 0, 1, epilogue);
  EXPECT_EQ(cmp.checked, c.batch * o.s.m * o.s.n);
  EXPECT_EQ(cmp.max_abs_error, 0.0) << plan.kernel_name();
}

INSTANTIATE_TEST_SUITE_P(Sm90, Fp8Blockwise, ::testing::ValuesIn(cases::fp8_blockwise_cases()),
                         [](const auto& info) { return info.param.label; });

// Random values in [-1, 1] rounded to e4m3 and random scales in [0.5, 1.5]: what is left is the FP8 tensor cores'
// accumulation inside each 128-deep block and D's rounding (the same bound as the unscaled FP8 tier's random test); a
// scale read from the wrong row, column or block errs by order 1.
TEST(Fp8BlockwiseRandom, RandomDataAndScalesWithinOutputPrecision) {
  REQUIRE_CC(90, "block-scaled FP8 GEMMs");
  const cases::Fp8BlockwiseCase c = cases::fp8_blockwise_cases()[1];  // f32 D
  gk::Gemm plan = cases::fp8_blockwise_plan(c, device_cc());
  BlockwiseOperands o(plan, 1);
  o.A.fill_uniform(91);
  o.B.fill_uniform(92);
  o.C.fill_uniform(93);
  o.scale_a.fill_uniform(94);
  o.scale_b.fill_uniform(95);
  for (HostMatrix* scales : {&o.scale_a, &o.scale_b})
    for (std::int64_t r = 0; r < scales->rows(); ++r)
      for (std::int64_t col = 0; col < scales->cols(); ++col)
        scales->set(0, r, col, 1.0 + 0.5 * scales->get(0, r, col));
  o.dequantize();
  o.run(plan, 2.0, 0.5);
  gk::verify::Epilogue epilogue;
  epilogue.activation = c.activation;
  const auto cmp =
      gk::verify::compare_with_reference(o.dequantized_a, o.dequantized_b, &o.C, o.D, 2.0, 0.5, 0, 1, epilogue);
  EXPECT_LE(cmp.max_rel_error, 1.5e-2) << plan.kernel_name();
}
