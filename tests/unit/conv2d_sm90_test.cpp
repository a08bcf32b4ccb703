// tests/unit/conv2d_sm90_test.cpp: Conv2d's SM90 family without a GPU: the default on SM90, its names, catalog and
// source, its validate rules, TMA im2col's problem rules, what it refuses naming kernel_cc=80 (or, unpinned, runs on
// the CUTLASS 2.x kernels), pointwise problems run as the SM90 GEMM, and the stages of short reductions.
#include <gtest/gtest.h>

#include <string>

#include "gemmkit/codegen.hpp"
#include "gemmkit/conv2d.hpp"
#include "gemmkit/errors.hpp"
#include "unit/conv2d_setup.hpp"

namespace gemmkit {
namespace {

using namespace conv2d_setup;

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
  EXPECT_TRUE(render(fprop.spec()).splittable);  // a cubin and a host module, built side by side
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
  EXPECT_EQ(spec.conv->iterator_algorithm, IteratorAlgorithm::Analytic);  // no 2.x iterators on TMA kernels
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
  EXPECT_EQ(spec.conv->stride_support, StrideSupport::Strided);  // the 2.x unity kernels do not apply
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
  EXPECT_EQ(strided_dgrad.conv->stride_support, StrideSupport::Strided);
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
  EXPECT_EQ(fprop.spec().conv->iterator_algorithm, IteratorAlgorithm::Analytic);
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

}  // namespace
}  // namespace gemmkit
