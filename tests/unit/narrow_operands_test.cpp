// tests/unit/narrow_operands_test.cpp: operands whose leading dimensions no tensor-core vector fits (odd extents, as
// torch hands them) run on CUTLASS 2.x kernels that load them element by element when the plan left its opclass to
// gemmkit: tensor-op kernels of a two-stage mainloop for f16 and bf16, SIMT for other types; a plan that chose its
// opclass or configuration keeps the TensorError. Without a GPU: spec_for only.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "catalog/catalog.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"

namespace gk = gemmkit;

namespace {

// A row-major rows x cols device view at a fake, 256-byte aligned address (spec_for never reads it).
gk::TensorView matrix(gk::DataType dtype, std::int64_t rows, std::int64_t cols) {
  static char* const base = reinterpret_cast<char*>(std::uintptr_t{1} << 32);
  return gk::TensorView::on_gpu(base, dtype, {rows, cols});
}

gk::GemmOptions f16_row(int cc) {
  gk::GemmOptions o;
  o.element = gk::DataType::f16;
  o.element_accumulator = gk::DataType::f32;
  o.layout = gk::Layout::RowMajor;
  o.cc = cc;
  return o;
}

}  // namespace

TEST(NarrowOperands, OddLeadingDimensionsRunOnTwoStageTensorOpKernelsByDefault) {
  for (const int cc : {80, 90}) {
    gk::Gemm plan(f16_row(cc));
    const gk::TensorView A = matrix(gk::DataType::f16, 777, 3001), B = matrix(gk::DataType::f16, 3001, 1999);
    const gk::TensorView D = matrix(gk::DataType::f16, 777, 1999);
    const gk::KernelSpec spec = plan.spec_for(A, B, nullptr, D);
    EXPECT_EQ(spec.family, gk::KernelFamily::Sm80Universal) << cc;
    EXPECT_EQ(spec.opclass, gk::OpClass::TensorOp) << cc;
    EXPECT_EQ(spec.alignment_a, 1);
    EXPECT_EQ(spec.tile.stages, 2);  // cp.async moves 4 bytes or more: the pipelined mainloop's ordinary loads
    EXPECT_EQ(plan.opclass(), gk::OpClass::TensorOp);  // the plan itself keeps its kernels for the shapes they fit
    const gk::TensorView A8 = matrix(gk::DataType::f16, 768, 3008), B8 = matrix(gk::DataType::f16, 3008, 2000);
    const gk::KernelSpec aligned = plan.spec_for(A8, B8, nullptr, matrix(gk::DataType::f16, 768, 2000));
    EXPECT_EQ(aligned.opclass, gk::OpClass::TensorOp);
    EXPECT_EQ(aligned.kernel_cc, cc);
  }
}

TEST(NarrowOperands, Bf16TakesTheTwoStageKernelsToo) {
  gk::GemmOptions o = f16_row(90);
  o.element = gk::DataType::bf16;
  gk::Gemm plan(o);
  const gk::KernelSpec spec =
      plan.spec_for(matrix(gk::DataType::bf16, 777, 3001), matrix(gk::DataType::bf16, 3001, 1999), nullptr,
                    matrix(gk::DataType::bf16, 777, 1999));
  EXPECT_EQ(spec.opclass, gk::OpClass::TensorOp);
  EXPECT_EQ(spec.name(), "cutlass_tensorop_bf16_s16816gemm_bf16_256x128_32x2_tt_align1_stream_k");  // one wave
}

// The tile by the problem's size, as measured on an H100: 256 x 128 for many waves (one wave: below).
TEST(NarrowOperands, TheTwoStageTileFollowsTheProblemsSize) {
  gk::Gemm plan(f16_row(90));
  auto tile_for = [&](std::int64_t m, std::int64_t n, std::int64_t k) {
    const gk::KernelSpec spec = plan.spec_for(matrix(gk::DataType::f16, m, k), matrix(gk::DataType::f16, k, n), nullptr,
                                              matrix(gk::DataType::f16, m, n));
    EXPECT_EQ(spec.tile.stages, 2);
    return spec.tile.cta_tile();
  };
  EXPECT_EQ(tile_for(4095, 4097, 4099), (gk::Shape3{256, 128, 32}));
  EXPECT_EQ(tile_for(8191, 8193, 1023), (gk::Shape3{256, 128, 32}));
}

// One wave of two-stage tiles (a CTA per SM waiting on its loads: 128 x 128 for 777 x 1999 x 3001, 64 x 128 for 1001^3)
// runs on a Stream-K kernel instead, which shares the K iterations out over every SM, on the largest tile that leaves
// each SM 12 K steps or more; more waves, a short K, an activation or a set tile keep the data-parallel kernel.
TEST(NarrowOperands, OneWaveOfTwoStageTilesSharesItsKOutOnStreamK) {
  auto spec_for = [](gk::Gemm& plan, std::int64_t m, std::int64_t n, std::int64_t k) {
    return plan.spec_for(matrix(gk::DataType::f16, m, k), matrix(gk::DataType::f16, k, n), nullptr,
                         matrix(gk::DataType::f16, m, n));
  };
  gk::Gemm plan(f16_row(90));
  for (const auto& [m, n, k, tile] : {std::tuple{777, 1999, 3001, gk::Shape3{256, 128, 32}},
                                      std::tuple{1001, 1003, 1005, gk::Shape3{128, 128, 32}}}) {
    const gk::KernelSpec spec = spec_for(plan, m, n, k);
    EXPECT_EQ(spec.swizzle, gk::Swizzle::StreamK) << spec.name();
    EXPECT_EQ(spec.tile.cta_tile(), tile) << spec.name();
    EXPECT_EQ(spec.tile.stages, 2);
  }
  EXPECT_EQ(spec_for(plan, 513, 1001, 1025).swizzle, gk::Swizzle::StreamK);     // the gpu tier's one-wave shape
  EXPECT_EQ(spec_for(plan, 4095, 4097, 4099).swizzle, gk::Swizzle::Identity1);  // 17 x 33 tiles of 256 x 128
  EXPECT_EQ(spec_for(plan, 1001, 1003, 255).swizzle, gk::Swizzle::Identity1);   // 8 steps of K
  gk::Gemm relu(f16_row(90));
  relu.set_activation(gk::Activation::ReLU);
  EXPECT_EQ(spec_for(relu, 777, 1999, 3001).swizzle, gk::Swizzle::Identity1);  // epilogues not measured so
  gk::GemmOptions two_stage = f16_row(90);
  two_stage.kernel_cc = 80;
  gk::Gemm tiled(two_stage);
  tiled.set_tile_description(spec_for(plan, 777, 1999, 3001).tile);
  EXPECT_EQ(spec_for(tiled, 777, 1999, 3001).swizzle, gk::Swizzle::Identity1);
}

// A two-stage tile on rows that fit a vector is valid; a deeper pipeline on alignment 1 is refused with the fix.
TEST(NarrowOperands, AlignmentOneNeedsTheTwoStageMainloop) {
  gk::GemmOptions o = f16_row(90);
  o.kernel_cc = 80;
  gk::Gemm plan(o);
  gk::KernelSpec spec = plan.spec(1, 1, 1);
  EXPECT_EQ(spec.tile.stages, 2);
  spec.tile = plan.tile_descriptions().front();  // the multistage default of aligned rows
  try {
    gk::catalog::validate(spec, gk::catalog::limits_for_cc(90));
    FAIL() << "expected a ConfigError";
  } catch (const gk::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("stages = 2"), std::string::npos) << e.what();
  }
}

TEST(NarrowOperands, PlansThatChoseTheirKernelsKeepTheTensorError) {
  const gk::TensorView A = matrix(gk::DataType::f16, 777, 3001), B = matrix(gk::DataType::f16, 3001, 1999);
  const gk::TensorView D = matrix(gk::DataType::f16, 777, 1999);
  gk::Gemm pinned(f16_row(90));
  pinned.set_opclass(gk::OpClass::TensorOp);
  EXPECT_THROW(pinned.spec_for(A, B, nullptr, D), gk::TensorError);
  gk::Gemm tiled(f16_row(90));
  tiled.set_tile_description(tiled.tile_descriptions()[1]);
  EXPECT_THROW(tiled.spec_for(A, B, nullptr, D), gk::TensorError);
  // A shape error stays the plan's own, whichever kernels would run it, and also once the twin has taken odd operands
  // (run() then checks the twin first).
  gk::Gemm plan(f16_row(90));
  EXPECT_THROW(plan.spec_for(A, B, nullptr, matrix(gk::DataType::f16, 778, 1999)), gk::TensorError);
  EXPECT_EQ(plan.spec_for(A, B, nullptr, D).tile.stages, 2);
  try {
    plan.spec_for(A, B, nullptr, matrix(gk::DataType::f16, 778, 1999));
    ADD_FAILURE() << "a D of the wrong shape was accepted";
  } catch (const gk::TensorError& e) {
    EXPECT_NE(std::string(e.what()).find("Tensor D is 778 x 1999"), std::string::npos) << e.what();
  }
  // The 2.x broadcast epilogue adds a bias along D's rows only (per column of a row-major D): a per-row bias keeps
  // the TensorError.
  gk::Gemm biased(f16_row(90));
  biased.set_bias(gk::BiasMode::PerRow);
  EXPECT_THROW(biased.spec_for(A, B, nullptr, D), gk::TensorError);
}

TEST(NarrowOperands, TheTwinCarriesThePlansActivation) {
  gk::Gemm plan(f16_row(90));
  plan.set_activation(gk::Activation::LeakyReLU, 0.25);
  const gk::TensorView A = matrix(gk::DataType::f16, 33, 35), B = matrix(gk::DataType::f16, 35, 17);
  const gk::KernelSpec spec = plan.spec_for(A, B, nullptr, matrix(gk::DataType::f16, 33, 17));
  EXPECT_EQ(spec.kernel_cc, 80);
  EXPECT_EQ(spec.activation, gk::Activation::LeakyReLU);
}
