// tests/unit/catalog_test.cpp: configuration tables per architecture and type, the problem-shape heuristic, and
// the validation rules' messages.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "catalog/catalog.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"

namespace gk = gemmkit;
namespace cat = gemmkit::catalog;

namespace {

cat::OperandTypes types(gk::DataType ab, gk::DataType cd, gk::DataType acc, gk::Layout la = gk::Layout::RowMajor,
                        gk::Layout lb = gk::Layout::RowMajor) {
  return {ab, ab, cd, cd, acc, la, lb, gk::Layout::RowMajor};
}

gk::KernelSpec sm90_f16_spec() {
  gk::GemmOptions o;
  o.element = gk::DataType::f16;
  o.element_accumulator = gk::DataType::f32;
  o.layout = gk::Layout::RowMajor;
  o.cc = 90;
  return gk::Gemm(o).spec();
}

// That plan's configurations, as run() weighs them.
std::vector<gk::TileDescription> sm90_f16_tiles() {
  return cat::tile_descriptions(90, gk::OpClass::TensorOp,
                                types(gk::DataType::f16, gk::DataType::f16, gk::DataType::f32), cat::limits_for_cc(90));
}

}  // namespace

TEST(Catalog, EnumerationCountsPerArchitectureAndType) {
  const auto sm80 = cat::limits_for_cc(80), sm90 = cat::limits_for_cc(90);
  const auto f16 = types(gk::DataType::f16, gk::DataType::f16, gk::DataType::f32);
  EXPECT_EQ(cat::tile_descriptions(80, gk::OpClass::TensorOp, f16, sm80).size(), 22u);
  EXPECT_EQ(cat::tile_descriptions(90, gk::OpClass::TensorOp, f16, sm90).size(),
            153u);  // 36 on the lean epilogue, 12 of them Stream-K; 3 narrow tiles; 3 on the N-split kernel
  EXPECT_EQ(cat::tile_descriptions(80, gk::OpClass::Simt, f16, sm80).size(), 1u);  // one generic SIMT tile
  const auto f32 = types(gk::DataType::f32, gk::DataType::f32, gk::DataType::f32);
  // tf32, 3xTF32, fast_bf16 and fast_f16 each (18 tiles)
  EXPECT_EQ(cat::tile_descriptions(80, gk::OpClass::TensorOp, f32, sm80).size(), 72u);
  EXPECT_EQ(cat::tile_descriptions(80, gk::OpClass::Simt, f32, sm80).size(), 11u);
  const auto f64 = types(gk::DataType::f64, gk::DataType::f64, gk::DataType::f64);
  EXPECT_EQ(cat::tile_descriptions(80, gk::OpClass::TensorOp, f64, sm80).size(), 13u);
  const auto s8 =
      types(gk::DataType::s8, gk::DataType::s32, gk::DataType::s32, gk::Layout::RowMajor, gk::Layout::ColumnMajor);
  EXPECT_EQ(cat::tile_descriptions(80, gk::OpClass::TensorOp, s8, sm80).size(), 16u);
  // 99 KB of shared memory (SM86/89) prunes the deepest SM80 tiles.
  EXPECT_LT(cat::tile_descriptions(86, gk::OpClass::TensorOp, f16, cat::limits_for_cc(86)).size(), 22u);
}

TEST(Catalog, Sm90NarrowAlignmentsGetCpAsyncConfigurationsOnly) {
  const auto f16 = types(gk::DataType::f16, gk::DataType::f16, gk::DataType::f32);
  const auto tiles = cat::tile_descriptions(90, gk::OpClass::TensorOp, f16, cat::limits_for_cc(90), 4, 4);
  ASSERT_FALSE(tiles.empty());
  for (const auto& td : tiles) {
    EXPECT_EQ(td.cluster_shape, (gk::Shape3{1, 1, 1}));
    EXPECT_TRUE(td.kernel_schedule == gk::KernelSchedule::Auto ||
                td.kernel_schedule == gk::KernelSchedule::CpAsyncWarpSpecializedCooperative)
        << td.to_string();
  }
}

TEST(Catalog, OpclassesAndAlignments) {
  const auto f16 = types(gk::DataType::f16, gk::DataType::f16, gk::DataType::f32);
  EXPECT_EQ(cat::supported_opclasses(90, f16), (std::vector<gk::OpClass>{gk::OpClass::TensorOp, gk::OpClass::Simt}));
  // 1: the two-stage mainloop's element-by-element loads (rows of an odd leading dimension).
  EXPECT_EQ(cat::operand_alignments(80, gk::OpClass::TensorOp, gk::DataType::f16, f16), (std::vector<int>{8, 4, 2, 1}));
  const auto bf16 = types(gk::DataType::bf16, gk::DataType::bf16, gk::DataType::f32);
  EXPECT_EQ(cat::supported_opclasses(80, bf16), (std::vector<gk::OpClass>{gk::OpClass::TensorOp, gk::OpClass::Simt}));
  EXPECT_EQ(
      cat::kernel_cc_for(90, gk::OpClass::TensorOp, types(gk::DataType::f64, gk::DataType::f64, gk::DataType::f64)),
      80);  // f64 tensor cores: CUTLASS 2.x kernels
}

TEST(CatalogHeuristic, LargeProblemsKeepTheDefault) {
  const auto spec = sm90_f16_spec();
  const auto tiles = sm90_f16_tiles();
  EXPECT_EQ(cat::choose_tile(tiles, spec, {8192, 8192, 8192, 1}, 132), 0u);
  EXPECT_EQ(cat::choose_tile(tiles, spec, {2400, 3232, 4096, 1}, 132), 0u);
  EXPECT_EQ(cat::choose_tile(tiles, spec, {128, 128, 128, 1}, 132), 0u);  // tiny: one kernel serves them all
  EXPECT_EQ(cat::choose_tile(tiles, spec, {512, 512, 512, 1}, 132), 0u);  // below 1 GFLOP
}

TEST(CatalogHeuristic, WavesCountWholeClusters) {
  const auto spec = sm90_f16_spec();
  const auto tiles = sm90_f16_tiles();
  // M = 128: a 2x1 cluster of 128-row tiles would run an idle CTA beside every busy one; the choice covers the 128
  // rows with one cluster row and no idle CTA.
  for (const std::int64_t n : {14336, 28672}) {
    const auto chosen = tiles[cat::choose_tile(tiles, spec, {128, n, 4096, 1}, 132)];
    EXPECT_LE(chosen.cta_tile()[0] * chosen.cluster_shape[0], 128) << n << ": " << chosen.to_string();
  }
}

TEST(CatalogHeuristic, TheTransposedClusterIsWeighedWhereTheDefaultClusterPads) {
  const auto spec = sm90_f16_spec();
  const auto tiles = sm90_f16_tiles();
  // M = 128, N = 28672: one wave of 128 x 256 tiles in 1x2 clusters beats two of 64 x 256 in 2x1 by the estimate.
  const auto wide = tiles[cat::choose_tile(tiles, spec, {128, 28672, 8192, 1}, 132)];
  EXPECT_EQ(wide.cta_tile(), (gk::Shape3{128, 256, 64})) << wide.to_string();
  EXPECT_EQ(wide.cluster_shape, (gk::Shape3{1, 2, 1})) << wide.to_string();
  // N = 14336: the transposed cluster only ties (56 tiles of 128 x 256 or 112 of 128 x 128 against 112 of 64 x 256),
  // so the default's cluster stays.
  const auto tie = tiles[cat::choose_tile(tiles, spec, {128, 14336, 4096, 1}, 132)];
  EXPECT_EQ(tie.cluster_shape, (gk::Shape3{2, 1, 1})) << tie.to_string();
}

TEST(CatalogHeuristic, SmallProblemsTakeSmallerTilesAndLongKTakesStreamK) {
  const auto spec = sm90_f16_spec();
  const auto tiles = sm90_f16_tiles();
  // 1024 x 1024 has 32 default (128x256) tiles for 132 SMs: smaller tiles fill more SMs (at K = 4096 split-K 2 on
  // 128x128 tiles, tests/unit/split_k_test.cpp; at K = 1024 128 unsplit 64x128 tiles).
  for (const std::int64_t k : {1024, 4096}) {
    const auto mid = tiles[cat::choose_tile(tiles, spec, {1024, 1024, k, 1}, 132)];
    EXPECT_LT(mid.cta_tile()[0] * mid.cta_tile()[1], 128 * 256) << k << ": " << mid.to_string();
  }
  const auto long_k = tiles[cat::choose_tile(tiles, spec, {256, 512, 65536, 1}, 132)];
  EXPECT_EQ(long_k.tile_scheduler, gk::TileScheduler::StreamK) << long_k.to_string();
  EXPECT_EQ(long_k.cta_tile()[0] * long_k.cta_tile()[1], 128 * 128) << long_k.to_string();
  // 2 waves of 128x256 tiles plus one: the quantized last wave goes to Stream-K.
  const auto quantized = tiles[cat::choose_tile(tiles, spec, {128 * 265, 256, 4096, 1}, 132)];
  EXPECT_EQ(quantized.tile_scheduler, gk::TileScheduler::StreamK) << quantized.to_string();
  EXPECT_EQ(quantized.cta_tile(), tiles.front().cta_tile());
}

TEST(CatalogHeuristic, ASkinnyOutputTakesATileThatCoversIt) {
  const auto spec = sm90_f16_spec();
  const auto tiles = sm90_f16_tiles();
  ASSERT_EQ(tiles.front().cta_tile()[1], 256);
  // A 1x1 conv's GEMM at batch 128: 401408 x 64 x 64. The default 128x256 tile would compute 4x the output; a tile
  // 64 wide (128 x 64) computes none of it in vain.
  const auto skinny = tiles[cat::choose_tile(tiles, spec, {401408, 64, 64, 1}, 132)];
  EXPECT_EQ(skinny.cta_tile()[1], 64) << skinny.to_string();
  EXPECT_EQ(skinny.cluster_shape, tiles.front().cluster_shape);
  // A covered output keeps the default (the first entry: the tests above).
  EXPECT_EQ(cat::choose_tile(tiles, spec, {401408, 256, 64, 1}, 132), 0u);
}

TEST(CatalogHeuristic, ALongKWalkSplitsEvenBelowTheFlopFloorAndALargeLastWaveWeighsSmallerTiles) {
  const auto spec = sm90_f16_spec();
  const auto tiles = sm90_f16_tiles();
  // A 1x1 conv's wgrad at batch 32: 64 x 64 over K = 100352 is 0.8 GFLOP, but one CTA would walk 1568 K steps.
  const auto walk = tiles[cat::choose_tile(tiles, spec, {64, 64, 100352, 1}, 132)];
  EXPECT_EQ(walk.tile_scheduler, gk::TileScheduler::StreamK) << walk.to_string();
  // Small and short: the default serves it.
  EXPECT_EQ(cat::choose_tile(tiles, spec, {64, 64, 2048, 1}, 132), 0u);
  // 196 default tiles (25088 x 256 x 512, a 1x1 conv at batch 32) are 1.5 waves: 392 tiles of 128 x 128 fill 3.
  const auto waves = tiles[cat::choose_tile(tiles, spec, {25088, 256, 512, 1}, 132)];
  EXPECT_EQ(waves.cta_tile()[0] * waves.cta_tile()[1], 128 * 128) << waves.to_string();
  EXPECT_EQ(waves.cluster_shape, tiles.front().cluster_shape);
}

TEST(CatalogHeuristic, AnExplicitStreamKSwizzleOrSingleTileIsKept) {
  auto spec = sm90_f16_spec();
  spec.swizzle = gk::Swizzle::StreamK;
  const auto tiles = sm90_f16_tiles();
  EXPECT_EQ(cat::choose_tile(tiles, spec, {128, 128, 128, 1}, 132), 0u);
  EXPECT_EQ(cat::choose_tile({tiles[5]}, sm90_f16_spec(), {128, 128, 128, 1}, 132), 0u);
}

// Decode shapes (at most 16 rows against 16M weights or more) run transposed on the narrow 64 x 16 tile: in clusters
// of four along the weights' rows while those take at most half the SMs, else in pairs; not where the tiles would
// leave more than half the SMs idle, and not for plans without the narrow tiles (tf32).
TEST(CatalogHeuristic, DecodeShapesTakeTheNarrowTileInClustersThatFitTheSms) {
  EXPECT_TRUE(cat::transposes_for_decode({1, 4096, 4096, 1}));
  EXPECT_TRUE(cat::transposes_for_decode({16, 4096, 4096, 1}));
  EXPECT_FALSE(cat::transposes_for_decode({17, 4096, 4096, 1}));
  EXPECT_FALSE(cat::transposes_for_decode({16, 2048, 4096, 1}));  // 8M weights: not a read of the weights alone
  EXPECT_FALSE(cat::transposes_for_decode({16, 4096, 4096, 2}));
  // The transposed plan's layouts: A' = B^T and B' = A^T column-major, D^T column-major.
  const cat::OperandTypes transposed{gk::DataType::f16,       gk::DataType::f16,      gk::DataType::f16,
                                     gk::DataType::f16,       gk::DataType::f32,      gk::Layout::ColumnMajor,
                                     gk::Layout::ColumnMajor, gk::Layout::ColumnMajor};
  const auto tiles = cat::tile_descriptions(90, gk::OpClass::TensorOp, transposed, cat::limits_for_cc(90));
  auto cluster_rows = [&](const cat::ProblemShape& shape) {
    const std::size_t i = cat::choose_decode_tile(tiles, shape, 132);
    if (i == tiles.size()) return 0;
    EXPECT_EQ(tiles[i].cta_tile(), (gk::Shape3{64, 16, 64}));
    EXPECT_EQ(tiles[i].kernel_schedule, gk::KernelSchedule::TmaWarpSpecializedPingpong);
    return tiles[i].cluster_shape[0];
  };
  EXPECT_EQ(cluster_rows({4096, 16, 4096, 1}), 4);   // 64 tiles
  EXPECT_EQ(cluster_rows({4096, 1, 14336, 1}), 4);   // 64 tiles over a longer K
  EXPECT_EQ(cluster_rows({8192, 16, 28672, 1}), 2);  // 128 tiles: 32 clusters of four do not fit
  EXPECT_EQ(cluster_rows({14336, 8, 4096, 1}), 2);   // 224 tiles
  EXPECT_EQ(cluster_rows({2048, 16, 16384, 1}), 0);  // 32 tiles: split-K instead
  const cat::OperandTypes tf32{gk::DataType::f32,       gk::DataType::f32,      gk::DataType::f32,
                               gk::DataType::f32,       gk::DataType::f32,      gk::Layout::ColumnMajor,
                               gk::Layout::ColumnMajor, gk::Layout::ColumnMajor};
  const auto tf32_tiles = cat::tile_descriptions(90, gk::OpClass::TensorOp, tf32, cat::limits_for_cc(90));
  EXPECT_EQ(cat::choose_decode_tile(tf32_tiles, {4096, 16, 4096, 1}, 132), tf32_tiles.size());
}

TEST(CatalogHeuristic, SplitKFillsFourWavesWithinTheReduction) {
  // res2's 1x1 wgrad at batch 128 on one 64 x 64 output tile: K = 401408 = 6272 steps of 64; 4 waves of 132 SMs.
  EXPECT_EQ(cat::choose_split_k(1, 6272, 132), 528);
  EXPECT_EQ(cat::choose_split_k(9, 6272, 132), 59);                          // ceil(528 / 9)
  EXPECT_EQ(cat::choose_split_k(131, 6272, 132), 5);                         // just under a wave: ceil(528 / 131)
  EXPECT_EQ(cat::choose_split_k(1, 100, 132), 12);                           // at least 8 steps per slice: 100 / 8
  EXPECT_EQ(cat::choose_split_k(4, 32, 108), 4);                             // 32 / 8
  EXPECT_EQ(cat::choose_split_k(1, 15, 132), 1);                             // too short to split
  EXPECT_EQ(cat::choose_split_k(132, 100000, 132), 1);                       // the output fills a wave
  EXPECT_EQ(cat::choose_split_k(1, 1 << 30, 20000), cat::kMaxSplitKSlices);  // the grid's z extent
  EXPECT_EQ(cat::choose_split_k(0, 6272, 132), 1);
  EXPECT_EQ(cat::choose_split_k(1, 6272, 0), 1);
  // Deterministic: the same numbers, the same answer.
  EXPECT_EQ(cat::choose_split_k(7, 5000, 132), cat::choose_split_k(7, 5000, 132));
}

TEST(CatalogHeuristic, SplitKTilePrefersSmallTilesAndCapsThePartialSums) {
  gk::TileDescription small, large;
  small.threadblock_shape = {64, 64, 64};
  large.threadblock_shape = {256, 128, 64};
  // A 64 x 64 output over K = 401408: the 64 x 64 tile (one eighth of the large tile's work), 528 slices.
  auto choice = cat::choose_split_k_tile({large, small}, {64, 64, 401408, 1}, 132);
  EXPECT_EQ(choice.tile, 1u);
  EXPECT_EQ(choice.slices, 528);
  // res5's 3x3 wgrad at batch 128 (512 x 4608 over 6272): 72 tiles would take 8 slices, but their partial sums
  // would move 8 x 512 x 4608 x 8 bytes, far more than the operands' (512 + 4608) x 6272 x 2: capped at 3.
  choice = cat::choose_split_k_tile({large}, {512, 4608, 6272, 1}, 132);
  EXPECT_EQ(choice.tile, 0u);
  EXPECT_EQ(choice.slices, 3);
  // An output that fills the GPU is not split.
  EXPECT_EQ(cat::choose_split_k_tile({large}, {4096, 4096, 4096, 1}, 132).slices, 1);
}

TEST(CatalogValidation, ParallelSplitKIsAConvOption) {
  gk::GemmOptions o;
  o.element = gk::DataType::f16;
  o.element_accumulator = gk::DataType::f32;
  o.layout = gk::Layout::RowMajor;
  o.cc = 80;
  gk::KernelSpec spec = gk::Gemm(o).spec();
  spec.split_k_mode = gk::SplitKMode::Parallel;
  EXPECT_THROW(cat::validate(spec, cat::limits_for_cc(80)), gk::ConfigError);
}

TEST(CatalogValidation, EveryRuleSaysWhatToChange) {
  const auto limits = cat::limits_for_cc(90);
  auto message = [&](gk::KernelSpec spec) -> std::string {
    try {
      cat::validate(spec, limits);
    } catch (const gk::ConfigError& e) {
      return e.what();
    }
    return "valid";
  };
  const gk::KernelSpec base = sm90_f16_spec();
  EXPECT_EQ(message(base), "valid");

  auto s = base;
  s.tile.stages = 1;
  EXPECT_EQ(message(s),
            "Stage count 1 is invalid for SM90 kernels: use 0 (as many as fit) or an explicit count of at "
            "least 2.");
  s = base;
  s.tile.cluster_shape = {3, 1, 1};
  s.tile.threadblock_shape = {384, 256, 64};
  EXPECT_EQ(message(s), "valid");  // 3 CTAs is a legal portable cluster
  s.tile.cluster_shape = {2, 1, 1};
  s.tile.threadblock_shape = {255, 256, 64};
  EXPECT_EQ(message(s),
            "Threadblock shape 255x256x64 must be a positive multiple of the cluster shape 2x1x1 in every "
            "dimension.");
  s = base;
  s.alignment_a = 16;
  EXPECT_EQ(message(s),
            "Alignment 16 of operand A is invalid: it must be a power of two of at most 8 elements (128 "
            "bits of f16).");
  s = base;
  s.alignment_a = 4;
  s.tile.kernel_schedule = gk::KernelSchedule::TmaWarpSpecializedCooperative;
  s.tile.epilogue_schedule = gk::EpilogueSchedule::TmaWarpSpecializedCooperative;
  EXPECT_NE(message(s).find("needs TMA loads, which need 16-byte aligned rows"), std::string::npos) << message(s);
  s.tile.cluster_shape = {1, 1, 1};
  s.tile.threadblock_shape = {128, 256, 64};
  EXPECT_NE(message(s).find("Use a CpAsync schedule or pad the leading dimensions"), std::string::npos) << message(s);
  s = base;
  s.tile.kernel_schedule = gk::KernelSchedule::TmaWarpSpecializedPingpong;
  s.tile.epilogue_schedule = gk::EpilogueSchedule::TmaWarpSpecialized;
  s.tile.threadblock_shape = {128, 128, 64};
  s.tile.cluster_shape = {1, 1, 1};
  s.tile.kernel_schedule = gk::KernelSchedule::TmaWarpSpecializedCooperative;
  s.tile.threadblock_shape = {64, 128, 64};
  EXPECT_NE(message(s).find("Cooperative kernel schedules need a CTA tile M of at least 128"), std::string::npos);
  s = base;
  s.activation = gk::Activation::GELU;
  s.tile.kernel_schedule = gk::KernelSchedule::TmaWarpSpecializedCooperative;
  s.tile.epilogue_schedule = gk::EpilogueSchedule::NoSmemWarpSpecialized;
  EXPECT_NE(message(s).find("need a TMA epilogue"), std::string::npos);
  s = base;
  s.swizzle = gk::Swizzle::Identity4;
  EXPECT_NE(message(s).find("is a CUTLASS 2.x threadblock swizzle"), std::string::npos);
  s = base;
  s.family = gk::KernelFamily::Sm80Universal;
  s.kernel_cc = 80;
  s.tile.stages = 3;
  s.tile.warp_count = {4, 2, 1};
  EXPECT_NE(message(s).find("needs an SM90 tensor-op kernel"), std::string::npos);
  s.tile.cluster_shape = {1, 1, 1};
  s.tile.threadblock_shape = {256, 128, 64};
  s.element_d = gk::DataType::f32;
  EXPECT_EQ(message(s), "CUTLASS 2.x kernels need element C (f16) equal to element D (f32).");
}
