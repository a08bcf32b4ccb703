// tests/gpu/conv2d_gpu_test.cpp: Conv2d on a CUDA device, exact on small integers against the float64 host
// reference: every case of support/conv_cases.hpp on the CUTLASS 2.x family (fprop, dgrad, wgrad; strides, padding,
// dilation; 1x1, 3x3, 7x7; odd channels; f16, bf16, tf32, f32 SIMT; activations; serial and parallel split-K),
// parallel split-K at many slice counts, the split run() chooses by itself, and, on an SM90 GPU, the CUTLASS 3.x
// family (Sm90/...: TMA im2col); host-staged tensors, a reused plan, what SM90 kernels refuse.
// Kernels: gemmkit_gpu_prebuild --cc 90 --only conv,conv90.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "gemmkit/conv2d.hpp"
#include "gemmkit/device.hpp"
#include "gemmkit/errors.hpp"
#include "support/conv_cases.hpp"
#include "support/gpu_test.hpp"
#include "verify/conv_reference.hpp"
#include "verify/device_buffer.hpp"

namespace gk = gemmkit;
namespace cases = gk::gpu_cases;
using gk::verify::DeviceBuffer;
using gk::verify::HostMatrix;

namespace {

// One case's tensors on small integers (exact in every element type and accumulator), run on the device or the host.
struct ConvRun {
  const cases::ConvCase& c;
  HostMatrix A, B, C, D;
  gk::Conv2dSplitK split;  // what run_on_device ran with

  explicit ConvRun(const cases::ConvCase& c)
      : c(c),
        A(gk::verify::conv_tensor(c.ab, c.shape.a(c.kind))),
        B(gk::verify::conv_tensor(c.ab, c.shape.b(c.kind))),
        C(gk::verify::conv_tensor(c.cd, c.shape.d(c.kind))),
        D(gk::verify::conv_tensor(c.cd, c.shape.d(c.kind))) {
    // A 16-bit accumulator (and serial split-K's 16-bit partial sums) holds integers up to 2048 exactly; so does a
    // 16-bit output of long sums (N*P*Q terms) of -1, 0 and 1.
    const bool long_sum = c.kind == gk::ConvKind::Wgrad && c.shape.n * c.shape.p() * c.shape.q() > 4096;
    const int ab = c.accumulator == gk::DataType::f16 || c.split_k_mode == gk::SplitKMode::Serial || long_sum ? 1 : 2;
    A.fill_integers(11, -ab, ab);
    B.fill_integers(12, -ab, ab);
    C.fill_integers(13, -3, 3);
    D.fill_integers(14, -100, 100);  // overwritten by the run
  }

  void run_on_device(gk::Conv2d& plan) {
    const int device = gk::current_device();
    const DeviceBuffer dA(A), dB(B), dC(C), dD(D);
    const auto vA = gk::verify::conv_view(A, c.shape.a(c.kind), dA.get(), device);
    const auto vB = gk::verify::conv_view(B, c.shape.b(c.kind), dB.get(), device);
    const auto vC = gk::verify::conv_view(C, c.shape.d(c.kind), dC.get(), device);
    const auto vD = gk::verify::conv_view(D, c.shape.d(c.kind), dD.get(), device);
    plan.run(vA, vB, c.beta != 0.0 ? &vC : nullptr, vD, c.shape.geometry, c.alpha, c.beta);
    dD.copy_to(D);
    split = plan.split_k_for(vA, vB, c.beta != 0.0 ? &vC : nullptr, vD, c.shape.geometry, c.beta);
  }

  gk::verify::Comparison compare() const {
    const gk::verify::Epilogue epilogue{c.activation, c.activation_parameter, nullptr, gk::BiasMode::None};
    return gk::verify::compare_conv(c.kind, c.shape, A, B, c.beta != 0.0 ? &C : nullptr, D, c.alpha, c.beta, epilogue);
  }
};

// The row `name` of `list` (conv_cases(): the CUTLASS 2.x family's).
cases::ConvCase find_case(const std::string& name, const std::vector<cases::ConvCase>& list = cases::conv_cases()) {
  for (const auto& c : list) {
    if (c.name == name) return c;
  }
  throw std::logic_error("no conv case " + name);
}

class Conv2dCases : public ::testing::TestWithParam<cases::ConvCase> {};

TEST_P(Conv2dCases, ExactAgainstFloat64Reference) {
  REQUIRE_GPU();
  const cases::ConvCase& c = GetParam();
  if (c.kernel_cc == 90 && device_cc() != 90) GTEST_SKIP() << "SM90 conv kernels need an SM90 GPU";
  gk::Conv2d plan = cases::conv_plan(c, device_cc());
  ConvRun run(c);
  run.run_on_device(plan);
  const auto cmp = run.compare();
  EXPECT_EQ(cmp.checked, run.D.rows() * run.D.cols());
  EXPECT_EQ(cmp.max_abs_error, 0.0) << c.name << " with " << cases::conv_spec(c, device_cc()).name();
  // The family the case asked for, and no other, ran it.
  EXPECT_EQ(plan.kernel_cc(), c.kernel_cc);
}

INSTANTIATE_TEST_SUITE_P(All, Conv2dCases, ::testing::ValuesIn(cases::conv_cases()),
                         [](const ::testing::TestParamInfo<cases::ConvCase>& info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(Sm90, Conv2dCases, ::testing::ValuesIn(cases::conv90_cases()),
                         [](const ::testing::TestParamInfo<cases::ConvCase>& info) { return info.param.name; });

// On an SM90 GPU a default plan takes the SM90 family; a problem only the 2.x kernels run (a stride-2 dgrad) runs
// on them, exactly, while a plan given kernel_cc=90 refuses it before anything runs, naming kernel_cc=80.
TEST(Conv2dSm90Gpu, DefaultsToSm90AndRefusesWhatOnlySm80RunsNamingKernelCc80) {
  REQUIRE_GPU();
  if (device_cc() != 90) GTEST_SKIP() << "SM90 conv kernels need an SM90 GPU";
  cases::ConvCase c = {"dgrad_stride2",   gk::ConvKind::Dgrad, gk::DataType::f16,
                       gk::DataType::f16, gk::DataType::f32,   cases::conv_shape(2, 12, 10, 16, 32, 3, 3, 2, 1)};
  gk::Conv2dOptions defaults;
  defaults.kind = c.kind;
  defaults.element = gk::DataType::f16;
  defaults.element_accumulator = gk::DataType::f32;
  gk::Conv2d plan(defaults);
  EXPECT_EQ(plan.kernel_cc(), 90);
  ConvRun served(c);
  served.run_on_device(plan);  // on the 2.x kernels, said once on stderr
  EXPECT_EQ(served.compare().max_abs_error, 0.0);

  gk::Conv2dOptions strict = defaults;
  strict.kernel_cc = 90;
  gk::Conv2d pinned(strict);
  ConvRun refused(c);
  try {
    refused.run_on_device(pinned);
    FAIL() << "expected a ConfigError or TensorError";
  } catch (const gk::Error& e) {  // a ConfigError or TensorError, as the plan's header says
    EXPECT_NE(std::string(e.what()).find("kernel_cc=80"), std::string::npos) << e.what();
  }
  c.kernel_cc = 80;
  gk::Conv2d sm80 = cases::conv_plan(c, device_cc());
  ConvRun run(c);
  run.run_on_device(sm80);
  EXPECT_EQ(run.compare().max_abs_error, 0.0);
}

TEST(Conv2dGpu, HostTensorsAreStagedAndTheResultLandsBeforeReturn) {
  REQUIRE_GPU();
  const cases::ConvCase c = cases::conv_cases().front();
  gk::Conv2d plan = cases::conv_plan(c, device_cc());
  ConvRun run(c);
  const auto vA = gk::verify::conv_view(run.A, c.shape.a(c.kind));
  const auto vB = gk::verify::conv_view(run.B, c.shape.b(c.kind));
  const auto vD = gk::verify::conv_view(run.D, c.shape.d(c.kind));
  plan.run(vA, vB, nullptr, vD, c.shape.geometry);
  EXPECT_EQ(run.compare().max_abs_error, 0.0);
}

// A strided 1x1 fprop runs as a GEMM over interleaved batches of x and y: from host tensors too (x's staged span ends
// inside the tensor, y is written whole), with C and beta.
TEST(Conv2dSm90Gpu, StridedPointwiseFpropRunsFromHostTensors) {
  REQUIRE_GPU();
  if (device_cc() != 90) GTEST_SKIP() << "the GEMM route is kernel_cc 90's";
  const cases::ConvCase c = find_case("fprop_f16_1x1_stride2", cases::conv90_cases());
  gk::Conv2d plan = cases::conv_plan(c, device_cc());
  ConvRun run(c);
  const auto vA = gk::verify::conv_view(run.A, c.shape.a(c.kind));
  const auto vB = gk::verify::conv_view(run.B, c.shape.b(c.kind));
  const auto vC = gk::verify::conv_view(run.C, c.shape.d(c.kind));
  const auto vD = gk::verify::conv_view(run.D, c.shape.d(c.kind));
  EXPECT_EQ(plan.spec_for(vA, vB, &vC, vD, c.shape.geometry, c.beta).family, gk::KernelFamily::Sm90Collective);
  plan.run(vA, vB, &vC, vD, c.shape.geometry, c.alpha, c.beta);
  EXPECT_EQ(run.compare().max_abs_error, 0.0);
}

TEST(Conv2dGpu, OnePlanRunsManyProblemsAndPicksKernelsPerProblem) {
  REQUIRE_GPU();
  // One f16 fprop plan over shapes that need other vectors (12 channels) and filters (1x1, 7x7 with stride 2).
  const auto all = cases::conv_cases();
  gk::Conv2d plan = cases::conv_plan(all.front(), device_cc());
  for (const char* name : {"fprop_f16_3x3", "fprop_f16_channels12", "fprop_f16_7x7_stride2", "fprop_f16_1x1"}) {
    for (const auto& c : all) {
      if (c.name != name) continue;
      ConvRun run(c);
      run.run_on_device(plan);
      EXPECT_EQ(run.compare().max_abs_error, 0.0) << name;
    }
  }
}

// One parallel split-K kernel, the slice count a run-time argument: counts that divide N*P*Q's steps of the tile's K
// and counts that do not, more slices than steps (the empty ones add zeros); beta and ReLU after the reduction.
TEST(Conv2dGpu, ParallelSplitKIsExactForAnySliceCount) {
  REQUIRE_GPU();
  cases::ConvCase c = find_case("wgrad_f16_parallel5_relu_beta");
  gk::Conv2d plan = cases::conv_plan(c, device_cc());
  for (int slices : {2, 3, 5, 7, 16, 40, 200}) {
    plan.set_split_k(gk::SplitKMode::Parallel, slices);
    ConvRun run(c);
    run.run_on_device(plan);
    EXPECT_EQ(run.split, (gk::Conv2dSplitK{gk::SplitKMode::Parallel, slices}));
    const auto cmp = run.compare();
    EXPECT_EQ(cmp.checked, run.D.rows() * run.D.cols());
    EXPECT_EQ(cmp.max_abs_error, 0.0) << slices << " slices";
  }
}

// Without a split-K setting run() splits a wgrad whose output is under a wave of CTAs, in parallel; a mode with no
// count gets the count chosen; a forced serial count is kept.
TEST(Conv2dGpu, RunChoosesTheSplitAndStaysExact) {
  REQUIRE_GPU();
  for (const char* name : {"wgrad_f16_auto_split", "wgrad_bf16_parallel_auto_count", "wgrad_f16_split_k3"}) {
    const cases::ConvCase c = find_case(name);
    gk::Conv2d plan = cases::conv_plan(c, device_cc());
    ConvRun run(c);
    run.run_on_device(plan);
    EXPECT_EQ(run.split.mode, c.split_k_mode.value_or(gk::SplitKMode::Parallel)) << name;
    EXPECT_GT(run.split.slices, c.split_k_slices > 0 ? c.split_k_slices - 1 : 1) << name;
    EXPECT_EQ(run.compare().max_abs_error, 0.0) << name;
  }
}

TEST(Conv2dGpu, StridedDgradWithDilationIsRefusedBeforeAnythingRuns) {
  REQUIRE_GPU();
  cases::ConvCase c = {"dgrad_refused",   gk::ConvKind::Dgrad, gk::DataType::f16,
                       gk::DataType::f16, gk::DataType::f32,   cases::conv_shape(1, 12, 12, 16, 16, 3, 3, 2, 2, 2)};
  gk::Conv2d plan = cases::conv_plan(c, device_cc());
  ConvRun run(c);
  try {
    run.run_on_device(plan);
    FAIL() << "expected a ConfigError";
  } catch (const gk::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("dilation 1 only"), std::string::npos) << e.what();
  }
}

}  // namespace
