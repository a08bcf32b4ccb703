// tests/unit/activations_test.cpp: the formulas of gemmkit/activations.hpp (sigmoid, SiLU, GELU for 16-bit outputs),
// on the host, where they use the exact exp and division: what the GPU adds (its exp2 / reciprocal approximations)
// is checked by the gpu tier (GpuEpilogue.ApproximateTranscendentals...).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "gemmkit/activations.hpp"
#include "verify/host_matrix.hpp"

namespace gemmkit::activation {
namespace {

double relative_error(double got, double want) {
  return std::fabs(got - want) / std::max(std::fabs(want), 1e-300);
}

// The erfc fit keeps GELU's relative accuracy down its left tail (GELU(-10) ~ -7.6e-23), where 1 + erf would not;
// float's rounding of x^2 / 2 grows the error to 6e-6 at x = -10 (3e-6 down to x = -6, where f16 GELU is 0).
TEST(Activations, GeluErfMatchesFloat64WithinFloatPrecision) {
  double worst = 0.0;
  for (double x = -10.0; x <= 10.0; x += 1.0 / 64) {
    const double want = 0.5 * x * std::erfc(-x / std::sqrt(2.0));
    if (want == 0.0) continue;
    worst = std::max(worst, relative_error(gelu_erf(static_cast<float>(x)), want));
  }
  EXPECT_LT(worst, 1e-5);
  EXPECT_EQ(gelu_erf(0.0f), 0.0f);
}

// The float64 reference the gpu tier compares against keeps GELU's tail too (0.5 x (1 + erf) gave ~1e-16 there).
TEST(Activations, Float64ReferenceGeluHasItsTail) {
  const double want = -7.6198530241604e-23;  // GELU(-10) = -10 * Phi(-10)
  EXPECT_NEAR(gemmkit::verify::apply_activation(Activation::GELU, -10.0, 0.0) / want, 1.0, 1e-9);
  EXPECT_NEAR(gemmkit::verify::apply_activation(Activation::GELU, 1.0, 0.0), 0.8413447460685429, 1e-15);
}

TEST(Activations, SigmoidAndSiluMatchFloat64) {
  double worst = 0.0;
  for (double x = -80.0; x <= 80.0; x += 1.0 / 16) {
    const double sigmoid_want = 1.0 / (1.0 + std::exp(-x));
    worst = std::max(worst, relative_error(sigmoid(static_cast<float>(x)), sigmoid_want));
    if (x != 0.0) worst = std::max(worst, relative_error(silu(static_cast<float>(x)), x * sigmoid_want));
  }
  EXPECT_LT(worst, 1e-6);
}

// What CUTLASS's epilogues instantiate: scalars and Arrays of the compute type (16-bit Arrays go through the same
// per-element loop; GCC's array-bounds check misreads CUTLASS's packed half_t Array on the host, so not here).
TEST(Activations, FunctorsApplyElementwiseToArrays) {
  cutlass::Array<float, 4> in;
  for (int i = 0; i < 4; ++i) in[i] = -1.5f + static_cast<float>(i);
  const auto out = GELU<cutlass::Array<float, 4>>{}(in);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], gelu_erf(in[i]));
  EXPECT_EQ(float(Sigmoid<cutlass::half_t>{}(cutlass::half_t(0.0f))), 0.5f);
  EXPECT_FLOAT_EQ(SiLu<float>{}(2.0f), 2.0f * sigmoid(2.0f));
  EXPECT_TRUE(GELU<float>::kIsHeavy);
}

}  // namespace
}  // namespace gemmkit::activation
