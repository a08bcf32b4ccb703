// tests/unit/fp8_blockwise_test.cpp: block-scaled FP8 plans (the DeepSeek-V3 format) without a GPU: the kernel, its
// name, key record and source, the tiles it lists, the typed errors for what it cannot do, and run()'s checks of the
// scale tensors before anything runs.
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "catalog/catalog.hpp"
#include "gemmkit/codegen.hpp"
#include "gemmkit/epilogue.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"
#include "support/fp8_blockwise_cases.hpp"
#include "support/plan_options.hpp"
#include "unit/test_env.hpp"

namespace gk = gemmkit;

namespace {

gk::GemmOptions fp8_tn() {
  return gk::testing::fp8_tn(90);
}

gk::Gemm blockwise_plan() {
  gk::Gemm plan(fp8_tn());
  plan.set_block_scaling(gk::BlockScaling::Blockwise);
  return plan;
}

using gk::testenv::error_of;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST(Fp8Blockwise, TheKernelIsNamedKeyedAndRenderedOnCutlassBlockwiseMainloop) {
  gk::Gemm plan(fp8_tn());
  const std::string plain = plan.kernel_name();
  const std::string plain_record = plan.spec().canonical();
  plan.set_block_scaling(gk::BlockScaling::Blockwise);
  EXPECT_EQ(plan.block_scaling(), gk::BlockScaling::Blockwise);
  // The default FP8 tile (128 x 192) splits B's 128-column scale blocks: the first 128-wide tile is taken instead.
  EXPECT_EQ(plan.kernel_name(),
            "cutlass3x_sm90_tensorop_s0x0x0gemm_e4m3_e4m3_f32_bf16_bf16_256x128x128_2x1x1_0_tnt_align16_blockwise");
  EXPECT_TRUE(contains(plan.spec().canonical(), ";block_scaling=blockwise"));
  const std::string text = gk::render(plan.spec()).text;
  EXPECT_TRUE(contains(text, "#include \"gemmkit/sm90_blockwise.hpp\"")) << text;
  EXPECT_TRUE(contains(text, "cute::tuple<LayoutA, gemmkit::sm90::LayoutSFA>")) << text;
  EXPECT_TRUE(contains(text, "cutlass::gemm::KernelTmaWarpSpecializedCooperativeFP8Blockwise")) << text;
  EXPECT_TRUE(contains(text,
                       "using EpilogueSchedule =\n    gemmkit::sm90::ResolvedEpilogueSchedule<cutlass::epilogue::"
                       "TmaWarpSpecializedCooperative"))
      << text;
  EXPECT_TRUE(contains(text, "using Module = gemmkit::sm90::BlockwiseModule<Gemm, kBias, kScale>;")) << text;
  EXPECT_EQ(gk::parse_enum<gk::BlockScaling>("deepseek"), gk::BlockScaling::Blockwise);
  plan.set_block_scaling(gk::BlockScaling::None);
  EXPECT_EQ(plan.kernel_name(), plain);
  EXPECT_EQ(plan.spec().canonical(), plain_record);  // other kernels keep their cache keys
  const std::string plain_text = gk::render(plan.spec()).text;
  // The plain default runs gemmkit's overlapped promotion on the same builder's collective (with three stages of C,
  // sm90_source_stages.hpp, which includes the overlapped loops).
  EXPECT_TRUE(contains(plain_text, "#include \"gemmkit/sm90_source_stages.hpp\"")) << plain_text;
  EXPECT_TRUE(contains(plain_text, "ElementA, LayoutA, AlignmentA, ElementB, LayoutB, AlignmentB,")) << plain_text;
}

TEST(Fp8Blockwise, EveryListedTileIs128DeepAndAMultipleOf128WideWithoutStreamKOrLean) {
  gk::Gemm plan = blockwise_plan();
  const std::vector<gk::TileDescription> tiles = plan.tile_descriptions();
  ASSERT_FALSE(tiles.empty());
  bool pingpong = false;
  for (const gk::TileDescription& td : tiles) {
    const gk::Shape3 cta = td.cta_tile();
    EXPECT_EQ(cta[2], 128) << td.to_string();
    EXPECT_EQ(cta[1] % 128, 0) << td.to_string();
    EXPECT_NE(td.tile_scheduler, gk::TileScheduler::StreamK) << td.to_string();
    EXPECT_NE(td.epilogue_schedule, gk::EpilogueSchedule::Lean) << td.to_string();
    EXPECT_NE(td.epilogue_schedule, gk::EpilogueSchedule::NoSmemWarpSpecialized) << td.to_string();
    pingpong = pingpong || td.kernel_schedule == gk::KernelSchedule::TmaWarpSpecializedPingpong;
    plan.set_tile_description(td);
    const std::string text = gk::render(plan.spec()).text;
    EXPECT_TRUE(contains(text, "FP8Blockwise")) << text;
  }
  EXPECT_TRUE(pingpong);  // the 64 x 128 tile runs on the ping-pong mainloop
}

// Few rows over a long K split K in parallel, as per-tensor plans do: the partial-sums GEMM runs the block-scaled
// mainloop with the scales bound per slice, and the reduction applies none. A problem that fills the GPU does not
// split.
TEST(Fp8Blockwise, FewRowsOverALongKSplitKInParallelOnTheBlockScaledMainloop) {
  gk::Gemm plan = blockwise_plan();
  for (const auto& [m, n, k] : {std::array<long, 3>{16, 4096, 14336}, std::array<long, 3>{128, 4096, 14336}}) {
    const gk::KernelSpec split = plan.spec_for_problem(m, n, k);
    const std::string shape = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + ": ";
    EXPECT_EQ(split.split_k_mode, gk::SplitKMode::Parallel) << shape << split.name();
    EXPECT_EQ(split.block_scaling, gk::BlockScaling::Blockwise) << shape << split.name();
    EXPECT_EQ(split.tile.cta_tile()[2], 128) << shape << split.name();
    const std::string text = gk::render(split).text;
    EXPECT_TRUE(contains(text, "#include \"gemmkit/sm90_blockwise.hpp\"")) << text;
    EXPECT_TRUE(contains(text, "cute::tuple<LayoutB, gemmkit::sm90::LayoutSFB>")) << text;
    EXPECT_TRUE(contains(text, "std::is_same_v<LayoutC, cutlass::layout::RowMajor>, gemmkit::sm90::BlockScales>;"))
        << text;
  }
  EXPECT_EQ(plan.spec_for_problem(8192, 8192, 8192).split_k_mode, gk::SplitKMode::Serial);
  // The gpu tier's split case takes it too.
  const gk::gpu_cases::BlockwiseShape g = gk::gpu_cases::kBlockwiseSplitShape;
  EXPECT_EQ(plan.spec_for_problem(g.m, g.n, g.k).split_k_mode, gk::SplitKMode::Parallel);
  // Per-tensor parallel split-K kernels render as before: their layouts plain, no block scales.
  gk::Gemm per_tensor(fp8_tn());
  const std::string text = gk::render(per_tensor.spec_for_problem(16, 4096, 14336)).text;
  EXPECT_TRUE(contains(text, "ElementA, LayoutA, AlignmentA, ElementB,\n    LayoutB, AlignmentB,")) << text;
  EXPECT_TRUE(contains(text, "std::is_same_v<LayoutC, cutlass::layout::RowMajor>, void>;")) << text;
}

TEST(Fp8Blockwise, PlansWithoutABlockScaledMainloopAreRefusedAndKeepTheirSetting) {
  gk::Gemm f16(gk::testing::f16_row(90));
  const std::string not_fp8 = error_of<gk::ConfigError>([&] { f16.set_block_scaling(gk::BlockScaling::Blockwise); });
  EXPECT_TRUE(contains(not_fp8, "Block scaling scales FP8 operands")) << not_fp8;
  EXPECT_EQ(f16.block_scaling(), gk::BlockScaling::None);

  gk::Gemm sm80(gk::testing::f16_row(80));
  const std::string old = error_of<gk::ConfigError>([&] { sm80.set_block_scaling(gk::BlockScaling::Blockwise); });
  EXPECT_TRUE(contains(old, "mainloop of SM90 GEMM and grouped GEMM kernels")) << old;

  gk::Gemm scaled(fp8_tn());
  scaled.set_scale(gk::ScaleMode::RowAndColumn);
  const std::string both = error_of<gk::ConfigError>([&] { scaled.set_block_scaling(gk::BlockScaling::Blockwise); });
  EXPECT_TRUE(contains(both, "replaces the scale vectors")) << both;

  gk::Gemm plan = blockwise_plan();
  const std::string stream_k = error_of<gk::ConfigError>([&] { plan.set_swizzling_functor(gk::Swizzle::StreamK); });
  EXPECT_TRUE(contains(stream_k, "Default tile scheduler")) << stream_k;
  gk::TileDescription wide = plan.tile_descriptions().front();
  wide.threadblock_shape = {128, 192, 128};
  wide.cluster_shape = {1, 1, 1};
  const std::string split_block = error_of<gk::ConfigError>([&] { plan.set_tile_description(wide); });
  EXPECT_TRUE(contains(split_block, "a multiple of 128 wide")) << split_block;
  gk::TileDescription lean = plan.tile_descriptions().front();
  lean.kernel_schedule = gk::KernelSchedule::TmaWarpSpecializedCooperative;
  lean.epilogue_schedule = gk::EpilogueSchedule::Lean;
  const std::string lean_error = error_of<gk::ConfigError>([&] { plan.set_tile_description(lean); });
  EXPECT_TRUE(contains(lean_error, "TMA epilogue")) << lean_error;
  // No quick twin stands in for a block-scaled kernel: the lean epilogue has no block-scaled mainloop.
  const gk::KernelSpec spec = plan.spec();
  EXPECT_FALSE(gk::catalog::family_of(spec.family).quick_twin(spec).has_value());
}

// The block-scaled kernels store D with the TMA epilogue: a D whose rows are not 16-byte multiples fits none of them.
TEST(Fp8Blockwise, NarrowRowsOfDAreRefusedBeforeAnyKernelIsChosen) {
  gk::Gemm plan = blockwise_plan();
  alignas(256) static unsigned char bytes[256 * 256 * 4];
  const auto A = gk::TensorView::on_gpu(bytes, gk::DataType::e4m3, {64, 256}, gk::Layout::RowMajor, 0);
  const auto B = gk::TensorView::on_gpu(bytes, gk::DataType::e4m3, {256, 100}, gk::Layout::ColumnMajor, 0);
  const auto D = gk::TensorView::on_gpu(bytes, gk::DataType::bf16, {64, 100}, gk::Layout::RowMajor, 0);
  const std::string narrow = error_of<gk::TensorError>([&] { (void)plan.spec_for(A, B, nullptr, D); });
  EXPECT_TRUE(contains(narrow, "Tensor D")) << narrow;
  gk::KernelSpec spec = plan.spec();
  spec.alignment_c = 4;
  const std::string explicit_spec = error_of<gk::ConfigError>([&] { (void)gk::render(spec); });
  EXPECT_TRUE(contains(explicit_spec, "needs 16-byte rows of C and D")) << explicit_spec;
}

TEST(Fp8Blockwise, AnEpilogueStillAppliesButAVisitorTreeIsRefused) {
  gk::Gemm plan = blockwise_plan();
  plan.set_activation(gk::Activation::GELU);
  plan.set_bias(gk::BiasMode::PerColumn);
  EXPECT_TRUE(contains(plan.kernel_name(), "_gelu_biascolumn_blockwise")) << plan.kernel_name();
  gk::Gemm tree_plan = blockwise_plan();
  namespace ep = gk::epilogue;
  const ep::Epilogue tree(ep::relu(ep::acc() + ep::aux("residual")));
  const std::string refused = error_of<gk::ConfigError>([&] { tree_plan.set_epilogue_visitor(tree); });
  EXPECT_TRUE(contains(refused, "no epilogue visitor tree")) << refused;
}

TEST(Fp8Blockwise, RunChecksTheScalesBeforeAnythingRuns) {
  gk::Gemm plan = blockwise_plan();
  alignas(256) static unsigned char bytes[512 * 512 * 4];
  const long m = 64, n = 200, k = 272;  // KB = 3, NB = 2
  const auto A = gk::TensorView::on_gpu(bytes, gk::DataType::e4m3, {m, k}, gk::Layout::RowMajor, 0);
  const auto B = gk::TensorView::on_gpu(bytes, gk::DataType::e4m3, {k, n}, gk::Layout::ColumnMajor, 0);
  const auto D = gk::TensorView::on_gpu(bytes, gk::DataType::bf16, {m, n}, gk::Layout::RowMajor, 0);
  // scale_a: M x KB, M-major; scale_b: NB x KB, row-major.
  const auto scale_a = gk::TensorView::strided(bytes, gk::DataType::f32, {m, 3}, {1, m}, 0);
  const auto scale_b = gk::TensorView::strided(bytes, gk::DataType::f32, {2, 3}, {3, 1}, 0);
  const auto row_major_a = gk::TensorView::strided(bytes, gk::DataType::f32, {m, 3}, {3, 1}, 0);
  const auto short_b = gk::TensorView::strided(bytes, gk::DataType::f32, {1, 3}, {3, 1}, 0);
  const auto half_b = gk::TensorView::strided(bytes, gk::DataType::f16, {2, 3}, {3, 1}, 0);
  auto run_error_of = [&](const gk::TensorView* a, const gk::TensorView* b, const gk::TensorView& A_,
                          const gk::TensorView& D_) {
    gk::RunOptions options;
    options.scale_a = a;
    options.scale_b = b;
    return error_of<gk::TensorError>([&] { plan.run(A_, B, nullptr, D_, 1.0, 0.0, options); });
  };
  auto tensor_error_of = [&](const gk::TensorView* a, const gk::TensorView* b) { return run_error_of(a, b, A, D); };
  EXPECT_TRUE(contains(tensor_error_of(&scale_a, nullptr), "RunOptions::scale_b"))
      << tensor_error_of(&scale_a, nullptr);
  const std::string strides = tensor_error_of(&row_major_a, &scale_b);
  EXPECT_TRUE(contains(strides, "scale_a: has strides (3, 1)") && contains(strides, "M-major")) << strides;
  const std::string shape = tensor_error_of(&scale_a, &short_b);
  EXPECT_TRUE(contains(shape, "scale_b: has shape (1, 3); the plan expects (2, 3) f32")) << shape;
  EXPECT_TRUE(contains(tensor_error_of(&scale_a, &half_b), "element type f16")) << tensor_error_of(&scale_a, &half_b);
  // A's scales load with TMA in 16-byte runs along M.
  const auto A_odd = gk::TensorView::on_gpu(bytes, gk::DataType::e4m3, {m - 2, k}, gk::Layout::RowMajor, 0);
  const auto D_odd = gk::TensorView::on_gpu(bytes, gk::DataType::bf16, {m - 2, n}, gk::Layout::RowMajor, 0);
  const std::string odd = run_error_of(&scale_a, &scale_b, A_odd, D_odd);
  EXPECT_TRUE(contains(odd, "M = 62 is not a multiple of 4")) << odd;

  // tune() times candidates without scales: it refuses a block-scaled plan instead of failing in a candidate.
  const std::string tune = error_of<gk::ConfigError>([&] { (void)plan.tune(A, B, nullptr, D); });
  EXPECT_TRUE(contains(tune, "does not take block scales")) << tune;

  gk::Gemm unscaled(fp8_tn());
  gk::RunOptions extra;
  extra.scale_a = &scale_a;
  extra.scale_b = &scale_b;
  const std::string no_block_scaling =
      error_of<gk::TensorError>([&] { unscaled.run(A, B, nullptr, D, 1.0, 0.0, extra); });
  EXPECT_TRUE(contains(no_block_scaling, "set_block_scaling(BlockScaling::Blockwise)")) << no_block_scaling;
}
