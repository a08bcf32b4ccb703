// bench/overhead_section.cpp: host time of one run() on a cached kernel (f16, device tensors; 128^3 unless
// --overhead-shape says otherwise) vs cuBLAS.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "bench.hpp"

namespace bench {
namespace {

// Launch-only calls are timed in chunks with a synchronize between chunks (outside the timed region), so at
// most this many launches are pending: far below the launch queue's depth, so a call never waits for the GPU.
constexpr int kChunk = 200;
constexpr int kWarmup = 200;

double micros(std::int64_t ns) {
  return static_cast<double>(ns) * 1e-3;
}

struct Overhead {
  double launch_mean_us = 0, launch_chunk_median_us = 0;
  double sync_median_us = 0, sync_mean_us = 0, sync_p90_us = 0;
  double gpu_us = 0;  // device time per call, back to back (for context: whether the queue could fill)

  Value json() const {
    Value v = Value::object();
    v["launch_only_us_mean"] = launch_mean_us;
    v["launch_only_us_chunk_median"] = launch_chunk_median_us;
    v["launch_sync_us_median"] = sync_median_us;
    v["launch_sync_us_mean"] = sync_mean_us;
    v["launch_sync_us_p90"] = sync_p90_us;
    v["gpu_us_per_call"] = gpu_us;
    return v;
  }
};

// `launch` enqueues one GEMM without waiting; `launch_sync` enqueues one and waits for it.
template <class Launch, class LaunchSync>
Overhead measure(Context& ctx, Launch&& launch, LaunchSync&& launch_sync) {
  const int calls = ctx.options.calls;
  Overhead out;
  for (int i = 0; i < kWarmup; ++i) launch();
  BENCH_CUDA(cudaStreamSynchronize(ctx.stream));

  std::vector<double> chunk_means;
  std::int64_t total_ns = 0;
  for (int done = 0; done < calls; done += kChunk) {
    const int n = std::min(kChunk, calls - done);
    BENCH_CUDA(cudaStreamSynchronize(ctx.stream));
    const std::int64_t t0 = now_ns();
    for (int i = 0; i < n; ++i) launch();
    const std::int64_t elapsed = now_ns() - t0;
    total_ns += elapsed;
    chunk_means.push_back(micros(elapsed) / n);
  }
  BENCH_CUDA(cudaStreamSynchronize(ctx.stream));
  out.launch_mean_us = micros(total_ns) / calls;
  out.launch_chunk_median_us = median(chunk_means);

  std::vector<double> each;
  each.reserve(static_cast<std::size_t>(calls));
  for (int i = 0; i < calls; ++i) {
    const std::int64_t t0 = now_ns();
    launch_sync();
    each.push_back(micros(now_ns() - t0));
  }
  out.sync_median_us = median(each);
  double sum = 0;
  for (double x : each) sum += x;
  out.sync_mean_us = sum / calls;
  std::sort(each.begin(), each.end());
  out.sync_p90_us = each[static_cast<std::size_t>(0.9 * (calls - 1))];

  out.gpu_us = 1e3 * time_batch_ms(ctx.stream, 1000, [&] { launch(); });
  return out;
}

}  // namespace

SectionResult overhead_section(Context& ctx) {
  const gk::DataType dtype = gk::DataType::f16;
  const Shape s = ctx.options.overhead_shape;
  if (ctx.options.calls < kChunk) throw Failure("--calls must be at least " + std::to_string(kChunk));
  gk::Gemm plan = default_plan(dtype, ctx);
  const auto elements = [](std::int64_t rows, std::int64_t cols) { return static_cast<std::size_t>(rows * cols); };
  const std::size_t count_a = elements(s.m, s.k), count_b = elements(s.k, s.n), count = elements(s.m, s.n);
  const std::size_t width = element_bytes(dtype), bytes = count * width;
  std::vector<std::byte> hA(count_a * width), hB(count_b * width), hD_gemmkit(bytes), hD_cublas(bytes);
  fill_uniform(dtype, hA.data(), count_a, 7);
  fill_uniform(dtype, hB.data(), count_b, 8);
  DeviceBuffer dA(hA.size()), dB(hB.size()), dD_gemmkit(bytes), dD_cublas(bytes);
  BENCH_CUDA(cudaMemcpy(dA.get(), hA.data(), hA.size(), cudaMemcpyHostToDevice));
  BENCH_CUDA(cudaMemcpy(dB.get(), hB.data(), hB.size(), cudaMemcpyHostToDevice));
  BENCH_CUDA(cudaMemset(dD_gemmkit.get(), 0xFF, bytes));
  const auto vA = gk::TensorView::on_gpu(dA.get(), dtype, {s.m, s.k}, gk::Layout::RowMajor, ctx.device);
  const auto vB = gk::TensorView::on_gpu(dB.get(), dtype, {s.k, s.n}, gk::Layout::RowMajor, ctx.device);
  const auto vD = gk::TensorView::on_gpu(dD_gemmkit.get(), dtype, {s.m, s.n}, gk::Layout::RowMajor, ctx.device);
  const gk::RunOptions no_sync{ctx.stream, false, false}, with_sync{ctx.stream, true, false};

  // The kernel whose launch is measured must compute the right thing.
  plan.run(vA, vB, nullptr, vD, 1.0, 0.0, with_sync);
  cublas_gemm(ctx.cublas, dtype, s, dA.get(), dB.get(), dD_cublas.get());
  BENCH_CUDA(cudaStreamSynchronize(ctx.stream));
  BENCH_CUDA(cudaMemcpy(hD_gemmkit.data(), dD_gemmkit.get(), bytes, cudaMemcpyDeviceToHost));
  BENCH_CUDA(cudaMemcpy(hD_cublas.data(), dD_cublas.get(), bytes, cudaMemcpyDeviceToHost));
  const double scale = std::sqrt(static_cast<double>(s.k) / 9.0);
  for (std::size_t i = 0; i < count; ++i) {
    const double g = load_element(dtype, hD_gemmkit.data(), i), w = load_element(dtype, hD_cublas.data(), i);
    if (!(std::fabs(g - w) / std::max(std::fabs(w), scale) <= 0x1p-9)) {
      throw Failure("gemmkit's " + s.text() + " result differs from cuBLAS's at element " + std::to_string(i) + ": " +
                    std::to_string(g) + " vs " + std::to_string(w));
    }
  }

  std::printf("overhead: gemmkit ...\n");
  std::fflush(stdout);
  const Overhead gemmkit = measure(
      ctx, [&] { plan.run(vA, vB, nullptr, vD, 1.0, 0.0, no_sync); },
      [&] { plan.run(vA, vB, nullptr, vD, 1.0, 0.0, with_sync); });
  std::printf("overhead: cuBLAS ...\n");
  std::fflush(stdout);
  auto cublas_launch = [&] { cublas_gemm(ctx.cublas, dtype, s, dA.get(), dB.get(), dD_cublas.get()); };
  const Overhead cublas = measure(ctx, cublas_launch, [&] {
    cublas_launch();
    BENCH_CUDA(cudaStreamSynchronize(ctx.stream));
  });

  SectionResult result;
  result.json["shape"] = s.text();
  result.json["dtype"] = "f16";
  result.json["kernel_name"] = plan.spec_for(vA, vB, nullptr, vD).name();
  result.json["calls"] = ctx.options.calls;
  result.json["launch_only_chunk"] = kChunk;
  result.json["gemmkit"] = gemmkit.json();
  result.json["cublas"] = cublas.json();
  Table table{
      {"", "launch only, µs/call (mean / chunk median)", "launch + sync, µs/call (median / mean / p90)", "GPU µs/call"},
      {}};
  auto row = [](const std::string& name, const Overhead& o) {
    return std::vector<std::string>{
        name, fixed(o.launch_mean_us, 2) + " / " + fixed(o.launch_chunk_median_us, 2),
        fixed(o.sync_median_us, 2) + " / " + fixed(o.sync_mean_us, 2) + " / " + fixed(o.sync_p90_us, 2),
        fixed(o.gpu_us, 2)};
  };
  table.rows.push_back(row("gemmkit Gemm::run", gemmkit));
  table.rows.push_back(row("cublasGemmEx", cublas));
  result.markdown = "## Host overhead per call (" + s.text() + " f16, device tensors, cached kernel `" +
                    result.json["kernel_name"].get<std::string>() + "`, " + std::to_string(ctx.options.calls) +
                    " calls each)\n\n" + table.markdown() +
                    "\nLaunch only: host time of calls that do not wait, timed in chunks of " + std::to_string(kChunk) +
                    " with a synchronize between chunks outside the timed region. "
                    "Launch + sync: host time of each call including cudaStreamSynchronize.\n";
  return result;
}

}  // namespace bench
