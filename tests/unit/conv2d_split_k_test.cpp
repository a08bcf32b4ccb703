// tests/unit/conv2d_split_k_test.cpp: Conv2d's split-K without a GPU: the parallel split run() chooses for a wgrad
// under a wave, the SM90 conv kernels that never split, and the mode and count users force (and their errors).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "gemmkit/codegen.hpp"
#include "gemmkit/conv2d.hpp"
#include "gemmkit/errors.hpp"
#include "unit/conv2d_setup.hpp"

namespace gemmkit {
namespace {

using namespace conv2d_setup;

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
  EXPECT_EQ(unity.conv->stride_support, StrideSupport::Unity);
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

}  // namespace
}  // namespace gemmkit
