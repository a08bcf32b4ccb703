// tests/unit/conv2d_test.cpp: Conv2d without a GPU: the output-size rule and its errors, the plan's family and
// reference-format kernel names, the iterators and stride support run() picks per problem, the tensor checks
// (packed NHWC, groups = 1, alignment), the canonical record and the CLI's --conv (goldens of the rendered source:
// codegen_test.cpp). The SM90 family: conv2d_sm90_test.cpp; split-K: conv2d_split_k_test.cpp.
#include <gtest/gtest.h>

#include <string>
#include <type_traits>

#include "gemmkit/codegen.hpp"
#include "gemmkit/conv2d.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"
#include "support/cli.hpp"
#include "unit/conv2d_setup.hpp"

namespace gemmkit {
namespace {

using namespace conv2d_setup;

TEST(Conv2dOutputSize, FollowsTheFormulaWithStridePaddingAndDilation) {
  // P = (H + 2 pad - dil (R - 1) - 1) / stride + 1
  EXPECT_EQ(Conv2d::output_size({2, 56, 56, 64}, {128, 3, 3, 64}, {}), (Extent{2, 54, 54, 128}));
  EXPECT_EQ(Conv2d::output_size({2, 56, 56, 64}, {128, 3, 3, 64}, {{1, 1}, {1, 1}, {1, 1}}), (Extent{2, 56, 56, 128}));
  EXPECT_EQ(Conv2d::output_size({1, 224, 224, 3}, {64, 7, 7, 3}, {{2, 2}, {3, 3}, {1, 1}}), (Extent{1, 112, 112, 64}));
  EXPECT_EQ(Conv2d::output_size({1, 17, 9, 8}, {8, 3, 3, 8}, {{2, 1}, {1, 0}, {2, 3}}), (Extent{1, 8, 3, 8}));
  EXPECT_EQ(Conv2d::output_size({1, 5, 5, 8}, {8, 1, 1, 8}, {{2, 2}, {0, 0}, {1, 1}}), (Extent{1, 3, 3, 8}));
}

TEST(Conv2dOutputSize, RefusesEmptyOutputsGroupsAndBadGeometry) {
  EXPECT_NE(error_of([] {
              Conv2d::output_size({1, 4, 4, 8}, {8, 7, 7, 8}, {});
            }).find("larger than the padded input"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              Conv2d::output_size({1, 8, 8, 8}, {8, 3, 3, 8}, {{1, 1}, {0, 0}, {4, 4}});
            }).find("dilation 4 x 4"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              Conv2d::output_size({1, 8, 8, 8}, {8, 3, 3, 4}, {});
            }).find("groups = 1"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              Conv2d::output_size({1, 8, 8, 8}, {8, 3, 3, 8}, {{0, 1}, {0, 0}, {1, 1}});
            }).find("strides must be at least 1"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              Conv2d::output_size({1, 8, 8, 8}, {8, 3, 3, 8}, {{1, 1}, {-1, 0}, {1, 1}});
            }).find("padding must be at least 0"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              Conv2d::output_size({1, 8, 8, 8}, {8, 3, 3, 8}, {{1, 1}, {0, 0}, {1, 0}});
            }).find("dilations must be at least 1"),
            std::string::npos);
  EXPECT_THROW(Conv2d::output_size({1, 8, 8, 8}, {8, 3, 3, 4}, {}), ConfigError);
}

TEST(Conv2dPlan, UsesTheSm80FamilyWithTheReferenceNames) {
  Conv2d fprop(options(ConvKind::Fprop));
  EXPECT_EQ(fprop.spec().family, KernelFamily::Sm80Conv2d);
  EXPECT_EQ(fprop.kernel_cc(), 80);
  EXPECT_EQ(fprop.kernel_name(), "cutlass_sm80_tensorop_f16_s16x8x16fprop_analytic_f16_256x128_64x3_nhwc_align8");
  // On an SM90 GPU with kernel_cc=80.
  Conv2dOptions hopper80 = options(ConvKind::Fprop, DataType::f16, DataType::f32, 90);
  hopper80.kernel_cc = 80;
  Conv2d on_hopper(hopper80);
  EXPECT_EQ(on_hopper.spec().family, KernelFamily::Sm80Conv2d);
  EXPECT_EQ(on_hopper.kernel_cc(), 80);
  Conv2d wgrad(options(ConvKind::Wgrad, DataType::f32, DataType::f32));
  EXPECT_EQ(wgrad.kernel_name(), "cutlass_sm80_tensorop_s16x8x8tf32wgrad_analytic_256x128_32x3_nhwc_align4");
  Conv2d dgrad(options(ConvKind::Dgrad, DataType::f16, DataType::f16));
  EXPECT_EQ(dgrad.kernel_name(), "cutlass_sm80_tensorop_h16x8x16dgrad_analytic_256x128_64x3_nhwc_align8");
  dgrad.set_stride_support(StrideSupport::Unity);
  dgrad.set_iterator_algorithm(IteratorAlgorithm::Optimized);
  EXPECT_EQ(dgrad.kernel_name(), "cutlass_sm80_tensorop_h16x8x16dgrad_optimized_256x128_64x3_nhwc_unity_stride_align8");
  Conv2d simt(options(ConvKind::Fprop, DataType::f32, DataType::f32));
  simt.set_opclass(OpClass::Simt);
  simt.set_activation(Activation::ReLU);
  EXPECT_EQ(simt.kernel_name(), "cutlass_sm80_simt_sfprop_analytic_128x128_8x4_nhwc_align1_relu");
  Conv2d bf16(options(ConvKind::Fprop, DataType::bf16, DataType::f32));
  EXPECT_EQ(bf16.kernel_name(), "cutlass_sm80_tensorop_bf16_s16x8x16fprop_analytic_bf16_256x128_64x3_nhwc_align8");
}

TEST(Conv2dPlan, RefusesWhatNoConvKernelHas) {
  Conv2dOptions sm90_on_ampere = options(ConvKind::Fprop, DataType::f16, DataType::f32, 80);
  sm90_on_ampere.kernel_cc = 90;
  EXPECT_NE(error_of([&] { Conv2d plan(sm90_on_ampere); }).find("kernel_cc 90 is not available for cc 80"),
            std::string::npos);
  Conv2d plan(options(ConvKind::Fprop));
  EXPECT_THROW(plan.set_swizzling_functor(Swizzle::StreamK), ConfigError);
  EXPECT_NE(error_of([&] { plan.set_stride_support(StrideSupport::Unity); }).find("dgrad"), std::string::npos);
  plan.set_split_k(SplitKMode::Serial, 4);
  EXPECT_EQ(plan.split_k_slices(), 4);
  // A GEMM's settings and run do not exist on it (Conv2d is a Plan, not a Gemm).
  static_assert(!std::is_convertible_v<Conv2d*, Gemm*>);
  // f16 SIMT convs do not exist (f32 SIMT does).
  EXPECT_THROW(plan.set_opclass(OpClass::Simt), ConfigError);
}

TEST(Conv2dPlan, RunPicksOptimizedIteratorsAndDgradStrideSupportByProblem) {
  Conv2d fprop(options(ConvKind::Fprop));
  const Conv2dGeometry same{{1, 1}, {1, 1}, {1, 1}};
  KernelSpec spec = fprop.spec_for(tensor({2, 8, 8, 64}), tensor({32, 3, 3, 64}), nullptr, tensor({2, 8, 8, 32}), same);
  EXPECT_EQ(spec.conv->iterator_algorithm, IteratorAlgorithm::Optimized);
  EXPECT_EQ(spec.alignment_a, 8);
  EXPECT_EQ(spec.name().find("fprop_optimized"), spec.name().find("fprop"));
  // Channels of 12 allow vectors of 4 f16 only.
  spec = fprop.spec_for(tensor({2, 8, 8, 12}), tensor({32, 3, 3, 12}), nullptr, tensor({2, 8, 8, 32}), same);
  EXPECT_EQ(spec.alignment_a, 4);
  EXPECT_EQ(spec.alignment_b, 4);
  EXPECT_EQ(spec.alignment_c, 8);
  // A 33-wide filter is past the optimized iterators' masks.
  spec =
      fprop.spec_for(tensor({1, 40, 40, 8}), tensor({8, 33, 1, 8}), nullptr, tensor({1, 8, 40, 8}), Conv2dGeometry{});
  EXPECT_EQ(spec.conv->iterator_algorithm, IteratorAlgorithm::Analytic);
  fprop.set_iterator_algorithm(IteratorAlgorithm::Optimized);
  EXPECT_NE(
      error_of([&] {
        fprop.spec_for(tensor({1, 40, 40, 8}), tensor({8, 33, 1, 8}), nullptr, tensor({1, 8, 40, 8}), Conv2dGeometry{});
      }).find("Iterator algorithm optimized is invalid"),
      std::string::npos);

  Conv2d dgrad(options(ConvKind::Dgrad));
  // dgrad: A = dy (N,P,Q,K), B = w (K,R,S,C), D = dx (N,H,W,C).
  spec = dgrad.spec_for(tensor({2, 8, 8, 32}), tensor({32, 3, 3, 16}), nullptr, tensor({2, 8, 8, 16}), same);
  EXPECT_EQ(spec.conv->stride_support, StrideSupport::Unity);
  EXPECT_NE(spec.name().find("_unity_stride_"), std::string::npos);
  const Conv2dGeometry strided{{2, 2}, {1, 1}, {1, 1}};
  spec = dgrad.spec_for(tensor({2, 4, 4, 32}), tensor({32, 3, 3, 16}), nullptr, tensor({2, 8, 8, 16}), strided);
  EXPECT_EQ(spec.conv->stride_support, StrideSupport::Strided);
  EXPECT_NE(render(spec).text.find("StridedDgradIdentityThreadblockSwizzle<1>"), std::string::npos);
  // Strided dgrad kernels neither dilate nor split K.
  const Conv2dGeometry dilated{{2, 2}, {2, 2}, {2, 2}};
  EXPECT_NE(error_of([&] {
              dgrad.spec_for(tensor({2, 4, 4, 32}), tensor({32, 3, 3, 16}), nullptr, tensor({2, 8, 8, 16}), dilated);
            }).find("dilation 1 only"),
            std::string::npos);
  dgrad.set_split_k(SplitKMode::Serial, 2);
  EXPECT_NE(error_of([&] {
              dgrad.spec_for(tensor({2, 4, 4, 32}), tensor({32, 3, 3, 16}), nullptr, tensor({2, 8, 8, 16}), strided);
            }).find("no split-K"),
            std::string::npos);
}

TEST(Conv2dTensors, ErrorsNameTheTensorAndWhatToChange) {
  Conv2d fprop(options(ConvKind::Fprop));
  const TensorView x = tensor({2, 8, 8, 16}), w = tensor({32, 3, 3, 16}), y = tensor({2, 6, 6, 32});
  EXPECT_NO_THROW(fprop.spec_for(x, w, nullptr, y));
  // The output size rule.
  EXPECT_NE(error_of([&] {
              fprop.spec_for(x, w, nullptr, tensor({2, 8, 8, 32}));
            }).find("gives (2, 6, 6, 32)"),
            std::string::npos);
  // NCHW-ordered strides (a torch tensor that is not channels_last, viewed as NHWC).
  TensorView nchw = TensorView::strided(x.data, DataType::f16, {2, 8, 8, 16}, {1024, 8, 1, 64}, 0);
  const std::string packed = error_of([&] { fprop.spec_for(nchw, w, nullptr, y); });
  EXPECT_NE(packed.find("Tensor A (input, NHWC)"), std::string::npos) << packed;
  EXPECT_NE(packed.find("channels_last"), std::string::npos) << packed;
  EXPECT_THROW(fprop.spec_for(nchw, w, nullptr, y), TensorError);
  // Element type, rank, beta without C, C's extents.
  EXPECT_NE(error_of([&] {
              fprop.spec_for(tensor({2, 8, 8, 16}, DataType::f32), w, nullptr, y);
            }).find("f32"),
            std::string::npos);
  const TensorView flat = TensorView::strided(x.data, DataType::f16, {16, 64}, {64, 1}, 0);
  EXPECT_NE(error_of([&] { fprop.spec_for(flat, w, nullptr, y); }).find("must be 4-D"), std::string::npos);
  EXPECT_NE(error_of([&] { fprop.spec_for(x, w, nullptr, y, {}, 1.0); }).find("no C was given"), std::string::npos);
  const TensorView wrong_c = tensor({2, 6, 6, 16});
  EXPECT_NE(error_of([&] { fprop.spec_for(x, w, &wrong_c, y); }).find("Tensor C has extents"), std::string::npos);
  // groups = 1 only.
  EXPECT_NE(error_of([&] {
              fprop.spec_for(x, tensor({32, 3, 3, 8}), nullptr, y);
            }).find("groups = 1"),
            std::string::npos);
  // Odd channels: no f16 tensor-op vector fits; the message says what to do.
  const std::string odd = error_of([&] { fprop.spec_for(tensor({2, 8, 8, 3}), tensor({32, 3, 3, 3}), nullptr, y); });
  EXPECT_NE(odd.find("3 channels"), std::string::npos) << odd;
  EXPECT_NE(odd.find("Simt"), std::string::npos) << odd;
  // ... which f32 SIMT takes.
  Conv2d simt(options(ConvKind::Fprop, DataType::f32, DataType::f32));
  simt.set_opclass(OpClass::Simt);
  const KernelSpec spec = simt.spec_for(tensor({2, 8, 8, 3}, DataType::f32), tensor({5, 3, 3, 3}, DataType::f32),
                                        nullptr, tensor({2, 6, 6, 5}, DataType::f32));
  EXPECT_EQ(spec.alignment_a, 1);
  EXPECT_EQ(spec.opclass, OpClass::Simt);
  // A misaligned address narrows the vectors.
  const KernelSpec narrow = fprop.spec_for(tensor({2, 8, 8, 16}, DataType::f16, 4), w, nullptr, y);
  EXPECT_EQ(narrow.alignment_a, 2);
}

TEST(Conv2dSpec, CanonicalRecordsTheConvOnlyForConvs) {
  Conv2d fprop(options(ConvKind::Fprop));
  EXPECT_NE(fprop.spec().canonical().find(";conv=fprop;iterator=analytic;stride_support=strided"), std::string::npos);
  GemmOptions g;
  g.element = DataType::f16;
  g.element_accumulator = DataType::f32;
  g.layout = Layout::RowMajor;
  g.cc = 80;
  EXPECT_EQ(Gemm(g).spec().canonical().find("conv="), std::string::npos);
  EXPECT_FALSE(Gemm(g).spec().conv);  // a GEMM's spec carries no conv part
  EXPECT_EQ(fprop.spec().conv, (ConvKernel{ConvKind::Fprop, IteratorAlgorithm::Analytic, StrideSupport::Strided}));
}

TEST(Conv2dCli, PlanShowsTheKernelRunWouldPickAndUsageErrorsNameTheOption) {
  // No sizes: the reference's construct() kernel; sizes: the one run() picks (optimized, 4-wide for 12 channels).
  auto result = testing::run_cli("plan --conv fprop --cc 80 --element f16 --element-accumulator f32");
  EXPECT_EQ(result.status, 0) << result.out;
  EXPECT_NE(result.out.find("cutlass_sm80_tensorop_f16_s16x8x16fprop_analytic_f16_256x128_64x3_nhwc_align8"),
            std::string::npos)
      << result.out;
  result = testing::run_cli(
      "plan --conv dgrad --cc 90 --kernel-cc 80 --element f16 --element-accumulator f32 --batch 2 --height 14 --width "
      "14 --channels 12 "
      "--out-channels 64 --filter-height 3 --filter-width 3 --stride 2 --pad 1");
  EXPECT_EQ(result.status, 0) << result.out;
  EXPECT_NE(result.out.find("dgrad_optimized_f16_256x128_64x3_nhwc_align8"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("sm80_conv2d"), std::string::npos) << result.out;
  // A problem whose output would be empty is the library's ConfigError (exit 1); --height without --conv a usage error.
  result =
      testing::run_cli("plan --conv fprop --cc 80 --height 2 --width 2 --filter-height 5 --filter-width 5 --pad 0");
  EXPECT_EQ(result.status, 1) << result.out;
  EXPECT_NE(result.out.find("larger than the padded input"), std::string::npos) << result.out;
  // SM90: the CUTLASS 3.x family by default; a problem only kernel_cc 80 runs is refused naming it.
  result = testing::run_cli(
      "plan --conv fprop --cc 90 --element f16 --element-accumulator f32 --batch 2 --height 14 --width 14 --channels "
      "64 --out-channels 64 --filter-height 3 --filter-width 3 "
      "--pad 1");
  EXPECT_EQ(result.status, 0) << result.out;
  EXPECT_NE(result.out.find("cutlass3x_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_f16_f16nhwc_"), std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("sm90_conv2d"), std::string::npos) << result.out;
  result = testing::run_cli(
      "plan --conv dgrad --cc 90 --kernel-cc 90 --element f16 --element-accumulator f32 --batch 2 --height 14 --width "
      "14 "
      "--channels 64 --out-channels 64 --filter-height 3 --filter-width 3 --stride 2 --pad 1");
  EXPECT_EQ(result.status, 1) << result.out;
  EXPECT_NE(result.out.find("--kernel-cc 80"), std::string::npos) << result.out;
  // Unpinned, the strided dgrad runs on the 2.x kernels, and the CLI says so.
  result = testing::run_cli(
      "plan --conv dgrad --cc 90 --element f16 --element-accumulator f32 --batch 2 --height 14 --width 14 "
      "--channels 64 --out-channels 64 --filter-height 3 --filter-width 3 --stride 2 --pad 1");
  EXPECT_EQ(result.status, 0) << result.out;
  EXPECT_NE(result.out.find("sm80_conv2d"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("--kernel-cc 90"), std::string::npos) << result.out;
  result = testing::run_cli("plan --cc 80 --height 2");
  EXPECT_EQ(result.status, 2) << result.out;
  EXPECT_NE(result.out.find("--height needs --conv"), std::string::npos) << result.out;
  result = testing::run_cli("plan --conv sideways --cc 80");
  EXPECT_EQ(result.status, 2) << result.out;
}

}  // namespace
}  // namespace gemmkit
