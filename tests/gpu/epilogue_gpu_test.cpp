// tests/gpu/epilogue_gpu_test.cpp: fused activations and bias on SM90 (CUTLASS 3.x) and SM80-family (2.x) kernels
// against a float64 host reference; the leaky_relu slope is a run-time argument that is honoured.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "gemmkit/cache.hpp"
#include "gemmkit/codegen.hpp"
#include "gemmkit/compiler.hpp"
#include "gemmkit/device.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"
#include "support/gpu_cases.hpp"
#include "support/gpu_test.hpp"
#include "unit/test_env.hpp"
#include "verify/host_matrix.hpp"

namespace gk = gemmkit;
using gk::verify::HostMatrix;
namespace cases = gk::gpu_cases;

namespace {

struct Problem {
  HostMatrix A, B, C, D, bias_row, bias_column;
  explicit Problem(gk::DataType t, const cases::Shape& s = cases::kMatrixShape,
                   gk::Layout layout_c = gk::Layout::RowMajor)
      : A(t, s.m, s.k, gk::Layout::RowMajor),
        B(t, s.k, s.n, gk::Layout::RowMajor),
        C(t, s.m, s.n, layout_c),
        D(t, s.m, s.n, layout_c),
        bias_row(t, 1, s.m, gk::Layout::RowMajor),
        bias_column(t, 1, s.n, gk::Layout::RowMajor) {}
  void fill_uniform() {
    A.fill_uniform(31);
    B.fill_uniform(32);
    C.fill_uniform(33);
    bias_row.fill_uniform(34);
    bias_column.fill_uniform(35);
  }
  void fill_integers() {
    A.fill_integers(41, -4, 4);
    B.fill_integers(42, -4, 4);
    C.fill_integers(43, -4, 4);
    bias_row.fill_integers(44, -4, 4);
    bias_column.fill_integers(45, -4, 4);
  }
};

// Host tensors (staged by run) keep these tests short; the device path is covered by gemm_gpu_test.
gk::verify::Comparison run_checked(gk::Gemm& plan, Problem& p, double alpha, double beta,
                                   gk::BiasMode bias = gk::BiasMode::None) {
  const HostMatrix* bias_matrix = bias == gk::BiasMode::PerRow ? &p.bias_row : &p.bias_column;
  const auto bias_view =
      gk::TensorView::host(const_cast<void*>(bias_matrix->data()), bias_matrix->dtype(), {bias_matrix->cols()});
  gk::RunOptions options;
  if (bias != gk::BiasMode::None) options.bias = &bias_view;
  const auto C = p.C.view();
  plan.run(p.A.view(), p.B.view(), beta != 0.0 ? &C : nullptr, p.D.view(), alpha, beta, options);
  gk::verify::Epilogue epilogue{plan.activation(), plan.activation_parameter(),
                                bias != gk::BiasMode::None ? bias_matrix : nullptr, bias};
  return gk::verify::compare_with_reference(p.A, p.B, beta != 0.0 ? &p.C : nullptr, p.D, alpha, beta, 0, 1, epilogue);
}

double tolerance(gk::DataType t) {
  return t == gk::DataType::bf16 ? 4e-2 : 1e-2;
}

}  // namespace

using EpilogueCase = std::tuple<int, gk::DataType, gk::Activation>;
class Activations : public ::testing::TestWithParam<EpilogueCase> {};

TEST_P(Activations, MatchFloat64ReferenceWithAndWithoutC) {
  if (gk::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  const auto [kernel_cc, type, activation] = GetParam();
  if (kernel_cc > device_cc()) GTEST_SKIP() << "SM" << kernel_cc << " kernels need an SM" << kernel_cc << " GPU";
  gk::Gemm plan(cases::epilogue_options(type, device_cc(), kernel_cc));
  plan.set_activation(activation, 0.2);
  EXPECT_EQ(plan.kernel_cc(), kernel_cc);  // no silent fallback to another kernel generation
  Problem p(type);
  p.fill_uniform();
  for (double beta : {0.5, 0.0}) {
    const auto cmp = run_checked(plan, p, 1.25, beta);
    EXPECT_LE(cmp.max_rel_error, tolerance(type)) << plan.kernel_name() << " beta=" << beta;
  }
}

std::string epilogue_case_name(const ::testing::TestParamInfo<EpilogueCase>& info) {
  return "sm" + std::to_string(std::get<0>(info.param)) + "_" + std::string(gk::to_string(std::get<1>(info.param))) +
         "_" + std::string(gk::to_string(std::get<2>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(Gpu, Activations,
                         ::testing::Combine(::testing::Values(90, 80), ::testing::ValuesIn(cases::epilogue_types()),
                                            ::testing::ValuesIn(cases::all_activations())),
                         epilogue_case_name);

TEST(GpuEpilogue, ExactOnSmallIntegersForPiecewiseLinearActivations) {
  if (gk::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  for (int kernel_cc : cases::kernel_generations(device_cc())) {
    for (auto activation : {gk::Activation::Identity, gk::Activation::ReLU, gk::Activation::LeakyReLU}) {
      gk::Gemm plan(cases::epilogue_options(gk::DataType::f16, device_cc(), kernel_cc));
      plan.set_activation(activation, 0.5);  // x * 0.5 stays exact on integers
      Problem p(gk::DataType::f16);
      p.fill_integers();
      EXPECT_EQ(run_checked(plan, p, 1.0, 1.0).max_abs_error, 0.0) << plan.kernel_name();
    }
  }
}

// Sigmoid, SiLU and GELU of a 16-bit D use hardware exp / reciprocal approximations (gemmkit/activations.hpp). On
// exact pre-activation values (small integers, alpha a power of two) only the activation and the final rounding
// err: every element must be within 1.5 units in the last place of D's type of the float64 value.
TEST(GpuEpilogue, ApproximateTranscendentalsStayWithinOneAndAHalfUlpsOfFloat64) {
  if (gk::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  for (int kernel_cc : cases::kernel_generations(device_cc())) {
    for (auto type : {gk::DataType::f16, gk::DataType::bf16}) {
      const double ulp = type == gk::DataType::f16 ? std::ldexp(1.0, -10) : std::ldexp(1.0, -7);  // relative
      const double smallest = type == gk::DataType::f16 ? std::ldexp(1.0, -24) : 1e-30;           // subnormal step
      for (auto activation : {gk::Activation::GELU, gk::Activation::Sigmoid, gk::Activation::SiLU}) {
        gk::Gemm plan(cases::epilogue_options(type, device_cc(), kernel_cc));
        plan.set_activation(activation);
        Problem p(type);
        p.fill_integers();
        const double alpha = 1.0 / 16, beta = 0.25;  // pre-activation values in about [-8, 8], exact in float32
        const auto C = p.C.view();
        plan.run(p.A.view(), p.B.view(), &C, p.D.view(), alpha, beta);
        const gk::verify::Epilogue epilogue{activation, 0.0, nullptr, gk::BiasMode::None};
        double worst_ulps = 0.0;
        for (std::int64_t r = 0; r < p.D.rows(); ++r) {
          for (std::int64_t c = 0; c < p.D.cols(); ++c) {
            const double want = gk::verify::reference_element(p.A, p.B, &p.C, alpha, beta, 0, r, c, epilogue);
            const double step = std::max(std::fabs(want) * ulp, smallest);
            worst_ulps = std::max(worst_ulps, std::fabs(p.D.get(0, r, c) - want) / step);
          }
        }
        EXPECT_LE(worst_ulps, 1.5) << plan.kernel_name();
      }
    }
  }
}

TEST(GpuEpilogue, LeakySlopeIsHonouredWithoutRecompiling) {
  if (gk::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  for (int kernel_cc : cases::kernel_generations(device_cc())) {
    gk::Gemm plan(cases::epilogue_options(gk::DataType::f16, device_cc(), kernel_cc));
    Problem p(gk::DataType::f16);
    p.fill_integers();
    plan.set_activation(gk::Activation::LeakyReLU, 0.5);
    EXPECT_EQ(run_checked(plan, p, 1.0, 1.0).max_abs_error, 0.0);
    const int builds = gk::cache_counters().builds;
    plan.set_activation(gk::Activation::LeakyReLU, 0.25);
    EXPECT_EQ(run_checked(plan, p, 1.0, 1.0).max_abs_error, 0.0) << plan.kernel_name();
    EXPECT_EQ(gk::cache_counters().builds, builds);
  }
}

TEST(GpuEpilogue, Sm80RowBiasWithRowMajorDIsRefusedBeforeCompiling) {
  gk::Gemm plan(cases::epilogue_options(gk::DataType::f16, 90, 80));
  try {
    plan.set_bias(gk::BiasMode::PerRow);
    FAIL() << "expected a ConfigError";
  } catch (const gk::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("per-row with ColumnMajor C"), std::string::npos) << e.what();
  }
}

TEST(GpuEpilogue, BiasPerRowAndPerColumn) {
  if (gk::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  for (int kernel_cc : cases::kernel_generations(device_cc())) {
    for (auto bias : {gk::BiasMode::PerRow, gk::BiasMode::PerColumn}) {
      gk::Gemm plan(cases::bias_options(bias, device_cc(), kernel_cc));
      plan.set_activation(gk::Activation::ReLU);
      plan.set_bias(bias);
      Problem p(gk::DataType::f16, cases::kMatrixShape, plan.layout_c());
      p.fill_integers();
      EXPECT_EQ(run_checked(plan, p, 1.0, 1.0, bias).max_abs_error, 0.0) << plan.kernel_name();
    }
  }
}

// gemmkit's lean epilogue (epilogue schedule Lean): one kernel per element type takes every activation, bias mode and
// C at launch. Exact on small integers for the piecewise-linear activations, within the tier's tolerance for the
// others (random data); on tiles that stick out of the problem (the general walk) and on whole tiles (the plain
// walk, alpha alone); nothing is built after the first run of each type.
TEST(GpuEpilogue, LeanEpilogueTakesEveryActivationBiasAndCAtLaunch) {
  if (gk::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  if (device_cc() < 90) GTEST_SKIP() << "the lean epilogue is an SM90 kernel's";
  for (gk::DataType type : cases::lean_types()) {
    gk::Gemm plan(cases::epilogue_options(type, device_cc(), 90));
    cases::use_lean_epilogue(plan);
    const std::string kernel = plan.kernel_name();
    int builds = -1;  // after the first run of this type
    for (const cases::Shape& shape : {cases::kMatrixShape, cases::kWholeTilesShape}) {
      for (gk::Activation activation : cases::all_activations()) {
        const bool piecewise_linear = activation == gk::Activation::Identity || activation == gk::Activation::ReLU ||
                                      activation == gk::Activation::LeakyReLU;
        for (gk::BiasMode bias : {gk::BiasMode::None, gk::BiasMode::PerRow, gk::BiasMode::PerColumn}) {
          plan.set_activation(activation, 0.5);  // x * 0.5 stays exact on integers
          plan.set_bias(bias);
          EXPECT_EQ(plan.kernel_name(), kernel);
          for (double beta : {0.0, 1.0}) {
            Problem p(type, shape);
            piecewise_linear ? p.fill_integers() : p.fill_uniform();
            const auto cmp = run_checked(plan, p, piecewise_linear ? 1.0 : 1.25, beta, bias);
            const std::string what = std::string(gk::to_string(activation)) + " bias " +
                                     std::string(gk::to_string(bias)) + " beta " + std::to_string(beta) + " " +
                                     std::to_string(shape.m) + "x" + std::to_string(shape.n);
            if (piecewise_linear) {
              EXPECT_EQ(cmp.max_abs_error, 0.0) << kernel << " " << what;
            } else {
              EXPECT_LE(cmp.max_rel_error, tolerance(type)) << kernel << " " << what;
            }
            if (builds < 0) builds = gk::cache_counters().builds;
          }
        }
      }
    }
    EXPECT_EQ(gk::cache_counters().builds, builds) << kernel << " was built again";
  }
}

// With activation_at_launch (the default for 16-bit operands) an SM90 plan's kernel on CUTLASS's TMA epilogue takes
// its activation at launch: one kernel per element type and bias mode serves every activation, exact on small integers
// for the piecewise-linear ones and within the tier's tolerance for the others; changing the activation builds
// nothing. Without a bias its D is bit for bit the D of the kernel that compiles the activation in.
TEST(GpuEpilogue, OneKernelOnCutlassEpilogueTakesEveryActivationAtLaunch) {
  if (gk::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  if (device_cc() < 90) GTEST_SKIP() << "activations taken at launch are an SM90 kernel's";
  const gk::testenv::ScopedEnv wait("GEMMKIT_WAIT_FOR_BEST", "1");  // the plans' own kernels, never a stand-in
  for (gk::DataType type : cases::lean_types()) {
    for (gk::BiasMode bias : {gk::BiasMode::None, gk::BiasMode::PerRow, gk::BiasMode::PerColumn}) {
      gk::Gemm plan(cases::epilogue_options(type, device_cc(), 90));
      plan.set_activation_at_launch(true);
      plan.set_bias(bias);
      std::string kernel;
      int builds = -1;       // after the first run
      int other_builds = 0;  // the compiled-in kernels
      for (gk::Activation activation : cases::all_activations()) {
        if (activation == gk::Activation::Identity && bias == gk::BiasMode::None) continue;  // the plain kernel's
        const bool piecewise_linear = activation == gk::Activation::Identity || activation == gk::Activation::ReLU ||
                                      activation == gk::Activation::LeakyReLU;
        plan.set_activation(activation, 0.5);  // x * 0.5 stays exact on integers
        if (kernel.empty()) kernel = plan.kernel_name();
        EXPECT_EQ(plan.kernel_name(), kernel);
        for (double beta : {0.0, 1.0}) {
          Problem p(type);
          piecewise_linear ? p.fill_integers() : p.fill_uniform();
          const auto cmp = run_checked(plan, p, piecewise_linear ? 1.0 : 1.25, beta, bias);
          if (builds < 0) builds = gk::cache_counters().builds;
          const std::string what = std::string(gk::to_string(activation)) + " beta " + std::to_string(beta);
          if (bias == gk::BiasMode::None) {
            const HostMatrix at_launch_d = p.D;
            gk::Gemm compiled_in = cases::compiled_in_plan(type, activation, device_cc());
            const int before = gk::cache_counters().builds;
            run_checked(compiled_in, p, piecewise_linear ? 1.0 : 1.25, beta, bias);
            other_builds += gk::cache_counters().builds - before;
            EXPECT_EQ(std::memcmp(p.D.data(), at_launch_d.data(), p.D.bytes()), 0)
                << kernel << " and " << compiled_in.kernel_name() << " differ: " << what;
          }
          if (piecewise_linear) {
            EXPECT_EQ(cmp.max_abs_error, 0.0) << kernel << " " << what;
          } else {
            EXPECT_LE(cmp.max_rel_error, tolerance(type)) << kernel << " " << what;
          }
        }
      }
      EXPECT_NE(kernel.find("_act_at_launch"), std::string::npos) << kernel;
      EXPECT_EQ(gk::cache_counters().builds - other_builds, builds) << kernel << " was built again";
    }
  }
}

// A plan's first run with nothing built compiles the chosen configuration's quick twin (the same tile on the lean
// epilogue), runs it, and builds the chosen kernel in the background; once built, runs take that one. Both exact.
TEST(GpuEpilogue, FirstRunBuildsTheQuickTwinThenTheChosenKernelInTheBackground) {
  if (gk::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  if (device_cc() < 90) GTEST_SKIP() << "the lean epilogue is an SM90 kernel's";
  gk::testenv::TempDir cache_dir;
  gk::testenv::ScopedEnv cache("GEMMKIT_CACHE_DIR", cache_dir.str());
  gk::testenv::ScopedEnv wait("GEMMKIT_WAIT_FOR_BEST", std::nullopt);
  // A column-major B with a ReLU, which no other gpu test runs: when the tier runs in one process (one gtest binary
  // and a filter), neither kernel is loaded already, so both must come from this test's empty cache.
  gk::GemmOptions options = cases::epilogue_options(gk::DataType::f16, device_cc(), 90);
  options.layout_b = gk::Layout::ColumnMajor;
  gk::Gemm plan(options);
  plan.set_activation(gk::Activation::ReLU);
  gk::Gemm twin_plan(options);
  cases::use_lean_epilogue(twin_plan);
  const gk::Toolchain& toolchain = gk::Toolchain::discover();
  const gk::DiskCache disk;
  Problem p(gk::DataType::f16, cases::kWholeTilesShape);
  p.B = HostMatrix(gk::DataType::f16, cases::kWholeTilesShape.k, cases::kWholeTilesShape.n, gk::Layout::ColumnMajor);
  p.fill_integers();
  const gk::KernelSpec chosen = plan.spec_for(p.A.view(), p.B.view(), nullptr, p.D.view());
  EXPECT_EQ(run_checked(plan, p, 1.0, 1.0).max_abs_error, 0.0);
  EXPECT_TRUE(disk.find(toolchain, gk::render(twin_plan.spec()))) << "the twin was not built";
  EXPECT_FALSE(disk.find(toolchain, gk::render(chosen))) << chosen.name() << " was built before the first run ended";
  gk::Gemm::wait_for_background();
  EXPECT_TRUE(disk.find(toolchain, gk::render(chosen))) << chosen.name() << " was not built in the background";
  const int builds = gk::cache_counters().builds;
  EXPECT_EQ(run_checked(plan, p, 1.0, 1.0).max_abs_error, 0.0);
  EXPECT_EQ(gk::cache_counters().builds, builds);
}
