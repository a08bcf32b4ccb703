// tests/unit/plan_test.cpp: Gemm planning without a GPU: operand inference, names, opclass, configuration.
#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"
#include "support/cli.hpp"
#include "unit/test_env.hpp"

namespace gk = gemmkit;

namespace {

using gk::testing::f16_row;

template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const gk::ConfigError& e) {
    return e.what();
  }
  return "no ConfigError";
}

}  // namespace

TEST(PlanNames, DefaultKernelsMatchTheReferenceFormat) {
  EXPECT_EQ(gk::Gemm(f16_row(90)).kernel_name(),
            "cutlass3x_sm90_tensorop_s0x0x0gemm_f16_f16_f32_f16_f16_256x256x64_2x1x1_0_ttt_align8");
  EXPECT_EQ(gk::Gemm(f16_row(80)).kernel_name(), "cutlass_tensorop_f16_s16816gemm_f16_256x128_64x3_tt_align8");
  auto bf16 = f16_row(80);
  bf16.element = gk::DataType::bf16;
  EXPECT_EQ(gk::Gemm(bf16).kernel_name(), "cutlass_tensorop_bf16_s16816gemm_bf16_256x128_64x3_tt_align8");
  gk::GemmOptions f32;
  f32.element = gk::DataType::f32;
  f32.layout = gk::Layout::RowMajor;
  f32.cc = 80;
  EXPECT_EQ(gk::Gemm(f32).kernel_name(), "cutlass_tensorop_s1688tf32gemm_256x128_32x3_tt_align4");
  f32.cc = 90;
  // tf32 wgmma cannot pair a K-major A with an N-major B: the kernel computes D^T = B^T A^T ("nnn").
  EXPECT_EQ(gk::Gemm(f32).kernel_name(),
            "cutlass3x_sm90_tensorop_s0x0x0tf32gemm_f32_f32_f32_f32_f32_256x256x32_2x1x1_0_nnn_align4");
  f32.layout_b = gk::Layout::ColumnMajor;
  f32.layout_a = f32.layout_c = gk::Layout::RowMajor;
  f32.layout.reset();
  EXPECT_EQ(gk::Gemm(f32).kernel_name(),
            "cutlass3x_sm90_tensorop_s0x0x0tf32gemm_f32_f32_f32_f32_f32_256x256x32_2x1x1_0_tnt_align4");
  f32.layout = gk::Layout::RowMajor;
  f32.layout_a.reset();
  f32.layout_b.reset();
  f32.layout_c.reset();
  gk::GemmOptions f64 = f32;
  f64.element = gk::DataType::f64;
  f64.cc = 80;
  EXPECT_EQ(gk::Gemm(f64).kernel_name(), "cutlass_tensorop_d884gemm_128x128_16x3_tt_align1");
}

TEST(PlanNames, ColumnMajorOutputShowsTheSwitchedLayoutsOnSm80) {
  auto o = f16_row(80);
  o.layout_c = gk::Layout::ColumnMajor;
  o.layout.reset();
  o.layout_a = gk::Layout::RowMajor;
  o.layout_b = gk::Layout::RowMajor;
  // Row, row -> column-major D is computed as (B^T A^T), both column-major: "nn".
  EXPECT_NE(gk::Gemm(o).kernel_name().find("_nn_align8"), std::string::npos) << gk::Gemm(o).kernel_name();
}

TEST(PlanOperands, PrecedenceAndTheReferenceErrors) {
  std::vector<std::uint16_t> storage(16);
  const auto a = gk::TensorView::host(storage.data(), gk::DataType::bf16, {4, 4}, gk::Layout::ColumnMajor);
  gk::GemmOptions o = f16_row(90);
  o.element = gk::DataType::bf16;
  o.element_a = gk::DataType::f16;
  o.A = &a;
  EXPECT_EQ(error_of([&] { gk::Gemm p(o); }), "Must not specify both element_A and tensor A.");
  o.element_a.reset();
  gk::Gemm plan(o);
  EXPECT_EQ(plan.element_a(), gk::DataType::bf16);  // the tensor's dtype and its strides' layout
  EXPECT_EQ(plan.layout_a(), gk::Layout::ColumnMajor);
  EXPECT_EQ(plan.layout_b(), gk::Layout::RowMajor);

  o.layout_a = gk::Layout::RowMajor;
  EXPECT_EQ(error_of([&] { gk::Gemm p(o); }), "Must not specify both layout_A and tensor A.");

  gk::GemmOptions missing;
  missing.layout = gk::Layout::RowMajor;
  missing.element_a = gk::DataType::f16;
  missing.cc = 90;
  EXPECT_EQ(error_of([&] { gk::Gemm p(missing); }), "Must specify one of element_B, tensor B, or generic element.");
  gk::GemmOptions no_layout;
  no_layout.element = gk::DataType::f16;
  no_layout.cc = 90;
  EXPECT_EQ(error_of([&] { gk::Gemm p(no_layout); }), "Must specify one of layout_A, tensor A, or generic layout.");
}

TEST(PlanOperands, AccumulatorDefaultsToElementC) {
  gk::GemmOptions o;
  o.element = gk::DataType::f16;
  o.layout = gk::Layout::RowMajor;
  o.cc = 80;
  gk::Gemm plan(o);
  EXPECT_EQ(plan.element_accumulator(), gk::DataType::f16);
  EXPECT_EQ(plan.kernel_name(), "cutlass_tensorop_h16816gemm_256x128_64x3_tt_align8");
}

TEST(PlanOperands, UnsupportedComputeCapabilityIsAConfigError) {
  EXPECT_NE(error_of([] { gk::Gemm p(f16_row(75)); }).find("80 (Ampere) and newer"), std::string::npos);
  EXPECT_NE(error_of([] { gk::Gemm p(f16_row(100)); }).find("not supported yet"), std::string::npos);
}

TEST(PlanOpclass, TensorOpByDefaultAndSimtOnRequest) {
  gk::Gemm plan(f16_row(80));
  EXPECT_EQ(plan.opclass(), gk::OpClass::TensorOp);
  plan.set_opclass(gk::OpClass::Simt);
  EXPECT_EQ(plan.kernel_name(), "cutlass_simt_f16_sgemm_f16_128x128_8x2_tt_align1");
}

TEST(PlanOpclass, IntegerTensorCoresNeedTnAndSayWhich) {
  gk::GemmOptions o;
  o.element = gk::DataType::s8;
  o.element_c = gk::DataType::s32;
  o.element_d = gk::DataType::s32;
  o.element_accumulator = gk::DataType::s32;
  o.layout = gk::Layout::RowMajor;
  o.cc = 80;
  gk::Gemm plan(o);
  EXPECT_EQ(plan.opclass(), gk::OpClass::Simt);
  EXPECT_EQ(error_of([&] { plan.set_opclass(gk::OpClass::TensorOp); }),
            "Unsupported operation class TensorOp for CC 80 and data type combination (s8, s8, s32) and layout "
            "combination (RowMajor, RowMajor).");
  o.layout_b = gk::Layout::ColumnMajor;
  EXPECT_EQ(gk::Gemm(o).kernel_name(), "cutlass_tensorop_i16832gemm_s8_256x128_128x3_tn_align16");
}

TEST(PlanOpclass, NoKernelForTheCombination) {
  gk::GemmOptions o = f16_row(90);
  o.element_b = gk::DataType::bf16;
  const std::string message = error_of([&] { gk::Gemm p(o); });
  EXPECT_NE(message.find("No kernel configuration found for supported data type and layout combination (f16, bf16, "
                         "f32)x(RowMajor, RowMajor)"),
            std::string::npos)
      << message;
}

// The error of a plan without kernels names the nearest combination that has one (in the message and as data),
// and that combination builds.
TEST(PlanOpclass, NoKernelNamesTheNearestCombinationThatHasOne) {
  using Setting = gk::ConfigError::Setting;
  auto nearest_of = [](const gk::GemmOptions& o) -> std::pair<std::vector<Setting>, std::string> {
    try {
      gk::Gemm plan(o);
    } catch (const gk::ConfigError& e) {
      return {e.nearest, e.what()};
    }
    return {{}, "no ConfigError"};
  };
  struct Case {
    gk::GemmOptions options;
    std::vector<Setting> nearest;
  };
  gk::GemmOptions bf16_col;  // the accumulator defaults to C's type, bf16: no bf16-accumulating kernel
  bf16_col.element = gk::DataType::bf16;
  bf16_col.layout = gk::Layout::ColumnMajor;
  bf16_col.cc = 80;
  gk::GemmOptions mixed = f16_row(90);
  mixed.element_b = gk::DataType::bf16;
  gk::GemmOptions tf32 = f16_row(80);  // tf32 operands want f32 beside them, not f16
  tf32.element = gk::DataType::tf32;
  tf32.element_accumulator = std::nullopt;
  gk::GemmOptions int8 = f16_row(90);
  int8.element = gk::DataType::s8;
  int8.element_accumulator = std::nullopt;
  for (const Case& c : std::vector<Case>{
           {bf16_col, {{"element_accumulator", "f32"}}},
           {mixed, {{"element_B", "f16"}}},
           {tf32, {{"element_accumulator", "f32"}, {"element_A", "f32"}, {"element_B", "f32"}}},
           {int8, {{"element_accumulator", "s32"}}},
       }) {
    const auto [nearest, message] = nearest_of(c.options);
    EXPECT_EQ(nearest, c.nearest) << message;
    std::string named = "The nearest combination with a kernel sets ";
    for (const Setting& s : c.nearest) named += (&s == &c.nearest.front() ? "" : ", ") + s.option + "=" + s.value;
    EXPECT_NE(message.find(named + "."), std::string::npos) << message;
    gk::GemmOptions fixed = c.options;
    for (const Setting& s : nearest) {
      const gk::DataType type = *gk::parse_enum<gk::DataType>(s.value);
      if (s.option == "element_accumulator") fixed.element_accumulator = type;
      if (s.option == "element_A") fixed.element_a = type;
      if (s.option == "element_B") fixed.element_b = type;
    }
    EXPECT_NO_THROW(gk::Gemm{fixed}) << message;
  }
  // Nothing within three changes (u8 has no kernel at all): no suggestion, and the message does not pretend one.
  gk::GemmOptions u8 = f16_row(80);
  u8.element = gk::DataType::u8;
  u8.element_accumulator = std::nullopt;
  const auto [nearest, message] = nearest_of(u8);
  EXPECT_TRUE(nearest.empty()) << message;
  EXPECT_NE(message.find("No kernel configuration found"), std::string::npos) << message;
  EXPECT_EQ(message.find("nearest"), std::string::npos) << message;
}

TEST(PlanConfiguration, TileDescriptionsAreUniqueValidAndStartWithTheDefault) {
  for (int cc : {80, 90}) {
    gk::Gemm plan(f16_row(cc));
    const auto tiles = plan.tile_descriptions();
    ASSERT_FALSE(tiles.empty());
    EXPECT_EQ(tiles.front(), plan.spec().tile);
    std::set<std::string> seen;
    for (const auto& td : tiles) {
      EXPECT_TRUE(seen.insert(td.to_string()).second) << "duplicate:\n" << td.to_string();
      EXPECT_NO_THROW(plan.set_tile_description(td)) << td.to_string();
    }
  }
  EXPECT_EQ(gk::Gemm(f16_row(80)).tile_descriptions().size(), 22u);
}

// The printed block shows what one CTA computes, and labels the reference's ThreadblockShape as the cluster's tile
// (the default SM90 kernel: a 256x256x64 cluster tile over a 2x1x1 cluster is a 128x256x64 CTA tile).
TEST(PlanConfiguration, TileDescriptionTextShowsTheCtaTile) {
  const gk::TileDescription td = gk::Gemm(f16_row(90)).tile_descriptions().front();
  ASSERT_EQ(td.threadblock_shape, (gk::Shape3{256, 256, 64}));
  ASSERT_EQ(td.cluster_shape, (gk::Shape3{2, 1, 1}));
  const std::string text = td.to_string();
  EXPECT_NE(text.find("\n  CTA tile: [128, 256, 64]\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\n  ThreadblockShape (cluster tile): [256, 256, 64]\n"), std::string::npos) << text;
  EXPECT_LT(text.find("ClusterShape: [2, 1, 1]"), text.find("CTA tile")) << text;
}

TEST(PlanConfiguration, EightStagesAreRejectedWithTheSharedMemoryNumbers) {
  gk::Gemm plan(f16_row(90));
  gk::TileDescription td = plan.tile_descriptions().front();
  td.threadblock_shape = {512, 128, 64};  // a 256x128x64 CTA tile in a 2x1x1 cluster
  td.stages = 8;
  td.kernel_schedule = gk::KernelSchedule::TmaWarpSpecializedCooperative;
  td.epilogue_schedule = gk::EpilogueSchedule::TmaWarpSpecializedCooperative;
  const std::string message = error_of([&] { plan.compile(td); });
  EXPECT_EQ(message,
            "Configuration uses too much shared memory: the mainloop uses 49184 bytes per stage and 8 stages for a "
            "total of 393472 bytes, but a block on CC 90 can use at most 232448 bytes. Reduce the stage count (at "
            "most 4 fit) or the tile shape.");
  EXPECT_FALSE(plan.tile_description().has_value());  // nothing was stored
}

TEST(PlanConfiguration, Sm80StageAndClusterRules) {
  gk::Gemm plan(f16_row(80));
  gk::TileDescription td = plan.tile_descriptions().front();
  td.stages = 4;  // 4 x 49184 bytes > 166912
  EXPECT_NE(error_of([&] { plan.set_tile_description(td); }).find("196736 bytes"), std::string::npos);
  td.stages = 3;
  td.cluster_shape = {2, 1, 1};
  EXPECT_NE(error_of([&] { plan.set_tile_description(td); }).find("needs an SM90 tensor-op kernel"), std::string::npos);
}

TEST(PlanConfiguration, Sm90ScheduleAndClusterRules) {
  gk::Gemm plan(f16_row(90));
  gk::TileDescription td = plan.tile_descriptions().front();
  td.kernel_schedule = gk::KernelSchedule::TmaWarpSpecializedCooperative;
  EXPECT_NE(error_of([&] { plan.set_tile_description(td); }).find("both be auto or neither"), std::string::npos);
  td.epilogue_schedule = gk::EpilogueSchedule::TmaWarpSpecialized;
  td.kernel_schedule = gk::KernelSchedule::TmaWarpSpecializedPingpong;
  td.tile_scheduler = gk::TileScheduler::StreamK;
  EXPECT_NE(error_of([&] { plan.set_tile_description(td); }).find("needs a cooperative kernel schedule"),
            std::string::npos);
  td = plan.tile_descriptions().front();
  td.cluster_shape = {2, 1, 2};
  EXPECT_NE(error_of([&] { plan.set_tile_description(td); }).find("third dimension"), std::string::npos);
  td.cluster_shape = {4, 4, 1};
  td.threadblock_shape = {512, 1024, 64};
  EXPECT_NE(error_of([&] { plan.set_tile_description(td); }).find("non-portable"), std::string::npos);
}

// A Pingpong mainloop with the cooperative TMA epilogue used to pass the plan's checks and fail only when rendered:
// the rule lived in codegen alone. Now the family's one copy refuses it where the tile is set.
TEST(PlanConfiguration, PingpongKernelWithCooperativeEpilogueIsRefusedWhenSet) {
  gk::Gemm plan(f16_row(90));
  gk::TileDescription td = plan.tile_descriptions().front();
  td.threadblock_shape = {128, 128, 64};
  td.cluster_shape = {1, 1, 1};
  td.kernel_schedule = gk::KernelSchedule::TmaWarpSpecializedPingpong;
  td.epilogue_schedule = gk::EpilogueSchedule::TmaWarpSpecializedCooperative;
  EXPECT_NE(error_of([&] { plan.set_tile_description(td); }).find("epilogue schedule needs a cooperative kernel"),
            std::string::npos);
  EXPECT_FALSE(plan.tile_description().has_value());
  td.epilogue_schedule = gk::EpilogueSchedule::TmaWarpSpecialized;
  plan.set_tile_description(td);
  EXPECT_NO_THROW(plan.render_source());
}

TEST(PlanSwizzle, StreamKOnSm90PicksACooperativeConfiguration) {
  gk::Gemm plan(f16_row(90));
  EXPECT_EQ(plan.swizzling_functors(), (std::vector<gk::Swizzle>{gk::Swizzle::Identity1, gk::Swizzle::StreamK}));
  plan.set_swizzling_functor(gk::Swizzle::StreamK);
  const auto spec = plan.spec();
  EXPECT_EQ(spec.tile.kernel_schedule, gk::KernelSchedule::TmaWarpSpecializedCooperative);
  EXPECT_NE(spec.name().find("_stream_k"), std::string::npos) << spec.name();
}

TEST(PlanSwizzle, HorizontalSwizzleIsRefusedWithTheReason) {
  gk::Gemm plan(f16_row(80));
  EXPECT_NE(error_of([&] { plan.set_swizzling_functor(gk::Swizzle::Horizontal); })
                .find("does not compile with CUTLASS "
                      "4.2"),
            std::string::npos);
  EXPECT_EQ(plan.swizzling_functors().size(), 5u);  // IdentitySwizzle1/2/4/8 and Stream-K
}

TEST(PlanSwizzle, StreamKNeedsTensorOp) {
  gk::Gemm plan(f16_row(80));
  plan.set_opclass(gk::OpClass::Simt);
  EXPECT_NE(error_of([&] { plan.set_swizzling_functor(gk::Swizzle::StreamK); })
                .find("only supported with opcode class "
                      "TensorOp"),
            std::string::npos);
}

TEST(PlanActivation, ListsTheReferenceActivationsAndNamesTheEpilogue) {
  const auto all = gk::Gemm::activations();
  std::set<std::string> names;
  for (auto a : all) names.insert(std::string(gk::to_string(a)));
  for (const char* expected : {"gelu", "hardswish", "identity", "leaky_relu", "relu", "sigmoid", "silu", "tanh"}) {
    EXPECT_TRUE(names.count(expected)) << expected;
  }
  gk::Gemm plan(f16_row(90));
  plan.set_activation(gk::Activation::ReLU);
  EXPECT_EQ(plan.spec().family, gk::KernelFamily::Sm90Collective);  // no fallback to SM80 kernels
  EXPECT_EQ(plan.spec().activation, gk::Activation::ReLU);
  plan.set_activation_at_launch(false);
  EXPECT_NE(plan.kernel_name().find("_relu"), std::string::npos);
}

// By default an SM90 plan with a fused activation takes it at launch, so changing the activation keeps the plan's
// kernel; identity alone keeps the linear combination's kernel (with a bias, identity is one more activation of the
// shared kernel), and SM80 kernels compile theirs in.
TEST(PlanActivation, TakenAtLaunchByDefaultOneKernelServesEveryActivation) {
  const gk::testenv::ScopedEnv unset("GEMMKIT_ACTIVATION_AT_LAUNCH", std::nullopt);
  gk::Gemm plan(f16_row(90));
  EXPECT_FALSE(plan.spec().activation_at_launch);
  plan.set_activation(gk::Activation::ReLU);
  const gk::KernelSpec relu = plan.spec();
  EXPECT_TRUE(relu.activation_at_launch);
  EXPECT_NE(relu.name().find("_act_at_launch"), std::string::npos) << relu.name();
  plan.set_activation(gk::Activation::LeakyReLU, 0.3);
  EXPECT_EQ(plan.spec().canonical(), relu.canonical());
  EXPECT_EQ(plan.spec().activation, gk::Activation::LeakyReLU);  // what the launch passes
  plan.set_bias(gk::BiasMode::PerColumn);
  EXPECT_TRUE(plan.spec().activation_at_launch);
  EXPECT_NE(plan.spec().canonical(), relu.canonical());
  // With a bias the fusion has an activation node anyway: identity is taken at launch too, by the same kernel.
  const std::string biased = plan.spec().canonical();
  plan.set_activation(gk::Activation::Identity);
  EXPECT_TRUE(plan.spec().activation_at_launch);
  EXPECT_EQ(plan.spec().canonical(), biased);

  gk::GemmOptions sm80 = f16_row(80);
  gk::Gemm old_plan(sm80);
  old_plan.set_activation(gk::Activation::ReLU);
  EXPECT_FALSE(old_plan.spec().activation_at_launch);
  EXPECT_NE(old_plan.kernel_name().find("_relu"), std::string::npos);
}

// At launch by default on 16-bit operands, compiled in for FP8 and where GEMMKIT_ACTIVATION_AT_LAUNCH=0; a plan's own
// choice wins over either.
TEST(PlanActivation, AtLaunchUnlessFp8OrTurnedOff) {
  std::optional<gk::testenv::ScopedEnv> unset(std::in_place, "GEMMKIT_ACTIVATION_AT_LAUNCH", std::nullopt);
  gk::Gemm plan(f16_row(90));
  plan.set_activation(gk::Activation::GELU);
  EXPECT_TRUE(plan.activation_at_launch());
  EXPECT_TRUE(plan.spec().activation_at_launch);
  plan.set_activation_at_launch(false);
  EXPECT_FALSE(plan.activation_at_launch());
  EXPECT_FALSE(plan.spec().activation_at_launch);
  EXPECT_NE(plan.kernel_name().find("_gelu"), std::string::npos);

  gk::Gemm fp8(gk::testing::fp8_tn(90));
  fp8.set_activation(gk::Activation::GELU);
  EXPECT_FALSE(fp8.activation_at_launch());
  EXPECT_NE(fp8.kernel_name().find("_gelu"), std::string::npos) << fp8.kernel_name();
  fp8.set_activation_at_launch(true);
  EXPECT_TRUE(fp8.spec().activation_at_launch);

  unset.reset();
  const gk::testenv::ScopedEnv off("GEMMKIT_ACTIVATION_AT_LAUNCH", "0");
  gk::Gemm other(f16_row(90));
  other.set_activation(gk::Activation::GELU);
  EXPECT_FALSE(other.spec().activation_at_launch);
  other.set_activation_at_launch(true);
  EXPECT_TRUE(other.spec().activation_at_launch);
}
