// tests/unit/selection_test.cpp: what a plan's kernel selection hands the background builds, without a GPU: the
// kernels the neighbours of a new shape class will want.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "catalog/catalog.hpp"
#include "gemmkit/gemm.hpp"
#include "selection/plan_core.hpp"

namespace gemmkit {
namespace {

// A Gemm whose selection layer the test reaches.
class SelectionProbe : public Gemm {
 public:
  using Gemm::Gemm;
  selection::PlanCore& core() { return *core_; }
};

GemmOptions sm90_options(DataType element) {
  GemmOptions o;
  o.element = element;
  o.element_accumulator = DataType::f32;
  o.layout = Layout::RowMajor;
  o.cc = 90;
  return o;
}

std::string launched(const selection::RunChoice& c) {
  return (c.alternative != nullptr ? c.alternative->spec(c.alternative_index) : c.choices->spec(c.index)).canonical();
}

// The neighbours' kernels are run()'s picks for M, N and K each halved and doubled (the user's orientation, also for
// a plan that computes D^T), each once, without the problem's own kernel.
TEST(Neighbours, AreTheKernelsRunPicksForHalfAndTwiceEachExtent) {
  constexpr int kSms = 132;
  for (const DataType element : {DataType::f16, DataType::f32}) {  // f32 row x row computes D^T on SM90 (tf32)
    SelectionProbe plan(sm90_options(element));
    selection::PlanCore& core = plan.core();
    const int alignment = element == DataType::f16 ? 8 : 4;
    for (const auto [m, n, k] : {std::array<std::int64_t, 3>{16, 4096, 4096}, {1000, 3000, 512}}) {
      const selection::ProblemKey p{m, n, k, 1, alignment, alignment, alignment};
      const selection::RunChoice c = core.run_choice(p, kSms);
      std::set<std::string> expected;
      for (const auto& q : {selection::ProblemKey{m / 2, n, k, 1, alignment, alignment, alignment},
                            {m * 2, n, k, 1, alignment, alignment, alignment},
                            {m, n / 2, k, 1, alignment, alignment, alignment},
                            {m, n * 2, k, 1, alignment, alignment, alignment},
                            {m, n, k / 2, 1, alignment, alignment, alignment},
                            {m, n, k * 2, 1, alignment, alignment, alignment}}) {
        expected.insert(launched(core.run_choice(q, kSms)));
      }
      expected.erase(launched(c));
      std::set<std::string> got;
      for (const KernelSpec& spec : core.neighbour_specs(c)) {
        EXPECT_TRUE(got.insert(spec.canonical()).second) << "twice: " << spec.name();
      }
      EXPECT_EQ(got, expected) << to_string(element) << " " << m << "x" << n << "x" << k;
      EXPECT_FALSE(expected.empty());  // these shapes sit near a change of kernel
    }
  }
}

// A decode shape on a row-major 16-bit plan runs as D^T = B^T A^T: the column-major kernel on the narrow tile, A and B
// swapped, data-parallel; more rows, a set tile or a visitor tree keep the plan's own orientation.
TEST(Decode, ShapesOfFewRowsRunTransposedOnTheNarrowTile) {
  for (const DataType element : {DataType::f16, DataType::bf16}) {
    SelectionProbe plan(sm90_options(element));
    selection::RunChoice c = plan.core().run_choice({16, 4096, 4096, 1, 8, 8, 8}, 132);
    ASSERT_NE(c.alternative, nullptr);
    ASSERT_EQ(c.alternative_kind, selection::Alternative::TransposedDecode);
    c.take_alternative();
    EXPECT_TRUE(c.transposed());
    EXPECT_EQ(c.split, (KSplit{Decomposition::DataParallel, 1}));
    const KernelSpec spec = c.choices->spec(c.index);
    EXPECT_EQ(spec.layout_a, Layout::ColumnMajor);
    EXPECT_EQ(spec.layout_b, Layout::ColumnMajor);
    EXPECT_EQ(spec.layout_c, Layout::ColumnMajor);
    EXPECT_EQ(spec.tile.cta_tile(), (Shape3{64, 16, 64}));
    EXPECT_EQ(spec.tile.cluster_shape, (Shape3{4, 1, 1}));
    EXPECT_EQ(plan.spec_for_problem(16, 4096, 4096).canonical(), spec.canonical());  // what run() reports
    const selection::RunChoice more_rows = plan.core().run_choice({17, 4096, 4096, 1, 8, 8, 8}, 132);
    EXPECT_FALSE(more_rows.alternative != nullptr &&
                 more_rows.alternative_kind == selection::Alternative::TransposedDecode);
  }
  SelectionProbe with_tile(sm90_options(DataType::f16));
  with_tile.set_tile_description(with_tile.tile_descriptions().front());
  EXPECT_EQ(with_tile.core().run_choice({16, 4096, 4096, 1, 8, 8, 8}, 132).alternative, nullptr);
}

// A Stream-K kernel launched data-parallel (a stand-in for a data-parallel choice runs with that choice's split) is
// weighed by its waves, as any data-parallel kernel; launched to share K out, by its work spread over the SMs.
TEST(EstimatedTime, AStreamKKernelLaunchedDataParallelIsWeighedByItsWaves) {
  TileDescription td;
  td.threadblock_shape = {128, 128, 64};
  td.tile_scheduler = TileScheduler::StreamK;
  const catalog::ProblemShape shape{1000, 1000, 4096, 1};  // 64 tiles: half a wave of 132 SMs
  const double data_parallel = catalog::estimated_time(td, shape, 132, Decomposition::DataParallel);
  const double shared = catalog::estimated_time(td, shape, 132, Decomposition::Heuristic);
  td.tile_scheduler = TileScheduler::Default;
  EXPECT_EQ(data_parallel, catalog::estimated_time(td, shape, 132));
  EXPECT_LT(shared, data_parallel);
}

}  // namespace
}  // namespace gemmkit
