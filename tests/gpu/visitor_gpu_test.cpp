// tests/gpu/visitor_gpu_test.cpp: epilogue visitor trees on SM90 and CUTLASS 2.x kernels against a float64 host
// evaluation of the same tree: loads (aux matrices of two types and layouts, row and column broadcasts, shared or per
// batch), computes (arithmetic, max/min, every activation, a conversion), stores and row/column/scalar reductions (sum
// and max, per batch or over every batch), a DAG (the reference notebook's epilogue), trees of the plain form (on the
// fused kernels of the same settings); and the checks run() makes first.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"
#include "support/gpu_cases.hpp"
#include "support/gpu_test.hpp"
#include "verify/epilogue_reference.hpp"
#include "verify/host_matrix.hpp"

namespace gk = gemmkit;
namespace cases = gk::gpu_cases;
using gk::epilogue::Node;
using gk::epilogue::NodeKind;
using gk::verify::HostMatrix;

namespace {

bool per_batch(const std::string& name) {
  return name.size() > 6 && name.compare(name.size() - 6, 6, "_batch") == 0;
}

// Host tensors for every named tensor of a tree, shaped by its node: what run() takes and the reference reads.
struct VisitorTensors {
  std::map<std::string, std::unique_ptr<HostMatrix>> tensors;
  gk::verify::VisitorHost host;
  std::map<std::string, std::unique_ptr<HostMatrix>> expected;
  gk::verify::VisitorHost expected_host;

  VisitorTensors(const gk::epilogue::Epilogue& tree, std::int64_t m, std::int64_t n, std::int64_t batch) {
    std::uint64_t seed = 100;
    for (const Node& node : tree.nodes()) {
      if (node.name.empty() || node.kind == NodeKind::Scalar || tensors.count(node.name)) continue;
      const bool row = node.kind == NodeKind::RowBroadcast || node.kind == NodeKind::RowReduction;
      const bool column = node.kind == NodeKind::ColumnBroadcast || node.kind == NodeKind::ColumnReduction;
      const bool one = node.kind == NodeKind::ScalarReduction;
      const std::int64_t rows = row || one ? 1 : m, cols = column || one ? 1 : n;
      const std::int64_t b = node.kind == NodeKind::Store || per_batch(node.name) ? batch : 1;
      auto make = [&] { return std::make_unique<HostMatrix>(*node.element, rows, cols, node.layout, b); };
      tensors[node.name] = make();
      if (node.kind == NodeKind::Matrix || node.kind == NodeKind::RowBroadcast ||
          node.kind == NodeKind::ColumnBroadcast) {
        tensors[node.name]->fill_integers(seed++, -4, 4);
        host.inputs[node.name] = tensors[node.name].get();
      } else {
        expected[node.name] = make();
        expected_host.outputs[node.name] = expected[node.name].get();
      }
    }
    expected_host.inputs = host.inputs;
  }

  std::vector<gk::VisitorArgument> arguments() const {
    std::vector<gk::VisitorArgument> out;
    for (const auto& [name, tensor] : tensors) out.push_back({name, tensor->view(), 0.0});
    return out;
  }
};

// The largest error relative to max(1, |expected|) over every element.
double max_relative_error(const HostMatrix& got, const HostMatrix& want) {
  double worst = 0.0;
  for (std::int64_t b = 0; b < want.batch(); ++b) {
    for (std::int64_t r = 0; r < want.rows(); ++r) {
      for (std::int64_t c = 0; c < want.cols(); ++c) {
        const double w = want.get(b, r, c), g = got.get(b, r, c);
        worst = std::max(worst, std::abs(g - w) / std::max(1.0, std::abs(w)));
      }
    }
  }
  return worst;
}

using VisitorParam = std::tuple<cases::VisitorCase, int>;  // the tree and the kernel generation
class VisitorTrees : public ::testing::TestWithParam<VisitorParam> {};

}  // namespace

TEST_P(VisitorTrees, MatchFloat64Evaluation) {
  REQUIRE_GPU();
  const auto& [c, kernel_cc] = GetParam();
  if (kernel_cc > device_cc()) GTEST_SKIP() << "SM" << kernel_cc << " kernels need an SM" << kernel_cc << " GPU";
  if (c.sm90_only && kernel_cc < 90) {
    // The 2.x plan refuses the tree before anything compiles (the unit tier checks the message).
    EXPECT_THROW((void)cases::visitor_plan(c, device_cc(), kernel_cc), gk::ConfigError);
    return;
  }
  gk::Gemm plan = cases::visitor_plan(c, device_cc(), kernel_cc);
  const auto [m, n, k] = cases::kMatrixShape;
  HostMatrix A(gk::DataType::f16, m, k, gk::Layout::RowMajor, c.batch);
  HostMatrix B(gk::DataType::f16, k, n, gk::Layout::RowMajor, c.batch);
  HostMatrix C(gk::DataType::f16, m, n, gk::Layout::RowMajor, c.batch);
  HostMatrix D(gk::DataType::f16, m, n, gk::Layout::RowMajor, c.batch);
  HostMatrix expected_D = D;
  A.fill_integers(1, -4, 4);
  B.fill_integers(2, -4, 4);
  C.fill_integers(3, -4, 4);
  // The plan's tree with its types resolved (a plain-form tree runs a kernel without one).
  const gk::epilogue::Epilogue tree = plan.epilogue_visitor()->with_types(gk::DataType::f16, gk::DataType::f16);
  // Plain trees run the fused kernel of their settings where the plan has one (cases::visitor_cases says where).
  const bool fused = std::string(c.name).rfind("plain", 0) == 0 && kernel_cc >= 90;
  EXPECT_EQ(plan.spec().visitor.has_value(), !fused) << plan.kernel_name();
  VisitorTensors tensors(tree, m, n, c.batch);
  const double alpha = 2.0, beta = 0.5;

  gk::RunOptions options;
  options.visitor_args = tensors.arguments();
  const auto Cv = C.view();
  plan.run(A.view(), B.view(), tree.reads_source() ? &Cv : nullptr, D.view(), alpha, beta, options);
  gk::verify::evaluate_visitor(tree, A, B, &C, expected_D, alpha, beta, tensors.expected_host);

  // Integer data keeps every sum exact: only the activations' approximations and D's rounding differ.
  const double tolerance = std::string(c.name) == "compute" || std::string(c.name) == "plain" ? 2e-3 : 0.0;
  EXPECT_LE(max_relative_error(D, expected_D), tolerance) << "D of " << c.name;
  for (const auto& [name, want] : tensors.expected) {
    EXPECT_LE(max_relative_error(*tensors.tensors.at(name), *want), tolerance) << name << " of " << c.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Gpu, VisitorTrees,
                         ::testing::Combine(::testing::ValuesIn(cases::visitor_cases()), ::testing::Values(90, 80)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).name) + "_sm" +
                                  std::to_string(std::get<1>(info.param));
                         });

TEST(VisitorArguments, AreCheckedBeforeAnythingRuns) {
  REQUIRE_GPU();
  const cases::VisitorCase c = cases::visitor_cases().front();  // the notebook: aux, bias, F
  gk::Gemm plan = cases::visitor_plan(c, device_cc(), device_cc() >= 90 ? 90 : 80);
  const auto [m, n, k] = cases::kMatrixShape;
  HostMatrix A(gk::DataType::f16, m, k, gk::Layout::RowMajor), B(gk::DataType::f16, k, n, gk::Layout::RowMajor);
  HostMatrix C(gk::DataType::f16, m, n, gk::Layout::RowMajor), D(gk::DataType::f16, m, n, gk::Layout::RowMajor);
  A.fill_integers(1, -4, 4);
  B.fill_integers(2, -4, 4);
  C.fill_integers(3, -4, 4);
  D.fill_integers(4, 7, 7);
  VisitorTensors tensors(*plan.spec().visitor, m, n, 1);
  const auto Cv = C.view();
  auto run_with = [&](std::vector<gk::VisitorArgument> args) {
    gk::RunOptions options;
    options.visitor_args = std::move(args);
    plan.run(A.view(), B.view(), &Cv, D.view(), 1.0, 0.0, options);
  };
  auto without = [&](const std::string& name) {
    auto args = tensors.arguments();
    std::erase_if(args, [&](const auto& a) { return a.name == name; });
    return args;
  };
  EXPECT_THROW(run_with(without("aux")), gk::TensorError);
  EXPECT_THROW(run_with(without("F")), gk::TensorError);
  auto wrong_shape = without("bias");
  HostMatrix bias_row(gk::DataType::f16, 1, n, gk::Layout::RowMajor);  // (1, n) where the tree reads (m, 1)
  wrong_shape.push_back({"bias", bias_row.view(), 0.0});
  EXPECT_THROW(run_with(wrong_shape), gk::TensorError);
  auto wrong_type = without("aux");
  HostMatrix aux32(gk::DataType::f32, m, n, gk::Layout::RowMajor);
  wrong_type.push_back({"aux", aux32.view(), 0.0});
  EXPECT_THROW(run_with(wrong_type), gk::TensorError);
  auto unknown = tensors.arguments();
  unknown.push_back({"gamma", std::nullopt, 1.0});
  EXPECT_THROW(run_with(unknown), gk::TensorError);
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) ASSERT_EQ(D.get(0, i, j), 7.0) << "D was written at " << i << ", " << j;
  }
}
