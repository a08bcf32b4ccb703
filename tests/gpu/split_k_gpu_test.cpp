// tests/gpu/split_k_gpu_test.cpp: split-K and the Stream-K decompositions on SM90 kernels, exact on small-integer data:
// several split counts (none dividing K's steps), both reduction modes, beta != 0 and a fused ReLU that must see the
// full sum (partial sums of the other sign), the automatic choice for long-K and decode shapes (these run transposed on
// a narrow tile), and CUDA graphs
// replayed with their own workspace (parallel split-K too: its reduction is a programmatic dependent launch).
// Kernels: gemmkit_gpu_prebuild --only splitk.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gemmkit/cache.hpp"
#include "gemmkit/device.hpp"
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
  explicit Operands(const cases::Shape& s, gk::Layout layout = gk::Layout::RowMajor)
      : A(gk::DataType::f16, s.m, s.k, layout),
        B(gk::DataType::f16, s.k, s.n, layout),
        C(gk::DataType::f16, s.m, s.n, layout),
        D(gk::DataType::f16, s.m, s.n, layout) {}
  void fill_integers() {
    A.fill_integers(61, -3, 3);
    B.fill_integers(62, -3, 3);
    C.fill_integers(63, -8, 8);
  }
  // A in [1, 3]; B's rows negative in the first half of K and positive in the second: every partial sum of the first
  // half is negative while the full sum may be positive, so a ReLU applied to a partial sum (before the reduction)
  // would zero what the reference keeps.
  void fill_sign_split() {
    A.fill_integers(64, 1, 3);
    B.fill_integers(65, 1, 2);
    for (long k = 0; k < B.rows() / 2; ++k) {
      for (long n = 0; n < B.cols(); ++n) B.set(0, k, n, -B.get(0, k, n));
    }
    C.fill_integers(66, -2, 2);
  }
};

// D = act(A@B + beta C) through device tensors; the comparison with the float64 reference (D's rounding) on every
// element, or on `samples` of them.
gk::verify::Comparison run_exact(gk::Gemm& plan, Operands& o, double beta, long samples = 0) {
  DeviceBuffer dA(o.A), dB(o.B), dC(o.C), dD(o.D);
  gk::RunOptions wait;
  wait.wait_for_best = true;  // the kernel chosen for the shape, not a stand-in while it compiles
  plan.run(dA.view_like(o.A), dB.view_like(o.B), dC.view_like(o.C), dD.view_like(o.D), 1.0, beta, wait);
  dD.copy_to(o.D);
  const gk::verify::Epilogue epilogue{plan.activation(), plan.activation_parameter(), nullptr, gk::BiasMode::None};
  return gk::verify::compare_with_reference(o.A, o.B, &o.C, o.D, 1.0, beta, samples, 1, epilogue);
}

// The same with a per-column bias of small integers (exact in f16), added before the activation.
gk::verify::Comparison run_exact_with_bias(gk::Gemm& plan, Operands& o, double beta) {
  HostMatrix bias(gk::DataType::f16, 1, o.D.cols(), gk::Layout::RowMajor);
  bias.fill_integers(67, -4, 4);
  DeviceBuffer dA(o.A), dB(o.B), dC(o.C), dD(o.D), dBias(bias);
  const gk::TensorView bias_view = gk::TensorView::on_gpu(dBias.get(), gk::DataType::f16, {bias.cols()});
  gk::RunOptions wait;
  wait.wait_for_best = true;
  wait.bias = &bias_view;
  plan.run(dA.view_like(o.A), dB.view_like(o.B), dC.view_like(o.C), dD.view_like(o.D), 1.0, beta, wait);
  dD.copy_to(o.D);
  const gk::verify::Epilogue epilogue{plan.activation(), plan.activation_parameter(), &bias, gk::BiasMode::PerColumn};
  return gk::verify::compare_with_reference(o.A, o.B, &o.C, o.D, 1.0, beta, 0, 1, epilogue);
}

gk::KSplit k_split_of(gk::Gemm& plan, const Operands& o) {
  const gk::TensorView C = o.C.view();
  return plan.k_split_for(o.A.view(), o.B.view(), &C, o.D.view(), 1.0);
}

std::string kernel_of(gk::Gemm& plan, const Operands& o) {
  const gk::TensorView C = o.C.view();
  return plan.spec_for(o.A.view(), o.B.view(), &C, o.D.view(), 1.0).name();
}

}  // namespace

TEST(GpuSplitK, EverySplitCountAndReductionModeIsExactWithBetaAndReluAfterTheReduction) {
  REQUIRE_CC(90, "SM90 Stream-K kernels");
  gk::Gemm plan = cases::split_k_plan(device_cc(), gk::Activation::ReLU);
  for (const gk::ReductionMode reduction : {gk::ReductionMode::Deterministic, gk::ReductionMode::Nondeterministic}) {
    plan.set_reduction_mode(reduction);
    for (const int splits : {2, 3, 5, 8, 16}) {
      plan.set_split_k_slices(splits);
      const std::string what = std::to_string(splits) + " splits, " + std::string(gk::to_string(reduction));
      Operands sign(cases::kSplitKShape);
      sign.fill_sign_split();
      ASSERT_EQ(k_split_of(plan, sign), (gk::KSplit{gk::Decomposition::SplitK, splits})) << what;
      EXPECT_EQ(run_exact(plan, sign, 1.0).max_abs_error, 0.0) << what << " " << kernel_of(plan, sign);
      Operands mixed(cases::kSplitKShape);
      mixed.fill_integers();
      EXPECT_EQ(run_exact(plan, mixed, 2.0).max_abs_error, 0.0) << what;
    }
  }
}

// Host only: the data of the test above has outputs positive overall though every first-half partial sum is negative.
TEST(GpuSplitK, TheReluDataWouldCatchAnActivationBeforeTheReduction) {
  Operands o(cases::kSplitKShape);
  o.fill_sign_split();
  long positive = 0;
  for (long i = 0; i < o.A.rows(); ++i) {
    for (long j = 0; j < o.B.cols(); ++j) {
      double first_half = 0.0, total = 0.0;
      for (long k = 0; k < o.A.cols(); ++k) {
        const double p = o.A.get(0, i, k) * o.B.get(0, k, j);
        total += p;
        if (k < o.A.cols() / 2) first_half += p;
      }
      EXPECT_LT(first_half, 0.0);
      if (total + o.C.get(0, i, j) > 0) ++positive;
    }
  }
  EXPECT_GT(positive, o.D.rows() * o.D.cols() / 4);
  EXPECT_LT(positive, o.D.rows() * o.D.cols() * 3 / 4);
}

TEST(GpuSplitK, ForcedDecompositionsRunTheSameKernelExactly) {
  REQUIRE_CC(90, "SM90 Stream-K kernels");
  gk::Gemm plan = cases::split_k_plan(device_cc(), gk::Activation::ReLU);
  plan.set_split_k_slices(2);
  Operands first(cases::kSplitKShape);
  first.fill_sign_split();
  ASSERT_EQ(run_exact(plan, first, 1.0).max_abs_error, 0.0);
  const std::string kernel = kernel_of(plan, first);
  for (const gk::Decomposition mode :
       {gk::Decomposition::DataParallel, gk::Decomposition::StreamK, gk::Decomposition::Heuristic}) {
    plan.set_decomposition(mode);
    Operands o(cases::kSplitKShape);
    o.fill_sign_split();
    EXPECT_EQ(kernel_of(plan, o), kernel);  // the same kernel: the decomposition is a run-time argument
    EXPECT_EQ(k_split_of(plan, o), (gk::KSplit{mode, 1}));
    EXPECT_EQ(run_exact(plan, o, 1.0).max_abs_error, 0.0) << gk::to_string(mode);
  }
}

// The lean epilogue under the Stream-K scheduler (the quick twin that stands in while a split-K kernel builds): the
// per-column bias and the ReLU after the full reduction, every decomposition and both reduction modes.
TEST(GpuSplitK, TheLeanStreamKTwinIsExactInEveryDecomposition) {
  REQUIRE_CC(90, "SM90 Stream-K kernels");
  gk::Gemm plan = cases::lean_split_k_plan(device_cc());
  Operands first(cases::kSplitKShape);
  first.fill_sign_split();
  const std::string kernel = kernel_of(plan, first);
  ASSERT_NE(kernel.find("lean"), std::string::npos) << kernel;
  // Split-K is chosen through its split count; the other decompositions by name.
  const std::vector<std::pair<gk::Decomposition, int>> settings = {
      {gk::Decomposition::SplitK, 2},  {gk::Decomposition::SplitK, 3},       {gk::Decomposition::SplitK, 8},
      {gk::Decomposition::StreamK, 1}, {gk::Decomposition::DataParallel, 1}, {gk::Decomposition::Heuristic, 1}};
  for (const gk::ReductionMode reduction : {gk::ReductionMode::Deterministic, gk::ReductionMode::Nondeterministic}) {
    plan.set_reduction_mode(reduction);
    for (const auto& [mode, splits] : settings) {
      mode == gk::Decomposition::SplitK ? plan.set_split_k_slices(splits) : plan.set_decomposition(mode);
      const std::string what = std::string(gk::to_string(mode)) + ", " + std::to_string(splits) + " splits, " +
                               std::string(gk::to_string(reduction));
      for (const bool sign_split : {true, false}) {
        Operands o(cases::kSplitKShape);
        sign_split ? o.fill_sign_split() : o.fill_integers();
        EXPECT_EQ(kernel_of(plan, o), kernel) << what;
        EXPECT_EQ(k_split_of(plan, o), (gk::KSplit{mode, splits})) << what;
        EXPECT_EQ(run_exact_with_bias(plan, o, sign_split ? 1.0 : 2.0).max_abs_error, 0.0) << what;
      }
    }
  }
}

TEST(GpuSplitK, AutomaticChoiceForLongKAndDecodeShapes) {
  REQUIRE_CC(90, "SM90 Stream-K kernels");
  gk::Gemm plan = cases::split_k_plan(device_cc(), gk::Activation::Identity);
  const int sms = gk::device_info(gk::current_device()).sm_count;
  for (const cases::Shape& s : cases::split_k_auto_shapes()) {
    Operands o(s);
    o.fill_integers();
    const gk::KSplit split = k_split_of(plan, o);
    const std::string what = std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) + " " +
                             std::string(gk::to_string(split.mode)) + " " + std::to_string(split.splits);
    if (s.m <= 16) {  // decode shapes run transposed on the narrow tile (GpuSplitK.DecodeShapesRunTransposedExactly)
      EXPECT_EQ(split.mode, gk::Decomposition::DataParallel) << what;
      EXPECT_NE(kernel_of(plan, o).find("x16x64_"), std::string::npos) << what << " " << kernel_of(plan, o);
    } else if (s.m == 128) {  // one wave of 64 x 64
      EXPECT_EQ(split.mode, gk::Decomposition::DataParallel) << what;
    } else if (sms >= 128) {
      EXPECT_EQ(split.mode, gk::Decomposition::SplitK) << what;
      EXPECT_GE(split.splits, 2) << what;
    }
    EXPECT_EQ(run_exact(plan, o, 1.0, 20000).max_abs_error, 0.0) << what << " " << kernel_of(plan, o);
  }
}

// Decode shapes (at most 16 rows) run as D^T = B^T A^T on the narrow tile, the tokens in its 16 columns: exact for 1,
// 8 and 16 rows, in clusters of four (64 tiles of the weights' rows) and of two (128), with beta != 0, and with a
// per-column bias (a per-row one of the transposed kernel) and a ReLU.
TEST(GpuSplitK, DecodeShapesRunTransposedExactly) {
  REQUIRE_CC(90, "SM90 kernels");
  for (const bool bias_relu : {false, true}) {
    gk::Gemm plan = cases::decode_plan(device_cc(), bias_relu);
    for (const cases::Shape& s : cases::decode_shapes()) {
      if (bias_relu && s.n != cases::decode_shapes().front().n) continue;  // one kernel with the bias
      Operands o(s);
      o.fill_integers();
      const std::string kernel = kernel_of(plan, o);
      const std::string what = std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) + " " +
                               kernel + (bias_relu ? " bias+relu" : "");
      EXPECT_NE(kernel.find("_nnn_"), std::string::npos) << what;  // the transposed problem's layouts
      for (const double beta : {0.0, 1.0}) {
        const gk::verify::Comparison c = bias_relu ? run_exact_with_bias(plan, o, beta) : run_exact(plan, o, beta);
        EXPECT_EQ(c.max_abs_error, 0.0) << what << ", beta " << beta;
      }
    }
  }
}

// Parallel split-K: the partial sums of every K slice, then one reduction kernel with the whole epilogue. The
// sign-split data would catch an activation or a bias applied to a partial sum; beta != 0 reads C in the reduction.
TEST(GpuSplitK, ParallelSplitKIsExactWithTheWholeEpilogueAfterTheReduction) {
  REQUIRE_CC(90, "SM90 Stream-K kernels");
  for (const gk::Layout layout : {gk::Layout::RowMajor, gk::Layout::ColumnMajor}) {
    for (const gk::Activation activation : cases::parallel_split_k_activations()) {
      gk::Gemm plan = cases::parallel_split_k_plan(device_cc(), activation, layout);
      Operands o(cases::kParallelSplitKShape, layout);
      o.fill_sign_split();
      HostMatrix bias(gk::DataType::f16, 1, o.D.rows(), gk::Layout::RowMajor);
      bias.fill_integers(67, -4, 4);
      const auto bias_view = gk::TensorView::host(const_cast<void*>(bias.data()), bias.dtype(), {bias.cols()});
      const std::string what = std::string(gk::to_string(layout)) + " " + std::string(gk::to_string(activation));
      const gk::TensorView C = o.C.view();
      const gk::KernelSpec spec = plan.spec_for(o.A.view(), o.B.view(), &C, o.D.view(), 1.0);
      ASSERT_EQ(spec.split_k_mode, gk::SplitKMode::Parallel) << what << " " << spec.name();
      const gk::KSplit split = plan.k_split_for(o.A.view(), o.B.view(), &C, o.D.view(), 1.0);
      ASSERT_GE(split.splits, 2) << what;
      gk::RunOptions options;
      options.bias = &bias_view;
      options.wait_for_best = true;  // the parallel kernel itself, not the serial one while it builds
      for (const double beta : {1.0, 2.0}) {
        plan.run(o.A.view(), o.B.view(), &C, o.D.view(), 1.0, beta, options);
        const gk::verify::Epilogue epilogue{plan.activation(), plan.activation_parameter(), &bias,
                                            gk::BiasMode::PerRow};
        EXPECT_EQ(gk::verify::compare_with_reference(o.A, o.B, &o.C, o.D, 1.0, beta, 0, 1, epilogue).max_abs_error, 0.0)
            << what << ", beta " << beta << ", " << split.splits << " slices, " << spec.name();
      }
      EXPECT_EQ(plan.running_kernel_name(o.A.view(), o.B.view(), &C, o.D.view(), 1.0), spec.name()) << what;
    }
  }
}

// Captures one run of `plan` (D = act(A@B + C + bias)) into a CUDA graph and replays it three times, each replay
// exact: its own workspace (a graph memory node) and barriers reset; for parallel split-K, the reduction launched as
// the GEMM's programmatic dependent.
void replay_captured(gk::Gemm& plan, Operands& o, const HostMatrix* bias = nullptr) {
  DeviceBuffer dA(o.A), dB(o.B), dC(o.C), dD(o.D);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  std::optional<DeviceBuffer> d_bias;
  std::optional<gk::TensorView> bias_view;
  gk::RunOptions options;
  if (bias != nullptr) {
    d_bias.emplace(*bias);
    bias_view = d_bias->view_like(*bias);
    options.bias = &*bias_view;
  }
  options.stream = stream;
  options.sync = false;
  options.wait_for_best = true;  // loads the chosen kernel itself, so that the graph captures it
  plan.run(dA.view_like(o.A), dB.view_like(o.B), dC.view_like(o.C), dD.view_like(o.D), 1.0, 1.0, options);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(plan.running_kernel_name(o.A.view(), o.B.view(), nullptr, o.D.view()), kernel_of(plan, o));
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  plan.run(dA.view_like(o.A), dB.view_like(o.B), dC.view_like(o.C), dD.view_like(o.D), 1.0, 1.0, options);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  const gk::verify::Epilogue epilogue{plan.activation(), plan.activation_parameter(), bias,
                                      bias != nullptr ? gk::BiasMode::PerRow : gk::BiasMode::None};
  for (int replay = 0; replay < 3; ++replay) {
    ASSERT_EQ(cudaMemsetAsync(dD.get(), 0, dD.bytes(), stream), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    dD.copy_to(o.D);
    EXPECT_EQ(gk::verify::compare_with_reference(o.A, o.B, &o.C, o.D, 1.0, 1.0, 0, 1, epilogue).max_abs_error, 0.0)
        << "replay " << replay << " of " << kernel_of(plan, o);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST(GpuSplitK, CapturedIntoAGraphAndReplayed) {
  REQUIRE_CC(90, "SM90 Stream-K kernels");
  gk::Gemm plan = cases::split_k_plan(device_cc(), gk::Activation::ReLU);
  plan.set_split_k_slices(5);
  Operands o(cases::kSplitKShape);
  o.fill_sign_split();
  replay_captured(plan, o);
}

TEST(GpuSplitK, ParallelSplitKCapturedIntoAGraphAndReplayed) {
  REQUIRE_CC(90, "SM90 Stream-K kernels");
  gk::Gemm plan = cases::parallel_split_k_plan(device_cc(), gk::Activation::ReLU, gk::Layout::RowMajor);
  Operands o(cases::kParallelSplitKShape);
  o.fill_sign_split();
  ASSERT_EQ(plan.spec_for(o.A.view(), o.B.view(), nullptr, o.D.view()).split_k_mode, gk::SplitKMode::Parallel);
  HostMatrix bias(gk::DataType::f16, 1, o.D.rows(), gk::Layout::RowMajor);
  bias.fill_integers(68, -4, 4);
  replay_captured(plan, o, &bias);
}

// GEMMKIT_WAIT_FOR_BEST=1 does for parallel split-K what RunOptions::wait_for_best does: the first run() launches
// the parallel kernel itself (compiled or loaded there), not a serial stand-in while it builds in the background.
// It tests the knob where the parallel kernel is not in the cache yet (a fresh GEMMKIT_CACHE_DIR, no prebuild).
TEST(GpuSplitK, WaitForBestKnobRunsTheParallelKernelOnTheFirstRun) {
  REQUIRE_CC(90, "SM90 Stream-K kernels");
  gk::Gemm plan = cases::parallel_split_k_plan(device_cc(), gk::Activation::Identity, gk::Layout::RowMajor);
  Operands o(cases::kParallelSplitKShape);
  o.fill_integers();
  HostMatrix bias(gk::DataType::f16, 1, o.D.rows(), gk::Layout::RowMajor);  // the case's plans add a per-row bias
  bias.fill_integers(68, -4, 4);
  const auto bias_view = gk::TensorView::host(const_cast<void*>(bias.data()), bias.dtype(), {bias.cols()});
  gk::RunOptions options;
  options.bias = &bias_view;
  const gk::TensorView C = o.C.view();
  const gk::KernelSpec spec = plan.spec_for(o.A.view(), o.B.view(), &C, o.D.view(), 1.0);
  ASSERT_EQ(spec.split_k_mode, gk::SplitKMode::Parallel) << spec.name();
  ASSERT_EQ(setenv("GEMMKIT_WAIT_FOR_BEST", "1", 1), 0);
  const gk::CacheCounters before = gk::cache_counters();
  plan.run(o.A.view(), o.B.view(), &C, o.D.view(), 1.0, 1.0, options);
  const gk::CacheCounters after = gk::cache_counters();
  unsetenv("GEMMKIT_WAIT_FOR_BEST");
  EXPECT_EQ(plan.running_kernel_name(o.A.view(), o.B.view(), &C, o.D.view(), 1.0), spec.name());
  EXPECT_EQ(after.background_builds, before.background_builds);  // nothing left to build behind the caller's back
  const gk::verify::Epilogue epilogue{plan.activation(), plan.activation_parameter(), &bias, gk::BiasMode::PerRow};
  EXPECT_EQ(gk::verify::compare_with_reference(o.A, o.B, &o.C, o.D, 1.0, 1.0, 0, 1, epilogue).max_abs_error, 0.0);
}
