// tests/unit/grouped_test.cpp: GroupedGemm without a GPU: which family and kernel name a plan gets, its rules, every
// tile rendering through the grouped templates, goldens, and the checks of the lists (errors name group and operand).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "gemmkit/codegen.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"
#include "gemmkit/grouped_gemm.hpp"
#include "support/plan_options.hpp"
#include "unit/test_env.hpp"

namespace gemmkit {
namespace {

GemmOptions f16_options(int cc, std::optional<int> kernel_cc = std::nullopt) {
  GemmOptions o;
  o.element = DataType::f16;
  o.element_accumulator = DataType::f32;
  o.layout = Layout::RowMajor;
  o.cc = cc;
  o.kernel_cc = kernel_cc;
  return o;
}

// Device views at fake, 256-byte aligned addresses: enough for spec_for, which never reads them.
TensorView matrix(long rows, long cols, long ld = 0, DataType dtype = DataType::f16, std::size_t offset = 0) {
  alignas(256) static char base[1024];
  return TensorView::strided(base + offset, dtype, {rows, cols}, {ld == 0 ? cols : ld, 1}, 0);
}

struct Lists {
  std::vector<TensorView> A, B, C, D;
  void add(long m, long n, long k) {
    A.push_back(matrix(m, k));
    B.push_back(matrix(k, n));
    C.push_back(matrix(m, n));
    D.push_back(matrix(m, n));
  }
};

using testenv::error_of;

TEST(GroupedPlan, Sm90UsesThePtrArrayFamilyWithReferenceStyleName) {
  GroupedGemm plan(f16_options(90));
  const KernelSpec spec = plan.spec();
  EXPECT_EQ(spec.family, KernelFamily::Sm90Grouped);
  EXPECT_EQ(plan.kernel_cc(), 90);
  EXPECT_EQ(spec.name(),
            "cutlass3x_sm90_tensorop_s0x0x0gemm_grouped_f16_f16_f32_f16_f16_128x128x64_1x1x1_0_ttt_align8");
  EXPECT_TRUE(render(spec).splittable);  // a cubin and a host module, built side by side
}

TEST(GroupedPlan, KernelCc80AndSm80GivesTheReferenceKernel) {
  for (const GemmOptions& options : {f16_options(90, 80), f16_options(80)}) {
    GroupedGemm plan(options);
    EXPECT_EQ(plan.spec().family, KernelFamily::Sm80Grouped);
    EXPECT_EQ(plan.kernel_name(), "cutlass_tensorop_f16_s16816gemm_grouped_f16_256x128_64x3_tt_align8");
    EXPECT_FALSE(render(plan.spec()).splittable);
  }
}

TEST(GroupedPlan, Tf32WithRowMajorAAndBTakesTheSm80Family) {
  GemmOptions o = f16_options(90);
  o.element = DataType::f32;
  GroupedGemm plan(o);
  EXPECT_EQ(plan.spec().family, KernelFamily::Sm80Grouped);  // wgmma has no K-major A with N-major B for tf32
}

TEST(GroupedPlan, SwizzlesAndBiasAreRefusedWithTheReferenceMessage) {
  GroupedGemm plan(f16_options(90));
  EXPECT_EQ(plan.swizzling_functors(), std::vector<Swizzle>{Swizzle::Identity1});
  EXPECT_NE(error_of([&] {
              plan.set_swizzling_functor(Swizzle::StreamK);
            }).find("Grouped GEMM does not currently support different swizzling functors"),
            std::string::npos);
}

// A grouped plan offers only what applies to it: no bias vector, no single-GEMM run or spec_for, not a Gemm.
template <class P>
concept TakesBias = requires(P& plan) {
  plan.set_bias(BiasMode::PerRow);
};
template <class P>
concept RunsOneGemm = requires(P& plan, const TensorView& t) {
  plan.spec_for(t, t, nullptr, t);
};
static_assert(TakesBias<Gemm> && RunsOneGemm<Gemm>);
static_assert(!TakesBias<GroupedGemm> && !RunsOneGemm<GroupedGemm> && !std::is_convertible_v<GroupedGemm*, Gemm*>);

TEST(GroupedPlan, Sm90ScheduleRulesAreTheFamilys) {
  GroupedGemm plan(f16_options(90));
  TileDescription td = plan.tile_descriptions().front();
  td.kernel_schedule = KernelSchedule::TmaWarpSpecializedPingpong;
  td.epilogue_schedule = EpilogueSchedule::TmaWarpSpecializedCooperative;
  EXPECT_NE(error_of([&] { plan.set_tile_description(td); }).find("epilogue of its own kernel schedule"),
            std::string::npos);
  td.kernel_schedule = KernelSchedule::CpAsyncWarpSpecializedCooperative;
  EXPECT_NE(error_of([&] { plan.set_tile_description(td); }).find("has no grouped form"), std::string::npos);
}

// Every configuration and activation renders: the templates and the families' placeholders agree.
TEST(GroupedPlan, EveryTileAndActivationRenders) {
  for (auto kernel_cc : {90, 80}) {
    GroupedGemm plan(f16_options(90, kernel_cc));
    const auto tiles = plan.tile_descriptions();
    ASSERT_FALSE(tiles.empty());
    for (const auto& td : tiles) {
      plan.set_tile_description(td);
      const KernelSource source = plan.render_source();
      EXPECT_NE(source.text.find("gemmkit/grouped_entry.hpp"), std::string::npos) << plan.kernel_name();
      EXPECT_NE(plan.kernel_name().find("gemm_grouped_"), std::string::npos);
    }
    for (const auto& row : enum_rows<Activation>()) {
      plan.set_activation(row.value);
      EXPECT_NE(plan.render_source().text.find("kActivation[] = \"" + std::string(row.name) + "\""), std::string::npos);
    }
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// GEMMKIT_UPDATE_GOLDENS=1 rewrites the goldens, as in codegen_test.cpp.
void expect_golden(const std::string& golden, const GroupedGemm& plan) {
  const std::string path = std::string(GEMMKIT_GOLDEN_DIR) + "/" + golden;
  const std::string text = plan.render_source().text;
  if (const char* update = std::getenv("GEMMKIT_UPDATE_GOLDENS"); update != nullptr && std::string(update) == "1") {
    std::ofstream(path, std::ios::binary) << text;
    return;
  }
  EXPECT_EQ(text, read_file(path)) << "render() output changed for " << golden;
}

TEST(GroupedPlan, RenderedSourcesMatchGoldens) {
  expect_golden("grouped_sm90_f16_tensorop.cu", GroupedGemm(f16_options(90)));
  GroupedGemm silu(f16_options(90));
  TileDescription pingpong = silu.tile_descriptions().front();
  pingpong.threadblock_shape = {64, 128, 64};
  silu.set_tile_description(pingpong);
  silu.set_activation(Activation::SiLU);
  expect_golden("grouped_sm90_f16_silu.cu", silu);
  GroupedGemm relu(f16_options(90, 80));
  relu.set_activation(Activation::ReLU);
  expect_golden("grouped_sm80_f16_relu.cu", relu);
  GroupedGemm blockwise(testing::fp8_tn(90));
  blockwise.set_block_scaling(BlockScaling::Blockwise);
  expect_golden("grouped_sm90_e4m3_blockwise.cu", blockwise);
}

TEST(GroupedLists, MixedShapesWithEmptyGroupsKeepTheWidestVectors) {
  GroupedGemm plan(f16_options(90));
  Lists l;
  l.add(128, 256, 512);
  l.add(0, 64, 64);  // empty groups never constrain the vectors
  l.add(8, 8, 8);
  l.add(1024, 128, 0);
  const KernelSpec spec = plan.spec_for(l.A, l.B, l.C, l.D, 1.0);
  EXPECT_EQ(spec.alignment_a, 8);
  EXPECT_EQ(spec.alignment_b, 8);
  EXPECT_EQ(spec.alignment_c, 8);
}

TEST(GroupedLists, EmptyGroupsMayComeWithoutDataOthersMayNot) {
  GroupedGemm plan(f16_options(90));
  Lists l;
  l.add(64, 64, 64);
  l.add(0, 64, 64);
  for (auto* list : {&l.A, &l.C, &l.D}) (*list)[1].data = nullptr;  // M = 0: no element anywhere but in B
  EXPECT_NO_THROW(plan.spec_for(l.A, l.B, l.C, l.D, 1.0));
  l.B[1].data = nullptr;  // B[1] is 64 x 64: it has elements, so it needs its data
  EXPECT_EQ(error_of([&] { plan.spec_for(l.A, l.B, l.C, l.D, 1.0); }).rfind("Tensor B[1]: data pointer is null", 0),
            0u);
}

TEST(GroupedLists, ListsOfDifferentLengthsAreRefused) {
  GroupedGemm plan(f16_options(90));
  Lists l;
  l.add(64, 64, 64);
  l.add(64, 64, 64);
  l.D.pop_back();
  EXPECT_NE(error_of([&] { plan.spec_for(l.A, l.B, l.C, l.D, 1.0); }).find("Lengths of A, B, C, and D lists"),
            std::string::npos);
  EXPECT_NE(
      error_of([&] { plan.spec_for(std::span<const TensorView>{}, {}, {}, {}, 0.0); }).find("the lists are empty"),
      std::string::npos);
}

TEST(GroupedLists, ErrorsNameTheGroupAndTheOperand) {
  GroupedGemm plan(f16_options(90));
  Lists l;
  l.add(64, 64, 64);
  l.add(64, 64, 64);
  l.B[1] = matrix(32, 64);
  EXPECT_EQ(error_of([&] {
              plan.spec_for(l.A, l.B, l.C, l.D, 1.0);
            }).rfind("Tensors A[1] and B[1]: A is 64 x 64 (M x K) but B is 32 x 64", 0),
            0u);
  l.B[1] = matrix(64, 64);
  l.D[1] = matrix(64, 32);
  EXPECT_EQ(error_of([&] { plan.spec_for(l.A, l.B, l.C, l.D, 1.0); }).rfind("Tensor D[1] is 64 x 32", 0), 0u);
  l.D[1] = matrix(64, 64);
  l.A[0].dtype = DataType::bf16;
  EXPECT_EQ(error_of([&] { plan.spec_for(l.A, l.B, l.C, l.D, 1.0); }).rfind("Tensor A[0]", 0), 0u);
  l.A[0].dtype = DataType::f16;
  EXPECT_NE(error_of([&] { plan.spec_for(l.A, l.B, {}, l.D, 1.0); }).find("no C list was given"), std::string::npos);
  EXPECT_NO_THROW(plan.spec_for(l.A, l.B, {}, l.D, 0.0));
}

TEST(GroupedLists, BatchedTensorsAreNotGroups) {
  GroupedGemm plan(f16_options(90));
  Lists l;
  l.add(64, 64, 64);
  alignas(256) static char base[64];
  l.A[0] = TensorView::on_gpu(base, DataType::f16, {2, 64, 64});
  EXPECT_EQ(error_of([&] {
              plan.spec_for(l.A, l.B, l.C, l.D, 1.0);
            }).rfind("Tensor A[0]: grouped GEMMs take one matrix per group", 0),
            0u);
}

TEST(GroupedLists, Sm90NeedsSixteenByteRowsAndSaysSm80TakesNarrower) {
  Lists l;
  l.add(64, 64, 64);
  l.add(64, 60, 64);  // N = 60: rows of 120 bytes fit 4-element vectors only
  l.B[1] = matrix(64, 60, 60);
  l.C[1] = matrix(64, 60, 60);
  l.D[1] = matrix(64, 60, 60);
  GroupedGemm sm90(f16_options(90));
  const std::string error = error_of([&] { sm90.spec_for(l.A, l.B, l.C, l.D, 1.0); });
  EXPECT_EQ(error.rfind("Tensor B[1]: its leading dimension 60", 0), 0u) << error;
  EXPECT_NE(error.find("kernel_cc = 80"), std::string::npos);
  GroupedGemm sm80(f16_options(90, 80));
  const KernelSpec spec = sm80.spec_for(l.A, l.B, l.C, l.D, 1.0);
  EXPECT_EQ(spec.alignment_a, 8);
  EXPECT_EQ(spec.alignment_b, 4);  // the narrowest vector any group needs
  EXPECT_EQ(spec.alignment_c, 4);
}

TEST(GroupedContiguous, ChecksShapesAndOffsetsBeforeTouchingTheDevice) {
  GroupedGemm plan(f16_options(90));
  alignas(256) static char base[256];
  const TensorView A = TensorView::on_gpu(base, DataType::f16, {256, 64});
  const TensorView B = TensorView::on_gpu(base, DataType::f16, {4, 64, 128});
  const TensorView D = TensorView::on_gpu(base, DataType::f16, {256, 128});
  const TensorView wrong_d = TensorView::on_gpu(base, DataType::f16, {256, 64});
  const TensorView offsets = TensorView::on_gpu(base, DataType::s32, {4});
  const TensorView offsets_f32 = TensorView::on_gpu(base, DataType::f32, {4});
  const TensorView offsets_3 = TensorView::on_gpu(base, DataType::s32, {3});
  EXPECT_EQ(error_of([&] { plan.run_contiguous(A, B, nullptr, wrong_d, offsets); }).rfind("Tensors A, B and D", 0), 0u);
  EXPECT_EQ(error_of([&] { plan.run_contiguous(A, B, nullptr, D, offsets_f32); }).rfind("Tensor offsets", 0), 0u);
  EXPECT_EQ(error_of([&] { plan.run_contiguous(A, B, nullptr, D, offsets_3); }).rfind("Tensor offsets", 0), 0u);
  EXPECT_NE(error_of([&] { plan.run_contiguous(A, B, nullptr, D, offsets, 1.0, 1.0); }).find("no C was given"),
            std::string::npos);
  GemmOptions column_a = f16_options(90);
  column_a.layout_a = Layout::ColumnMajor;
  GroupedGemm transposed(column_a);
  EXPECT_NE(error_of([&] { transposed.run_contiguous(A, B, nullptr, D, offsets); }).find("layout_A and layout_C"),
            std::string::npos);
  // spec_for_contiguous checks as run_contiguous does and names its kernel: the plan's, a set tile kept.
  EXPECT_EQ(error_of([&] { plan.spec_for_contiguous(A, B, nullptr, wrong_d, offsets); }).rfind("Tensors A, B and D", 0),
            0u);
  EXPECT_EQ(plan.spec_for_contiguous(A, B, nullptr, D, offsets).name(), plan.kernel_name());
  const std::vector<TileDescription> tiles = plan.tile_descriptions();
  plan.set_tile_description(tiles.back());
  EXPECT_EQ(plan.spec_for_contiguous(A, B, nullptr, D, offsets).tile, tiles.back());
}

// f16 MoE operands of `rows` tokens and eight experts of 512 x n weights, all at `base` (no GPU: nothing runs).
struct MoeViews {
  TensorView A, B, D, offsets;
};
MoeViews moe_views(void* base, std::int64_t n, std::int64_t rows) {
  return {TensorView::on_gpu(base, DataType::f16, {rows, 512}), TensorView::on_gpu(base, DataType::f16, {8, 512, n}),
          TensorView::on_gpu(base, DataType::f16, {rows, n}), TensorView::on_gpu(base, DataType::s32, {8})};
}

// The MoE form of an SM90 16-bit plan takes 128 x 256 tiles where N is a multiple of 256 (half the passes over the
// tokens), else 256 x 128 where the experts average 256 rows or more (half the passes over the weights), else 128 x
// 128; a set tile stays, and the list form keeps the plan's default.
TEST(GroupedContiguous, TilesTwoHundredFiftySixWideWhereNIsAMultipleOfThem) {
  alignas(256) static char base[256];
  auto tile_for = [&](GroupedGemm& plan, std::int64_t n, std::int64_t rows = 4096) {
    const MoeViews v = moe_views(base, n, rows);
    return plan.spec_for_contiguous(v.A, v.B, nullptr, v.D, v.offsets).tile;
  };
  GroupedGemm plan(f16_options(90));
  EXPECT_EQ(tile_for(plan, 2048).cta_tile(), (Shape3{128, 256, 64}));
  EXPECT_EQ(tile_for(plan, 2048).cluster_shape, (Shape3{1, 1, 1}));
  EXPECT_EQ(tile_for(plan, 2048, 64).cta_tile(), (Shape3{128, 256, 64}));  // N decides first
  EXPECT_EQ(tile_for(plan, 1408).cta_tile(), (Shape3{256, 128, 64}));      // 512 rows an expert
  EXPECT_EQ(tile_for(plan, 1408).cluster_shape, (Shape3{1, 1, 1}));
  EXPECT_EQ(tile_for(plan, 1408, 2048).cta_tile(), (Shape3{256, 128, 64}));  // 256 rows an expert
  EXPECT_EQ(tile_for(plan, 1408, 2040), plan.tile_descriptions().front());   // 255
  const std::vector<KernelSpec> shipped = plan.run_time_kernels();           // what a pack holds: all three
  ASSERT_EQ(shipped.size(), 3u);
  EXPECT_EQ(shipped[0].name(), plan.kernel_name());
  EXPECT_EQ(shipped[1].tile, tile_for(plan, 2048));
  EXPECT_EQ(shipped[2].tile, tile_for(plan, 1408));
  plan.set_tile_description(plan.tile_descriptions().front());
  EXPECT_EQ(tile_for(plan, 2048).cta_tile(), (Shape3{128, 128, 64}));
  EXPECT_EQ(tile_for(plan, 1408).cta_tile(), (Shape3{128, 128, 64}));
  EXPECT_EQ(plan.run_time_kernels().size(), 1u);
  GroupedGemm sm80(f16_options(90, 80));
  EXPECT_EQ(tile_for(sm80, 2048), sm80.tile_descriptions().front());
  EXPECT_EQ(tile_for(sm80, 1408), sm80.tile_descriptions().front());
  // FP8 experts (transposed e4m3 weights [G, N, K]) keep the plan's own kernel: the wide tiles were timed on 16 bits.
  GroupedGemm fp8(testing::fp8_tn(90));
  for (const std::int64_t n : {2048, 1408}) {
    const TensorView A = TensorView::on_gpu(base, DataType::e4m3, {4096, 512});
    const TensorView B = TensorView::on_gpu(base, DataType::e4m3, {8, 512, n}, Layout::ColumnMajor);
    const TensorView D = TensorView::on_gpu(base, DataType::bf16, {4096, n});
    const TensorView offsets = TensorView::on_gpu(base, DataType::s32, {8});
    EXPECT_EQ(fp8.spec_for_contiguous(A, B, nullptr, D, offsets).name(), fp8.kernel_name()) << n;
  }
}

// Only the 256 x 128 pick, whose N 256 does not divide, has a rival (128 x 256, the same configuration otherwise):
// the GPU weighs the two on the group sizes. None where 256 divides N, under 256 rows or from 1024 rows an expert,
// with a set tile, on SM80 or for FP8.
TEST(GroupedContiguous, TallTilePicksAreLaunchedBesideTheirTransposedRival) {
  alignas(256) static char base[256];
  auto rival_for = [&](GroupedGemm& plan, std::int64_t n, std::int64_t rows = 4096) {
    const MoeViews v = moe_views(base, n, rows);
    return plan.rival_for_contiguous(v.A, v.B, nullptr, v.D, v.offsets);
  };
  GroupedGemm plan(f16_options(90));
  const std::optional<KernelSpec> rival = rival_for(plan, 1408);
  ASSERT_TRUE(rival.has_value());
  EXPECT_EQ(rival->tile.cta_tile(), (Shape3{128, 256, 64}));
  TileDescription transposed = plan.run_time_kernels().back().tile;  // the 256 x 128 pick, as run_contiguous has it
  ASSERT_EQ(transposed.cta_tile(), (Shape3{256, 128, 64}));
  transposed.threadblock_shape = rival->tile.threadblock_shape;
  EXPECT_EQ(rival->tile, transposed);                       // nothing else differs
  EXPECT_EQ(rival->tile, plan.run_time_kernels()[1].tile);  // shipped already: the 128 x 256 pick
  EXPECT_TRUE(rival_for(plan, 1408, 2048).has_value());
  EXPECT_FALSE(rival_for(plan, 1408, 2040).has_value());
  EXPECT_TRUE(rival_for(plan, 1408, 8184).has_value());   // 1023 rows an expert
  EXPECT_FALSE(rival_for(plan, 1408, 8192).has_value());  // 1024: 256 x 128 alone
  EXPECT_FALSE(rival_for(plan, 2048).has_value());
  plan.set_tile_description(plan.tile_descriptions().front());
  EXPECT_FALSE(rival_for(plan, 1408).has_value());
  GroupedGemm sm80(f16_options(90, 80));
  EXPECT_FALSE(rival_for(sm80, 1408).has_value());
  GroupedGemm fp8(testing::fp8_tn(90));
  const TensorView A = TensorView::on_gpu(base, DataType::e4m3, {4096, 512});
  const TensorView B = TensorView::on_gpu(base, DataType::e4m3, {8, 512, 1408}, Layout::ColumnMajor);
  const TensorView D = TensorView::on_gpu(base, DataType::bf16, {4096, 1408});
  EXPECT_FALSE(fp8.rival_for_contiguous(A, B, nullptr, D, TensorView::on_gpu(base, DataType::s32, {8})).has_value());
}

}  // namespace
}  // namespace gemmkit
