// tests/unit/tensor_check_test.cpp: every tensor is checked against the plan before anything runs (no GPU needed:
// these errors come before the device is touched), and D is left untouched.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "api/tensor_check.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"

namespace gk = gemmkit;

namespace {

struct Buffers {
  std::vector<std::uint16_t> a, b, c, d;
  Buffers(int m, int n, int k) : a(m * k, 1), b(k * n, 1), c(m * n, 1), d(m * n, 0xBEEF) {}
};

gk::Gemm f16_plan() {
  gk::GemmOptions o;
  o.element = gk::DataType::f16;
  o.layout = gk::Layout::RowMajor;
  o.element_accumulator = gk::DataType::f32;
  o.cc = 90;
  return gk::Gemm(o);
}

std::string tensor_error(gk::Gemm& plan, const gk::TensorView& A, const gk::TensorView& B, const gk::TensorView* C,
                         const gk::TensorView& D, double beta = 0.0) {
  try {
    plan.run(A, B, C, D, 1.0, beta);
  } catch (const gk::TensorError& e) {
    return e.what();
  }
  return "no TensorError";
}

}  // namespace

TEST(TensorCheck, LayoutInferenceFromStrides) {
  std::vector<float> storage(12);
  auto row = gk::TensorView::host(storage.data(), gk::DataType::f32, {3, 4});
  EXPECT_EQ(gk::detail::infer_layout(row), gk::Layout::RowMajor);
  auto col = gk::TensorView::host(storage.data(), gk::DataType::f32, {3, 4}, gk::Layout::ColumnMajor);
  EXPECT_EQ(gk::detail::infer_layout(col), gk::Layout::ColumnMajor);
  auto padded = gk::TensorView::strided(storage.data(), gk::DataType::f32, {2, 3}, {6, 1});
  EXPECT_EQ(gk::detail::infer_layout(padded), gk::Layout::RowMajor);
  auto every_other = gk::TensorView::strided(storage.data(), gk::DataType::f32, {3, 2}, {4, 2});
  EXPECT_FALSE(gk::detail::infer_layout(every_other).has_value());
}

TEST(TensorCheck, OperandFoldsBatchDimensionsAndFindsTheLeadingDimension) {
  std::vector<float> storage(2 * 3 * 4 * 5);
  auto t = gk::TensorView::host(storage.data(), gk::DataType::f32, {2, 3, 4, 5});
  const auto m = gk::detail::check_operand(t, "A", gk::DataType::f32, gk::Layout::RowMajor);
  EXPECT_EQ(m.rows, 4);
  EXPECT_EQ(m.cols, 5);
  EXPECT_EQ(m.ld, 5);
  EXPECT_EQ(m.batch, 6);
  EXPECT_EQ(m.batch_stride, 20);
  const int candidates[] = {4, 2, 1};
  EXPECT_EQ(gk::detail::fitting_alignment(m, 4, candidates, 3), 1);  // ld 5 is odd
}

TEST(TensorCheck, EachRuleNamesTheOperandAndLeavesDUntouched) {
  const int m = 16, n = 8, k = 32;
  Buffers buf(m, n, k);
  gk::Gemm plan = f16_plan();
  const auto A = gk::TensorView::host(buf.a.data(), gk::DataType::f16, {m, k});
  const auto B = gk::TensorView::host(buf.b.data(), gk::DataType::f16, {k, n});
  const auto C = gk::TensorView::host(buf.c.data(), gk::DataType::f16, {m, n});
  const auto D = gk::TensorView::host(buf.d.data(), gk::DataType::f16, {m, n});

  const auto wrong_type = gk::TensorView::host(buf.a.data(), gk::DataType::bf16, {m, k});
  EXPECT_EQ(tensor_error(plan, wrong_type, B, &C, D),
            "Tensor A: has element type bf16 but the plan expects f16. Convert the tensor or declare the plan with "
            "element_A=bf16.");
  const auto vector = gk::TensorView::host(buf.a.data(), gk::DataType::f16, {m * k});
  EXPECT_EQ(tensor_error(plan, vector, B, &C, D),
            "Tensor A: must be of rank 2 to 6 (a matrix, or a batch of matrices); received rank 1, shape (512,).");
  const auto column = gk::TensorView::host(buf.b.data(), gk::DataType::f16, {k, n}, gk::Layout::ColumnMajor);
  EXPECT_NE(tensor_error(plan, A, column, &C, D).find("which is ColumnMajor, but the plan expects RowMajor"),
            std::string::npos);
  const auto short_b = gk::TensorView::host(buf.b.data(), gk::DataType::f16, {k / 2, n});
  EXPECT_NE(tensor_error(plan, A, short_b, &C, D).find("their K extents must agree"), std::string::npos);
  const auto wide_d = gk::TensorView::host(buf.d.data(), gk::DataType::f16, {m / 2, n});
  EXPECT_NE(tensor_error(plan, A, B, &C, wide_d).find("Tensor D is 8 x 8 but A@B is 16 x 8"), std::string::npos);
  EXPECT_NE(tensor_error(plan, A, B, nullptr, D, 1.0).find("beta is 1.000000 but no C was given"), std::string::npos);
  std::vector<std::uint16_t> batched(3 * m * k, 1);
  const auto A3 = gk::TensorView::host(batched.data(), gk::DataType::f16, {3, m, k});
  EXPECT_NE(tensor_error(plan, A3, B, &C, D).find("Tensor D has a batch of 1 but the GEMM's batch is 3"),
            std::string::npos);
  std::vector<std::uint16_t> batched_b(2 * k * n, 1);
  const auto B2 = gk::TensorView::host(batched_b.data(), gk::DataType::f16, {2, k, n});
  EXPECT_NE(tensor_error(plan, A3, B2, &C, D).find("Tensors A and B: invalid batch counts: A has 3 and B has 2"),
            std::string::npos);

  for (auto value : buf.d) ASSERT_EQ(value, 0xBEEF);  // no error wrote a byte of D
}
