// tests/gpu/grouped_gpu_test.cpp: GroupedGemm on a CUDA device, exact on small integers against a float64 host
// reference: 1, 2, 50 and 1000 groups of mixed shapes with odd and empty ones, all layouts, bf16 and tf32, every
// activation, both families, host-staged lists, CUDA graphs; the MoE form with skewed and empty experts in a graph,
// in bf16 and FP8, and with DeepSeek-V3 block scales.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gemmkit/device.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/grouped_gemm.hpp"
#include "support/gpu_cases.hpp"
#include "support/gpu_test.hpp"
#include "verify/device_buffer.hpp"
#include "verify/host_matrix.hpp"

namespace gk = gemmkit;
namespace cases = gk::gpu_cases;
using gk::verify::DeviceBuffer;
using gk::verify::HostMatrix;

namespace {

struct Extent {
  long m, n, k;
};

// Group extents: odd M values (where `odd_m`), empty groups (m, n or k of 0) and sizes around the tile sizes; N and K
// stay multiples of 8 so that every layout keeps 16-byte rows.
std::vector<Extent> mixed_extents(int groups, std::uint64_t seed, long largest = 264, bool odd_m = true) {
  std::mt19937_64 random(seed);
  const long sizes[] = {8, 16, 64, 128, 136, largest};
  const long odd_ms[] = {1, 3, 127};
  std::vector<Extent> out;
  for (int g = 0; g < groups; ++g) {
    Extent e{sizes[random() % 6], sizes[random() % 6], sizes[random() % 6]};
    if (random() % 5 == 0 && odd_m) e.m = odd_ms[random() % 3];
    if (groups > 2 && g % 17 == 5) (g % 3 == 0 ? e.m : g % 3 == 1 ? e.n : e.k) = 0;
    out.push_back(e);
  }
  return out;
}

// One call's groups: host matrices on small integers, device copies, and views in the plan's layouts.
struct Groups {
  std::vector<HostMatrix> A, B, C, D;
  std::vector<std::unique_ptr<DeviceBuffer>> dA, dB, dC, dD;
  std::vector<gk::TensorView> vA, vB, vC, vD;

  Groups(const gk::GroupedGemm& plan, const std::vector<Extent>& extents, std::uint64_t seed, bool on_device = true) {
    for (std::size_t g = 0; g < extents.size(); ++g) {
      const Extent& e = extents[g];
      A.emplace_back(plan.element_a(), e.m, e.k, plan.layout_a());
      B.emplace_back(plan.element_b(), e.k, e.n, plan.layout_b());
      C.emplace_back(plan.element_c(), e.m, e.n, plan.layout_c());
      D.emplace_back(plan.element_d(), e.m, e.n, plan.layout_c());
      A.back().fill_integers(seed + 4 * g, -3, 3);
      B.back().fill_integers(seed + 4 * g + 1, -3, 3);
      C.back().fill_integers(seed + 4 * g + 2, -3, 3);
      D.back().fill_integers(seed + 4 * g + 3, 7, 7);  // what an empty group's D must keep
    }
    for (std::size_t g = 0; g < extents.size(); ++g) {
      if (!on_device) {
        vA.push_back(A[g].view());
        vB.push_back(B[g].view());
        vC.push_back(C[g].view());
        vD.push_back(D[g].view());
        continue;
      }
      dA.push_back(std::make_unique<DeviceBuffer>(A[g]));
      dB.push_back(std::make_unique<DeviceBuffer>(B[g]));
      dC.push_back(std::make_unique<DeviceBuffer>(C[g]));
      dD.push_back(std::make_unique<DeviceBuffer>(D[g]));
      vA.push_back(dA[g]->view_like(A[g]));
      vB.push_back(dB[g]->view_like(B[g]));
      vC.push_back(dC[g]->view_like(C[g]));
      vD.push_back(dD[g]->view_like(D[g]));
    }
  }

  // Every element of every group's D against the reference (rounded to D's type); an empty group's D unchanged.
  // Returns the number of groups that differ.
  int wrong_groups(double alpha, double beta, gk::Activation activation = gk::Activation::Identity,
                   std::int64_t samples = 0) {
    int wrong = 0;
    for (std::size_t g = 0; g < D.size(); ++g) {
      if (!dD.empty()) dD[g]->copy_to(D[g]);
      if (D[g].rows() == 0 || D[g].cols() == 0) continue;
      if (A[g].cols() == 0) {  // k = 0: the group is skipped, D keeps its 7s
        for (long r = 0; r < D[g].rows(); ++r) {
          for (long c = 0; c < D[g].cols(); ++c) wrong += D[g].get(0, r, c) != 7.0 ? 1 : 0;
        }
        continue;
      }
      gk::verify::Epilogue epilogue;
      epilogue.activation = activation;
      epilogue.parameter = 0.25;
      const auto cmp = gk::verify::compare_with_reference(A[g], B[g], &C[g], D[g], alpha, beta, samples, g, epilogue);
      // Piecewise-linear activations are exact on integers; the others within a few ulps of a 16-bit output.
      const bool exact = activation == gk::Activation::Identity || activation == gk::Activation::ReLU ||
                         activation == gk::Activation::LeakyReLU;
      if (exact ? cmp.max_abs_error != 0.0 : cmp.max_rel_error > 4e-3) ++wrong;
    }
    return wrong;
  }
};

class GroupedPlans : public ::testing::TestWithParam<cases::GroupedCase> {};

TEST_P(GroupedPlans, ExactOnOneTwoFiftyAndAThousandGroups) {
  REQUIRE_GPU();
  gk::GroupedGemm plan = cases::grouped_plan(GetParam());
  plan.set_activation(GetParam().activation, 0.25);
  if (plan.kernel_cc() > device_cc()) GTEST_SKIP() << "needs an SM" << plan.kernel_cc() << " GPU";
  // SM90's TMA needs 16-byte leading dimensions: an odd M only where M is never one (row-major A, C and D).
  const bool odd_m =
      plan.kernel_cc() < 90 || (plan.layout_a() == gk::Layout::RowMajor && plan.layout_c() == gk::Layout::RowMajor);
  for (int count : {1, 2, 50, 1000}) {
    Groups groups(plan, mixed_extents(count, 100 + count, count == 1000 ? 64 : 264, odd_m), 7 * count);
    plan.run(groups.vA, groups.vB, groups.vC, groups.vD, 2.0, 1.0);
    EXPECT_EQ(groups.wrong_groups(2.0, 1.0, GetParam().activation), 0)
        << plan.kernel_name() << ", " << count << " groups";
  }
}

INSTANTIATE_TEST_SUITE_P(Gpu, GroupedPlans, ::testing::ValuesIn(cases::grouped_cases(90)),
                         [](const auto& info) { return info.param.label; });

TEST(GpuGrouped, WithoutCBetaIsZero) {
  REQUIRE_GPU();
  gk::GroupedGemm plan = cases::grouped_plan(cases::grouped_cases(device_cc()).front());
  Groups groups(plan, mixed_extents(20, 5), 11);
  plan.run(groups.vA, groups.vB, {}, groups.vD, 1.0, 0.0);
  EXPECT_EQ(groups.wrong_groups(1.0, 0.0), 0);
}

TEST(GpuGrouped, HostListsAreStagedAndLandBeforeReturn) {
  REQUIRE_GPU();
  gk::GroupedGemm plan = cases::grouped_plan(cases::grouped_cases(device_cc()).front());
  Groups groups(plan, mixed_extents(12, 9), 13, /*on_device=*/false);
  plan.run(groups.vA, groups.vB, groups.vC, groups.vD, 1.0, 1.0);
  EXPECT_EQ(groups.wrong_groups(1.0, 1.0), 0);
}

TEST(GpuGrouped, TheSameListAgainAndAnotherListBothExact) {
  REQUIRE_GPU();
  gk::GroupedGemm plan = cases::grouped_plan(cases::grouped_cases(device_cc()).front());
  Groups first(plan, mixed_extents(30, 21), 23), second(plan, mixed_extents(31, 22), 29);
  for (int round = 0; round < 3; ++round) {
    plan.run(first.vA, first.vB, first.vC, first.vD, 1.0, 1.0);
    EXPECT_EQ(first.wrong_groups(1.0, 1.0), 0) << "round " << round;
    plan.run(second.vA, second.vB, second.vC, second.vD, 1.0, -1.0);
    EXPECT_EQ(second.wrong_groups(1.0, -1.0), 0) << "round " << round;
  }
}

// The walk-through's workload: 50 problems with M, N, K from {128, 256, 512, 1024}, sampled against the reference.
TEST(GpuGrouped, WalkThroughWorkloadOnBothFamilies) {
  REQUIRE_GPU();
  for (int kernel_cc : cases::kernel_generations(device_cc())) {
    gk::GroupedGemm plan(cases::epilogue_options(gk::DataType::f16, device_cc(), kernel_cc));
    std::mt19937_64 random(2023);
    const long sizes[] = {128, 256, 512, 1024};
    std::vector<Extent> extents;
    for (int g = 0; g < 50; ++g) extents.push_back({sizes[random() % 4], sizes[random() % 4], sizes[random() % 4]});
    Groups groups(plan, extents, 2023);
    plan.run(groups.vA, groups.vB, groups.vC, groups.vD, 1.0, 0.0);
    EXPECT_EQ(groups.wrong_groups(1.0, 0.0, gk::Activation::Identity, 2000), 0) << plan.kernel_name();
  }
}

// The list form captured into a graph: every replay reads the A of that moment through the captured metadata.
TEST(GpuGrouped, ListFormCapturedAndReplayed) {
  REQUIRE_GPU();
  gk::GroupedGemm plan = cases::grouped_plan(cases::grouped_cases(device_cc()).front());
  Groups groups(plan, mixed_extents(16, 31), 37);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  gk::RunOptions options;
  options.stream = stream;
  plan.run(groups.vA, groups.vB, groups.vC, groups.vD, 1.0, 1.0, options);  // loads the kernel outside the capture
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  plan.run(groups.vA, groups.vB, groups.vC, groups.vD, 1.0, 1.0, options);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int replay = 0; replay < 10; ++replay) {
    for (std::size_t g = 0; g < groups.A.size(); ++g) {
      groups.A[g].fill_integers(1000 * replay + g, -3, 3);
      ASSERT_EQ(cudaMemcpy(groups.dA[g]->get(), groups.A[g].data(), groups.A[g].bytes(), cudaMemcpyHostToDevice),
                cudaSuccess);
    }
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(groups.wrong_groups(1.0, 1.0), 0) << "replay " << replay;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// The MoE form: A [total_m, K] stacked by group, B [G, K, N] (or transposed weights), offsets on the device.
struct Experts {
  HostMatrix A, B, D, sevens;
  std::unique_ptr<DeviceBuffer> dA, dB, dD, offsets;
  std::vector<std::int32_t> ends;

  Experts(const gk::GroupedGemm& plan, const std::vector<int>& rows, long n, long k)
      : A(plan.element_a(), total(rows), k, gk::Layout::RowMajor),
        B(plan.element_b(), k, n, plan.layout_b(), static_cast<long>(rows.size())),
        D(plan.element_d(), total(rows), n, gk::Layout::RowMajor),
        sevens(plan.element_d(), total(rows), n, gk::Layout::RowMajor) {
    A.fill_integers(1, -3, 3);
    B.fill_integers(2, -3, 3);
    sevens.fill_integers(3, 7, 7);  // what rows no group owns must keep
    D = sevens;
    dA = std::make_unique<DeviceBuffer>(A);
    dB = std::make_unique<DeviceBuffer>(B);
    dD = std::make_unique<DeviceBuffer>(D);
    offsets = std::make_unique<DeviceBuffer>(rows.size() * sizeof(std::int32_t));
    set_rows(rows);
  }
  static long total(const std::vector<int>& rows) {
    long sum = 0;
    for (int r : rows) sum += r;
    return sum;
  }
  // New group sizes (at most the rows A has), written to the device offsets with a plain copy; D back to 7s.
  void set_rows(const std::vector<int>& rows) {
    EXPECT_EQ(cudaMemcpy(dD->get(), sevens.data(), sevens.bytes(), cudaMemcpyHostToDevice), cudaSuccess);
    ends.clear();
    int end = 0;
    for (int r : rows) ends.push_back(end += r);
    EXPECT_EQ(cudaMemcpy(offsets->get(), ends.data(), ends.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  gk::TensorView offsets_view() const {
    return gk::TensorView::strided(offsets->get(), gk::DataType::s32, {static_cast<long>(ends.size())}, {1},
                                   gk::current_device());
  }
  void run(gk::GroupedGemm& plan, const gk::RunOptions& options = {}) {
    plan.run_contiguous(dA->view_like(A), dB->view_like(B), nullptr, dD->view_like(D), offsets_view(), 1.0, 0.0,
                        options);
  }
  // D += A @ B in place (C is D, beta = 1): a second launch that computed would add the product twice.
  void accumulate(gk::GroupedGemm& plan) {
    const gk::TensorView d = dD->view_like(D);
    plan.run_contiguous(dA->view_like(A), dB->view_like(B), &d, d, offsets_view(), 1.0, 1.0);
  }
  gk::KernelSpec spec(gk::GroupedGemm& plan) {
    return plan.spec_for_contiguous(dA->view_like(A), dB->view_like(B), nullptr, dD->view_like(D), offsets_view());
  }
  // Rows of each group against A's rows @ that group's B, plus `added` (7 after accumulate()); rows past the last
  // offset keep their 7s.
  int wrong_rows(double added = 0.0) {
    dD->copy_to(D);
    int wrong = 0, begin = 0;
    for (std::size_t g = 0; g < ends.size(); ++g) {
      for (int r = begin; r < ends[g]; ++r) {
        for (long c = 0; c < D.cols(); ++c) {
          double sum = added;
          for (long kk = 0; kk < A.cols(); ++kk) sum += A.get(0, r, kk) * B.get(static_cast<long>(g), kk, c);
          wrong += D.get(0, r, c) != gk::verify::round_to(D.dtype(), sum) ? 1 : 0;
        }
      }
      begin = std::max(begin, ends[g]);
    }
    for (long r = begin; r < D.rows(); ++r) wrong += D.get(0, r, 0) != 7.0 ? 1 : 0;
    return wrong;
  }
};

// Captures one run_contiguous into a CUDA graph, then replays it on each new split of the rows (the GPU reads the
// group sizes at each replay) and checks every row.
void expect_replays_exact(gk::GroupedGemm& plan, Experts& experts, const std::vector<std::vector<int>>& splits) {
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  gk::RunOptions options;
  options.stream = stream;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  experts.run(plan, options);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (const auto& rows : splits) {
    experts.set_rows(rows);
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(experts.wrong_rows(), 0) << plan.kernel_name() << " replay with " << rows.front() << "...";
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

class ContiguousPlans : public ::testing::TestWithParam<cases::GroupedCase> {};

TEST_P(ContiguousPlans, SkewedAndEmptyExpertsInsideACudaGraph) {
  REQUIRE_GPU();
  gk::GroupedGemm plan = cases::grouped_plan(GetParam());
  if (plan.kernel_cc() > device_cc()) GTEST_SKIP() << "needs an SM" << plan.kernel_cc() << " GPU";
  // K = 272: 16-byte rows of A for every element type the cases take (FP8's too), a partial K tile.
  Experts experts(plan, {0, 5, 300, 0, 17, 128, 1, 61}, 136, 272);
  experts.run(plan);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(experts.wrong_rows(), 0) << plan.kernel_name() << " eagerly";
  expect_replays_exact(plan, experts,
                       {{64, 64, 64, 64, 64, 64, 64, 64},
                        {512, 0, 0, 0, 0, 0, 0, 0},
                        {0, 0, 0, 0, 0, 0, 0, 511},
                        {1, 2, 3, 4, 5, 6, 7, 8}});
}

// An SM90 module cuts an expert taller than a band (at least eight rows of tiles; at N = 2048 on an H100 or H200,
// nine) into metadata entries of their own. These experts span up to four bands, with empty ones between, eagerly
// and in a replayed graph whose entry count was fixed at capture.
TEST_P(ContiguousPlans, ExpertsTallerThanABandEagerAndReplayed) {
  REQUIRE_GPU();
  gk::GroupedGemm plan = cases::grouped_plan(GetParam());
  if (plan.kernel_cc() > device_cc()) GTEST_SKIP() << "needs an SM" << plan.kernel_cc() << " GPU";
  Experts experts(plan, {2500, 0, 700, 300, 1}, 2048, 32);
  experts.run(plan);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(experts.wrong_rows(), 0) << plan.kernel_name() << " eagerly";
  expect_replays_exact(plan, experts, {{3501, 0, 0, 0, 0}, {1153, 1153, 1153, 41, 1}});
}

// Runs experts of these rows against an N x 64 weight on the tile run_contiguous picks, exactly: SM90 16-bit plans
// take `wide` (catalog::choose_contiguous_tile), the others their own kernel, whatever its tile.
void expect_moe_tile_exact(const cases::GroupedCase& c, const std::vector<int>& rows, long n, const gk::Shape3& wide) {
  gk::GroupedGemm plan = cases::grouped_plan(c);
  if (plan.kernel_cc() > device_cc()) GTEST_SKIP() << "needs an SM" << plan.kernel_cc() << " GPU";
  Experts experts(plan, rows, n, 64);
  const gk::KernelSpec spec = experts.spec(plan);
  const bool sixteen_bit = plan.element_a() == gk::DataType::bf16 || plan.element_a() == gk::DataType::f16;
  if (plan.kernel_cc() == 90 && sixteen_bit) {
    EXPECT_EQ(spec.tile.cta_tile(), wide) << spec.name();
  } else {
    EXPECT_EQ(spec.name(), plan.kernel_name());
  }
  experts.run(plan);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(experts.wrong_rows(), 0) << spec.name();
}

// An N that is a multiple of 256: 128 x 256 tiles; skewed, empty and one-row experts.
TEST_P(ContiguousPlans, WideTileWhereNIsAMultipleOf256) {
  REQUIRE_GPU();
  expect_moe_tile_exact(GetParam(), {0, 300, 5, 1, 0, 700}, 256, {128, 256, 64});
}

// Another N over experts that average 256 rows or more: 256 x 128 tiles; skewed, empty and one-row experts, a
// partial tile along N.
TEST_P(ContiguousPlans, TallTileOverExpertsOfManyRows) {
  REQUIRE_GPU();
  expect_moe_tile_exact(GetParam(), {0, 900, 5, 1, 0, 700}, 200, {256, 128, 64});
}

// Over an N that 256 does not divide, 256 x 128 is launched with its 128 x 256 rival and the GPU runs the one of fewer
// waves: exactly one computes, whichever wins. Splits (on 132 SMs): a tie (256 x 128 runs), 40 experts of 257 rows at
// N = 200 (128 x 256: 120 tiles against 160), 20 of 512 at N = 384 (256 x 128: 120 against 160).
TEST_P(ContiguousPlans, TransposedRivalsComputeOnce) {
  REQUIRE_GPU();
  gk::GroupedGemm plan = cases::grouped_plan(GetParam());
  if (plan.kernel_cc() > device_cc()) GTEST_SKIP() << "needs an SM" << plan.kernel_cc() << " GPU";
  const std::vector<std::pair<std::vector<int>, long>> splits = {
      {{0, 900, 5, 1, 0, 700}, 200}, {std::vector<int>(40, 257), 200}, {std::vector<int>(20, 512), 384}};
  for (const auto& [rows, n] : splits) {
    Experts experts(plan, rows, n, 64);
    const std::optional<gk::KernelSpec> rival =
        plan.rival_for_contiguous(experts.dA->view_like(experts.A), experts.dB->view_like(experts.B), nullptr,
                                  experts.dD->view_like(experts.D), experts.offsets_view());
    const bool sixteen_bit = plan.element_a() == gk::DataType::bf16 || plan.element_a() == gk::DataType::f16;
    if (plan.kernel_cc() != 90 || !sixteen_bit) {
      EXPECT_FALSE(rival.has_value()) << rival->name();
      continue;
    }
    ASSERT_TRUE(rival.has_value()) << n;
    EXPECT_EQ(rival->tile.cta_tile(), (gk::Shape3{128, 256, 64}));
    EXPECT_EQ(experts.spec(plan).tile.cta_tile(), (gk::Shape3{256, 128, 64}));
    experts.accumulate(plan);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(experts.wrong_rows(7.0), 0) << plan.kernel_name() << ", " << rows.size() << " experts, N = " << n;
  }
}

INSTANTIATE_TEST_SUITE_P(Gpu, ContiguousPlans, ::testing::ValuesIn(cases::contiguous_cases(90)),
                         [](const auto& info) { return info.param.label; });

// Block-scaled FP8 experts: small integers times power-of-two scales (1/4 to 4) of A per row and 128-deep K block and
// of each expert's B per 128 x 128 block. Every product and partial sum is a short binary fraction, so D is exact
// after its bf16 rounding. N = 136 and K = 272 end in partial scale blocks; the groups are skewed, empty and one row.
TEST(GpuGroupedFp8, BlockScaledExpertsExactWithPowerOfTwoScales) {
  REQUIRE_CC(90, "block-scaled FP8 grouped GEMMs");
  const std::vector<int> rows = {0, 5, 300, 0, 17, 128, 1, 61};
  const long n = 136, k = 272, k_blocks = 3, n_blocks = 2, groups = static_cast<long>(rows.size());
  for (gk::GroupedGemm& plan : cases::blockwise_moe_plans(device_cc())) {
    Experts experts(plan, rows, n, k);
    const long total = Experts::total(rows);
    HostMatrix scale_a(gk::DataType::f32, total, k_blocks, gk::Layout::RowMajor);
    HostMatrix scale_b(gk::DataType::f32, n_blocks, k_blocks, gk::Layout::RowMajor, groups);
    const double factors[] = {0.25, 0.5, 1.0, 2.0, 4.0};
    for (long r = 0; r < total; ++r)
      for (long b = 0; b < k_blocks; ++b) scale_a.set(0, r, b, factors[(r * 3 + b) % 5]);
    for (long g = 0; g < groups; ++g)
      for (long nb = 0; nb < n_blocks; ++nb)
        for (long b = 0; b < k_blocks; ++b) scale_b.set(g, nb, b, factors[(g + 2 * nb + b + 1) % 5]);
    DeviceBuffer d_scale_a(scale_a), d_scale_b(scale_b);
    const int device = gk::current_device();
    const gk::TensorView sa =
        gk::TensorView::strided(d_scale_a.get(), gk::DataType::f32, {total, k_blocks}, {k_blocks, 1}, device);
    const gk::TensorView sb = gk::TensorView::strided(d_scale_b.get(), gk::DataType::f32, {groups, n_blocks, k_blocks},
                                                      {n_blocks * k_blocks, k_blocks, 1}, device);
    gk::RunOptions options;
    options.scale_a = &sa;
    options.scale_b = &sb;
    experts.run(plan, options);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    experts.dD->copy_to(experts.D);
    long wrong = 0, begin = 0;
    for (long g = 0; g < groups; ++g) {
      for (long r = begin; r < experts.ends[static_cast<std::size_t>(g)]; ++r) {
        for (long c = 0; c < n; ++c) {
          double sum = 0;
          for (long kk = 0; kk < k; ++kk) {
            sum += experts.A.get(0, r, kk) * experts.B.get(g, kk, c) * scale_a.get(0, r, kk / 128) *
                   scale_b.get(g, c / 128, kk / 128);
          }
          wrong += experts.D.get(0, r, c) != gk::verify::round_to(experts.D.dtype(), sum) ? 1 : 0;
        }
      }
      begin = std::max(begin, static_cast<long>(experts.ends[static_cast<std::size_t>(g)]));
    }
    for (long r = begin; r < total; ++r) wrong += experts.D.get(0, r, 0) != 7.0 ? 1 : 0;
    EXPECT_EQ(wrong, 0) << plan.kernel_name();
  }
}

}  // namespace
