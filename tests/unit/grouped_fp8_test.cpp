// tests/unit/grouped_fp8_test.cpp: FP8 grouped GEMM plans without a GPU: the SM90 ptr-array FP8 kernels (CUTLASS's
// promoted, fast-accumulation and block-scaled mainloops), the tiles they list, their names and sources, the typed
// errors for what they cannot do, and run_contiguous's checks of the block scales before anything runs.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gemmkit/codegen.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/grouped_gemm.hpp"
#include "support/plan_options.hpp"
#include "unit/test_env.hpp"

namespace gk = gemmkit;

namespace {

using gk::testenv::error_of;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

gk::GroupedGemm blockwise_plan() {
  gk::GroupedGemm plan(gk::testing::fp8_tn(90));
  plan.set_block_scaling(gk::BlockScaling::Blockwise);
  return plan;
}

TEST(GroupedFp8, PlansTakeThePtrArrayFp8MainloopAndListFastAccumulationTwins) {
  gk::GroupedGemm plan(gk::testing::fp8_tn(90));
  const gk::KernelSpec spec = plan.spec();
  EXPECT_EQ(spec.family, gk::KernelFamily::Sm90Grouped);
  EXPECT_EQ(spec.name(),
            "cutlass3x_sm90_tensorop_s0x0x0gemm_grouped_e4m3_e4m3_f32_bf16_bf16_128x128x128_1x1x1_0_tnt_align16");
  const std::vector<gk::TileDescription> tiles = plan.tile_descriptions();
  ASSERT_FALSE(tiles.empty());
  ASSERT_EQ(tiles.size() % 2, 0u);
  const std::size_t promoted = tiles.size() / 2;
  for (std::size_t i = 0; i < tiles.size(); ++i) {
    const gk::TileDescription& td = tiles[i];
    const bool fast = i >= promoted;
    EXPECT_EQ(td.math_operation == gk::MathOperation::MultiplyAddFastAccum, fast) << td.to_string();
    // Promoted accumulators live twice in registers: at most 64 x 192 per consumer warp group.
    const gk::Shape3 cta = td.cta_tile();
    const bool cooperative = td.kernel_schedule == gk::KernelSchedule::TmaWarpSpecializedCooperative ||
                             (td.kernel_schedule == gk::KernelSchedule::Auto && cta[0] >= 128);
    EXPECT_LE((cooperative ? cta[0] / 2 : cta[0]) * cta[1], 64 * 192) << td.to_string();
    EXPECT_EQ(cta[2], 128) << td.to_string();
  }
  plan.set_tile_description(tiles[promoted]);
  const std::string fast_text = gk::render(plan.spec()).text;
  EXPECT_TRUE(contains(fast_text, "cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperativeFP8FastAccum"))
      << fast_text;
  EXPECT_TRUE(contains(plan.kernel_name(), "_fp8_fastaccum")) << plan.kernel_name();
  plan.set_tile_description(tiles.front());
  const std::string text = gk::render(plan.spec()).text;
  EXPECT_TRUE(contains(text, "ElementA, LayoutA*, AlignmentA, ElementB,\n    LayoutB*, AlignmentB")) << text;
}

TEST(GroupedFp8, BlockScaledKernelsPairEachOperandWithItsScalesOnEveryListedTile) {
  gk::GroupedGemm plan = blockwise_plan();
  EXPECT_EQ(plan.block_scaling(), gk::BlockScaling::Blockwise);
  EXPECT_EQ(plan.kernel_name(),
            "cutlass3x_sm90_tensorop_s0x0x0gemm_grouped_e4m3_e4m3_f32_bf16_bf16_128x128x128_1x1x1_0_tnt_align16_"
            "blockwise");
  EXPECT_TRUE(contains(plan.spec().canonical(), ";block_scaling=blockwise"));
  const std::vector<gk::TileDescription> tiles = plan.tile_descriptions();
  ASSERT_FALSE(tiles.empty());
  bool pingpong = false;
  for (const gk::TileDescription& td : tiles) {
    const gk::Shape3 cta = td.cta_tile();
    EXPECT_EQ(cta[2], 128) << td.to_string();
    EXPECT_EQ(cta[1] % 128, 0) << td.to_string();
    EXPECT_NE(td.math_operation, gk::MathOperation::MultiplyAddFastAccum) << td.to_string();
    plan.set_tile_description(td);
    const std::string text = gk::render(plan.spec()).text;
    EXPECT_TRUE(contains(text, "cute::tuple<LayoutA*, gemmkit::sm90_grouped::LayoutSFA*>")) << text;
    EXPECT_TRUE(contains(text, "cute::tuple<LayoutB*, gemmkit::sm90_grouped::LayoutSFB*>")) << text;
    const bool is_pingpong = cta[0] < 128;
    pingpong = pingpong || is_pingpong;
    EXPECT_TRUE(contains(text, std::string("cutlass::gemm::KernelPtrArrayTmaWarpSpecialized") +
                                   (is_pingpong ? "Pingpong" : "Cooperative") + "FP8Blockwise"))
        << text;
  }
  EXPECT_TRUE(pingpong);  // the 64 x 128 tile runs on the ping-pong mainloop
  plan.set_block_scaling(gk::BlockScaling::None);
  EXPECT_FALSE(contains(plan.kernel_name(), "blockwise"));
}

TEST(GroupedFp8, BlockScalingIsRefusedWhereNoGroupedKernelTakesIt) {
  gk::GroupedGemm f16(gk::testing::f16_row(90));
  const std::string not_fp8 = error_of<gk::ConfigError>([&] { f16.set_block_scaling(gk::BlockScaling::Blockwise); });
  EXPECT_TRUE(contains(not_fp8, "Block scaling scales FP8 operands")) << not_fp8;
  EXPECT_EQ(f16.block_scaling(), gk::BlockScaling::None);

  gk::GroupedGemm sm80(gk::testing::f16_row(80));
  const std::string old = error_of<gk::ConfigError>([&] { sm80.set_block_scaling(gk::BlockScaling::Blockwise); });
  EXPECT_TRUE(contains(old, "SM90 GEMM and grouped GEMM kernels")) << old;

  // The list form has no scale lists: a block-scaled plan says where it runs.
  gk::GroupedGemm plan = blockwise_plan();
  alignas(256) static unsigned char bytes[4096];
  const std::vector<gk::TensorView> A = {gk::TensorView::on_gpu(bytes, gk::DataType::e4m3, {16, 128})};
  const std::vector<gk::TensorView> B = {
      gk::TensorView::on_gpu(bytes, gk::DataType::e4m3, {128, 128}, gk::Layout::ColumnMajor)};
  const std::vector<gk::TensorView> D = {gk::TensorView::on_gpu(bytes, gk::DataType::bf16, {16, 128})};
  const std::string list = error_of<gk::ConfigError>([&] { plan.run(A, B, {}, D); });
  EXPECT_TRUE(contains(list, "call run_contiguous")) << list;
}

TEST(GroupedFp8, RunContiguousChecksTheBlockScalesBeforeAnythingRuns) {
  gk::GroupedGemm plan = blockwise_plan();
  alignas(256) static unsigned char bytes[1 << 16];
  const long total_m = 100, n = 200, k = 272, groups = 3;  // KB = 3, NB = 2
  const auto A = gk::TensorView::on_gpu(bytes, gk::DataType::e4m3, {total_m, k});
  const auto B = gk::TensorView::strided(bytes, gk::DataType::e4m3, {groups, k, n}, {n * k, 1, k}, 0);
  const auto D = gk::TensorView::on_gpu(bytes, gk::DataType::bf16, {total_m, n});
  const auto offsets = gk::TensorView::on_gpu(bytes, gk::DataType::s32, {groups});
  // scale_a: total_M x KB row-major; scale_b: G x NB x KB row-major.
  const auto scale_a = gk::TensorView::strided(bytes, gk::DataType::f32, {total_m, 3}, {3, 1}, 0);
  const auto scale_b = gk::TensorView::strided(bytes, gk::DataType::f32, {groups, 2, 3}, {6, 3, 1}, 0);
  const auto m_major_a = gk::TensorView::strided(bytes, gk::DataType::f32, {total_m, 3}, {1, total_m}, 0);
  const auto one_group_b = gk::TensorView::strided(bytes, gk::DataType::f32, {2, 3}, {3, 1}, 0);
  auto run_error_of = [&](const gk::TensorView* a, const gk::TensorView* b) {
    gk::RunOptions options;
    options.scale_a = a;
    options.scale_b = b;
    return error_of<gk::TensorError>([&] { plan.run_contiguous(A, B, nullptr, D, offsets, 1.0, 0.0, options); });
  };
  EXPECT_TRUE(contains(run_error_of(nullptr, &scale_b), "RunOptions::scale_a")) << run_error_of(nullptr, &scale_b);
  const std::string strides = run_error_of(&m_major_a, &scale_b);
  EXPECT_TRUE(contains(strides, "scale_a: has strides (1, 100)") && contains(strides, "row-major")) << strides;
  const std::string shape = run_error_of(&scale_a, &one_group_b);
  EXPECT_TRUE(contains(shape, "scale_b: has shape (2, 3); the plan expects (3, 2, 3) f32")) << shape;

  gk::GroupedGemm unscaled(gk::testing::fp8_tn(90));
  gk::RunOptions extra;
  extra.scale_a = &scale_a;
  extra.scale_b = &scale_b;
  const std::string no_block_scaling =
      error_of<gk::TensorError>([&] { unscaled.run_contiguous(A, B, nullptr, D, offsets, 1.0, 0.0, extra); });
  EXPECT_TRUE(contains(no_block_scaling, "set_block_scaling(BlockScaling::Blockwise)")) << no_block_scaling;
}

}  // namespace
