// tests/unit/front_door_rules_test.cpp: the front-door rules the fuzzer (fuzz_front_door_test.cpp) found missing or
// wrong, one example each: what is refused (naming the operand) and what is accepted.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"
#include "support/cli.hpp"

namespace gk = gemmkit;

namespace {

// Views at a fake 256-byte aligned address: the checks never dereference them.
void* base(std::int64_t byte_offset = 0) {
  alignas(256) static char bytes[256];
  return bytes + byte_offset;
}

gk::TensorView view(gk::DataType t, std::initializer_list<std::int64_t> shape,
                    std::initializer_list<std::int64_t> strides, std::int64_t byte_offset = 0) {
  return gk::TensorView::strided(base(byte_offset), t, shape, strides, 0);
}

gk::TensorView row(gk::DataType t, std::int64_t rows, std::int64_t cols) {
  return gk::TensorView::on_gpu(base(), t, {rows, cols});
}

// The message of the TensorError spec_for throws, or "" when it returns a kernel.
std::string refusal(gk::Gemm& plan, const gk::TensorView& A, const gk::TensorView& B, const gk::TensorView* C,
                    const gk::TensorView& D, double beta = 0.0) {
  try {
    plan.spec_for(A, B, C, D, beta);
    return "";
  } catch (const gk::TensorError& e) {
    return e.what();
  }
}

::testing::AssertionResult StartsWith(const std::string& text, const std::string& prefix) {
  if (text.rfind(prefix, 0) == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not start with '" << prefix << "'";
}

const gk::DataType f16 = gk::DataType::f16;

}  // namespace

TEST(FrontDoorRules, ARankBeyondTheViewIsRefusedWithoutReadingPastIt) {
  gk::Gemm plan(gk::testing::f16_row(90));
  gk::TensorView A = row(f16, 64, 64);
  A.rank = gk::kMaxRank + 1;
  EXPECT_TRUE(StartsWith(refusal(plan, A, row(f16, 64, 64), nullptr, row(f16, 64, 64)),
                         "Tensor A: must be of rank 2 to 6 (a matrix, or a batch of matrices); received rank 7"));
}

TEST(FrontDoorRules, ASpanPast2To63IsRefusedNotWrapped) {
  gk::Gemm plan(gk::testing::f16_row(90));
  const auto huge =
      view(f16, {std::int64_t{1} << 40, 3, 64, 64}, {std::int64_t{3} << 40, std::int64_t{1} << 40, 64, 1});
  EXPECT_TRUE(StartsWith(refusal(plan, huge, row(f16, 64, 64), nullptr, row(f16, 64, 64)),
                         "Tensor A: has shape (1099511627776, 3, 64, 64)"));
}

TEST(FrontDoorRules, ExtentOneBatchDimensionsTakeAnyStride) {
  gk::Gemm plan(gk::testing::f16_row(90));
  // (3, 1, 64, 64) whose extent-1 dimension has a stride no reshape would give it, as torch's unsqueeze/expand do.
  const auto A = view(f16, {3, 1, 64, 64}, {4096, 12345, 64, 1});
  EXPECT_EQ(refusal(plan, A, row(f16, 64, 64), nullptr, view(f16, {3, 64, 64}, {4096, 64, 1})), "");
}

TEST(FrontDoorRules, EmptyOutputsAreAcceptedAndKZeroIsRefused) {
  gk::Gemm plan(gk::testing::f16_row(90));
  EXPECT_EQ(refusal(plan, row(f16, 0, 64), row(f16, 64, 64), nullptr, row(f16, 0, 64)), "");
  // A batch of 0 against a single B broadcasts to 0 matrices, not 1.
  EXPECT_EQ(refusal(plan, view(f16, {0, 64, 64}, {4096, 64, 1}), row(f16, 64, 64), nullptr,
                    view(f16, {0, 64, 64}, {4096, 64, 1})),
            "");
  EXPECT_TRUE(StartsWith(refusal(plan, row(f16, 64, 0), view(f16, {0, 64}, {64, 1}), nullptr, row(f16, 64, 64)),
                         "Tensors A and B: K is 0"));
}

TEST(FrontDoorRules, OverlappingBatchesOfDAreRefused) {
  gk::Gemm plan(gk::testing::f16_row(90));
  const auto A = view(f16, {3, 64, 64}, {4096, 64, 1});
  const auto D = view(f16, {3, 64, 64}, {0, 64, 1});  // every batch writes the same matrix
  EXPECT_TRUE(StartsWith(refusal(plan, A, row(f16, 64, 64), nullptr, D), "Tensor D: its batch stride 0"));
  // The same strides are a broadcast read for A.
  EXPECT_EQ(refusal(plan, D, row(f16, 64, 64), nullptr, A), "");
  // Batches interleaved within D's rows (3 x 64 columns side by side in rows of 192) do not overlap; one element
  // less of leading dimension, or a batch stride under a row's 64, and they would.
  EXPECT_EQ(refusal(plan, A, row(f16, 64, 64), nullptr, view(f16, {3, 64, 64}, {64, 192, 1})), "");
  EXPECT_TRUE(StartsWith(refusal(plan, A, row(f16, 64, 64), nullptr, view(f16, {3, 64, 64}, {64, 191, 1})),
                         "Tensor D: its batch stride 64"));
  EXPECT_TRUE(StartsWith(refusal(plan, A, row(f16, 64, 64), nullptr, view(f16, {3, 64, 64}, {63, 192, 1})),
                         "Tensor D: its batch stride 63"));
}

TEST(FrontDoorRules, DsBatchErrorNamesDWhenThereIsNoC) {
  gk::Gemm plan(gk::testing::f16_row(90));
  EXPECT_TRUE(
      StartsWith(refusal(plan, row(f16, 64, 64), row(f16, 64, 64), nullptr, view(f16, {4, 64, 64}, {4096, 64, 1})),
                 "Tensor D has a batch of 4"));
}

TEST(FrontDoorRules, TheContiguousExtentMustFitTheVectorToo) {
  gk::Gemm plan(gk::testing::f16_row(90));
  // K = 20 with a leading dimension of 32: CUTLASS reads rows of K in vectors, so 8-element vectors do not fit.
  const auto A = view(f16, {64, 20}, {32, 1});
  const gk::KernelSpec s = plan.spec_for(A, view(f16, {20, 64}, {64, 1}), nullptr, row(f16, 64, 64));
  EXPECT_EQ(s.alignment_a, 4);
  EXPECT_EQ(s.alignment_b, 8);
}

TEST(FrontDoorRules, Sm90FusedEpiloguesNeedSixteenByteCAndDAndSaySoForD) {
  gk::Gemm plan(gk::testing::f16_row(90));
  plan.set_activation(gk::Activation::ReLU);
  const auto D = view(f16, {64, 60}, {60, 1});  // N = 60: 4-element vectors at most
  // Left to gemmkit, the kernel generation gives way: CUTLASS 2.x tensor-op kernels fuse the activation with narrower
  // stores.
  const gk::KernelSpec twin = plan.spec_for(row(f16, 64, 64), view(f16, {64, 60}, {64, 1}), nullptr, D);
  EXPECT_EQ(twin.kernel_cc, 80);
  EXPECT_EQ(twin.opclass, gk::OpClass::TensorOp);
  plan.set_opclass(gk::OpClass::TensorOp);  // chosen, it is kept, and the vectors' rule is the error
  EXPECT_TRUE(StartsWith(refusal(plan, row(f16, 64, 64), view(f16, {64, 60}, {64, 1}), nullptr, D),
                         "Tensor D: its leading dimension 60"));
  // An f64 C has no 16-byte vector in these kernels: the plan is refused when the activation is set.
  gk::GemmOptions o = gk::testing::f16_row(90);
  o.element_c = gk::DataType::f64;
  o.element_d = gk::DataType::f32;
  gk::Gemm f64_c(o);
  EXPECT_THROW(f64_c.set_activation(gk::Activation::ReLU), gk::ConfigError);
  EXPECT_EQ(f64_c.activation(), gk::Activation::Identity);
}

TEST(FrontDoorRules, DOfAnotherWidthThanCIsCheckedInCsVectorBytes) {
  gk::GemmOptions o = gk::testing::f16_row(90);
  o.element_c = gk::DataType::f32;  // C in 4 x f32 vectors: D (f16) is stored in 8 x f16 vectors of the same 16 bytes
  gk::Gemm plan(o);
  const auto C = view(gk::DataType::f32, {64, 64}, {64, 1});
  auto alignment_c = [&](std::int64_t ld_d) {
    return plan.spec_for(row(f16, 64, 64), row(f16, 64, 64), &C, view(f16, {64, 64}, {ld_d, 1}), 1.0).alignment_c;
  };
  EXPECT_EQ(alignment_c(72), 4);  // 8 f16 per row step: the widest
  EXPECT_EQ(alignment_c(68), 2);  // 4 f16: 8-byte vectors, C's 2 x f32
}

TEST(FrontDoorRules, AMisalignedDeviceBiasIsRefusedBeforeAnythingRuns) {
  gk::Gemm plan(gk::testing::f16_row(90));
  plan.set_bias(gk::BiasMode::PerColumn);
  const auto bias = gk::TensorView::on_gpu(base(1), f16, {64}, gk::Layout::RowMajor);
  gk::RunOptions options;
  options.bias = &bias;
  try {
    plan.run(row(f16, 64, 64), row(f16, 64, 64), nullptr, row(f16, 64, 64), 1.0, 0.0, options);
    FAIL() << "expected a TensorError";
  } catch (const gk::TensorError& e) {
    EXPECT_TRUE(StartsWith(e.what(), "Tensor bias: its address is not a multiple of 2 bytes"));
  }
}
