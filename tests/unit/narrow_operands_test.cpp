// tests/unit/narrow_operands_test.cpp: operands whose leading dimensions no tensor-core vector fits (odd extents, as
// torch hands them) run on the CUTLASS 2.x SIMT kernels when the plan left its opclass to gemmkit; a plan that chose
// its opclass or configuration keeps the TensorError. Without a GPU: spec_for only.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

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

TEST(NarrowOperands, OddLeadingDimensionsRunOnSimtKernelsByDefault) {
  for (const int cc : {80, 90}) {
    gk::Gemm plan(f16_row(cc));
    const gk::TensorView A = matrix(gk::DataType::f16, 777, 3001), B = matrix(gk::DataType::f16, 3001, 1999);
    const gk::TensorView D = matrix(gk::DataType::f16, 777, 1999);
    const gk::KernelSpec spec = plan.spec_for(A, B, nullptr, D);
    EXPECT_EQ(spec.family, gk::KernelFamily::Sm80Universal) << cc;
    EXPECT_EQ(spec.opclass, gk::OpClass::Simt) << cc;
    EXPECT_EQ(spec.alignment_a, 1);
    EXPECT_EQ(plan.opclass(), gk::OpClass::TensorOp);  // the plan itself keeps its kernels for the shapes they fit
    const gk::TensorView A8 = matrix(gk::DataType::f16, 768, 3008), B8 = matrix(gk::DataType::f16, 3008, 2000);
    EXPECT_EQ(plan.spec_for(A8, B8, nullptr, matrix(gk::DataType::f16, 768, 2000)).opclass, gk::OpClass::TensorOp);
  }
}

TEST(NarrowOperands, Bf16TakesTheSimtKernelsToo) {
  gk::GemmOptions o = f16_row(90);
  o.element = gk::DataType::bf16;
  gk::Gemm plan(o);
  const gk::KernelSpec spec =
      plan.spec_for(matrix(gk::DataType::bf16, 777, 3001), matrix(gk::DataType::bf16, 3001, 1999), nullptr,
                    matrix(gk::DataType::bf16, 777, 1999));
  EXPECT_EQ(spec.opclass, gk::OpClass::Simt);
  EXPECT_EQ(spec.name(), "cutlass_simt_bf16_sgemm_bf16_128x128_8x2_tt_align1");
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
  // A shape error stays the plan's own, whichever kernels would run it.
  gk::Gemm plan(f16_row(90));
  EXPECT_THROW(plan.spec_for(A, B, nullptr, matrix(gk::DataType::f16, 778, 1999)), gk::TensorError);
  // SIMT has no bias epilogue on 2.x kernels: a bias plan keeps the TensorError.
  gk::Gemm biased(f16_row(90));
  biased.set_bias(gk::BiasMode::PerRow);
  EXPECT_THROW(biased.spec_for(A, B, nullptr, D), gk::TensorError);
}

TEST(NarrowOperands, TheSimtTwinCarriesThePlansActivation) {
  gk::Gemm plan(f16_row(90));
  plan.set_activation(gk::Activation::LeakyReLU, 0.25);
  const gk::TensorView A = matrix(gk::DataType::f16, 33, 35), B = matrix(gk::DataType::f16, 35, 17);
  const gk::KernelSpec spec = plan.spec_for(A, B, nullptr, matrix(gk::DataType::f16, 33, 17));
  EXPECT_EQ(spec.opclass, gk::OpClass::Simt);
  EXPECT_EQ(spec.activation, gk::Activation::LeakyReLU);
}
