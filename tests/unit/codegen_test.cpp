// tests/unit/codegen_test.cpp: render() pinned by golden files, and the specs it refuses by the families' rules.
// GEMMKIT_UPDATE_GOLDENS=1 rewrites tests/golden/codegen_*.cu from the current output instead of comparing.
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "catalog/catalog.hpp"
#include "codegen/render.hpp"
#include "gemmkit/codegen.hpp"
#include "gemmkit/conv2d.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"
#include "support/cli.hpp"
#include "unit/test_env.hpp"

namespace gemmkit {
namespace {

KernelSpec sm90_f16_auto() {
  KernelSpec spec;
  spec.cc = 90;
  spec.kernel_cc = 90;
  spec.family = KernelFamily::Sm90Collective;
  spec.element_a = spec.element_b = spec.element_c = spec.element_d = DataType::f16;
  spec.element_accumulator = DataType::f32;
  spec.alignment_a = spec.alignment_b = spec.alignment_c = 8;
  spec.tile.threadblock_shape = {256, 256, 64};
  spec.tile.warp_count = {4, 1, 1};
  spec.tile.instruction_shape = {64, 256, 16};
  spec.tile.cluster_shape = {2, 1, 1};
  return spec;
}

KernelSpec sm90_bf16_stream_k_leaky() {
  KernelSpec spec = sm90_f16_auto();
  spec.element_a = spec.element_b = spec.element_d = DataType::bf16;
  spec.element_c = DataType::f32;
  spec.alignment_c = 4;
  spec.layout_b = Layout::ColumnMajor;
  spec.layout_c = Layout::ColumnMajor;
  spec.tile.threadblock_shape = {128, 128, 64};
  spec.tile.cluster_shape = {1, 1, 1};
  spec.tile.stages = 4;
  spec.tile.kernel_schedule = KernelSchedule::TmaWarpSpecializedCooperative;
  spec.tile.epilogue_schedule = EpilogueSchedule::TmaWarpSpecializedCooperative;
  spec.swizzle = Swizzle::StreamK;
  spec.activation = Activation::LeakyReLU;
  return spec;
}

KernelSpec sm90_f16_row_bias_gelu() {
  KernelSpec spec = sm90_f16_auto();
  spec.bias = BiasMode::PerRow;
  spec.activation = Activation::GELU;
  return spec;
}

// The same kernel on gemmkit's lean epilogue, which takes the activation, bias and scale vectors at launch.
KernelSpec sm90_f16_lean() {
  KernelSpec spec = sm90_f16_auto();
  spec.tile.kernel_schedule = KernelSchedule::TmaWarpSpecializedCooperative;
  spec.tile.epilogue_schedule = EpilogueSchedule::Lean;
  return spec;
}

// The row-bias GELU kernel taking its activation at launch: the same CUTLASS epilogue, one kernel for every activation.
KernelSpec sm90_f16_row_bias_at_launch() {
  KernelSpec spec = sm90_f16_row_bias_gelu();
  spec.activation_at_launch = true;
  return spec;
}

// An FP8 GEMM on CUTLASS's block-scaled mainloop (DeepSeek-V3 scales) with a fused GELU, on the ping-pong schedule.
KernelSpec sm90_e4m3_blockwise_gelu() {
  KernelSpec spec = sm90_f16_auto();
  spec.element_a = spec.element_b = DataType::e4m3;
  spec.element_c = spec.element_d = DataType::bf16;
  spec.layout_b = Layout::ColumnMajor;
  spec.alignment_a = spec.alignment_b = 16;
  spec.tile.threadblock_shape = {64, 128, 128};
  spec.tile.cluster_shape = {1, 1, 1};
  spec.tile.kernel_schedule = KernelSchedule::TmaWarpSpecializedPingpong;
  spec.tile.epilogue_schedule = EpilogueSchedule::TmaWarpSpecialized;
  spec.activation = Activation::GELU;
  spec.block_scaling = BlockScaling::Blockwise;
  return spec;
}

KernelSpec sm80_f16_tensorop() {
  KernelSpec spec;
  spec.cc = 80;
  spec.kernel_cc = 80;
  spec.family = KernelFamily::Sm80Universal;
  spec.element_a = spec.element_b = spec.element_c = spec.element_d = DataType::f16;
  spec.element_accumulator = DataType::f32;
  spec.alignment_a = spec.alignment_b = spec.alignment_c = 8;
  spec.tile.threadblock_shape = {256, 128, 64};
  spec.tile.warp_count = {4, 2, 1};
  spec.tile.stages = 3;
  spec.tile.instruction_shape = {16, 8, 16};
  return spec;
}

KernelSpec sm80_f32_simt_gelu_column_c() {
  KernelSpec spec = sm80_f16_tensorop();
  spec.cc = 90;
  spec.opclass = OpClass::Simt;
  spec.element_a = spec.element_b = spec.element_c = spec.element_d = DataType::f32;
  spec.alignment_a = spec.alignment_b = spec.alignment_c = 1;
  spec.layout_c = Layout::ColumnMajor;
  spec.tile.threadblock_shape = {128, 128, 8};
  spec.tile.warp_count = {4, 2, 1};
  spec.tile.stages = 4;
  spec.tile.instruction_shape = {1, 1, 1};
  spec.swizzle = Swizzle::Identity4;
  spec.activation = Activation::GELU;
  return spec;
}

KernelSpec sm80_f16_column_bias_relu() {
  KernelSpec spec = sm80_f16_tensorop();
  spec.bias = BiasMode::PerColumn;
  spec.activation = Activation::ReLU;
  return spec;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void expect_golden(const std::string& golden, const KernelSpec& spec) {
  const std::string path = std::string(GEMMKIT_GOLDEN_DIR) + "/" + golden;
  const std::string text = render(spec).text;
  const char* update = std::getenv("GEMMKIT_UPDATE_GOLDENS");
  if (update != nullptr && std::string(update) == "1") {
    std::ofstream(path, std::ios::binary) << text;
    return;
  }
  const std::string expected = read_file(path);
  ASSERT_FALSE(expected.empty()) << path << " is missing; run with GEMMKIT_UPDATE_GOLDENS=1 to create it";
  EXPECT_EQ(text, expected) << "render() output changed for " << golden
                            << "; if intended, rerun with GEMMKIT_UPDATE_GOLDENS=1 and review the diff";
}

TEST(Codegen, Sm90F16AutoMatchesGolden) {
  expect_golden("codegen_sm90_f16_auto.cu", sm90_f16_auto());
}

TEST(Codegen, Sm90Bf16StreamKLeakyMatchesGolden) {
  expect_golden("codegen_sm90_bf16_stream_k_leaky.cu", sm90_bf16_stream_k_leaky());
}

TEST(Codegen, Sm90F16RowBiasGeluMatchesGolden) {
  expect_golden("codegen_sm90_f16_row_bias_gelu.cu", sm90_f16_row_bias_gelu());
}

TEST(Codegen, Sm90F16LeanMatchesGolden) {
  expect_golden("codegen_sm90_f16_lean.cu", sm90_f16_lean());
}

TEST(Codegen, Sm90F16RowBiasActivationAtLaunchMatchesGolden) {
  expect_golden("codegen_sm90_f16_row_bias_at_launch.cu", sm90_f16_row_bias_at_launch());
}

TEST(Codegen, Sm90E4m3BlockwiseGeluMatchesGolden) {
  expect_golden("codegen_sm90_e4m3_blockwise_gelu.cu", sm90_e4m3_blockwise_gelu());
}

TEST(Codegen, Sm80F16ColumnBiasReluMatchesGolden) {
  expect_golden("codegen_sm80_f16_column_bias_relu.cu", sm80_f16_column_bias_relu());
}

TEST(Codegen, Sm80F16TensorOpMatchesGolden) {
  expect_golden("codegen_sm80_f16_tensorop.cu", sm80_f16_tensorop());
}

TEST(Codegen, Sm80F32SimtGeluMatchesGolden) {
  expect_golden("codegen_sm80_f32_simt_gelu.cu", sm80_f32_simt_gelu_column_c());
}

TEST(Codegen, SourceCarriesNameArchAndGlue) {
  const KernelSpec spec = sm90_f16_auto();
  const KernelSource source = render(spec);
  EXPECT_EQ(source.kernel_name, spec.name());
  EXPECT_EQ(source.arch_flag, spec.arch_flag());
  EXPECT_NE(source.text.find("inline constexpr char kName[] = \"" + spec.name() + "\";"), std::string::npos);
  EXPECT_NE(source.text.find("#include \"gemmkit/module_entry.hpp\""), std::string::npos);
  EXPECT_EQ(source.text.find("{{"), std::string::npos);
  for (const KernelSpec& each : {sm90_f16_auto(), sm80_f16_tensorop()}) {
    const auto& family = catalog::family_of(each.family);
    const std::string glue = "#include \"" + std::string(family.glue_header(each)) + "\"";
    EXPECT_NE(render(each).text.find(glue), std::string::npos) << glue;
  }
}

// GEMMKIT_LEAN_TMA_STORE switches the lean epilogue's way out for D (staged in shared memory and stored with TMA, or
// from registers) in the rendered source, so the two builds are two cache entries under one kernel name.
TEST(Codegen, LeanTmaStoreKnobRendersAnotherSource) {
  const KernelSpec spec = sm90_f16_lean();
  const std::string from_registers = render(spec).text;
  std::string staged;
  {
    const testenv::ScopedEnv knob("GEMMKIT_LEAN_TMA_STORE", "1");
    staged = render(spec).text;
  }
  EXPECT_NE(from_registers.find("constexpr bool TmaStore = false;"), std::string::npos);
  EXPECT_NE(staged.find("constexpr bool TmaStore = true;"), std::string::npos);
  EXPECT_EQ(render(spec).text, from_registers);  // the knob is read at each render, not once per process
}

// On the Lean epilogue schedule every activation, bias and scale mode renders the same source, so one kernel (one
// name, one cache entry, one canonical record) serves them all; CUTLASS's epilogues compile them in.
TEST(Codegen, LeanEpilogueKernelIsSharedByEveryPlainEpilogue) {
  const KernelSpec plain = sm90_f16_lean();
  const KernelSource source = render(plain);
  EXPECT_NE(source.text.find("#include \"gemmkit/sm90_lean.hpp\""), std::string::npos);
  EXPECT_NE(source.text.find("gemmkit::sm90::LeanCollectiveEpilogue<"), std::string::npos);
  EXPECT_NE(plain.name().find("_epi_lean"), std::string::npos) << plain.name();
  EXPECT_TRUE(source.splittable);
  for (const Activation activation : {Activation::ReLU, Activation::GELU, Activation::LeakyReLU}) {
    for (const BiasMode bias : {BiasMode::None, BiasMode::PerRow, BiasMode::PerColumn}) {
      for (const ScaleMode scale : {ScaleMode::None, ScaleMode::RowAndColumn}) {
        KernelSpec spec = plain;
        spec.activation = activation;
        spec.bias = bias;
        spec.scale = scale;
        EXPECT_EQ(render(spec).text, source.text);
        EXPECT_EQ(spec.name(), plain.name());
        EXPECT_EQ(spec.canonical(), plain.canonical());
      }
    }
  }
  KernelSpec relu = sm90_f16_auto();
  relu.activation = Activation::ReLU;
  EXPECT_NE(render(relu).text.find("cutlass::epilogue::thread::ReLu"), std::string::npos);
  EXPECT_NE(relu.canonical(), sm90_f16_auto().canonical());
}

// A kernel that takes its activation at launch is one kernel (source, name, cache record) for every activation of
// an otherwise equal spec, and not the kernel that compiles one in; the bias and the tile still make other kernels.
TEST(Codegen, ActivationAtLaunchKernelIsSharedByEveryActivation) {
  const KernelSpec gelu = sm90_f16_row_bias_at_launch();
  const KernelSource source = render(gelu);
  EXPECT_NE(source.text.find("gemmkit::activation::AtLaunchFor16BitD"), std::string::npos);
  EXPECT_NE(gelu.name().find("_act_at_launch"), std::string::npos) << gelu.name();
  for (const Activation activation :
       {Activation::Identity, Activation::ReLU, Activation::LeakyReLU, Activation::SiLU}) {
    KernelSpec spec = gelu;
    spec.activation = activation;
    EXPECT_EQ(render(spec).text, source.text);
    EXPECT_EQ(spec.name(), gelu.name());
    EXPECT_EQ(spec.canonical(), gelu.canonical());
  }
  EXPECT_NE(gelu.canonical(), sm90_f16_row_bias_gelu().canonical());
  KernelSpec column_bias = gelu;
  column_bias.bias = BiasMode::PerColumn;
  EXPECT_NE(column_bias.canonical(), gelu.canonical());
  // A 32-bit D keeps CUTLASS's exact functors, as the kernels that compile one in do.
  KernelSpec f32_d = gelu;
  f32_d.element_c = f32_d.element_d = DataType::f32;
  f32_d.alignment_c = 4;
  EXPECT_NE(render(f32_d).text.find("gemmkit::activation::AtLaunch,"), std::string::npos);
  // On the lean epilogue, which takes every activation at launch anyway, the flag changes nothing.
  KernelSpec lean = sm90_f16_lean();
  lean.activation_at_launch = true;
  EXPECT_EQ(lean.canonical(), sm90_f16_lean().canonical());
  EXPECT_EQ(render(lean).text, render(sm90_f16_lean()).text);
}

// run()'s first build of a plan with nothing built is the default configuration's quick twin: the same tile on the
// lean epilogue, a configuration the plan lists (a Stream-K tile's twin keeps the Stream-K scheduler); none where the
// lean epilogue cannot store D.
TEST(Codegen, TheQuickTwinIsTheSameTileOnTheLeanEpilogue) {
  const auto& family = catalog::family_of(KernelFamily::Sm90Collective);
  const std::optional<TileDescription> twin = family.quick_twin(sm90_f16_auto());
  ASSERT_TRUE(twin);
  EXPECT_EQ(*twin, sm90_f16_lean().tile);
  Gemm plan(testing::f16_row(90));
  const auto tiles = plan.tile_descriptions();
  EXPECT_NE(std::find(tiles.begin(), tiles.end(), *family.quick_twin(plan.spec())), tiles.end());
  KernelSpec column_major = sm90_f16_auto();
  column_major.layout_c = Layout::ColumnMajor;
  EXPECT_FALSE(family.quick_twin(column_major));
  EXPECT_FALSE(family.quick_twin(sm90_bf16_stream_k_leaky()));
  EXPECT_FALSE(family.quick_twin(sm90_f16_lean()));
  EXPECT_FALSE(catalog::family_of(KernelFamily::Sm80Universal).quick_twin(sm80_f16_tensorop()));

  // Every Stream-K entry of the plan has a listed twin on the same tile, cluster and scheduler.
  int stream_k_entries = 0;
  for (const TileDescription& td : tiles) {
    if (td.tile_scheduler != TileScheduler::StreamK || td.epilogue_schedule == EpilogueSchedule::Lean) continue;
    ++stream_k_entries;
    KernelSpec stream_k = plan.spec();
    stream_k.tile = td;
    const std::optional<std::size_t> index = catalog::quick_twin_index(tiles, stream_k);
    ASSERT_TRUE(index) << td.to_string();
    const TileDescription& lean = tiles[*index];
    EXPECT_EQ(lean.epilogue_schedule, EpilogueSchedule::Lean);
    EXPECT_EQ(lean.tile_scheduler, TileScheduler::StreamK);
    EXPECT_EQ(lean.cta_tile(), td.cta_tile());
    EXPECT_EQ(lean.cluster_shape, td.cluster_shape);
  }
  EXPECT_GT(stream_k_entries, 0);
  // A plan whose swizzle is Stream-K keeps it: the twin is the lean entry of the same tile, launched with that swizzle.
  KernelSpec swizzled = sm90_f16_auto();
  swizzled.swizzle = Swizzle::StreamK;
  ASSERT_TRUE(family.quick_twin(swizzled));
  EXPECT_EQ(*family.quick_twin(swizzled), sm90_f16_lean().tile);
}

TEST(Codegen, Sm90GemmsAreSplittable) {
  EXPECT_TRUE(render(sm90_f16_auto()).splittable);
  EXPECT_TRUE(render(sm90_bf16_stream_k_leaky()).splittable);
  EXPECT_FALSE(render(sm80_f16_tensorop()).splittable);
}

TEST(Codegen, Sm90DerivesCtaTileAndSchedulerTags) {
  const std::string text = render(sm90_bf16_stream_k_leaky()).text;
  EXPECT_NE(text.find("cute::Shape<cute::Int<128>, cute::Int<128>, cute::Int<64>>"), std::string::npos);
  EXPECT_NE(text.find("using TileScheduler = cutlass::gemm::StreamKScheduler;"), std::string::npos);
  EXPECT_NE(text.find("cutlass::epilogue::thread::LeakyReLU"), std::string::npos);
  EXPECT_NE(text.find("constexpr int AlignmentD = 8;"), std::string::npos);  // 16 bytes of f32 C = 8 bf16
  KernelSpec persistent = sm90_f16_auto();
  persistent.tile.tile_scheduler = TileScheduler::Persistent;
  EXPECT_NE(render(persistent).text.find("using TileScheduler = cutlass::gemm::PersistentScheduler;"),
            std::string::npos);
}

TEST(Codegen, BiasSelectsTheBroadcastEpilogues) {
  KernelSpec sm90_column = sm90_f16_auto();
  sm90_column.bias = BiasMode::PerColumn;
  const std::string sm90_text = render(sm90_column).text;
  EXPECT_NE(sm90_text.find("gemmkit::module::Bias::PerColumn;"), std::string::npos);
  EXPECT_NE(sm90_text.find("using ElementBias = cutlass::half_t;"), std::string::npos);
  KernelSpec sm80_row = sm80_f16_tensorop();
  sm80_row.bias = BiasMode::PerRow;
  sm80_row.layout_c = Layout::ColumnMajor;
  const std::string sm80_text = render(sm80_row).text;
  EXPECT_NE(sm80_text.find("gemmkit::module::Bias::PerRow;"), std::string::npos);
  EXPECT_NE(sm80_text.find("cutlass::gemm::device::GemmUniversalWithBroadcast<"), std::string::npos);
  EXPECT_NE(render(sm80_f16_tensorop()).text.find("cutlass::gemm::device::GemmUniversal<"), std::string::npos);
}

TEST(Codegen, Sm80DerivesWarpShapeAndTags) {
  const std::string text = render(sm80_f32_simt_gelu_column_c()).text;
  EXPECT_NE(text.find("cutlass::gemm::GemmShape<32, 64, 8>"), std::string::npos);
  EXPECT_NE(text.find("GemmIdentityThreadblockSwizzle<4>"), std::string::npos);
  EXPECT_NE(text.find("cutlass::arch::OpClassSimt"), std::string::npos);
  EXPECT_NE(text.find("using LayoutC = cutlass::layout::ColumnMajor;"), std::string::npos);
}

// The refusal is a ConfigError whose message names the kernel and contains `needle`, the family rule's words.
void expect_refused(const KernelSpec& spec, const std::string& needle) {
  try {
    render(spec);
    ADD_FAILURE() << "render() accepted a spec it cannot express: " << spec.name();
  } catch (const ConfigError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find(spec.name()), std::string::npos) << message;
    EXPECT_NE(message.find(needle), std::string::npos) << message;
  }
}

TEST(Codegen, RefusesWhatTheFamiliesCannotExpress) {
  KernelSpec mixed_c = sm80_f16_tensorop();
  mixed_c.element_c = DataType::f32;
  expect_refused(mixed_c, "equal to element D");

  KernelSpec pingpong_stream_k = sm90_f16_auto();
  pingpong_stream_k.tile.kernel_schedule = KernelSchedule::TmaWarpSpecializedPingpong;
  pingpong_stream_k.tile.epilogue_schedule = EpilogueSchedule::TmaWarpSpecialized;
  pingpong_stream_k.tile.tile_scheduler = TileScheduler::StreamK;
  expect_refused(pingpong_stream_k, "needs a cooperative kernel schedule");

  KernelSpec small_auto_stream_k = sm90_f16_auto();
  small_auto_stream_k.tile.threadblock_shape = {128, 128, 64};  // CTA M 64: Auto resolves to ping-pong
  small_auto_stream_k.swizzle = Swizzle::StreamK;
  expect_refused(small_auto_stream_k, "needs a cooperative kernel schedule");

  // The rule catalog::validate used to lack: a ping-pong mainloop cannot feed the cooperative TMA epilogue.
  KernelSpec pingpong_cooperative_epilogue = sm90_f16_auto();
  pingpong_cooperative_epilogue.tile.threadblock_shape = {128, 128, 64};
  pingpong_cooperative_epilogue.tile.cluster_shape = {1, 1, 1};
  pingpong_cooperative_epilogue.tile.kernel_schedule = KernelSchedule::TmaWarpSpecializedPingpong;
  pingpong_cooperative_epilogue.tile.epilogue_schedule = EpilogueSchedule::TmaWarpSpecializedCooperative;
  expect_refused(pingpong_cooperative_epilogue, "TmaWarpSpecializedCooperative epilogue schedule needs a cooperative");

  KernelSpec nosmem_relu = sm90_f16_auto();
  nosmem_relu.tile.kernel_schedule = KernelSchedule::TmaWarpSpecializedCooperative;
  nosmem_relu.tile.epilogue_schedule = EpilogueSchedule::NoSmemWarpSpecialized;
  nosmem_relu.activation = Activation::ReLU;
  expect_refused(nosmem_relu, "NoSmemWarpSpecialized");

  KernelSpec nosmem_bias = nosmem_relu;
  nosmem_bias.activation = Activation::Identity;
  nosmem_bias.bias = BiasMode::PerColumn;
  expect_refused(nosmem_bias, "NoSmemWarpSpecialized");

  KernelSpec sm80_row_bias_row_c = sm80_f16_tensorop();
  sm80_row_bias_row_c.bias = BiasMode::PerRow;
  expect_refused(sm80_row_bias_row_c, "per-row bias with RowMajor C");

  KernelSpec sm80_column_bias_column_c = sm80_f16_tensorop();
  sm80_column_bias_column_c.bias = BiasMode::PerColumn;
  sm80_column_bias_column_c.layout_c = Layout::ColumnMajor;
  expect_refused(sm80_column_bias_column_c, "per-column bias with ColumnMajor C");

  KernelSpec simt_bias = sm80_f32_simt_gelu_column_c();
  simt_bias.bias = BiasMode::PerRow;
  expect_refused(simt_bias, "needs a TensorOp kernel");

  KernelSpec int8_nn = sm80_f16_tensorop();
  int8_nn.element_a = int8_nn.element_b = DataType::s8;
  int8_nn.element_c = int8_nn.element_d = DataType::s32;
  int8_nn.element_accumulator = DataType::s32;
  expect_refused(int8_nn, "RowMajor and B ColumnMajor");

  KernelSpec uneven_warps = sm80_f16_tensorop();
  uneven_warps.tile.warp_count = {3, 2, 1};
  expect_refused(uneven_warps, "must divide the threadblock shape");
}

// What the lean epilogue does not move is refused by name.
TEST(Codegen, LeanEpilogueRefusesWhatItCannotStore) {
  KernelSpec column_major = sm90_f16_lean();
  column_major.layout_c = Layout::ColumnMajor;
  expect_refused(column_major, "row-major D");
  KernelSpec narrow_c = sm90_f16_lean();
  narrow_c.alignment_c = 4;
  expect_refused(narrow_c, "16-byte vectors");
  KernelSpec auto_mainloop = sm90_f16_lean();
  auto_mainloop.tile.kernel_schedule = KernelSchedule::Auto;
  expect_refused(auto_mainloop, "both be auto or neither");
  KernelSpec s8 = sm90_f16_lean();
  s8.element_d = DataType::s8;
  EXPECT_THROW(render(s8), ConfigError);
}

TEST(Codegen, ActivationAtLaunchIsRefusedWhereTheActivationIsCompiledIn) {
  KernelSpec sm80 = sm80_f16_tensorop();
  sm80.activation = Activation::ReLU;
  sm80.activation_at_launch = true;
  expect_refused(sm80, "SM90 GEMM option");
  KernelSpec parallel = sm90_f16_row_bias_at_launch();
  parallel.split_k_mode = SplitKMode::Parallel;
  expect_refused(parallel, "reduction");
}

TEST(Codegen, RenderRejectsMismatchedPlaceholders) {
  EXPECT_EQ(codegen::render("t", "a {{x}} b", {{"x", "1"}}), "a 1 b");
  EXPECT_THROW(codegen::render("t", "a {{y}}", {{"x", "1"}}), Error);
  EXPECT_THROW(codegen::render("t", "a", {{"x", "1"}}), Error);
  EXPECT_THROW(codegen::find_template("no_such.cu.in"), Error);
}

}  // namespace
}  // namespace gemmkit

namespace gemmkit {
namespace {

struct ActivationFunctor {
  Activation activation;
  const char* for_16bit_output;  // the functor a kernel with an f16 / bf16 D instantiates
  const char* for_f32_output;    // CUTLASS's, in cutlass/epilogue/thread/activation.h
};

void PrintTo(const ActivationFunctor& f, std::ostream* os) {
  *os << to_string(f.activation);  // ctest lists the test by it, not by a dump of the struct's bytes
}

class CodegenActivations : public ::testing::TestWithParam<ActivationFunctor> {};

// Each activation reaches both families' templates as its functor, and names the kernel; sigmoid, SiLU and GELU
// use gemmkit's approximations only where D is 16-bit.
TEST_P(CodegenActivations, BothFamiliesInstantiateTheFunctor) {
  const auto [activation, for_16bit_output, for_f32_output] = GetParam();
  for (KernelSpec spec : {sm90_f16_auto(), sm80_f16_tensorop(), sm80_f32_simt_gelu_column_c()}) {
    spec.activation = activation;
    const KernelSource source = render(spec);
    const std::string functor = spec.element_d == DataType::f32 ? for_f32_output : for_16bit_output;
    EXPECT_NE(source.text.find(functor + ","), std::string::npos) << to_string(spec.family) << " " << functor;
    if (activation != Activation::Identity) {
      EXPECT_NE(source.kernel_name.find(std::string("_") + std::string(to_string(activation))), std::string::npos);
    }
  }
}

#define GK_CUTLASS_ACT(name) "cutlass::epilogue::thread::" name
#define GK_OWN_ACT(name) "gemmkit::activation::" name
INSTANTIATE_TEST_SUITE_P(
    Unit, CodegenActivations,
    ::testing::Values(
        ActivationFunctor{Activation::Identity, GK_CUTLASS_ACT("Identity"), GK_CUTLASS_ACT("Identity")},
        ActivationFunctor{Activation::ReLU, GK_CUTLASS_ACT("ReLu"), GK_CUTLASS_ACT("ReLu")},
        ActivationFunctor{Activation::LeakyReLU, GK_CUTLASS_ACT("LeakyReLU"), GK_CUTLASS_ACT("LeakyReLU")},
        ActivationFunctor{Activation::GELU, GK_OWN_ACT("GELU"), GK_CUTLASS_ACT("GELU")},
        ActivationFunctor{Activation::GELUTanh, GK_CUTLASS_ACT("GELU_taylor"), GK_CUTLASS_ACT("GELU_taylor")},
        ActivationFunctor{Activation::HardSwish, GK_CUTLASS_ACT("HardSwish"), GK_CUTLASS_ACT("HardSwish")},
        ActivationFunctor{Activation::Sigmoid, GK_OWN_ACT("Sigmoid"), GK_CUTLASS_ACT("Sigmoid")},
        ActivationFunctor{Activation::SiLU, GK_OWN_ACT("SiLu"), GK_CUTLASS_ACT("SiLu")},
        ActivationFunctor{Activation::Tanh, GK_CUTLASS_ACT("Tanh"), GK_CUTLASS_ACT("Tanh")}),
    [](const auto& info) { return std::string(to_string(info.param.activation)); });
#undef GK_CUTLASS_ACT
#undef GK_OWN_ACT

// Conv2d kernels (the Sm80Conv2d family): a default, an activation with the strided dgrad swizzle, tf32.
Conv2dOptions conv_options(ConvKind kind, DataType element = DataType::f16, DataType accumulator = DataType::f32) {
  Conv2dOptions o;
  o.kind = kind;
  o.element = element;
  o.element_accumulator = accumulator;
  o.cc = 80;
  return o;
}

TEST(Conv2dGolden, Sm80FpropF16Optimized) {
  Conv2d plan(conv_options(ConvKind::Fprop));
  plan.set_iterator_algorithm(IteratorAlgorithm::Optimized);
  expect_golden("conv2d_sm80_fprop_f16_optimized.cu", plan.spec());
}

TEST(Conv2dGolden, Sm80DgradStridedSiluF16Accumulator) {
  Conv2d plan(conv_options(ConvKind::Dgrad, DataType::f16, DataType::f16));
  plan.set_activation(Activation::SiLU);
  plan.set_swizzling_functor(Swizzle::Identity4);
  expect_golden("conv2d_sm80_dgrad_f16_strided_silu.cu", plan.spec());
}

TEST(Conv2dGolden, Sm80WgradTf32) {
  Conv2d plan(conv_options(ConvKind::Wgrad, DataType::f32, DataType::f32));
  expect_golden("conv2d_sm80_wgrad_tf32.cu", plan.spec());
}

// The Sm90Conv2d family (the default on SM90): wgrad (its nested N tile and KCSR output) with a fused GELU.
TEST(Conv2dGolden, Sm90WgradF16Gelu) {
  Conv2dOptions o = conv_options(ConvKind::Wgrad);
  o.cc = 90;
  Conv2d plan(o);
  plan.set_activation(Activation::GELU);
  expect_golden("conv2d_sm90_wgrad_f16_gelu.cu", plan.spec());
}

// Parallel split-K: the conv kernel writes f32 partial sums, the reduction applies the plan's epilogue (ReLU).
TEST(Conv2dGolden, Sm80WgradF16ParallelSplitKRelu) {
  Conv2d plan(conv_options(ConvKind::Wgrad));
  plan.set_activation(Activation::ReLU);
  KernelSpec spec = plan.spec();
  spec.split_k_mode = SplitKMode::Parallel;
  expect_golden("conv2d_sm80_wgrad_f16_parallel_relu.cu", spec);
}

}  // namespace
}  // namespace gemmkit
