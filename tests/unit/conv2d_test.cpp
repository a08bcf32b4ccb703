// tests/unit/conv2d_test.cpp: Conv2d without a GPU: the output-size rule and its errors, the plan's family and
// reference-format kernel names, the iterators and stride support run() picks per problem, the tensor checks
// (packed NHWC, groups = 1, alignment), the split-K run() chooses or is told, the SM90 family (the default on
// SM90, its names, catalog, validate rules, TMA im2col problem rules and what it refuses naming kernel_cc=80)
// and the CLI's --conv (goldens of the rendered source: codegen_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <type_traits>

#include "gemmkit/codegen.hpp"
#include "gemmkit/conv2d.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"
#include "support/cli.hpp"

namespace gemmkit {
namespace {

using Extent = std::array<std::int64_t, 4>;

Conv2dOptions options(ConvKind kind, DataType element = DataType::f16, DataType accumulator = DataType::f32,
                      int cc = 80) {
  Conv2dOptions o;
  o.kind = kind;
  o.element = element;
  o.element_accumulator = accumulator;
  o.cc = cc;
  return o;
}

// A packed 4-D device view at a fake, 256-byte aligned address: enough for spec_for, which never reads it.
TensorView tensor(const Extent& e, DataType dtype = DataType::f16, std::size_t offset = 0) {
  alignas(256) static char base[1024];
  return TensorView::strided(base + offset, dtype, {e[0], e[1], e[2], e[3]}, {e[1] * e[2] * e[3], e[2] * e[3], e[3], 1},
                             0);
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

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
  EXPECT_EQ(spec.iterator_algorithm, IteratorAlgorithm::Optimized);
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
  EXPECT_EQ(spec.iterator_algorithm, IteratorAlgorithm::Analytic);
  fprop.set_iterator_algorithm(IteratorAlgorithm::Optimized);
  EXPECT_NE(
      error_of([&] {
        fprop.spec_for(tensor({1, 40, 40, 8}), tensor({8, 33, 1, 8}), nullptr, tensor({1, 8, 40, 8}), Conv2dGeometry{});
      }).find("Iterator algorithm optimized is invalid"),
      std::string::npos);

  Conv2d dgrad(options(ConvKind::Dgrad));
  // dgrad: A = dy (N,P,Q,K), B = w (K,R,S,C), D = dx (N,H,W,C).
  spec = dgrad.spec_for(tensor({2, 8, 8, 32}), tensor({32, 3, 3, 16}), nullptr, tensor({2, 8, 8, 16}), same);
  EXPECT_EQ(spec.stride_support, StrideSupport::Unity);
  EXPECT_NE(spec.name().find("_unity_stride_"), std::string::npos);
  const Conv2dGeometry strided{{2, 2}, {1, 1}, {1, 1}};
  spec = dgrad.spec_for(tensor({2, 4, 4, 32}), tensor({32, 3, 3, 16}), nullptr, tensor({2, 8, 8, 16}), strided);
  EXPECT_EQ(spec.stride_support, StrideSupport::Strided);
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

// Pinned to the SM90 family (kernel_cc=90): strict, what only 2.x kernels run is refused.
Conv2d sm90_plan(ConvKind kind, DataType element = DataType::f16, DataType accumulator = DataType::f32) {
  Conv2dOptions o = options(kind, element, accumulator, 90);
  o.kernel_cc = 90;
  return Conv2d(o);
}

TEST(Conv2dSm90, IsTheDefaultOnSm90WithTheReferenceNames) {
  Conv2d fprop = sm90_plan(ConvKind::Fprop);
  EXPECT_EQ(fprop.spec().family, KernelFamily::Sm90Conv2d);
  EXPECT_EQ(fprop.kernel_cc(), 90);
  EXPECT_EQ(fprop.kernel_name(),
            "cutlass3x_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_f16_f16nhwc_128x128x64_1x1x1_0_align8_warpspecialized_"
            "epi_tma");
  EXPECT_EQ(sm90_plan(ConvKind::Dgrad, DataType::bf16).kernel_name(),
            "cutlass3x_sm90_tensorop_dgrad_bf16nhwc_bf16nhwc_f32_bf16_bf16nhwc_128x128x64_1x1x1_0_align8_"
            "warpspecialized_epi_tma");
  // wgrad writes the filter: CUTLASS's KCSR tag.
  Conv2d wgrad = sm90_plan(ConvKind::Wgrad, DataType::f16, DataType::f16);
  wgrad.set_activation(Activation::ReLU);
  EXPECT_EQ(wgrad.kernel_name(),
            "cutlass3x_sm90_tensorop_wgrad_f16nhwc_f16nhwc_f16_f16_f16kcsr_128x128x64_1x1x1_0_align8_warpspecialized_"
            "epi_tma_relu");
  EXPECT_EQ(sm90_plan(ConvKind::Fprop, DataType::f32, DataType::f32).kernel_name(),
            "cutlass3x_sm90_tensorop_tf32fprop_f32nhwc_f32nhwc_f32_f32_f32nhwc_128x128x32_1x1x1_0_align4_"
            "warpspecialized_epi_tma");
  // Its catalog: 4 CTA tiles in 3 cluster shapes, one schedule.
  const auto tiles = fprop.tile_descriptions();
  ASSERT_EQ(tiles.size(), 12u);
  EXPECT_EQ(tiles[4].cluster_shape, (Shape3{2, 1, 1}));
  EXPECT_EQ(tiles[4].threadblock_shape, (Shape3{256, 128, 64}));
  // Its source: the conv collective builder, TMA im2col, the SM90 GEMM family's fused activation.
  const std::string source = render(wgrad.spec()).text;
  EXPECT_NE(source.find("cutlass::conv::Operator::kWgrad"), std::string::npos);
  EXPECT_NE(source.find("cutlass::conv::KernelImplicitTmaWarpSpecializedSm90"), std::string::npos);
  EXPECT_NE(source.find("gemmkit::sm90::Fusion<gemmkit::module::Bias::None, cutlass::epilogue::thread::ReLu"),
            std::string::npos);
  EXPECT_NE(source.find("#include \"gemmkit/conv2d_entry.hpp\""), std::string::npos);
}

TEST(Conv2dSm90, WhatOnlySm80HasIsRefusedNamingKernelCc80OrTakenBySimt) {
  // tf32 wgmma reads K-major operands: f32 dgrad and wgrad exist as 2.x kernels only. Pinned to kernel_cc 90 they are
  // refused; unpinned the plan takes the 2.x kernels, as kernel_cc=80 does.
  for (ConvKind kind : {ConvKind::Dgrad, ConvKind::Wgrad}) {
    const std::string message = error_of([&] { sm90_plan(kind, DataType::f32, DataType::f32); });
    EXPECT_NE(message.find("kernel_cc=80"), std::string::npos) << message;
    EXPECT_THROW(sm90_plan(kind, DataType::f32, DataType::f32), ConfigError);
    Conv2dOptions pinned = options(kind, DataType::f32, DataType::f32, 90);
    pinned.kernel_cc = 80;
    EXPECT_EQ(Conv2d(pinned).spec().family, KernelFamily::Sm80Conv2d);
    const Conv2d unpinned(options(kind, DataType::f32, DataType::f32, 90));
    EXPECT_EQ(unpinned.kernel_cc(), 80);
    EXPECT_EQ(unpinned.kernel_name(), Conv2d(pinned).kernel_name());
  }
  // SIMT exists as 2.x kernels only: an explicit Simt plan takes them and says so, as Gemm does.
  Conv2d simt = sm90_plan(ConvKind::Fprop, DataType::f32, DataType::f32);
  simt.set_opclass(OpClass::Simt);
  EXPECT_EQ(simt.kernel_cc(), 80);
  EXPECT_EQ(simt.kernel_name().rfind("cutlass_sm80_simt_", 0), 0u) << simt.kernel_name();
}

TEST(Conv2dSm90, ValidateRulesAreTyped) {
  Conv2d plan = sm90_plan(ConvKind::Fprop);
  EXPECT_NE(error_of([&] { plan.set_swizzling_functor(Swizzle::Identity4); }).find("IdentitySwizzle1"),
            std::string::npos);
  EXPECT_NE(error_of([&] { plan.set_iterator_algorithm(IteratorAlgorithm::Optimized); }).find("kernel_cc=80"),
            std::string::npos);
  TileDescription td = plan.spec().tile;
  td.cluster_shape = {2, 2, 1};
  td.threadblock_shape = {256, 256, 64};
  EXPECT_NE(error_of([&] { plan.set_tile_description(td); }).find("1x1x1, 2x1x1 and 1x2x1"), std::string::npos);
  td = plan.spec().tile;
  td.threadblock_shape = {256, 128, 64};
  EXPECT_NE(error_of([&] { plan.set_tile_description(td); }).find("M must be 64 or 128"), std::string::npos);
  td = plan.spec().tile;
  td.threadblock_shape = {128, 128, 32};
  EXPECT_NE(error_of([&] { plan.set_tile_description(td); }).find("128 bytes"), std::string::npos);
  td = plan.spec().tile;
  td.kernel_schedule = KernelSchedule::TmaWarpSpecializedCooperative;
  EXPECT_NE(error_of([&] { plan.set_tile_description(td); }).find("one schedule"), std::string::npos);
  td = plan.spec().tile;
  td.stages = 1;  // the SM90 GEMM family's stage rule (check_sm90_stages), word for word
  EXPECT_NE(error_of([&] { plan.set_tile_description(td); })
                .find("Stage count 1 is invalid for SM90 kernels: use 0 (as many as fit) or an explicit count of at "
                      "least 2."),
            std::string::npos);
  td.stages = 4;
  plan.set_tile_description(td);
  EXPECT_NE(plan.kernel_name().find("_1x1x1_4_align8"), std::string::npos) << plan.kernel_name();
}

TEST(Conv2dSm90, ProblemRulesOfTmaIm2colAreCheckedBeforeAnythingRuns) {
  Conv2d fprop = sm90_plan(ConvKind::Fprop);
  const Conv2dGeometry same{{1, 1}, {1, 1}, {1, 1}};
  KernelSpec spec = fprop.spec_for(tensor({2, 8, 8, 64}), tensor({32, 3, 3, 64}), nullptr, tensor({2, 8, 8, 32}), same);
  EXPECT_EQ(spec.family, KernelFamily::Sm90Conv2d);
  EXPECT_EQ(spec.alignment_a, 8);
  EXPECT_EQ(spec.iterator_algorithm, IteratorAlgorithm::Analytic);  // no 2.x iterators on TMA kernels
  // 12 channels: no 16-byte vector; the message names kernel_cc=80.
  const std::string narrow = error_of([&] {
    fprop.spec_for(tensor({2, 8, 8, 12}), tensor({32, 3, 3, 12}), nullptr, tensor({2, 8, 8, 32}), same);
  });
  EXPECT_NE(narrow.find("12 channels"), std::string::npos) << narrow;
  EXPECT_NE(narrow.find("kernel_cc=80"), std::string::npos) << narrow;
  EXPECT_THROW(fprop.spec_for(tensor({2, 8, 8, 12}), tensor({32, 3, 3, 12}), nullptr, tensor({2, 8, 8, 32}), same),
               TensorError);
  // A dilated filter of 2 x 130 + 1 = 261 rows is past TMA im2col's 8-bit offsets.
  const Conv2dGeometry wide{{1, 1}, {0, 0}, {130, 1}};
  const std::string reach = error_of([&] {
    fprop.spec_for(tensor({1, 300, 8, 8}), tensor({8, 3, 1, 8}), nullptr, tensor({1, 40, 8, 8}), wide);
  });
  EXPECT_NE(reach.find("below 256"), std::string::npos) << reach;
  // Padding 130 puts the im2col box's corner at -130.
  const Conv2dGeometry padded{{1, 1}, {130, 0}, {1, 1}};
  const std::string corner = error_of([&] {
    fprop.spec_for(tensor({1, 4, 8, 8}), tensor({8, 1, 1, 8}), nullptr, tensor({1, 264, 8, 8}), padded);
  });
  EXPECT_NE(corner.find("[-128, 127]"), std::string::npos) << corner;
  EXPECT_NE(corner.find("kernel_cc=80"), std::string::npos) << corner;
  // Strided dgrad and split-K exist as 2.x kernels only.
  Conv2d dgrad = sm90_plan(ConvKind::Dgrad);
  const Conv2dGeometry strided{{2, 2}, {1, 1}, {1, 1}};
  const std::string stride = error_of([&] {
    dgrad.spec_for(tensor({2, 4, 4, 32}), tensor({32, 3, 3, 16}), nullptr, tensor({2, 8, 8, 16}), strided);
  });
  EXPECT_NE(stride.find("unit strides only"), std::string::npos) << stride;
  EXPECT_NE(stride.find("kernel_cc=80"), std::string::npos) << stride;
  spec = dgrad.spec_for(tensor({2, 8, 8, 32}), tensor({32, 3, 3, 16}), nullptr, tensor({2, 8, 8, 16}), same);
  EXPECT_EQ(spec.stride_support, StrideSupport::Strided);  // the 2.x unity kernels do not apply
  Conv2d wgrad = sm90_plan(ConvKind::Wgrad);
  wgrad.set_split_k(SplitKMode::Serial, 2);
  const std::string split = error_of([&] {
    wgrad.spec_for(tensor({2, 8, 8, 32}), tensor({2, 8, 8, 16}), nullptr, tensor({32, 1, 1, 16}), Conv2dGeometry{});
  });
  EXPECT_NE(split.find("no split-K"), std::string::npos) << split;
  EXPECT_NE(split.find("kernel_cc=80"), std::string::npos) << split;
}

// An SM90 plan that was not given kernel_cc serves what only the 2.x kernels run: per problem (strided dgrad, split-K,
// narrow channels, paddings beyond TMA im2col's range) on its 2.x twin, and settings that only 2.x kernels have
// (iterator algorithms, swizzle strides) by moving to them. Problems the SM90 kernels take stay on them.
TEST(Conv2dSm90, UnpinnedPlansRunWhatOnlyTheCutlass2KernelsTakeOnThem) {
  const Conv2dGeometry same{{1, 1}, {1, 1}, {1, 1}};
  const Conv2dGeometry strided{{2, 2}, {1, 1}, {1, 1}};
  Conv2d fprop(options(ConvKind::Fprop, DataType::f16, DataType::f32, 90));
  EXPECT_EQ(fprop.kernel_cc(), 90);
  EXPECT_EQ(fprop.spec_for(tensor({2, 8, 8, 64}), tensor({32, 3, 3, 64}), nullptr, tensor({2, 8, 8, 32}), same).family,
            KernelFamily::Sm90Conv2d);
  // 12 channels: no 16-byte vector for TMA; the 2.x kernels read 4-element vectors.
  const KernelSpec narrow =
      fprop.spec_for(tensor({2, 8, 8, 12}), tensor({32, 3, 3, 12}), nullptr, tensor({2, 8, 8, 32}), same);
  EXPECT_EQ(narrow.family, KernelFamily::Sm80Conv2d);
  EXPECT_EQ(narrow.alignment_a, 4);
  EXPECT_EQ(fprop.kernel_cc(), 90);  // the plan itself stays on the SM90 kernels
  // Strided dgrad: the 2.x strided kernel.
  Conv2d dgrad(options(ConvKind::Dgrad, DataType::f16, DataType::f32, 90));
  const KernelSpec strided_dgrad =
      dgrad.spec_for(tensor({2, 4, 4, 32}), tensor({32, 3, 3, 16}), nullptr, tensor({2, 8, 8, 16}), strided);
  EXPECT_EQ(strided_dgrad.family, KernelFamily::Sm80Conv2d);
  EXPECT_EQ(strided_dgrad.stride_support, StrideSupport::Strided);
  // Split-K: the 2.x kernels, with the plan's split.
  Conv2d wgrad(options(ConvKind::Wgrad, DataType::f16, DataType::f32, 90));
  wgrad.set_split_k(SplitKMode::Parallel, 5);
  const TensorView dy = tensor({2, 8, 8, 32}), x = tensor({2, 8, 8, 16}), dw = tensor({32, 1, 1, 16});
  EXPECT_EQ(wgrad.spec_for(dy, x, nullptr, dw, Conv2dGeometry{}).family, KernelFamily::Sm80Conv2d);
  EXPECT_EQ(wgrad.split_k_for(dy, x, nullptr, dw, Conv2dGeometry{}), (Conv2dSplitK{SplitKMode::Parallel, 5}));
  wgrad.set_split_k(std::nullopt);
  EXPECT_NE(wgrad.spec_for(dy, x, nullptr, dw, Conv2dGeometry{}).family, KernelFamily::Sm80Conv2d);
  // A problem neither family takes is this plan's own error.
  EXPECT_THROW(fprop.spec_for(tensor({2, 8, 8, 64}), tensor({32, 3, 3, 64}), nullptr, tensor({2, 9, 8, 32}), same),
               TensorError);
  // Settings only the 2.x kernels have move the plan to them, dropping an SM90 tile.
  fprop.set_tile_description(fprop.tile_descriptions()[1]);
  fprop.set_iterator_algorithm(IteratorAlgorithm::Analytic);
  EXPECT_EQ(fprop.kernel_cc(), 80);
  EXPECT_FALSE(fprop.tile_description());
  EXPECT_EQ(fprop.spec().iterator_algorithm, IteratorAlgorithm::Analytic);
  Conv2d swizzled(options(ConvKind::Fprop, DataType::f16, DataType::f32, 90));
  swizzled.set_swizzling_stride(4);
  EXPECT_EQ(swizzled.kernel_cc(), 80);
  EXPECT_EQ(swizzled.swizzling_functor(), Swizzle::Identity4);
  EXPECT_THROW(swizzled.set_swizzling_stride(3), ConfigError);
  // Pinned, the same settings are refused.
  Conv2d pinned = sm90_plan(ConvKind::Fprop);
  EXPECT_THROW(pinned.set_iterator_algorithm(IteratorAlgorithm::Optimized), ConfigError);
  EXPECT_THROW(pinned.set_swizzling_stride(4), ConfigError);
  EXPECT_EQ(pinned.kernel_cc(), 90);
}

// res2's 1x1 64 -> 64 layer at batch 128: wgrad's implicit GEMM is 64 x 64 over K = 128 * 56 * 56 = 401408.
struct Res2Wgrad {
  TensorView dy = tensor({128, 56, 56, 64}), x = tensor({128, 56, 56, 64}), dw = tensor({64, 1, 1, 64});
};

// The CUTLASS 2.x family on an SM90 GPU (kernel_cc=80): SM90's conv kernels have no split-K.
Conv2dOptions sm80_on_hopper(ConvKind kind) {
  Conv2dOptions o = options(kind, DataType::f16, DataType::f32, 90);
  o.kernel_cc = 80;
  return o;
}

TEST(Conv2dSplitK, WgradUnderAWaveSplitsInParallelByDefault) {
  Conv2d wgrad(sm80_on_hopper(ConvKind::Wgrad));
  EXPECT_FALSE(wgrad.split_k_mode());
  EXPECT_EQ(wgrad.split_k_slices(), 0);
  const Res2Wgrad t;
  const KernelSpec spec = wgrad.spec_for(t.dy, t.x, nullptr, t.dw);
  const Conv2dSplitK split = wgrad.split_k_for(t.dy, t.x, nullptr, t.dw);
  EXPECT_EQ(split.mode, SplitKMode::Parallel);
  EXPECT_EQ(spec.split_k_mode, SplitKMode::Parallel);
  // The tile the shape picks, 4 waves of the H200's 132 SMs over its output tiles, at least 8 steps of K per slice.
  const Shape3 cta = spec.tile.cta_tile();
  const std::int64_t tiles = ((64 + cta[0] - 1) / cta[0]) * ((64 + cta[1] - 1) / cta[1]);
  EXPECT_EQ(split.slices, std::min<std::int64_t>((4 * 132 + tiles - 1) / tiles, 401408 / cta[2] / 8));
  EXPECT_GT(split.slices, 100);
  EXPECT_EQ(spec.name().substr(spec.name().size() - 16), "_splitk_parallel");
  const std::string source = render(spec).text;
  EXPECT_NE(source.find("gemmkit::sm80_conv2d::ParallelSplitKOutput<EpilogueOp>"), std::string::npos);
  // The direct kernel of the same configuration differs only in that.
  KernelSpec direct = spec;
  direct.split_k_mode = SplitKMode::Serial;
  EXPECT_EQ(direct.name() + "_splitk_parallel", spec.name());
  EXPECT_NE(direct.canonical(), spec.canonical());
  EXPECT_NE(render(direct).text.find("gemmkit::sm80_conv2d::DirectOutput<EpilogueOp>"), std::string::npos);
  // construct() names the direct kernel.
  EXPECT_EQ(wgrad.spec().split_k_mode, SplitKMode::Serial);

  // A wgrad whose K is short stays whole; so do fprop and dgrad, whatever their shape.
  const TensorView small_dy = tensor({2, 9, 9, 32}), small_x = tensor({2, 9, 9, 16}), small_dw = tensor({32, 3, 3, 16});
  const Conv2dGeometry same{{1, 1}, {1, 1}, {1, 1}};
  EXPECT_EQ(wgrad.split_k_for(small_dy, small_x, nullptr, small_dw, same), (Conv2dSplitK{SplitKMode::Serial, 1}));
  EXPECT_EQ(wgrad.spec_for(small_dy, small_x, nullptr, small_dw, same).split_k_mode, SplitKMode::Serial);
  Conv2d fprop(sm80_on_hopper(ConvKind::Fprop));
  const TensorView x7 = tensor({1, 7, 7, 2048}), w7 = tensor({512, 1, 1, 2048}), y7 = tensor({1, 7, 7, 512});
  EXPECT_EQ(fprop.split_k_for(x7, w7, nullptr, y7), (Conv2dSplitK{SplitKMode::Serial, 1}));
  // A mode without a count: run() counts for any kind (here 49 x 512 over K = 2048).
  fprop.set_split_k(SplitKMode::Parallel);
  const Conv2dSplitK fprop_split = fprop.split_k_for(x7, w7, nullptr, y7);
  EXPECT_EQ(fprop_split.mode, SplitKMode::Parallel);
  EXPECT_GT(fprop_split.slices, 1);
  EXPECT_LE(fprop_split.slices, 2048 / 8);
}

TEST(Conv2dSplitK, Sm90ConvKernelsNeverSplit) {
  Conv2d wgrad(options(ConvKind::Wgrad, DataType::f16, DataType::f32, 90));
  // res2's 3x3 64 -> 64 wgrad at batch 128: 64 x 576 over K = 401408, one conv kernel, unsplit.
  const TensorView dy = tensor({128, 56, 56, 64}), x = tensor({128, 56, 56, 64}), dw = tensor({64, 3, 3, 64});
  const Conv2dGeometry same{{1, 1}, {1, 1}, {1, 1}};
  EXPECT_EQ(wgrad.split_k_for(dy, x, nullptr, dw, same), (Conv2dSplitK{SplitKMode::Serial, 1}));
  EXPECT_EQ(wgrad.spec_for(dy, x, nullptr, dw, same).family, KernelFamily::Sm90Conv2d);
}

// kernel_cc 90: a 1x1 filter at unit stride without padding runs as the SM90 GEMM family's kernel, with the GEMM
// layouts of its kind; anything else (a stride, padding, a larger filter, a pinned tile, kernel_cc 80) stays a conv.
TEST(Conv2dSm90, PointwiseProblemsRunAsTheSm90Gemm) {
  const Res2Wgrad t;
  Conv2d wgrad(options(ConvKind::Wgrad, DataType::f16, DataType::f32, 90));
  wgrad.set_activation(Activation::ReLU);
  const KernelSpec w = wgrad.spec_for(t.dy, t.x, nullptr, t.dw);
  EXPECT_EQ(w.family, KernelFamily::Sm90Collective);
  EXPECT_EQ(w.activation, Activation::ReLU);
  // dw = dy^T x: dy read column-major (K x N*H*W), x row-major; a long K on a 64 x 64 output: the GEMM's parallel
  // split-K kernel, which run() splits (its own split-K, not the conv's).
  EXPECT_EQ(w.layout_a, Layout::ColumnMajor);
  EXPECT_EQ(w.layout_b, Layout::RowMajor);
  EXPECT_EQ(w.split_k_mode, SplitKMode::Parallel) << w.name();
  EXPECT_EQ(wgrad.split_k_for(t.dy, t.x, nullptr, t.dw), (Conv2dSplitK{SplitKMode::Serial, 1}));

  Conv2d fprop(options(ConvKind::Fprop, DataType::f16, DataType::f32, 90));
  const TensorView x = tensor({128, 56, 56, 64}), w1 = tensor({256, 1, 1, 64}), y = tensor({128, 56, 56, 256});
  const KernelSpec f = fprop.spec_for(x, w1, &y, y, Conv2dGeometry{}, 1.0);
  EXPECT_EQ(f.family, KernelFamily::Sm90Collective);
  EXPECT_EQ(f.layout_a, Layout::RowMajor);     // x as (N*H*W) x C
  EXPECT_EQ(f.layout_b, Layout::ColumnMajor);  // the K x C filter read as C x K
  EXPECT_EQ(f.layout_c, Layout::RowMajor);
  EXPECT_EQ(f.element_accumulator, DataType::f32);
  Conv2d dgrad(options(ConvKind::Dgrad, DataType::bf16, DataType::f32, 90));
  const KernelSpec d = dgrad.spec_for(tensor({2, 7, 7, 64}, DataType::bf16), tensor({64, 1, 1, 32}, DataType::bf16),
                                      nullptr, tensor({2, 7, 7, 32}, DataType::bf16));
  EXPECT_EQ(d.family, KernelFamily::Sm90Collective);
  EXPECT_EQ(d.element_a, DataType::bf16);
  EXPECT_EQ(d.layout_a, Layout::RowMajor);
  EXPECT_EQ(d.layout_b, Layout::RowMajor);

  // A strided 1x1 fprop (ResNet's downsampling) with H = stride * P: the GEMM, batched over the Q output columns.
  const Conv2dGeometry stride2{{2, 2}, {0, 0}, {1, 1}};
  const KernelSpec down = fprop.spec_for(x, w1, nullptr, tensor({128, 28, 28, 256}), stride2);
  EXPECT_EQ(down.family, KernelFamily::Sm90Collective);
  EXPECT_EQ(down.layout_a, Layout::RowMajor);
  // Not a GEMM: an odd H (rows (n, p) not one stride apart), a strided wgrad, padding, a 3x3 filter.
  EXPECT_EQ(fprop.spec_for(tensor({2, 11, 9, 64}), w1, nullptr, tensor({2, 6, 5, 256}), stride2).family,
            KernelFamily::Sm90Conv2d);
  Conv2d wgrad_down(options(ConvKind::Wgrad, DataType::f16, DataType::f32, 90));
  EXPECT_EQ(wgrad_down.spec_for(tensor({128, 28, 28, 256}), x, nullptr, w1, stride2).family, KernelFamily::Sm90Conv2d);
  const Conv2dGeometry pad1{{1, 1}, {1, 1}, {1, 1}};
  EXPECT_EQ(fprop.spec_for(x, w1, nullptr, tensor({128, 58, 58, 256}), pad1).family, KernelFamily::Sm90Conv2d);
  EXPECT_EQ(fprop.spec_for(x, tensor({256, 3, 3, 64}), nullptr, y, pad1).family, KernelFamily::Sm90Conv2d);
  // A tile description on the plan pins the conv kernel; the CUTLASS 2.x family is never rerouted.
  Conv2d pinned(options(ConvKind::Fprop, DataType::f16, DataType::f32, 90));
  pinned.set_tile_description(pinned.tile_descriptions().at(1));
  EXPECT_EQ(pinned.spec_for(x, w1, nullptr, y).family, KernelFamily::Sm90Conv2d);
  Conv2d sm80(sm80_on_hopper(ConvKind::Fprop));
  EXPECT_EQ(sm80.spec_for(x, w1, nullptr, y).family, KernelFamily::Sm80Conv2d);
  // The tensor checks stay the conv's: a wrong output size names the formula.
  const std::string size = error_of([&] { fprop.spec_for(x, w1, nullptr, tensor({128, 56, 55, 256})); });
  EXPECT_NE(size.find("P = (H + 2 pad"), std::string::npos) << size;
}

// A short fprop reduction (res2's 3x3 64 -> 64: 9 steps of the tile's K) runs its SM90 conv kernel at 4 stages;
// res3's (18 steps) keeps as many as fit (0), and so do dgrad (not measured) and a tile set on the plan.
TEST(Conv2dSm90, ShortReductionsRunWithFourStages) {
  Conv2d fprop(options(ConvKind::Fprop, DataType::f16, DataType::f32, 90));
  const Conv2dGeometry same{{1, 1}, {1, 1}, {1, 1}};
  const KernelSpec res2 =
      fprop.spec_for(tensor({128, 56, 56, 64}), tensor({64, 3, 3, 64}), nullptr, tensor({128, 56, 56, 64}), same);
  EXPECT_EQ(res2.family, KernelFamily::Sm90Conv2d);
  EXPECT_EQ(res2.tile.stages, 4) << res2.name();
  const KernelSpec res3 =
      fprop.spec_for(tensor({128, 28, 28, 128}), tensor({128, 3, 3, 128}), nullptr, tensor({128, 28, 28, 128}), same);
  EXPECT_EQ(res3.tile.stages, 0) << res3.name();
  Conv2d dgrad(options(ConvKind::Dgrad, DataType::f16, DataType::f32, 90));
  EXPECT_EQ(dgrad.spec_for(tensor({128, 56, 56, 64}), tensor({64, 3, 3, 64}), nullptr, tensor({128, 56, 56, 64}), same)
                .tile.stages,
            0);
  Conv2d pinned(options(ConvKind::Fprop, DataType::f16, DataType::f32, 90));
  pinned.set_tile_description(pinned.tile_descriptions().front());
  EXPECT_EQ(pinned.spec_for(tensor({128, 56, 56, 64}), tensor({64, 3, 3, 64}), nullptr, tensor({128, 56, 56, 64}), same)
                .tile.stages,
            0);
}

TEST(Conv2dSplitK, UsersForceTheModeAndCount) {
  Conv2d wgrad(sm80_on_hopper(ConvKind::Wgrad));
  const Res2Wgrad t;
  const int automatic = wgrad.split_k_for(t.dy, t.x, nullptr, t.dw).slices;
  wgrad.set_split_k(SplitKMode::Serial);  // the mode, the automatic count
  EXPECT_EQ(wgrad.split_k_for(t.dy, t.x, nullptr, t.dw), (Conv2dSplitK{SplitKMode::Serial, automatic}));
  EXPECT_EQ(wgrad.spec_for(t.dy, t.x, nullptr, t.dw).split_k_mode, SplitKMode::Serial);
  wgrad.set_split_k(SplitKMode::Parallel, 7);
  EXPECT_EQ(wgrad.split_k_mode(), SplitKMode::Parallel);
  EXPECT_EQ(wgrad.split_k_slices(), 7);
  EXPECT_EQ(wgrad.split_k_for(t.dy, t.x, nullptr, t.dw), (Conv2dSplitK{SplitKMode::Parallel, 7}));
  // One slice is no split: the direct kernel, as the reference runs ("parallel", 1).
  wgrad.set_split_k(SplitKMode::Parallel, 1);
  EXPECT_EQ(wgrad.split_k_for(t.dy, t.x, nullptr, t.dw), (Conv2dSplitK{SplitKMode::Serial, 1}));
  EXPECT_EQ(wgrad.spec_for(t.dy, t.x, nullptr, t.dw).split_k_mode, SplitKMode::Serial);
  wgrad.set_split_k(std::nullopt);
  EXPECT_EQ(wgrad.split_k_for(t.dy, t.x, nullptr, t.dw), (Conv2dSplitK{SplitKMode::Parallel, automatic}));
  // Option errors.
  EXPECT_NE(error_of([&] { wgrad.set_split_k(SplitKMode::Serial, -1); }).find("between 1 and 65535"),
            std::string::npos);
  EXPECT_THROW(wgrad.set_split_k(SplitKMode::Parallel, 65536), ConfigError);
  EXPECT_NE(error_of([&] { wgrad.set_split_k(std::nullopt, 3); }).find("needs a split_k_mode"), std::string::npos);
  EXPECT_FALSE(wgrad.split_k_mode());  // a refused setting leaves the plan as it was

  // Dgrad: the unit-stride kernels split in parallel; the strided ones split nothing.
  Conv2d dgrad(sm80_on_hopper(ConvKind::Dgrad));
  const TensorView dy = tensor({2, 8, 8, 32}), w = tensor({32, 3, 3, 16}), dx = tensor({2, 8, 8, 16});
  const Conv2dGeometry same{{1, 1}, {1, 1}, {1, 1}};
  dgrad.set_split_k(SplitKMode::Parallel, 2);
  const KernelSpec unity = dgrad.spec_for(dy, w, nullptr, dx, same);
  EXPECT_EQ(unity.split_k_mode, SplitKMode::Parallel);
  EXPECT_EQ(unity.stride_support, StrideSupport::Unity);
  const Conv2dGeometry strided{{2, 2}, {1, 1}, {1, 1}};
  const TensorView dy4 = tensor({2, 4, 4, 32});
  EXPECT_NE(error_of([&] { dgrad.spec_for(dy4, w, nullptr, dx, strided); }).find("no split-K"), std::string::npos);
  dgrad.set_split_k(SplitKMode::Parallel);  // automatic count: none for strided dgrad
  EXPECT_EQ(dgrad.split_k_for(dy4, w, nullptr, dx, strided), (Conv2dSplitK{SplitKMode::Serial, 1}));
  dgrad.set_split_k(SplitKMode::Parallel, 2);
  dgrad.set_stride_support(StrideSupport::Strided);  // the strided kernel at unit stride
  EXPECT_NE(error_of([&] { dgrad.spec_for(dy, w, nullptr, dx, same); }).find("no strided dgrad kernel"),
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
