// tests/support/grouped_probe_timing.cpp: the grouped probe's TIME lines: 50-group list runs (kernel, metadata copy,
// pack, CUDA graph replay) and MoE shapes, each the median over rounds.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gemmkit/abi.h"
#include "grouped_probe.hpp"

namespace grouped_probe {
namespace {

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Median over rounds of the GPU time of `per_round` calls of `enqueue`, in microseconds per call, after warm-up.
double time_gpu(Context& ctx, int per_round, const std::function<void()>& enqueue) {
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < 10; ++i) enqueue();
  std::vector<double> rounds;
  for (int r = 0; r < ctx.rounds; ++r) {
    CUDA_CHECK(cudaEventRecord(start, ctx.stream));
    for (int i = 0; i < per_round; ++i) enqueue();
    CUDA_CHECK(cudaEventRecord(stop, ctx.stream));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    rounds.push_back(1000.0 * ms / per_round);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return median(rounds);
}

// Median over rounds of the host time of `per_round` calls, in microseconds per call.
double time_host(Context& ctx, int per_round, const std::function<void()>& call) {
  std::vector<double> rounds;
  for (int r = 0; r < ctx.rounds; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < per_round; ++i) call();
    const auto end = std::chrono::steady_clock::now();
    rounds.push_back(std::chrono::duration<double, std::micro>(end - start).count() / per_round);
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  }
  return median(rounds);
}

}  // namespace

void list_timing(Context& ctx) {
  ctx.test("timing: list, 50 groups (walk-through sizes)", [&] {
    std::mt19937_64 rng(ctx.seed);
    Arena arena;
    std::vector<Group> groups;
    double flop = 0;
    for (const auto& [m, n, k] : walkthrough_shapes(ctx.seed)) {
      groups.push_back(make_group(arena, ctx.module.info, m, n, k, false, false, rng));
      flop += 2.0 * m * n * k;
    }
    arena.upload();
    const gk_grouped_args args = ctx.args(50, 1, 0);
    Buffers buffers(ctx.module, args);
    const auto problems = problems_of(arena, groups);
    run_list(ctx, args, problems, buffers);
    const Module& m = ctx.module;
    auto launch = [&] { m.expect_ok(m.run(&args, buffers.device, buffers.workspace, ctx.stream), "run"); };
    auto copy_and_launch = [&] {
      CUDA_CHECK(cudaMemcpyAsync(buffers.device, buffers.host, buffers.bytes, cudaMemcpyHostToDevice, ctx.stream));
      launch();
    };
    int32_t failed = -1;
    auto pack = [&] { m.expect_ok(m.pack(&args, problems.data(), buffers.host, buffers.bytes, &failed), "pack"); };

    const double kernel = time_gpu(ctx, 100, launch);
    const double with_copy = time_gpu(ctx, 100, copy_and_launch);
    const double host_pack = time_host(ctx, 100, pack);
    const double host_copy_and_launch = time_host(ctx, 100, copy_and_launch);

    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    CUDA_CHECK(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeGlobal));
    copy_and_launch();
    CUDA_CHECK(cudaStreamEndCapture(ctx.stream, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    const double in_graph = time_gpu(ctx, 100, [&] { CUDA_CHECK(cudaGraphLaunch(exec, ctx.stream)); });
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);

    std::printf("TIME list50 kernel only: %.1f us/run (%.0f TFLOP/s)\n", kernel, flop / kernel * 1e-6);
    std::printf("TIME list50 metadata copy + run: %.1f us/run on the GPU, %.1f us/run of host enqueue time\n",
                with_copy, host_copy_and_launch);
    std::printf("TIME list50 pack (host, %zu bytes): %.2f us\n", buffers.bytes, host_pack);
    std::printf("TIME list50 copy + run in a CUDA graph: %.1f us/replay\n", in_graph);
    return std::string("median of ") + std::to_string(ctx.rounds) + " rounds x 100 runs after 10 warm-up runs";
  });
}

void moe_timing(Context& ctx) {
  if (!ctx.module.info.contiguous) return;
  const int total_m = 8192, k = 4096;
  for (int groups : {8, 64}) {
    for (int n : {1408, 14336}) {
      for (bool skewed : {false, true}) {
        const std::string name = "timing: contiguous " + std::to_string(groups) + " experts, n " + std::to_string(n) +
                                 ", k 4096, total_m 8192, " + (skewed ? "skewed" : "uniform");
        ctx.test(name, [&] {
          const gk_grouped_info& info = ctx.module.info;
          const std::size_t a_bytes = std::size_t(total_m) * k * element_bytes(info.element_a);
          const std::size_t b_bytes = std::size_t(groups) * k * n * element_bytes(info.element_b);
          const std::size_t d_bytes = std::size_t(total_m) * n * element_bytes(info.element_d);
          void *a = nullptr, *b = nullptr, *d = nullptr;
          int32_t* offsets = nullptr;
          CUDA_CHECK(cudaMalloc(&a, a_bytes));
          CUDA_CHECK(cudaMalloc(&b, b_bytes));
          CUDA_CHECK(cudaMalloc(&d, d_bytes));
          CUDA_CHECK(cudaMalloc(&offsets, sizeof(int32_t) * groups));
          CUDA_CHECK(cudaMemset(a, 0x11, a_bytes));
          CUDA_CHECK(cudaMemset(b, 0x11, b_bytes));
          std::mt19937_64 rng(ctx.seed);
          std::vector<int> sizes =
              skewed ? skewed_sizes(rng, groups, total_m) : std::vector<int>(groups, total_m / groups);
          const std::vector<int32_t> ends = cumulative(sizes);
          CUDA_CHECK(cudaMemcpy(offsets, ends.data(), sizeof(int32_t) * groups, cudaMemcpyHostToDevice));
          gk_grouped_contiguous problem{};
          problem.total_m = total_m;
          problem.n = n;
          problem.k = k;
          problem.A = a;
          problem.B = b;
          problem.D = d;
          problem.offsets = offsets;
          problem.lda = k;
          problem.ldb = info.layout_b == GK_ROW_MAJOR ? n : k;
          problem.ldd = n;
          problem.batch_stride_b = int64_t(k) * n;
          const gk_grouped_args args = ctx.args(groups, 1, 0);
          Buffers buffers(ctx.module, args);
          const Module& m = ctx.module;
          const double us = time_gpu(ctx, 20, [&] {
            m.expect_ok(m.run_contiguous(&args, &problem, buffers.device, buffers.bytes, buffers.workspace, ctx.stream),
                        "gk_grouped_run_contiguous");
          });
          cudaFree(a);
          cudaFree(b);
          cudaFree(d);
          cudaFree(offsets);
          const double flop = 2.0 * total_m * n * k;
          std::printf("TIME moe %d experts n %d %s: %.1f us/run, %.0f TFLOP/s\n", groups, n,
                      skewed ? "skewed" : "uniform", us, flop / us * 1e-6);
          return std::string("largest expert ") + std::to_string(*std::max_element(sizes.begin(), sizes.end())) +
                 " rows";
        });
      }
    }
  }
}

}  // namespace grouped_probe
