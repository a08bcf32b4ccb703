// tests/unit/fp8_overlap_test.cpp: gemmkit's FP8 mainloops with the promotion overlapped (kernel schedules
// TmaWarpSpecialized{Cooperative,Pingpong}{FP8Overlap,FP8AlternatingPromotion}) without a GPU: where its tiles are
// listed, where the shape heuristics take them, its names and sources (and that CUTLASS's own FP8 kernels render
// as before), and the rules that refuse what it cannot do.
#include <gtest/gtest.h>

#include <set>
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

bool alternating(const gk::TileDescription& td) {
  return td.kernel_schedule == gk::KernelSchedule::TmaWarpSpecializedCooperativeFP8AlternatingPromotion ||
         td.kernel_schedule == gk::KernelSchedule::TmaWarpSpecializedPingpongFP8AlternatingPromotion;
}
bool cooperative(const gk::TileDescription& td) {
  return td.kernel_schedule == gk::KernelSchedule::TmaWarpSpecializedCooperativeFP8Overlap ||
         td.kernel_schedule == gk::KernelSchedule::TmaWarpSpecializedCooperativeFP8AlternatingPromotion;
}
bool overlaps(const gk::TileDescription& td) {
  return cooperative(td) || alternating(td) ||
         td.kernel_schedule == gk::KernelSchedule::TmaWarpSpecializedPingpongFP8Overlap;
}

std::vector<gk::TileDescription> overlap_tiles(const gk::Gemm& plan) {
  std::vector<gk::TileDescription> out;
  for (const gk::TileDescription& td : plan.tile_descriptions()) {
    if (overlaps(td)) out.push_back(td);
  }
  return out;
}

TEST(Fp8Overlap, TheDefaultLeadsTheListAndTheOtherTilesInEachClusterComeLast) {
  for (gk::DataType b : {gk::DataType::e4m3, gk::DataType::e5m2}) {
    gk::GemmOptions o = gk::testing::fp8_tn(90);
    o.element_b = b;
    gk::Gemm plan(o);
    const std::vector<gk::TileDescription> tiles = plan.tile_descriptions();
    ASSERT_GE(tiles.size(), 18u);
    EXPECT_EQ(tiles.front(), plan.spec().tile);
    ASSERT_TRUE(overlaps(tiles.front())) << tiles.front().to_string();
    ASSERT_FALSE(overlaps(tiles[1])) << tiles[1].to_string();  // then CUTLASS's, in the order they had
    for (std::size_t i = tiles.size() - 17; i < tiles.size(); ++i) ASSERT_TRUE(overlaps(tiles[i])) << i;
    std::vector<std::string> listed;
    for (const gk::TileDescription& td : overlap_tiles(plan)) {
      EXPECT_EQ(td.epilogue_schedule, cooperative(td) ? gk::EpilogueSchedule::TmaWarpSpecializedCooperative
                                                      : gk::EpilogueSchedule::TmaWarpSpecialized);
      EXPECT_EQ(td.tile_scheduler, gk::TileScheduler::Default);
      EXPECT_EQ(td.math_operation, gk::MathOperation::MultiplyAdd);
      listed.push_back(std::string(cooperative(td) ? "coop" : "pingpong") + (alternating(td) ? " alternating " : " ") +
                       gk::shape_text(td.cta_tile()) + "_" + gk::shape_text(td.cluster_shape));
    }
    EXPECT_EQ(listed, (std::vector<std::string>{
                          "coop 128x192x128_2x1x1", "coop 128x192x128_1x2x1", "coop 128x192x128_1x1x1",
                          "coop 128x128x128_2x1x1", "coop 128x128x128_1x2x1", "coop 128x128x128_1x1x1",
                          "pingpong 64x192x128_2x1x1", "pingpong 64x192x128_1x2x1", "pingpong 64x192x128_1x1x1",
                          "pingpong 64x128x128_2x1x1", "pingpong 64x128x128_1x2x1", "pingpong 64x128x128_1x1x1",
                          "coop alternating 128x128x128_2x1x1", "coop alternating 128x128x128_1x2x1",
                          "coop alternating 128x128x128_1x1x1", "pingpong alternating 64x128x128_2x1x1",
                          "pingpong alternating 64x128x128_1x2x1", "pingpong alternating 64x128x128_1x1x1"}));
  }
  // Not where there is no FP8 mainloop.
  EXPECT_TRUE(overlap_tiles(gk::Gemm(gk::testing::f16_row(90))).empty());
}

// The heuristics weigh CUTLASS's tiles, then run the chosen one on gemmkit's loop where it has one: column halves on
// 128 x 192, alternating K tiles on 128 x 128 (cooperative) and 64 x 128 (ping-pong), parallel split-K's partial-sum
// GEMMs included; CUTLASS's loop elsewhere, and for Stream-K, which gemmkit's loops do not take.
TEST(Fp8Overlap, TheShapeHeuristicsRunTheChosenTileOnGemmkitsLoopWhereItHasOne) {
  gk::Gemm plan(gk::testing::fp8_tn(90));
  std::set<std::string> taken;
  for (const auto& problem : gk::catalog::suite_problems()) {
    if (problem.k % 16 != 0) continue;  // FP8 rows are 16-byte vectors
    const gk::KernelSpec spec = plan.spec_for_problem(problem.m, problem.n, problem.k);
    const std::string shape = std::to_string(problem.m) + "x" + std::to_string(problem.n) + "x" +
                              std::to_string(problem.k) + ": " + spec.name();
    const gk::Shape3 cta = spec.tile.cta_tile();
    const bool halves = cta == gk::Shape3{128, 192, 128};
    const bool alternates = cta == gk::Shape3{128, 128, 128} || cta == gk::Shape3{64, 128, 128};
    // Parallel split-K's GEMMs run on the Default tile scheduler too; Stream-K (serial split-K among them) does not.
    const bool default_scheduler = spec.tile.tile_scheduler == gk::TileScheduler::Default;
    if (default_scheduler && (halves || alternates)) {
      EXPECT_TRUE(overlaps(spec.tile)) << shape;
      EXPECT_EQ(alternating(spec.tile), alternates) << shape;
      taken.insert(gk::shape_text(cta));
    } else {
      EXPECT_FALSE(overlaps(spec.tile)) << shape;
    }
  }
  EXPECT_EQ(taken, (std::set<std::string>{"128x192x128", "128x128x128", "64x128x128"}));
  // Parallel split-K's partial-sum GEMMs too (few rows over a long K).
  const gk::KernelSpec split = plan.spec_for_problem(128, 4096, 4096);
  EXPECT_EQ(split.split_k_mode, gk::SplitKMode::Parallel) << split.name();
  EXPECT_EQ(split.tile.kernel_schedule, gk::KernelSchedule::TmaWarpSpecializedPingpongFP8AlternatingPromotion)
      << split.name();
  const std::string source = gk::render(split).text;
  EXPECT_TRUE(contains(source, "#include \"gemmkit/sm90_fp8_overlap.hpp\"")) << source;
  EXPECT_TRUE(contains(source, "using CollectiveMainloop = gemmkit::sm90::Fp8AlternatingPromotion<")) << source;
  EXPECT_TRUE(contains(source, "gemmkit::sm90::ParallelSplitKModule<")) << source;
  // A plan with fast accumulation or a tile of its own keeps CUTLASS's loop.
  gk::Gemm fast(gk::testing::fp8_tn(90));
  fast.set_math_operation(gk::MathOperation::MultiplyAddFastAccum);
  EXPECT_FALSE(overlaps(fast.spec_for_problem(8192, 8192, 8192).tile));
  gk::Gemm set(gk::testing::fp8_tn(90));
  set.set_tile_description(plan.tile_descriptions()[1]);
  EXPECT_FALSE(overlaps(set.spec_for_problem(8192, 8192, 8192).tile));
}

// gemmkit's loops run 128 x 192 and 128 x 128 tiles at one speed per tile, so the waves decide at any size: a tail wave
// of 128 x 192 tiles costs more than the smaller tiles' extra waves at 4096^3 (5.3 against 7.8 waves) and
// 1024x28672x8192 (9.1 against 13.6), not at 8192^3 (20.8 against 31.0) or 8192x14336x4096 (36.4 against 54.3).
// The f16 default, on CUTLASS's loop, keeps its tile past four waves.
TEST(Fp8Overlap, TheWavesChooseBetweenTheOwnLoopsTilesAtAnySize) {
  gk::Gemm plan(gk::testing::fp8_tn(90));
  auto cta = [&](std::int64_t m, std::int64_t n, std::int64_t k) {
    return gk::shape_text(plan.spec_for_problem(m, n, k).tile.cta_tile());
  };
  EXPECT_EQ(cta(4096, 4096, 4096), "128x128x128");
  EXPECT_EQ(cta(1024, 28672, 8192), "128x128x128");
  EXPECT_EQ(cta(8192, 8192, 8192), "128x192x128");
  EXPECT_EQ(cta(8192, 14336, 4096), "128x192x128");
  EXPECT_TRUE(alternating(plan.spec_for_problem(4096, 4096, 4096).tile));
  gk::Gemm f16(gk::testing::f16_row(90));
  EXPECT_EQ(f16.spec_for_problem(4096, 4096, 4096).tile, f16.tile_descriptions().front());
}

// Three stages of C (sm90_source_stages.hpp) only where D is stored through C's buffers, 16 bits wide, on the 128 x 192
// tile: a plan without C, or with f32 C and D, keeps the builder's epilogue, and so does its cache key.
TEST(Fp8Overlap, OnlyA16BitCOnTheWideTileKeepsThreeStagesOfC) {
  auto renders_three = [](gk::GemmOptions o) {
    return contains(gk::render(gk::Gemm(o).spec()).text, "gemmkit::sm90::ThreeSourceStages<");
  };
  EXPECT_TRUE(renders_three(gk::testing::fp8_tn(90)));
  EXPECT_TRUE(renders_three(gk::testing::fp8_tn(90, gk::DataType::e4m3, gk::DataType::f16)));
  gk::GemmOptions no_c = gk::testing::fp8_tn(90);
  no_c.element_c = gk::DataType::void_t;
  EXPECT_FALSE(renders_three(no_c));
  EXPECT_FALSE(renders_three(gk::testing::fp8_tn(90, gk::DataType::e4m3, gk::DataType::f32)));
  gk::GemmOptions wide_c = gk::testing::fp8_tn(90);
  wide_c.element_c = gk::DataType::f32;  // C wider than D: no store through C's buffers
  EXPECT_FALSE(renders_three(wide_c));
}

TEST(Fp8Overlap, EveryTileDerivesTheBuildersCollectiveAndNamesItself) {
  gk::Gemm plan(gk::testing::fp8_tn(90));
  plan.set_scale(gk::ScaleMode::RowAndColumn);
  plan.set_activation(gk::Activation::ReLU);
  plan.set_tile_description(plan.tile_descriptions()[1]);  // CUTLASS's loop on the default tile
  const std::string builders_source = gk::render(plan.spec()).text;
  EXPECT_FALSE(contains(builders_source, "Fp8OverlappedPromotion")) << builders_source;
  EXPECT_TRUE(contains(builders_source, "using CollectiveMainloop = typename cutlass::gemm::collective::"))
      << builders_source;
  for (const gk::TileDescription& td : overlap_tiles(plan)) {
    plan.set_tile_description(td);
    const std::string name = plan.kernel_name();
    const std::string kernel = cooperative(td) ? "cooperative" : "pingpong";
    const std::string loop = alternating(td) ? "fp8alternating" : "fp8overlap";
    EXPECT_TRUE(contains(name, "_warpspecialized_" + kernel + "_" + loop + "_epi_tma_relu_scalerowcolumn")) << name;
    const gk::KernelSource source = gk::render(plan.spec());
    // The column halves' 128 x 192 tile with a 16-bit C keeps three stages of C, for a fifth mainloop stage.
    const bool three_c_stages = !alternating(td) && cooperative(td) && td.cta_tile()[1] == 192;
    EXPECT_TRUE(contains(source.text, three_c_stages ? "#include \"gemmkit/sm90_source_stages.hpp\""
                                                     : "#include \"gemmkit/sm90_fp8_overlap.hpp\""))
        << source.text;
    EXPECT_EQ(contains(source.text, "using CollectiveEpilogue = gemmkit::sm90::ThreeSourceStages<typename "),
              three_c_stages)
        << source.text;
    const std::string mainloop = alternating(td) ? "Fp8AlternatingPromotion" : "Fp8OverlappedPromotion";
    EXPECT_TRUE(contains(source.text, "using CollectiveMainloop = gemmkit::sm90::" + mainloop +
                                          "<typename cutlass::gemm::collective::CollectiveBuilder<"))
        << source.text;
    EXPECT_TRUE(contains(source.text, "KernelSchedule>::CollectiveOp>;")) << source.text;
    EXPECT_TRUE(contains(source.text, cooperative(td)
                                          ? "using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;"
                                          : "using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecializedPingpong;"))
        << source.text;
    EXPECT_TRUE(source.splittable);
    // The lean twin that stands in while it builds runs CUTLASS's mainloop.
    const gk::KernelSpec spec = plan.spec();
    const auto twin = gk::catalog::family_of(spec.family).quick_twin(spec);
    ASSERT_TRUE(twin.has_value());
    EXPECT_EQ(twin->kernel_schedule, cooperative(td) ? gk::KernelSchedule::TmaWarpSpecializedCooperative
                                                     : gk::KernelSchedule::TmaWarpSpecializedPingpong);
    EXPECT_EQ(twin->epilogue_schedule, gk::EpilogueSchedule::Lean);
  }
}

TEST(Fp8Overlap, WhatTheMainloopCannotDoIsRefusedByName) {
  gk::Gemm plan(gk::testing::fp8_tn(90));
  const gk::TileDescription overlap = overlap_tiles(plan).front();
  auto refusal = [&](gk::TileDescription td) {
    return error_of<gk::ConfigError>([&] { plan.set_tile_description(td); });
  };
  gk::TileDescription wide = overlap;
  wide.threadblock_shape = {256, 512, 128};
  EXPECT_TRUE(contains(refusal(wide), "128 x 192 x 128 or 128 x 128 x 128")) << refusal(wide);
  gk::TileDescription tall = overlap;
  tall.threadblock_shape = {512, 128, 128};
  EXPECT_TRUE(contains(refusal(tall), "128 x 192 x 128 or 128 x 128 x 128")) << refusal(tall);
  gk::TileDescription stream_k = overlap;
  stream_k.tile_scheduler = gk::TileScheduler::StreamK;
  EXPECT_TRUE(contains(refusal(stream_k), "Default tile scheduler")) << refusal(stream_k);
  gk::TileDescription lean = overlap;
  lean.epilogue_schedule = gk::EpilogueSchedule::Lean;
  EXPECT_TRUE(contains(refusal(lean), "TmaWarpSpecializedCooperative or NoSmemWarpSpecialized epilogue"))
      << refusal(lean);
  gk::TileDescription fast = overlap;
  fast.math_operation = gk::MathOperation::MultiplyAddFastAccum;
  EXPECT_TRUE(contains(refusal(fast), "no fast accumulation and no block scales")) << refusal(fast);

  gk::Gemm blockwise(gk::testing::fp8_tn(90));
  blockwise.set_block_scaling(gk::BlockScaling::Blockwise);
  const std::string scales = error_of<gk::ConfigError>([&] { blockwise.set_tile_description(overlap); });
  EXPECT_TRUE(contains(scales, "TmaWarpSpecializedCooperativeFP8Overlap")) << scales;

  gk::Gemm f16(gk::testing::f16_row(90));
  gk::TileDescription f16_tile = overlap;
  f16_tile.threadblock_shape = {256, 192, 64};
  const std::string not_fp8 = error_of<gk::ConfigError>([&] { f16.set_tile_description(f16_tile); });
  EXPECT_TRUE(contains(not_fp8, "is an FP8 mainloop")) << not_fp8;

  // Each kernel has its own tiles: a ping-pong warp group holds the whole tile.
  gk::TileDescription pingpong_wide = overlap;
  pingpong_wide.kernel_schedule = gk::KernelSchedule::TmaWarpSpecializedPingpongFP8Overlap;
  pingpong_wide.epilogue_schedule = gk::EpilogueSchedule::TmaWarpSpecialized;
  EXPECT_TRUE(contains(refusal(pingpong_wide),
                       "TmaWarpSpecializedPingpongFP8Overlap has CTA tiles of 64 x 192 x 128 or 64 x 128 x 128"))
      << refusal(pingpong_wide);
  // Alternating K tiles hold three sets of a warp group's tile: 64 x 128 only.
  gk::TileDescription alternating_wide = overlap;  // 128 x 192
  alternating_wide.kernel_schedule = gk::KernelSchedule::TmaWarpSpecializedCooperativeFP8AlternatingPromotion;
  EXPECT_TRUE(contains(refusal(alternating_wide),
                       "TmaWarpSpecializedCooperativeFP8AlternatingPromotion has CTA tiles of 128 x 128 x 128;"))
      << refusal(alternating_wide);

  EXPECT_EQ(gk::parse_enum<gk::KernelSchedule>("TmaWarpSpecializedCooperativeFP8Overlap"),
            gk::KernelSchedule::TmaWarpSpecializedCooperativeFP8Overlap);
  EXPECT_EQ(gk::parse_enum<gk::KernelSchedule>("TmaWarpSpecializedPingpongFP8Overlap"),
            gk::KernelSchedule::TmaWarpSpecializedPingpongFP8Overlap);
}

}  // namespace
