// tests/unit/split_k_test.cpp: the run-time choice of split-K and of 64-row tiles (which shapes, how many splits) and
// of the scheduler's swizzle, and the plan's split-K settings and their errors. No GPU: spec_for / k_split_for on SM90
// plans.
#include <gtest/gtest.h>

#include <array>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "catalog/catalog.hpp"
#include "gemmkit/conv2d.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"
#include "support/cli.hpp"
#include "verify/shape_suite.hpp"

namespace gk = gemmkit;
namespace cat = gemmkit::catalog;

namespace {

constexpr int kH200Sms = 132;

using gk::testing::f16_row;

gk::GemmOptions sm80_kernels() {
  gk::GemmOptions o = f16_row(90);
  o.kernel_cc = 80;
  return o;
}

struct Tables {
  gk::KernelSpec spec = gk::Gemm(f16_row(90)).spec();
  std::vector<gk::TileDescription> tiles =
      cat::tile_descriptions(90, gk::OpClass::TensorOp,
                             {gk::DataType::f16, gk::DataType::f16, gk::DataType::f16, gk::DataType::f16,
                              gk::DataType::f32, gk::Layout::RowMajor, gk::Layout::RowMajor, gk::Layout::RowMajor},
                             cat::limits_for_cc(90));
};

// What run() would do for a shape: the configuration and the decomposition it passes.
struct Choice {
  gk::TileDescription tile;
  gk::KSplit split;
};

Choice choose(const Tables& t, cat::ProblemShape shape, bool split_k = true) {
  const gk::TileDescription& tile = t.tiles[cat::choose_tile(t.tiles, t.spec, shape, kH200Sms, split_k)];
  gk::KSplit split{gk::Decomposition::DataParallel, 1};
  if (tile.tile_scheduler == gk::TileScheduler::StreamK) {
    split = split_k ? cat::choose_k_split(tile, shape, kH200Sms) : gk::KSplit{};
  }
  return {tile, split};
}

gk::TensorView probe(long rows, long cols) {
  alignas(256) static char base[256];
  return gk::TensorView::on_gpu(base, gk::DataType::f16, {rows, cols}, gk::Layout::RowMajor, 0);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const gk::ConfigError& e) {
    return e.what();
  }
  return "(no ConfigError)";
}

}  // namespace

TEST(SplitKChoice, LongKShapesSplitSoThatTilesTimesSplitsFillTheSms) {
  const Tables t;
  // 512x512: 4x4 CTA tiles of 128x128 (cluster 2x1 fits), 256 K steps: 132 / 16 = 8 splits.
  const Choice a = choose(t, {512, 512, 16384, 1});
  EXPECT_EQ(a.tile.tile_scheduler, gk::TileScheduler::StreamK);
  EXPECT_EQ(a.tile.cta_tile(), (gk::Shape3{128, 128, 64})) << a.tile.to_string();
  EXPECT_EQ(a.split, (gk::KSplit{gk::Decomposition::SplitK, 8}));
  // 1024x1024: 64 tiles -> 2 splits.
  EXPECT_EQ(choose(t, {1024, 1024, 32768, 1}).split, (gk::KSplit{gk::Decomposition::SplitK, 2}));
  // 256x4096: 64 Stream-K tiles -> 2 splits (64 x 64 tiles would be 2 waves).
  EXPECT_EQ(choose(t, {256, 4096, 16384, 1}).split, (gk::KSplit{gk::Decomposition::SplitK, 2}));
  // One output tile and a very long K: capped at kMaxSplits.
  EXPECT_EQ(choose(t, {128, 128, 1 << 20, 1}).split, (gk::KSplit{gk::Decomposition::SplitK, cat::kMaxSplits}));
}

TEST(SplitKChoice, SplitsAreBoundedByKAndNeverChosenForManyTilesOrShortK) {
  const Tables t;
  gk::TileDescription stream_k = t.tiles[cat::smallest_stream_k(t.tiles, {512, 512, 16384, 1})];
  // 16 tiles but only 32 K steps: at most 32 / kMinKTilesPerSplit = 2 splits.
  EXPECT_EQ(cat::choose_k_split(stream_k, {512, 512, 2048, 1}, kH200Sms), (gk::KSplit{gk::Decomposition::SplitK, 2}));
  // 16 tiles, 16 K steps: one split each; CUTLASS's heuristic.
  EXPECT_EQ(cat::choose_k_split(stream_k, {512, 512, 1024, 1}, kH200Sms), gk::KSplit{});
  // 67 tiles: more than half the SMs.
  EXPECT_EQ(cat::choose_k_split(stream_k, {128 * 67, 128, 65536, 1}, kH200Sms), gk::KSplit{});
  // Batches count as tiles: 16 x 8 = 128.
  EXPECT_EQ(cat::choose_k_split(stream_k, {512, 512, 16384, 8}, kH200Sms), gk::KSplit{});
  // Wave-quantized problems keep Stream-K with CUTLASS's heuristic.
  const Choice q = choose(t, {128 * 265, 256, 4096, 1});
  EXPECT_EQ(q.tile.tile_scheduler, gk::TileScheduler::StreamK);
  EXPECT_EQ(q.split, gk::KSplit{});
}

TEST(SplitKChoice, DecodeShapesTakeSixtyFourRowTilesOrSplitK) {
  const Tables t;
  // M = 16, N = 14336: 112 CTAs of 64x128 (cluster 1x1) cover most SMs; no split.
  const Choice wide = choose(t, {16, 14336, 4096, 1});
  EXPECT_EQ(wide.tile.cta_tile(), (gk::Shape3{64, 128, 64})) << wide.tile.to_string();
  EXPECT_EQ(wide.tile.cluster_shape, (gk::Shape3{1, 1, 1}));
  EXPECT_EQ(wide.split.mode, gk::Decomposition::DataParallel);
  // N = 28672: 224 such CTAs are two waves; one wave of 64x256 is cheaper.
  EXPECT_EQ(choose(t, {16, 28672, 8192, 1}).tile.cta_tile(), (gk::Shape3{64, 256, 64}));
  // N = 4096: 32 CTAs of 64x128 would leave 100 SMs idle: split-K 4 on 128x128 tiles (cluster 1x2).
  const Choice narrow = choose(t, {16, 4096, 4096, 1});
  EXPECT_EQ(narrow.tile.tile_scheduler, gk::TileScheduler::StreamK) << narrow.tile.to_string();
  EXPECT_EQ(narrow.tile.cluster_shape, (gk::Shape3{1, 2, 1}));
  EXPECT_EQ(narrow.split, (gk::KSplit{gk::Decomposition::SplitK, 4}));
  EXPECT_EQ(choose(t, {16, 8192, 28672, 1}).split, (gk::KSplit{gk::Decomposition::SplitK, 2}));
  // The choice keeps CUTLASS's epilogue; its quick twin (what run() builds first) is the same Stream-K tile on the
  // lean epilogue.
  EXPECT_NE(narrow.tile.epilogue_schedule, gk::EpilogueSchedule::Lean);
  gk::KernelSpec narrow_spec = t.spec;
  narrow_spec.tile = narrow.tile;
  const std::optional<std::size_t> twin = cat::quick_twin_index(t.tiles, narrow_spec);
  ASSERT_TRUE(twin);
  EXPECT_EQ(t.tiles[*twin].epilogue_schedule, gk::EpilogueSchedule::Lean);
  EXPECT_EQ(t.tiles[*twin].tile_scheduler, gk::TileScheduler::StreamK);
  EXPECT_EQ(t.tiles[*twin].cta_tile(), narrow.tile.cta_tile());
  EXPECT_EQ(t.tiles[*twin].cluster_shape, narrow.tile.cluster_shape);
  // GEMMKIT_SPLIT_K=off: the 64-row tile instead.
  const Choice off = choose(t, {16, 4096, 4096, 1}, false);
  EXPECT_EQ(off.tile.cta_tile(), (gk::Shape3{64, 128, 64}));
  EXPECT_EQ(off.split.mode, gk::Decomposition::DataParallel);
  // Small problems keep the default (one kernel serves them all).
  EXPECT_EQ(cat::choose_tile(t.tiles, t.spec, {16, 1024, 1024, 1}, kH200Sms), 0u);
  EXPECT_EQ(cat::choose_tile(t.tiles, t.spec, {64, 64, 64, 1}, kH200Sms), 0u);
}

TEST(SplitKChoice, WithoutAutomaticSplitKLongKTakesCutlassStreamKHeuristic) {
  const Tables t;
  const Choice a = choose(t, {512, 512, 16384, 1}, false);
  EXPECT_EQ(a.tile.tile_scheduler, gk::TileScheduler::StreamK);
  EXPECT_EQ(a.split, gk::KSplit{});
  // K < 8 max(M, N): no Stream-K without split-K.
  EXPECT_NE(choose(t, {128, 4096, 16384, 1}, false).tile.tile_scheduler, gk::TileScheduler::StreamK);
}

TEST(SplitKChoice, OneWaveOfSmallTilesRunsUnsplit) {
  const Tables t;
  // M = 128 against N = 4096: 2 x 64 tiles of 64 x 64 in 2x1 clusters, 128 of 132 SMs busy, whatever K.
  for (const std::int64_t k : {4096, 14336, 16384}) {
    const Choice c = choose(t, {128, 4096, k, 1});
    EXPECT_EQ(c.tile.cta_tile(), (gk::Shape3{64, 64, 64})) << c.tile.to_string();
    EXPECT_EQ(c.tile.cluster_shape, (gk::Shape3{2, 1, 1}));
    EXPECT_EQ(c.tile.tile_scheduler, gk::TileScheduler::Default);
    EXPECT_EQ(c.split.mode, gk::Decomposition::DataParallel) << k;
  }
  // 104 tiles (M = 128, N = 3328) still fill 3/4 of the SMs; 96 (N = 3072) and 64 (512x512) do not: split-K.
  EXPECT_EQ(choose(t, {128, 3328, 8192, 1}).tile.cta_tile(), (gk::Shape3{64, 64, 64}));
  EXPECT_EQ(choose(t, {128, 3072, 8192, 1}).split.mode, gk::Decomposition::SplitK);
  EXPECT_EQ(choose(t, {512, 512, 16384, 1}).split.mode, gk::Decomposition::SplitK);
  // Two waves of them (N = 8192) split K instead.
  EXPECT_EQ(choose(t, {128, 8192, 8192, 1}).split.mode, gk::Decomposition::SplitK);
}

// Counted over the benchmark's suite (f16): which shapes run split-K, with how many splits. Pinned so that a change
// of the heuristic shows up here (and the benchmark is rerun).
TEST(SplitKChoice, SuiteShapesThatRunSplitK) {
  const Tables t;
  std::map<std::string, int> split_k;
  int sixty_four_rows = 0;
  for (const auto& s : gk::verify::shape_suite()) {
    const Choice c = choose(t, {s.m, s.n, s.k, 1});
    if (c.split.mode == gk::Decomposition::SplitK) split_k[s.text()] = c.split.splits;
    if (c.tile.cta_tile()[0] == 64) ++sixty_four_rows;
  }
  const std::map<std::string, int> expected = {{"512x512x16384", 8}, {"1024x1024x32768", 2}, {"16x4096x4096", 4},
                                               {"16x4096x14336", 4}, {"16x8192x28672", 2},   {"128x8192x28672", 2},
                                               {"1x4096x4096", 4},   {"1x4096x14336", 4},    {"1x8192x28672", 2},
                                               {"8x4096x4096", 4},   {"8x4096x14336", 4},    {"8x8192x28672", 2}};
  EXPECT_EQ(split_k, expected);
  // M = 1, 8, 16 against N = 14336 and 28672; M = 128 against N = 14336 (2x1 clusters of 64 x 256) and N = 4096 (64 x
  // 64, one wave). 1024^3 takes 128 CTAs of 128 x 64 (unsplit: its K is too short to split).
  EXPECT_EQ(sixty_four_rows, 10);
  const Choice square = choose(t, {1024, 1024, 1024, 1});
  EXPECT_EQ(square.tile.cta_tile(), (gk::Shape3{128, 64, 64}));
  EXPECT_EQ(square.tile.cluster_shape, (gk::Shape3{1, 1, 1}));
  EXPECT_EQ(square.split.mode, gk::Decomposition::DataParallel);
  // 3000^3 (2 waves + 24 tiles of 128 x 256) takes 128 x 192 tiles (3 full waves) rather than Stream-K.
  const Choice odd = choose(t, {3000, 3000, 3000, 1});
  EXPECT_EQ(odd.tile.cta_tile(), (gk::Shape3{128, 192, 64}));
  EXPECT_EQ(odd.tile.tile_scheduler, gk::TileScheduler::Default);
  // 1024x14336x4096: 3 waves + 52 tiles of 128 x 256, and no tile shape fills them better: Stream-K.
  const Choice partly_idle = choose(t, {1024, 14336, 4096, 1});
  EXPECT_EQ(partly_idle.tile.cta_tile(), (gk::Shape3{128, 256, 64}));
  EXPECT_EQ(partly_idle.tile.tile_scheduler, gk::TileScheduler::StreamK);
}

TEST(SwizzleChoice, ProblemsManyClustersTallAndWideSwizzleWithoutPaddingATile) {
  const Tables t;
  const gk::TileDescription& front = t.tiles.front();  // 128 x 256 CTAs in 2 x 1 clusters
  ASSERT_EQ(front.cta_tile()[0], 128);
  ASSERT_EQ(front.cta_tile()[1], 256);
  ASSERT_EQ(front.cluster_shape, (gk::Shape3{2, 1, 1}));
  // Large problems: without a swizzle a wave of tiles spans a whole extent and streams that operand again every wave.
  EXPECT_EQ(cat::choose_max_swizzle(front, {16384, 16384, 16384}), 8);
  EXPECT_EQ(cat::choose_max_swizzle(front, {8192, 28672, 8192}), 8);
  // 56 x 28 CTA tiles: 8 would pad M to 64, 4 pads nothing.
  EXPECT_EQ(cat::choose_max_swizzle(front, {7168, 7168, 4096}), 4);
  // 65 CTA rows: any swizzle pads.
  EXPECT_EQ(cat::choose_max_swizzle(front, {8320, 8192, 4096}), 1);
  // Few clusters along one extent (a wave spans it already): 4 at M = 1024 (swizzle 8 would double the tiles), 16 at
  // 4096.
  EXPECT_EQ(cat::choose_max_swizzle(front, {1024, 28672, 8192}), 1);
  EXPECT_EQ(cat::choose_max_swizzle(front, {4096, 4096, 4096}), 1);
  EXPECT_EQ(cat::choose_max_swizzle(front, {8192, 4096, 4096}), 1);

  // What run() passes: the choice for the kernel it picks, the plan's setting when given, 0 without a persistent
  // scheduler.
  gk::Gemm plan(f16_row(90));
  const auto swizzle_for = [](gk::Gemm& p, long m, long n, long k) {
    const auto [A, B, D] = p.stand_in_tensors(m, n, k);
    return p.max_swizzle_for(A, B, nullptr, D);
  };
  EXPECT_EQ(swizzle_for(plan, 16384, 16384, 16384), 8);
  EXPECT_EQ(swizzle_for(plan, 1024, 28672, 8192), 1);
  EXPECT_EQ(swizzle_for(plan, 512, 512, 16384), 1);  // parallel split-K's 128 x 64 tiles: 4 x 8 of them
  gk::Gemm sm80_plan(sm80_kernels());
  EXPECT_EQ(swizzle_for(sm80_plan, 16384, 16384, 16384), 0);
  EXPECT_EQ(plan.max_swizzle_size(), 0);  // run() chooses
  plan.set_max_swizzle_size(8);
  EXPECT_EQ(plan.max_swizzle_size(), 8);
  EXPECT_EQ(swizzle_for(plan, 1024, 28672, 8192), 8);  // the plan's setting wins
  plan.set_max_swizzle_size(0);
  EXPECT_EQ(plan.max_swizzle_size(), 0);
  EXPECT_NE(error_of([&] { plan.set_max_swizzle_size(3); }).find("1, 2, 4 or 8"), std::string::npos);
  gk::Gemm sm80(sm80_kernels());
  sm80.set_max_swizzle_size(0);
  EXPECT_NE(error_of([&] { sm80.set_max_swizzle_size(4); }).find("IdentitySwizzle4"), std::string::npos);
}

// spec_for_problem: spec_for's kernel for packed device tensors of the plan's types and layouts, without tensors
// (FP8 on a build machine, gemmkit plan --m --n --k, pack lines); batches too (a Conv2d plan has no such method).
TEST(SpecForProblem, IsTheKernelSpecForPicksForPackedDeviceTensors) {
  gk::Gemm plan(f16_row(90));
  for (const auto& [m, n, k] : {std::array<long, 3>{512, 512, 16384},
                                {8192, 8192, 8192},
                                {1024, 1024, 1024},
                                {3000, 3000, 3000},
                                {16, 4096, 4096}}) {
    EXPECT_EQ(plan.spec_for_problem(m, n, k).name(),
              plan.spec_for(probe(m, k), probe(k, n), nullptr, probe(m, n)).name())
        << m << "x" << n << "x" << k;
  }
  EXPECT_EQ(plan.spec_for_problem(512, 512, 16384).split_k_mode, gk::SplitKMode::Parallel);
  alignas(256) static char base[256];
  const auto batched = [&](long rows, long cols) {
    return gk::TensorView::on_gpu(base, gk::DataType::f16, {3, rows, cols}, gk::Layout::RowMajor, 0);
  };
  EXPECT_EQ(plan.spec_for_problem(64, 96, 128, 3).name(),
            plan.spec_for(batched(64, 128), batched(128, 96), nullptr, batched(64, 96)).name());

  gk::GemmOptions fp8;
  fp8.element_a = fp8.element_b = gk::DataType::e4m3;
  fp8.element_c = fp8.element_d = gk::DataType::bf16;
  fp8.layout_a = fp8.layout_c = gk::Layout::RowMajor;
  fp8.layout_b = gk::Layout::ColumnMajor;
  fp8.cc = 90;
  gk::Gemm fp8_plan(fp8);
  EXPECT_EQ(fp8_plan.spec_for_problem(8192, 8192, 8192).name(),
            "cutlass3x_sm90_tensorop_s0x0x0gemm_e4m3_e4m3_f32_bf16_bf16_256x192x128_2x1x1_0_tnt_align16_"
            "warpspecialized_cooperative_fp8overlap_epi_tma");
}

TEST(SplitKPlan, SlicesForceAStreamKKernelWithThatManySplits) {
  gk::Gemm plan(f16_row(90));
  EXPECT_EQ(plan.decomposition(), gk::Decomposition::Auto);
  const auto A = probe(1024, 4096), B = probe(4096, 1024), D = probe(1024, 1024);
  // 1024 x 1024 x 4096 by default: split-K 2 on the smallest Stream-K tile.
  EXPECT_EQ(plan.k_split_for(A, B, nullptr, D), (gk::KSplit{gk::Decomposition::SplitK, 2}));
  plan.set_split_k_slices(5);
  EXPECT_EQ(plan.decomposition(), gk::Decomposition::SplitK);
  EXPECT_EQ(plan.split_k_slices(), 5);
  EXPECT_EQ(plan.spec_for(A, B, nullptr, D).tile.tile_scheduler, gk::TileScheduler::StreamK);
  EXPECT_EQ(plan.k_split_for(A, B, nullptr, D), (gk::KSplit{gk::Decomposition::SplitK, 5}));
  plan.set_decomposition(gk::Decomposition::DataParallel);
  EXPECT_EQ(plan.split_k_slices(), 1);
  EXPECT_EQ(plan.k_split_for(A, B, nullptr, D), (gk::KSplit{gk::Decomposition::DataParallel, 1}));
  plan.set_split_k_slices(1);
  EXPECT_EQ(plan.decomposition(), gk::Decomposition::Auto);
  // A small problem keeps the default data-parallel kernel.
  EXPECT_EQ(plan.k_split_for(probe(128, 128), probe(128, 128), nullptr, probe(128, 128)),
            (gk::KSplit{gk::Decomposition::DataParallel, 1}));
  plan.set_reduction_mode(gk::ReductionMode::Nondeterministic);
  EXPECT_EQ(plan.reduction_mode(), gk::ReductionMode::Nondeterministic);
}

TEST(SplitKPlan, BadSettingsAreConfigErrorsThatSayWhatToDo) {
  gk::Gemm plan(f16_row(90));
  EXPECT_NE(error_of([&] { plan.set_split_k_slices(0); }).find("split_k_slices must be"), std::string::npos);
  EXPECT_NE(error_of([&] { plan.set_decomposition(gk::Decomposition::SplitK); }).find("set_split_k_slices"),
            std::string::npos);
  // A tile without the Stream-K scheduler cannot split K.
  gk::TileDescription data_parallel = plan.tile_descriptions().front();
  plan.set_tile_description(data_parallel);
  EXPECT_NE(error_of([&] { plan.set_split_k_slices(4); }).find("Stream-K tile scheduler"), std::string::npos);
  EXPECT_EQ(plan.decomposition(), gk::Decomposition::Auto);  // unchanged after the error
  gk::Gemm with_stream_k_tile(f16_row(90));
  for (const auto& td : with_stream_k_tile.tile_descriptions()) {
    if (td.tile_scheduler == gk::TileScheduler::StreamK) {
      with_stream_k_tile.set_tile_description(td);
      break;
    }
  }
  with_stream_k_tile.set_split_k_slices(4);
  EXPECT_EQ(with_stream_k_tile.split_k_slices(), 4);
  // CUTLASS 2.x kernels have no Stream-K scheduler arguments.
  gk::Gemm sm80(sm80_kernels());
  EXPECT_NE(error_of([&] { sm80.set_split_k_slices(2); }).find("CUTLASS 2.x"), std::string::npos);
  EXPECT_NE(error_of([&] { sm80.set_reduction_mode(gk::ReductionMode::Nondeterministic); }).find("SM90"),
            std::string::npos);
  EXPECT_EQ(sm80.reduction_mode(), gk::ReductionMode::Deterministic);
}

// SM90 parallel split-K: where run() would split K on the Stream-K kernel, a partial-sums GEMM over K slices and a
// reduction kernel with the epilogue instead, on 128 x 64 tiles (cuBLAS's on 512x512x16384), on 64 x 128 at M = 32
// (a 64-row tile pads 32 rows to 64, not to 128; at most 16 rows run transposed, tests/unit/selection_test.cpp).
TEST(ParallelSplitK, LongKOverFewTilesRunsParallelSplitKOnTheMeasuredConfigurations) {
  gk::Gemm plan(f16_row(90));
  struct Case {
    long m, n, k;
    int slices;
    gk::Shape3 cta;
  };
  for (const Case& c : {Case{512, 512, 16384, 4, {128, 64, 64}}, Case{256, 1024, 16384, 4, {128, 64, 64}},
                        Case{32, 4096, 4096, 4, {64, 128, 64}}}) {
    const auto A = probe(c.m, c.k), B = probe(c.k, c.n), D = probe(c.m, c.n);
    const gk::KernelSpec spec = plan.spec_for(A, B, nullptr, D);
    const std::string what = std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k);
    EXPECT_EQ(spec.split_k_mode, gk::SplitKMode::Parallel) << what;
    EXPECT_EQ(spec.tile.cta_tile(), c.cta) << what;
    EXPECT_EQ(spec.tile.tile_scheduler, gk::TileScheduler::Default) << what;
    EXPECT_NE(spec.name().find("_splitk_parallel"), std::string::npos) << spec.name();
    EXPECT_EQ(plan.k_split_for(A, B, nullptr, D), (gk::KSplit{gk::Decomposition::SplitK, c.slices})) << what;
  }
  // What a pack of the plan holds: its run-time kernels include the parallel ones.
  int parallel_kernels = 0;
  for (const gk::KernelSpec& spec : plan.run_time_kernels()) {
    parallel_kernels += spec.split_k_mode == gk::SplitKMode::Parallel;
  }
  EXPECT_GE(parallel_kernels, 1);
}

TEST(ParallelSplitK, NotWhereSlicesCannotStartAlignedOrTheUserChose) {
  const Tables t;
  std::vector<gk::TileDescription> tiles;
  for (const auto& td : t.tiles) {
    if (td.tile_scheduler != gk::TileScheduler::StreamK) tiles.push_back(td);
  }
  // K = 2392 = 8 x 13 x 23: no slice count leaves 16-byte aligned slices of at least 8 K steps.
  EXPECT_FALSE(cat::choose_parallel_split(tiles, t.spec, {256, 384, 2392, 1}, kH200Sms, 8));
  // Many output tiles: no slice count fits one wave.
  EXPECT_FALSE(cat::choose_parallel_split(tiles, t.spec, {4096, 4096, 16384, 1}, kH200Sms, 8));
  ASSERT_TRUE(cat::choose_parallel_split(tiles, t.spec, {512, 512, 16384, 1}, kH200Sms, 8));

  const auto A = probe(512, 16384), B = probe(16384, 512), D = probe(512, 512);
  gk::Gemm forced(f16_row(90));
  forced.set_split_k_slices(4);  // Stream-K split-K, as set
  EXPECT_EQ(forced.spec_for(A, B, nullptr, D).split_k_mode, gk::SplitKMode::Serial);
  gk::Gemm tiled(f16_row(90));
  tiled.set_tile_description(tiled.tile_descriptions().front());
  EXPECT_EQ(tiled.spec_for(A, B, nullptr, D).split_k_mode, gk::SplitKMode::Serial);
  gk::Gemm sm80(sm80_kernels());  // CUTLASS 2.x kernels: no parallel split-K for GEMMs
  EXPECT_EQ(sm80.spec_for(A, B, nullptr, D).split_k_mode, gk::SplitKMode::Serial);
}

TEST(ParallelSplitK, SpecsOutsideSm90OrWithStreamKAreConfigErrors) {
  gk::KernelSpec sm80 = gk::Gemm(sm80_kernels()).spec();
  sm80.split_k_mode = gk::SplitKMode::Parallel;
  EXPECT_NE(error_of([&] { cat::validate(sm80, cat::limits_for_cc(90)); }).find("an SM90 one"), std::string::npos);
  gk::Gemm plan(f16_row(90));
  for (const auto& td : plan.tile_descriptions()) {
    if (td.tile_scheduler != gk::TileScheduler::StreamK) continue;
    gk::KernelSpec stream_k = plan.construct(td);
    stream_k.split_k_mode = gk::SplitKMode::Parallel;
    EXPECT_NE(error_of([&] { cat::validate(stream_k, cat::limits_for_cc(90)); }).find("does not combine"),
              std::string::npos);
    break;
  }
  // A serial spec's name and record are those of before parallel split-K.
  const gk::KernelSpec serial = plan.spec();
  EXPECT_EQ(serial.canonical().find("split_k"), std::string::npos);
  gk::KernelSpec parallel = serial;
  parallel.split_k_mode = gk::SplitKMode::Parallel;
  EXPECT_EQ(parallel.name(), serial.name() + "_splitk_parallel");
  EXPECT_NE(parallel.canonical(), serial.canonical());
}

TEST(SplitKPlan, RunRemembersOneShapesChoiceAndNotAnother) {
  // run() keeps the heuristics' answer for the last problem: a different shape, then the first again, must each get
  // their own choice, and a split setting made in between must change it.
  gk::Gemm plan(f16_row(90));
  const auto A = probe(512, 16384), B = probe(16384, 512), D = probe(512, 512);
  const auto A2 = probe(8192, 8192), B2 = probe(8192, 8192), D2 = probe(8192, 8192);
  const std::string long_k = plan.spec_for(A, B, nullptr, D).name();
  const std::string large = plan.spec_for(A2, B2, nullptr, D2).name();
  EXPECT_NE(long_k, large);
  EXPECT_EQ(plan.spec_for(A, B, nullptr, D).name(), long_k);
  EXPECT_EQ(plan.spec_for(A2, B2, nullptr, D2).name(), large);
  plan.set_split_k_slices(3);
  EXPECT_EQ(plan.k_split_for(A2, B2, nullptr, D2), (gk::KSplit{gk::Decomposition::SplitK, 3}));
  plan.set_split_k_slices(1);
  EXPECT_EQ(plan.spec_for(A2, B2, nullptr, D2).name(), large);
}
