// tests/unit/split_n_test.cpp: the N-split cooperative SM90 kernels (192-row CTA tiles, the two consumer warp groups
// splitting N) without a GPU: where they are listed, that the shape heuristics never take them, their names and
// sources, the rules that refuse what they cannot do, and the cooperative M rule beside them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "catalog/catalog.hpp"
#include "catalog/suite_shapes.hpp"
#include "gemmkit/codegen.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"
#include "support/plan_options.hpp"
#include "unit/test_env.hpp"

namespace gk = gemmkit;

namespace {

using gk::testenv::error_of;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

bool splits_n(const gk::TileDescription& td) {
  return td.kernel_schedule == gk::KernelSchedule::TmaWarpSpecializedCooperativeSplitN;
}

std::vector<gk::TileDescription> split_n_tiles(const gk::Gemm& plan) {
  std::vector<gk::TileDescription> out;
  for (const gk::TileDescription& td : plan.tile_descriptions()) {
    if (splits_n(td)) out.push_back(td);
  }
  return out;
}

TEST(SplitN, ThreeTilesOf192RowsAreListedLastForSixteenBitPlans) {
  for (gk::DataType type : {gk::DataType::f16, gk::DataType::bf16}) {
    gk::GemmOptions o = gk::testing::f16_row(90);
    o.element = type;
    gk::Gemm plan(o);
    const std::vector<gk::TileDescription> tiles = plan.tile_descriptions();
    ASSERT_GE(tiles.size(), 3u);
    std::vector<int> columns;
    for (std::size_t i = tiles.size() - 3; i < tiles.size(); ++i) {
      EXPECT_TRUE(splits_n(tiles[i])) << tiles[i].to_string();
      EXPECT_EQ(tiles[i].cta_tile()[0], 192);
      EXPECT_EQ(tiles[i].cta_tile()[2], 64);
      EXPECT_EQ(tiles[i].cluster_shape, (gk::Shape3{1, 1, 1}));
      columns.push_back(tiles[i].cta_tile()[1]);
    }
    EXPECT_EQ(columns, (std::vector<int>{128, 160, 192}));
    EXPECT_EQ(split_n_tiles(plan).size(), 3u);
  }
  // Not where the kernel has no form here: f32 D, FP8, an f16 accumulator.
  gk::GemmOptions f32_d = gk::testing::f16_row(90);
  f32_d.element_c = f32_d.element_d = gk::DataType::f32;
  EXPECT_TRUE(split_n_tiles(gk::Gemm(f32_d)).empty());
  EXPECT_TRUE(split_n_tiles(gk::Gemm(gk::testing::fp8_tn(90))).empty());
  gk::GemmOptions f16_accumulator = gk::testing::f16_row(90);
  f16_accumulator.element_accumulator = gk::DataType::f16;
  EXPECT_TRUE(split_n_tiles(gk::Gemm(f16_accumulator)).empty());
}

TEST(SplitN, TheShapeHeuristicsNeverTakeThem) {
  gk::Gemm plan(gk::testing::f16_row(90));
  for (const auto& problem : gk::catalog::suite_problems()) {
    const gk::KernelSpec spec = plan.spec_for_problem(problem.m, problem.n, problem.k);
    EXPECT_FALSE(splits_n(spec.tile)) << problem.m << "x" << problem.n << "x" << problem.k;
  }
}

TEST(SplitN, EveryTileRendersOnItsOwnCollectivesAndNamesItself) {
  gk::Gemm plan(gk::testing::f16_row(90));
  plan.set_activation(gk::Activation::ReLU);
  plan.set_bias(gk::BiasMode::PerColumn);
  for (const gk::TileDescription& td : split_n_tiles(plan)) {
    plan.set_tile_description(td);
    const std::string name = plan.kernel_name();
    EXPECT_TRUE(contains(name, "_warpspecialized_cooperative_splitn_epi_tma_act_at_launch_biascolumn")) << name;
    const gk::KernelSource source = gk::render(plan.spec());
    EXPECT_TRUE(contains(source.text, "#include \"gemmkit/sm90_split_n.hpp\"")) << source.text;
    EXPECT_TRUE(contains(source.text, "gemmkit::sm90::SplitNCollectives<CtaTile")) << source.text;
    EXPECT_TRUE(contains(source.text, "cute::Int<" + std::to_string(td.cta_tile()[1]) + ">")) << source.text;
    EXPECT_TRUE(source.splittable);
    // No lean twin: the lean epilogue has no N-split kernel.
    const gk::KernelSpec spec = plan.spec();
    EXPECT_FALSE(gk::catalog::family_of(spec.family).quick_twin(spec).has_value());
  }
}

TEST(SplitN, WhatTheKernelCannotDoIsRefusedByName) {
  gk::Gemm plan(gk::testing::f16_row(90));
  const gk::TileDescription split_n = split_n_tiles(plan).front();
  auto refusal = [&](gk::TileDescription td) {
    return error_of<gk::ConfigError>([&] { plan.set_tile_description(td); });
  };
  gk::TileDescription clustered = split_n;
  clustered.cluster_shape = {1, 2, 1};
  clustered.threadblock_shape = {192, 256, 64};
  EXPECT_TRUE(contains(refusal(clustered), "runs in 1x1x1 clusters")) << refusal(clustered);
  gk::TileDescription wide = split_n;
  wide.threadblock_shape = {192, 256, 64};
  EXPECT_TRUE(contains(refusal(wide), "192 x 128, 192 x 160 or 192 x 192")) << refusal(wide);
  gk::TileDescription stream_k = split_n;
  stream_k.tile_scheduler = gk::TileScheduler::StreamK;
  EXPECT_TRUE(contains(refusal(stream_k), "Default tile scheduler")) << refusal(stream_k);
  gk::TileDescription no_smem = split_n;
  no_smem.epilogue_schedule = gk::EpilogueSchedule::NoSmemWarpSpecialized;
  EXPECT_TRUE(contains(refusal(no_smem), "TmaWarpSpecializedCooperative epilogue")) << refusal(no_smem);
  // The builders' cooperative kernel splits M: 192 rows are refused there, naming the N-split schedule.
  gk::TileDescription m_split = split_n;
  m_split.kernel_schedule = gk::KernelSchedule::TmaWarpSpecializedCooperative;
  EXPECT_TRUE(contains(refusal(m_split), "TmaWarpSpecializedCooperativeSplitN")) << refusal(m_split);
  // f32 D has no N-split kernel.
  gk::GemmOptions f32_d = gk::testing::f16_row(90);
  f32_d.element_c = f32_d.element_d = gk::DataType::f32;
  gk::Gemm f32_plan(f32_d);
  const std::string f32 = error_of<gk::ConfigError>([&] { f32_plan.set_tile_description(split_n); });
  EXPECT_TRUE(contains(f32, "row-major 16-bit D")) << f32;
  EXPECT_EQ(gk::parse_enum<gk::KernelSchedule>("TmaWarpSpecializedCooperativeSplitN"),
            gk::KernelSchedule::TmaWarpSpecializedCooperativeSplitN);
}

}  // namespace
