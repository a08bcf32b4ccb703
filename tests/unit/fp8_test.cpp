// tests/unit/fp8_test.cpp: FP8 (e4m3, e5m2) plans without a GPU: names and parsing, the SM90 kernel and its tiles,
// and the typed errors for what FP8 cannot do (SM80, SIMT, layouts other than TN, narrow alignments, grouped).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "gemmkit/codegen.hpp"
#include "gemmkit/conv2d.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"
#include "gemmkit/grouped_gemm.hpp"
#include "support/cli.hpp"
#include "util/elements.hpp"

namespace gk = gemmkit;

namespace {

using gk::testing::fp8_tn;

template <class Fn>
std::string config_error_of(Fn&& fn) {
  try {
    fn();
  } catch (const gk::ConfigError& e) {
    return e.what();
  }
  return "no ConfigError";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST(Fp8Types, NamesAliasesWidthsAndHostDecoding) {
  EXPECT_EQ(gk::to_string(gk::DataType::e4m3), "e4m3");
  EXPECT_EQ(gk::to_string(gk::DataType::e5m2), "e5m2");
  EXPECT_EQ(gk::parse_enum<gk::DataType>("float8_e4m3fn"), gk::DataType::e4m3);  // torch's and ml_dtypes' names
  EXPECT_EQ(gk::parse_enum<gk::DataType>("float8_e5m2"), gk::DataType::e5m2);
  EXPECT_EQ(gk::row_of(gk::DataType::e4m3).cutlass, "cutlass::float_e4m3_t");
  EXPECT_EQ(gk::row_of(gk::DataType::e5m2).cutlass, "cutlass::float_e5m2_t");
  EXPECT_EQ(gk::bits_of(gk::DataType::e4m3), 8);
  EXPECT_EQ(gk::bits_of(gk::DataType::e5m2), 8);
  EXPECT_TRUE(gk::is_fp8(gk::DataType::e5m2));
  EXPECT_FALSE(gk::is_fp8(gk::DataType::s8));
  EXPECT_FALSE(gk::is_integer(gk::DataType::e4m3));
  // 0x38 = 1.0 and 0xC4 = -3.0 in e4m3 (bias 7); 0x3C = 1.0 and 0x4A = 12.0 in e5m2 (bias 15).
  const unsigned char e4m3[] = {0x38, 0xC4};
  const unsigned char e5m2[] = {0x3C, 0x4A};
  EXPECT_EQ(gk::util::element_value(gk::DataType::e4m3, e4m3, 0), 1.0);
  EXPECT_EQ(gk::util::element_value(gk::DataType::e4m3, e4m3, 1), -3.0);
  EXPECT_EQ(gk::util::element_value(gk::DataType::e5m2, e5m2, 0), 1.0);
  EXPECT_EQ(gk::util::element_value(gk::DataType::e5m2, e5m2, 1), 12.0);
}

TEST(Fp8Plan, Sm90KernelAccumulatesInF32WithAlignment16AndKTile128) {
  for (gk::DataType d : {gk::DataType::bf16, gk::DataType::f16, gk::DataType::f32}) {
    gk::Gemm plan(fp8_tn(90, gk::DataType::e4m3, d));
    EXPECT_EQ(plan.element_accumulator(), gk::DataType::f32);  // the default for FP8, not C's type
    const gk::KernelSpec spec = plan.spec();
    EXPECT_EQ(spec.family, gk::KernelFamily::Sm90Collective);
    EXPECT_EQ(spec.alignment_a, 16);
    EXPECT_EQ(spec.alignment_b, 16);
    const std::string dt(gk::to_string(d));
    EXPECT_EQ(spec.name(), "cutlass3x_sm90_tensorop_s0x0x0gemm_e4m3_e4m3_f32_" + dt + "_" + dt +
                               "_256x192x128_2x1x1_0_tnt_align16"
                               "_warpspecialized_cooperative_fp8overlap_epi_tma");
  }
  gk::GemmOptions mixed = fp8_tn(90, gk::DataType::e4m3, gk::DataType::f32);
  mixed.element_b = gk::DataType::e5m2;
  EXPECT_TRUE(contains(gk::Gemm(mixed).kernel_name(), "_e4m3_e5m2_f32_f32_f32_"));
}

TEST(Fp8Plan, EveryListedTileIsValidWithKTile128) {
  gk::Gemm plan(fp8_tn(90, gk::DataType::e5m2));
  const auto tiles = plan.tile_descriptions();
  ASSERT_GT(tiles.size(), 4u);
  bool has_128x192 = false;
  for (const auto& tile : tiles) {
    EXPECT_EQ(tile.threadblock_shape[2], 128) << tile.to_string();
    // The promotion keeps a warp group's tile twice in registers: at most 64 x 192 per warp group, so no 128 x 256
    // or 256 x 128 CTA (they spilled), and a 128-row CTA of 128 or more columns is split between two warp groups.
    const gk::Shape3 cta = tile.cta_tile();
    EXPECT_LE(cta[0] * cta[1], 128 * 192) << tile.to_string();
    if (cta[0] * cta[1] >= 128 * 128) {
      EXPECT_NE(tile.kernel_schedule, gk::KernelSchedule::TmaWarpSpecializedPingpong) << tile.to_string();
      EXPECT_NE(tile.kernel_schedule, gk::KernelSchedule::TmaWarpSpecialized) << tile.to_string();
    }
    has_128x192 |= cta == gk::Shape3{128, 192, 128};
    EXPECT_NO_THROW(plan.set_tile_description(tile)) << tile.to_string();
  }
  EXPECT_TRUE(has_128x192);
}

// M = 128: the default's 2x1 cluster of 128-row tiles would idle half its CTAs; 128 x 128 tiles in 1x2 clusters idle
// none.
TEST(Fp8Plan, FewRowsTakeTheTransposedClusterWhereTheDefaultPads) {
  gk::Gemm plan(fp8_tn(90));
  const gk::KernelSpec wide = plan.spec_for_problem(128, 28672, 8192);
  EXPECT_EQ(wide.tile.cta_tile(), (gk::Shape3{128, 128, 128})) << wide.name();
  EXPECT_EQ(wide.tile.cluster_shape, (gk::Shape3{1, 2, 1})) << wide.name();
  // Many rows keep the default 2x1 cluster.
  EXPECT_EQ(plan.spec_for_problem(8192, 8192, 8192).tile.cluster_shape, (gk::Shape3{2, 1, 1}));
  // One wave of 64 x 128 tiles over a long K still splits K in parallel (FP8 has no 64 x 64 tile, and unsplit the
  // long K would fall to too few CTAs).
  EXPECT_EQ(plan.spec_for_problem(128, 8192, 28672).split_k_mode, gk::SplitKMode::Parallel);
}

TEST(Fp8Plan, GeneratedSourceInstantiatesCutlassFp8Types) {
  gk::Gemm plan(fp8_tn(90));
  const std::string text = gk::render(plan.spec()).text;
  EXPECT_TRUE(contains(text, "using ElementA = cutlass::float_e4m3_t;")) << text;
  EXPECT_TRUE(contains(text, "using ElementB = cutlass::float_e4m3_t;")) << text;
  EXPECT_TRUE(contains(text, "using ElementD = cutlass::bfloat16_t;")) << text;
  EXPECT_TRUE(contains(text, "using ElementAccumulator = float;")) << text;
}

TEST(Fp8Errors, Sm80AndKernelCc80SayToUseCc90) {
  const std::string sm80 = config_error_of([] { gk::Gemm plan(fp8_tn(80)); });
  EXPECT_TRUE(contains(sm80, "cc=90")) << sm80;
  EXPECT_TRUE(contains(sm80, "SM90")) << sm80;
  gk::GemmOptions o = fp8_tn(90);
  o.kernel_cc = 80;
  const std::string kernel_cc = config_error_of([&] { gk::Gemm plan(o); });
  EXPECT_TRUE(contains(kernel_cc, "kernel_cc=90")) << kernel_cc;
}

TEST(Fp8Errors, SimtIsRefusedNamingTensorCores) {
  gk::Gemm plan(fp8_tn(90));
  const std::string simt = config_error_of([&] { plan.set_opclass(gk::OpClass::Simt); });
  EXPECT_TRUE(contains(simt, "tensor cores only")) << simt;
  EXPECT_EQ(plan.opclasses(), std::vector<gk::OpClass>{gk::OpClass::TensorOp});
}

TEST(Fp8Errors, LayoutsOtherThanTnNameTheFix) {
  for (auto [a, b] : {std::pair{gk::Layout::RowMajor, gk::Layout::RowMajor},
                      {gk::Layout::ColumnMajor, gk::Layout::ColumnMajor},
                      {gk::Layout::ColumnMajor, gk::Layout::RowMajor}}) {
    gk::GemmOptions o = fp8_tn(90);
    o.layout_a = a;
    o.layout_b = b;
    const std::string message = config_error_of([&] { gk::Gemm plan(o); });
    EXPECT_TRUE(contains(message, "K-major")) << message;
    EXPECT_TRUE(contains(message, "layout_A=RowMajor, layout_B=ColumnMajor")) << message;
  }
}

TEST(Fp8Errors, AccumulatorOutputsAndMixedOperandsAreRefused) {
  gk::GemmOptions acc = fp8_tn(90);
  acc.element_accumulator = gk::DataType::f16;
  EXPECT_TRUE(contains(config_error_of([&] { gk::Gemm plan(acc); }), "accumulate in f32"));
  gk::GemmOptions fp8_d = fp8_tn(90);
  fp8_d.element_c = fp8_d.element_d = gk::DataType::e4m3;
  EXPECT_TRUE(contains(config_error_of([&] { gk::Gemm plan(fp8_d); }), "bf16, f16 or f32"));
  gk::GemmOptions half_b = fp8_tn(90);
  half_b.element_b = gk::DataType::f16;
  EXPECT_TRUE(contains(config_error_of([&] { gk::Gemm plan(half_b); }), "both in e4m3 or e5m2"));
}

TEST(Fp8Errors, NarrowAlignmentsAndConvPlansAreRefused) {
  gk::Gemm plan(fp8_tn(90));
  const std::string narrow = config_error_of([&] { plan.construct(std::nullopt, 8, 16); });
  EXPECT_TRUE(contains(narrow, "alignment 16")) << narrow;
  // Grouped GEMMs take FP8 on SM90 (grouped_fp8_test.cpp); convolutions do not.
  EXPECT_EQ(gk::GroupedGemm(fp8_tn(90)).spec().family, gk::KernelFamily::Sm90Grouped);
  gk::Conv2dOptions conv;
  conv.element = gk::DataType::e4m3;
  conv.element_c = conv.element_d = gk::DataType::bf16;
  conv.cc = 90;
  const std::string conv_error = config_error_of([&] { gk::Conv2d conv_plan(conv); });
  EXPECT_TRUE(contains(conv_error, "FP8")) << conv_error;
}

TEST(Fp8Tensors, AnFp8TensorOfTheWrongTypeIsATensorError) {
  gk::Gemm plan(fp8_tn(90));
  alignas(256) static unsigned char bytes[64 * 64 * 4];
  const auto A = gk::TensorView::on_gpu(bytes, gk::DataType::e5m2, {64, 64}, gk::Layout::RowMajor, 0);
  const auto B = gk::TensorView::on_gpu(bytes, gk::DataType::e4m3, {64, 64}, gk::Layout::ColumnMajor, 0);
  const auto D = gk::TensorView::on_gpu(bytes, gk::DataType::bf16, {64, 64}, gk::Layout::RowMajor, 0);
  try {
    (void)plan.spec_for(A, B, nullptr, D);
    FAIL() << "expected a TensorError";
  } catch (const gk::TensorError& e) {
    EXPECT_TRUE(contains(e.what(), "element_A=e5m2")) << e.what();
  }
  const auto A_ok = gk::TensorView::on_gpu(bytes, gk::DataType::e4m3, {64, 64}, gk::Layout::RowMajor, 0);
  EXPECT_EQ(plan.spec_for(A_ok, B, nullptr, D).element_a, gk::DataType::e4m3);
}

TEST(Fp8Scales, ScaleVectorsNameTheKernelAndReachTheSource) {
  gk::Gemm plan(fp8_tn(90));
  const std::string plain = plan.kernel_name();
  const std::pair<gk::ScaleMode, std::string> modes[] = {{gk::ScaleMode::PerRow, "_scalerow"},
                                                         {gk::ScaleMode::PerColumn, "_scalecolumn"},
                                                         {gk::ScaleMode::RowAndColumn, "_scalerowcolumn"}};
  for (const auto& [mode, suffix] : modes) {
    plan.set_scale(mode);
    EXPECT_EQ(plan.scale(), mode);
    EXPECT_EQ(plan.kernel_name(), plain + suffix);
    EXPECT_TRUE(contains(plan.spec().canonical(), ";scale=" + std::string(gk::to_string(mode))));
    const std::string text = gk::render(plan.spec()).text;
    EXPECT_TRUE(contains(text, "gemmkit::module::Scale::" + std::string(gk::row_of(mode).cutlass))) << text;
  }
  EXPECT_EQ(gk::parse_enum<gk::ScaleMode>("rowwise"), gk::ScaleMode::RowAndColumn);
  plan.set_scale(gk::ScaleMode::None);
  EXPECT_EQ(plan.kernel_name(), plain);
  EXPECT_FALSE(contains(plan.spec().canonical(), "scale="));  // older kernels keep their cache keys
}

TEST(Fp8Scales, ScaleVectorsNeedAnSm90TmaEpilogue) {
  gk::Gemm f16(gk::testing::f16_row(80));
  const std::string refused = config_error_of([&] { f16.set_scale(gk::ScaleMode::PerRow); });
  EXPECT_TRUE(contains(refused, "SM90 kernels only")) << refused;
  EXPECT_EQ(f16.scale(), gk::ScaleMode::None);  // a refused setting is not kept

  gk::Gemm plan(fp8_tn(90));
  plan.set_scale(gk::ScaleMode::RowAndColumn);
  gk::TileDescription tile = plan.tile_descriptions().front();
  tile.kernel_schedule = gk::KernelSchedule::TmaWarpSpecializedCooperative;
  tile.epilogue_schedule = gk::EpilogueSchedule::NoSmemWarpSpecialized;
  const std::string nosmem = config_error_of([&] { plan.set_tile_description(tile); });
  EXPECT_TRUE(contains(nosmem, "need a TMA epilogue")) << nosmem;
}

TEST(Fp8Scales, RunChecksTheVectorsBeforeAnythingRuns) {
  gk::Gemm plan(fp8_tn(90));
  plan.set_scale(gk::ScaleMode::RowAndColumn);
  alignas(256) static unsigned char bytes[64 * 64 * 4];
  const auto A = gk::TensorView::on_gpu(bytes, gk::DataType::e4m3, {64, 32}, gk::Layout::RowMajor, 0);
  const auto B = gk::TensorView::on_gpu(bytes, gk::DataType::e4m3, {32, 48}, gk::Layout::ColumnMajor, 0);
  const auto D = gk::TensorView::on_gpu(bytes, gk::DataType::bf16, {64, 48}, gk::Layout::RowMajor, 0);
  const auto rows = gk::TensorView::on_gpu(bytes, gk::DataType::f32, {64}, gk::Layout::RowMajor, 0);
  const auto columns = gk::TensorView::on_gpu(bytes, gk::DataType::f32, {48}, gk::Layout::RowMajor, 0);
  const auto half_columns = gk::TensorView::on_gpu(bytes, gk::DataType::f16, {48}, gk::Layout::RowMajor, 0);
  auto tensor_error_of = [&](const gk::RunOptions& options) -> std::string {
    try {
      plan.run(A, B, nullptr, D, 1.0, 0.0, options);
    } catch (const gk::TensorError& e) {
      return e.what();
    }
    return "no TensorError";
  };
  gk::RunOptions missing;
  missing.row_scale = &rows;
  EXPECT_TRUE(contains(tensor_error_of(missing), "RunOptions::column_scale")) << tensor_error_of(missing);
  gk::RunOptions swapped;
  swapped.row_scale = &columns;
  swapped.column_scale = &rows;
  EXPECT_TRUE(contains(tensor_error_of(swapped), "row_scale: has shape")) << tensor_error_of(swapped);
  gk::RunOptions half;
  half.row_scale = &rows;
  half.column_scale = &half_columns;
  EXPECT_TRUE(contains(tensor_error_of(half), "element type f16")) << tensor_error_of(half);
  plan.set_scale(gk::ScaleMode::PerRow);
  gk::RunOptions extra;
  extra.row_scale = &rows;
  extra.column_scale = &columns;
  EXPECT_TRUE(contains(tensor_error_of(extra), "does not take it")) << tensor_error_of(extra);
}

// A plan declared without C (element_C void, as torch's row-wise FP8 kernel is built): the kernel has no source
// operand, so the epilogue's C buffers go to the mainloop (a fifth stage on the default 128 x 192 tile), a C passed to
// run() is refused by name, and the bias takes D's type.
TEST(Fp8NoC, APlanWithoutCBuildsAKernelWithoutCAndRefusesOne) {
  gk::GemmOptions options = fp8_tn(90);
  options.element_c = gk::DataType::void_t;
  gk::Gemm plan(options);
  EXPECT_TRUE(contains(plan.kernel_name(), "_e4m3_e4m3_f32_void_bf16_")) << plan.kernel_name();
  EXPECT_TRUE(contains(gk::render(plan.spec()).text, "using ElementC = void;"));
  alignas(256) static unsigned char bytes[64 * 64 * 4];
  const auto A = gk::TensorView::on_gpu(bytes, gk::DataType::e4m3, {64, 32}, gk::Layout::RowMajor, 0);
  const auto B = gk::TensorView::on_gpu(bytes, gk::DataType::e4m3, {32, 48}, gk::Layout::ColumnMajor, 0);
  const auto D = gk::TensorView::on_gpu(bytes, gk::DataType::bf16, {64, 48}, gk::Layout::RowMajor, 0);
  EXPECT_EQ(plan.spec_for(A, B, nullptr, D).element_c, gk::DataType::void_t);
  try {
    plan.run(A, B, &D, D, 1.0, 0.0);
    FAIL() << "expected a TensorError";
  } catch (const gk::TensorError& e) {
    EXPECT_TRUE(contains(e.what(), "has no C (element_C void)")) << e.what();
  }
  plan.set_bias(gk::BiasMode::PerColumn);
  const auto half_bias = gk::TensorView::on_gpu(bytes, gk::DataType::f16, {48}, gk::Layout::RowMajor, 0);
  gk::RunOptions with_bias;
  with_bias.bias = &half_bias;
  try {
    plan.run(A, B, nullptr, D, 1.0, 0.0, with_bias);
    FAIL() << "expected a TensorError";
  } catch (const gk::TensorError& e) {
    EXPECT_TRUE(contains(e.what(), "bf16")) << e.what();  // D's type
  }
  // Grouped FP8 kernels keep a C.
  const std::string grouped = config_error_of([&] { gk::GroupedGemm plan_of_groups(options); });
  EXPECT_TRUE(contains(grouped, "C=void")) << grouped;
}

// Fast accumulation (torch._scaled_mm's use_fast_accum): every FP8 configuration listed a second time with it, taken
// only by a plan that sets it, on CUTLASS's FP8FastAccum schedules with the epilogue schedule they match named.
TEST(Fp8FastAccum, APlanThatSetsItRunsTheFastAccumulationSchedules) {
  gk::Gemm plan(fp8_tn(90));
  const std::string promoted = plan.kernel_name();
  const auto ops = plan.math_operations();
  EXPECT_NE(std::find(ops.begin(), ops.end(), gk::MathOperation::MultiplyAddFastAccum), ops.end());
  EXPECT_EQ(gk::parse_enum<gk::MathOperation>("fast_accum"), gk::MathOperation::MultiplyAddFastAccum);
  plan.set_math_operation(gk::MathOperation::MultiplyAddFastAccum);
  // The same tile, on CUTLASS's loop: with no promotion there is nothing for gemmkit's loops to overlap.
  const std::string overlapped = "_warpspecialized_cooperative_fp8overlap_epi_tma";
  ASSERT_TRUE(contains(promoted, overlapped)) << promoted;
  EXPECT_EQ(plan.kernel_name(), promoted.substr(0, promoted.size() - overlapped.size()) + "_fp8_fastaccum");
  EXPECT_TRUE(contains(plan.spec().canonical(), ";math=multiply_add_fast_accum"));
  const std::string text = gk::render(plan.spec()).text;
  EXPECT_TRUE(contains(text, "using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecializedCooperativeFP8FastAccum;"))
      << text;
  EXPECT_TRUE(contains(text, "ResolvedEpilogueSchedule<cutlass::epilogue::TmaWarpSpecializedCooperative,")) << text;
  for (const gk::TileDescription& td : plan.tile_descriptions()) {
    EXPECT_EQ(td.math_operation, gk::MathOperation::MultiplyAddFastAccum);
    plan.set_tile_description(td);
    EXPECT_TRUE(contains(gk::render(plan.spec()).text, "FP8FastAccum")) << plan.kernel_name();
  }
  // run()'s other kernels keep it: parallel split-K for a long K, the lean quick twin.
  gk::Gemm fast(fp8_tn(90));
  fast.set_math_operation(gk::MathOperation::MultiplyAddFastAccum);
  const gk::KernelSpec split = fast.spec_for_problem(128, 4096, 7168);
  EXPECT_EQ(split.split_k_mode, gk::SplitKMode::Parallel) << split.name();
  EXPECT_TRUE(contains(gk::render(split).text, "FP8FastAccum")) << split.name();
  gk::Gemm promoted_plan(fp8_tn(90));
  EXPECT_EQ(promoted_plan.spec_for_problem(8192, 8192, 8192).tile.math_operation, gk::MathOperation::MultiplyAdd);
}

TEST(Fp8FastAccum, OtherOperandsAndBlockScalesRefuseIt) {
  gk::Gemm f16(gk::testing::f16_row(90));
  const std::string refused = config_error_of([&] { f16.set_math_operation(gk::MathOperation::MultiplyAddFastAccum); });
  EXPECT_TRUE(contains(refused, "multiply_add_fast_accum")) << refused;
  gk::Gemm blocked(fp8_tn(90));
  blocked.set_block_scaling(gk::BlockScaling::Blockwise);
  const std::string with_blocks =
      config_error_of([&] { blocked.set_math_operation(gk::MathOperation::MultiplyAddFastAccum); });
  EXPECT_TRUE(contains(with_blocks, "no block scales")) << with_blocks;
}
