// tests/support/grouped_probe_contiguous.cpp: the grouped probe's contiguous (MoE) form: skewed, empty and clamped
// experts on fresh buffers, and one call captured in a CUDA graph (warm, and cold on a new thread) replayed with new
// offsets.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gemmkit/abi.h"
#include "grouped_probe.hpp"

namespace grouped_probe {

std::vector<int32_t> cumulative(const std::vector<int>& sizes) {
  std::vector<int32_t> out;
  int32_t sum = 0;
  for (int s : sizes) out.push_back(sum += s);
  return out;
}

std::vector<int> skewed_sizes(std::mt19937_64& rng, int groups, int rows) {
  std::vector<int> sizes(groups, 0);
  for (int r = 0; r < rows; ++r) {
    const int g =
        std::min(groups - 1, static_cast<int>(std::pow(std::uniform_real_distribution<double>(0, 1)(rng), 3) * groups));
    ++sizes[g];
  }
  return sizes;
}

namespace {

// A MoE problem: A [total_m, k], B [G] x (k x n) in the module's B layout, D [total_m, n], offsets on the device.
struct Moe {
  int groups = 0, total_m = 0, n = 0, k = 0;
  bool has_c = false;
  Arena arena;
  Matrix A, B, C, D;  // B: the whole stack as one (G * k) x n or n x (G * k) allocation
  int32_t* offsets = nullptr;

  Moe(const gk_grouped_info& info, int groups_, int total_m_, int n_, int k_, bool has_c_, std::mt19937_64& rng)
      : groups(groups_), total_m(total_m_), n(n_), k(k_), has_c(has_c_) {
    A = arena.add(total_m, k, k, true, info.element_a);
    const bool b_row = info.layout_b == GK_ROW_MAJOR;
    B = arena.add(b_row ? groups * k : k, b_row ? n : groups * n, b_row ? n : k, b_row, info.element_b);
    C = arena.add(has_c ? total_m : 0, n, n, true, info.element_c);
    D = arena.add(total_m, n, n, true, info.element_d);
    arena.fill(A, [&] { return pick(rng, -2, 2); });
    arena.fill(B, [&] { return pick(rng, -2, 2); });
    arena.fill(C, [&] { return pick(rng, -3, 3); });
    arena.fill(D, [] { return kSentinel; });
    arena.upload();
    CUDA_CHECK(cudaMalloc(&offsets, sizeof(int32_t) * groups));
  }
  ~Moe() { cudaFree(offsets); }

  int64_t batch_stride_b() const { return static_cast<int64_t>(k) * n; }
  gk_grouped_contiguous problem() const {
    gk_grouped_contiguous c{};
    c.total_m = total_m;
    c.n = n;
    c.k = k;
    c.A = arena.device(A);
    c.B = arena.device(B);
    c.C = has_c ? arena.device(C) : nullptr;
    c.D = arena.device(D);
    c.offsets = offsets;
    c.lda = A.ld;
    c.ldb = B.ld;
    c.ldc = C.ld;
    c.ldd = D.ld;
    c.batch_stride_b = batch_stride_b();
    return c;
  }

  // The groups as the module derives them (offsets clamped into [0, total_m]), plus the rows no group owns as an
  // empty group whose D must stay untouched.
  std::vector<Group> groups_for(const std::vector<int32_t>& ends) const {
    std::vector<Group> out;
    std::vector<bool> owned(total_m, false);
    int32_t previous = 0;
    for (int g = 0; g < groups; ++g) {
      const int32_t start = g == 0 ? 0 : std::clamp(previous, 0, total_m);
      const int32_t end = std::clamp(ends[g], start, total_m);
      previous = ends[g];
      Group group;
      group.m = end - start;
      group.n = n;
      group.k = k;
      group.has_c = has_c;
      group.A = A.rows_from(start, group.m);
      group.B = B;
      group.B.rows = k;
      group.B.cols = n;
      group.B.offset += static_cast<std::size_t>(g) * batch_stride_b() * element_bytes(B.dtype);
      group.C = has_c ? C.rows_from(start, group.m) : C;
      group.D = D.rows_from(start, group.m);
      for (int r = start; r < end; ++r) owned[r] = true;
      out.push_back(group);
    }
    for (int r = 0; r < total_m; ++r) {
      if (owned[r]) continue;
      Group untouched;  // k = 0: the whole row must hold the sentinel
      untouched.D = D.rows_from(r, 1);
      out.push_back(untouched);
    }
    return out;
  }

  void set_offsets(const std::vector<int32_t>& ends, cudaStream_t stream) {
    CUDA_CHECK(cudaMemcpyAsync(offsets, ends.data(), sizeof(int32_t) * groups, cudaMemcpyHostToDevice, stream));
  }
};

std::string check_moe(Moe& moe, const std::vector<int32_t>& ends, const Epilogue& e) {
  moe.arena.download();
  if (std::string error = check_groups(moe.arena, moe.groups_for(ends), e); !error.empty()) return error;
  return {};
}

// One contiguous call on fresh buffers, checked.
std::string contiguous_case(Context& ctx, const std::vector<int32_t>& ends, int total_m, int n, int k, double beta) {
  std::mt19937_64 rng(ctx.seed + ends.size());
  const int groups = static_cast<int>(ends.size());
  Moe moe(ctx.module.info, groups, total_m, n, k, beta != 0, rng);
  moe.set_offsets(ends, ctx.stream);
  const gk_grouped_args args = ctx.args(groups, 1, beta);
  const gk_grouped_contiguous problem = moe.problem();
  ctx.module.expect_ok(ctx.module.can_implement(&args, &problem), "gk_grouped_can_implement");
  Buffers buffers(ctx.module, args);
  ctx.module.expect_ok(
      ctx.module.run_contiguous(&args, &problem, buffers.device, buffers.bytes, buffers.workspace, ctx.stream),
      "gk_grouped_run_contiguous");
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  if (std::string error = check_moe(moe, ends, ctx.epilogue(args)); !error.empty()) throw Failure(error);
  return std::to_string(groups) + " experts, total_m " + std::to_string(total_m) + ", n " + std::to_string(n) + ", k " +
         std::to_string(k);
}

// Captures one contiguous call in a graph (on a thread of its own when `cold`: the module then prepares the launch
// inside the capture), then replays it `replays` times with new offsets written between replays.
std::string graph_case(Context& ctx, bool cold, int replays) {
  std::mt19937_64 rng(ctx.seed + 77);
  const int groups = 8, total_m = 1024, n = 128, k = 192;
  Moe moe(ctx.module.info, groups, total_m, n, k, false, rng);
  const gk_grouped_args args = ctx.args(groups, 1, 0);
  const gk_grouped_contiguous problem = moe.problem();
  Buffers buffers(ctx.module, args);
  std::vector<int32_t> ends = cumulative(skewed_sizes(rng, groups, 1000));
  moe.set_offsets(ends, ctx.stream);
  auto call = [&] {
    return ctx.module.run_contiguous(&args, &problem, buffers.device, buffers.bytes, buffers.workspace, ctx.stream);
  };
  if (!cold) ctx.module.expect_ok(call(), "gk_grouped_run_contiguous (eager warm-up)");
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));

  cudaGraph_t graph = nullptr;
  int status = GK_OK;
  auto capture = [&] {
    CUDA_CHECK(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeGlobal));
    status = call();
    CUDA_CHECK(cudaStreamEndCapture(ctx.stream, &graph));
  };
  if (cold) {
    std::string error;
    std::thread thread([&] {
      try {
        CUDA_CHECK(cudaSetDevice(ctx.device));
        capture();
      } catch (const std::exception& e) {
        error = e.what();
      }
    });
    thread.join();
    if (!error.empty()) throw Failure(error);
  } else {
    capture();
  }
  ctx.module.expect_ok(status, "gk_grouped_run_contiguous (captured)");
  cudaGraphExec_t exec = nullptr;
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  std::size_t nodes = 0;
  CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &nodes));
  std::string result;
  for (int replay = 0; replay < replays && result.empty(); ++replay) {
    ends = cumulative(skewed_sizes(rng, groups, pick(rng, 0, total_m)));
    moe.set_offsets(ends, ctx.stream);
    moe.arena.fill(moe.D, [] { return kSentinel; });
    moe.arena.upload(moe.D, ctx.stream);
    CUDA_CHECK(cudaGraphLaunch(exec, ctx.stream));
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    if (std::string error = check_moe(moe, ends, ctx.epilogue(args)); !error.empty()) {
      result = "replay " + std::to_string(replay) + ": " + error;
    }
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  if (!result.empty()) throw Failure(result);
  return std::to_string(replays) + " replays with new offsets, " + std::to_string(nodes) + " graph nodes";
}

}  // namespace

void contiguous_tests(Context& ctx) {
  if (!ctx.module.info.contiguous) {
    ctx.test("contiguous", []() -> std::string { throw Skip("the module's A or C is column-major"); });
    return;
  }
  const int align = std::max({ctx.module.info.alignment_a, ctx.module.info.alignment_b, ctx.module.info.alignment_d});
  const int n = static_cast<int>(round_up(190, align)), k = static_cast<int>(round_up(260, align));
  std::mt19937_64 rng(ctx.seed + 5);
  ctx.test("contiguous skewed and empty experts, rows past the last offset", [&] {
    return contiguous_case(ctx, cumulative({0, 700, 3, 0, 200, 1, 100, 0}), 1024, n, k, 0);
  });
  ctx.test("contiguous 64 uniform experts, C",
           [&] { return contiguous_case(ctx, cumulative(std::vector<int>(64, 128)), 8192, 256, 512, 1); });
  ctx.test("contiguous one non-empty expert of 16", [&] {
    std::vector<int> sizes(16, 0);
    sizes[9] = 333;
    return contiguous_case(ctx, cumulative(sizes), 333, n, k, 0);
  });
  ctx.test("contiguous random skew, 32 experts",
           [&] { return contiguous_case(ctx, cumulative(skewed_sizes(rng, 32, 2000)), 2048, n, k, 0); });
  // Past total_m: clamped; decreasing: an empty group (offsets that decrease and rise again would make groups
  // overlap: undefined results, as for torch._grouped_mm, but no access outside A, C and D).
  ctx.test("contiguous offsets clamped (past total_m, then decreasing)", [&] {
    return contiguous_case(ctx, {100, 400, 200}, 350, n, k, 0);
  });
  ctx.test("contiguous in a CUDA graph (warm)", [&] { return graph_case(ctx, false, 10); });
  ctx.test("contiguous in a CUDA graph (captured cold, on a new thread)", [&] { return graph_case(ctx, true, 10); });
}

}  // namespace grouped_probe
