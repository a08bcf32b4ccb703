// tests/unit/math_operation_test.cpp: a plan's math operation (3xTF32 and the other fast-f32 modes, saturation) and
// the MathInstruction its configurations describe, without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "gemmkit/codegen.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"
#include "gemmkit/grouped_gemm.hpp"

namespace gk = gemmkit;

namespace {

gk::GemmOptions f32_row(int cc, std::optional<int> kernel_cc = std::nullopt) {
  gk::GemmOptions o;
  o.element = gk::DataType::f32;
  o.layout = gk::Layout::RowMajor;
  o.cc = cc;
  o.kernel_cc = kernel_cc;
  return o;
}

bool offers(const std::vector<gk::MathOperation>& ops, gk::MathOperation op) {
  return std::find(ops.begin(), ops.end(), op) != ops.end();
}

std::string config_error_of(gk::Gemm& plan, gk::MathOperation op) {
  try {
    plan.set_math_operation(op);
  } catch (const gk::ConfigError& e) {
    return e.what();
  }
  return "no ConfigError";
}

}  // namespace

TEST(MathOperation, Sm80F32OffersTf32And3xTf32AndTheRoundingModesEachWithItsOwnKernel) {
  gk::Gemm plan(f32_row(80));
  EXPECT_FALSE(plan.math_operation());
  const auto ops = plan.math_operations();
  ASSERT_FALSE(ops.empty());
  EXPECT_EQ(ops.front(), gk::MathOperation::MultiplyAdd);
  for (auto op : {gk::MathOperation::MultiplyAddFastF32, gk::MathOperation::MultiplyAddFastBF16,
                  gk::MathOperation::MultiplyAddFastF16}) {
    EXPECT_TRUE(offers(ops, op)) << gk::to_string(op);
  }
  const std::string tf32 = plan.kernel_name();
  EXPECT_NE(tf32.find("s1688tf32gemm"), std::string::npos) << tf32;

  plan.set_math_operation(gk::MathOperation::MultiplyAddFastF32);
  EXPECT_EQ(plan.kernel_cc(), 80);
  EXPECT_EQ(plan.spec().tile.math_operation, gk::MathOperation::MultiplyAddFastF32);
  EXPECT_NE(plan.kernel_name().find("s1688gemm"), std::string::npos) << plan.kernel_name();
  EXPECT_NE(gk::render(plan.spec()).text.find("cutlass::arch::OpMultiplyAddFastF32"), std::string::npos);
  // tile_descriptions() keeps to the plan's operation.
  for (const auto& td : plan.tile_descriptions()) EXPECT_EQ(td.math_operation, gk::MathOperation::MultiplyAddFastF32);

  plan.set_math_operation(gk::MathOperation::MultiplyAddFastBF16);
  EXPECT_NE(plan.kernel_name().find("s1688bf16gemm"), std::string::npos) << plan.kernel_name();
  EXPECT_NE(gk::render(plan.spec()).text.find("cutlass::arch::OpMultiplyAddFastBF16"), std::string::npos);
  plan.set_math_operation(gk::MathOperation::MultiplyAddFastF16);
  EXPECT_NE(plan.kernel_name().find("s1688f16gemm"), std::string::npos) << plan.kernel_name();

  plan.set_math_operation(std::nullopt);
  EXPECT_EQ(plan.kernel_name(), tf32);
}

TEST(MathOperation, WithoutOneSetRunKeepsToTheDefaultsOperation) {
  gk::Gemm plan(f32_row(80));
  // Every configuration run() may choose among multiplies as the default does (tf32), never a fast-f32 mode.
  const auto all = plan.tile_descriptions();
  EXPECT_TRUE(std::any_of(all.begin(), all.end(), [](const gk::TileDescription& td) {
    return td.math_operation == gk::MathOperation::MultiplyAddFastF32;
  }));
  for (const auto& spec : plan.run_time_kernels()) {
    EXPECT_EQ(spec.tile.math_operation, gk::MathOperation::MultiplyAdd) << spec.name();
  }
}

TEST(MathOperation, Sm90PlansMoveTo2xKernelsForWhatOnlyTheyOfferUnlessKernelCcIsGiven) {
  gk::Gemm plan(f32_row(90));
  EXPECT_EQ(plan.kernel_cc(), 90);
  EXPECT_TRUE(offers(plan.math_operations(), gk::MathOperation::MultiplyAddFastF32));
  // multiply_add is what the SM90 kernels do: the plan stays.
  plan.set_math_operation(gk::MathOperation::MultiplyAdd);
  EXPECT_EQ(plan.kernel_cc(), 90);
  plan.set_math_operation(gk::MathOperation::MultiplyAddFastF32);
  EXPECT_EQ(plan.kernel_cc(), 80);
  EXPECT_EQ(plan.spec().family, gk::KernelFamily::Sm80Universal);
  // Unset, the plan returns to the SM90 kernels.
  plan.set_math_operation(std::nullopt);
  EXPECT_EQ(plan.kernel_cc(), 90);

  gk::Gemm pinned(f32_row(90, 90));
  const std::string message = config_error_of(pinned, gk::MathOperation::MultiplyAddFastF32);
  EXPECT_NE(message.find("kernel_cc 90"), std::string::npos) << message;
  EXPECT_NE(message.find("kernel_cc=80"), std::string::npos) << message;
  EXPECT_EQ(pinned.kernel_cc(), 90);
  EXPECT_FALSE(pinned.math_operation());
}

TEST(MathOperation, OperationsNoKernelOffersAreTypedErrorsThatChangeNothing) {
  gk::GemmOptions f16;
  f16.element = gk::DataType::f16;
  f16.layout = gk::Layout::RowMajor;
  f16.cc = 80;
  gk::Gemm plan(f16);
  const std::string before = plan.kernel_name();
  const std::string message = config_error_of(plan, gk::MathOperation::MultiplyAddFastF32);
  EXPECT_NE(message.find("multiply_add_fast_f32"), std::string::npos) << message;
  EXPECT_NE(message.find("Available: multiply_add"), std::string::npos) << message;
  EXPECT_EQ(plan.kernel_name(), before);
  EXPECT_FALSE(plan.math_operation());
  // A tile of another math operation is refused by validation.
  gk::TileDescription td = plan.spec().tile;
  td.math_operation = gk::MathOperation::MultiplyAddFastBF16;
  EXPECT_THROW(plan.set_tile_description(td), gk::ConfigError);
  // An opclass without the plan's operation is refused before it changes.
  gk::Gemm fast(f32_row(80));
  fast.set_math_operation(gk::MathOperation::MultiplyAddFastF32);
  EXPECT_THROW(fast.set_opclass(gk::OpClass::Simt), gk::ConfigError);
  EXPECT_EQ(fast.opclass(), gk::OpClass::TensorOp);
}

TEST(MathOperation, IntegerPlansSaturate) {
  gk::GemmOptions s8;
  s8.element_a = s8.element_b = gk::DataType::s8;
  s8.element_c = s8.element_d = s8.element_accumulator = gk::DataType::s32;
  s8.layout_a = gk::Layout::RowMajor;
  s8.layout_b = gk::Layout::ColumnMajor;
  s8.layout_c = gk::Layout::RowMajor;
  s8.cc = 80;
  gk::Gemm plan(s8);
  EXPECT_EQ(plan.math_operations(), std::vector<gk::MathOperation>{gk::MathOperation::MultiplyAddSaturate});
  plan.set_math_operation(gk::MathOperation::MultiplyAddSaturate);
  EXPECT_NE(gk::render(plan.spec()).text.find("cutlass::arch::OpMultiplyAddSaturate"), std::string::npos);
}

TEST(MathInstruction, ListedAndStoredConfigurationsDescribeTheirInstruction) {
  gk::Gemm plan(f32_row(80));
  const auto tiles = plan.tile_descriptions();
  const auto tf32 = tiles.front().math_instruction();
  ASSERT_TRUE(tf32);
  EXPECT_EQ(tf32->opcode_class, gk::OpClass::TensorOp);
  EXPECT_EQ(tf32->element_a, gk::DataType::tf32);
  EXPECT_EQ(tf32->element_accumulator, gk::DataType::f32);
  EXPECT_EQ(tf32->instruction_shape, (gk::Shape3{16, 8, 8}));
  EXPECT_EQ(tf32->math_operation, gk::MathOperation::MultiplyAdd);
  const auto fast = std::find_if(tiles.begin(), tiles.end(), [](const gk::TileDescription& td) {
    return td.math_operation == gk::MathOperation::MultiplyAddFastBF16;
  });
  ASSERT_NE(fast, tiles.end());
  EXPECT_EQ(fast->math_instruction()->element_a, gk::DataType::bf16);

  plan.set_opclass(gk::OpClass::Simt);
  for (const auto& td : plan.tile_descriptions()) {
    ASSERT_TRUE(td.math_instruction());
    EXPECT_EQ(td.math_instruction()->opcode_class, gk::OpClass::Simt);
    EXPECT_EQ(td.math_instruction()->element_a, gk::DataType::f32);
  }
  // A configuration the user wrote describes nothing until a plan stores it; == ignores the description.
  gk::TileDescription mine = plan.tile_descriptions().front();
  gk::TileDescription bare = mine;
  bare.instruction_types.reset();
  EXPECT_FALSE(bare.math_instruction());
  EXPECT_EQ(bare, mine);
  plan.set_tile_description(bare);
  ASSERT_TRUE(plan.tile_description()->math_instruction());
  EXPECT_EQ(plan.tile_description()->math_instruction()->opcode_class, gk::OpClass::Simt);

  // The SM90 families list their configurations with the same description (no instruction shape: the builder's).
  gk::GemmOptions f16;
  f16.element = gk::DataType::f16;
  f16.element_accumulator = gk::DataType::f32;
  f16.layout = gk::Layout::RowMajor;
  f16.cc = 90;
  gk::GroupedGemm grouped(f16);
  const auto grouped_instruction = grouped.tile_descriptions().front().math_instruction();
  ASSERT_TRUE(grouped_instruction);
  EXPECT_EQ(grouped_instruction->element_a, gk::DataType::f16);
  EXPECT_EQ(grouped_instruction->opcode_class, gk::OpClass::TensorOp);
}
