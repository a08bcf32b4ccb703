// bench/quick_timing.cpp: short, robust timings for sections that measure many kernels (sweep, epilogues).
#include <algorithm>
#include <cmath>
#include <vector>

#include "bench.hpp"

namespace bench {

double quick_ms(cudaStream_t stream, const std::function<void()>& call) {
  for (int i = 0; i < 3; ++i) call();
  const double estimate = time_batch_ms(stream, 2, call);
  const int iters = static_cast<int>(std::clamp(std::ceil(20.0 / estimate), 2.0, 2000.0));
  std::vector<double> ms;
  for (int r = 0; r < 3; ++r) ms.push_back(time_batch_ms(stream, iters, call));
  return median(ms);
}

std::vector<std::vector<double>> interleaved_ms(cudaStream_t stream, const std::vector<std::function<void()>>& calls,
                                                int rounds, double batch_ms, double warmup_ms) {
  const std::size_t n = calls.size();
  std::vector<int> iters(n);
  double warmup_elapsed = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double estimate = time_batch_ms(stream, 2, calls[i]);
    iters[i] = static_cast<int>(std::clamp(std::ceil(batch_ms / estimate), 2.0, 100000.0));
    warmup_elapsed += estimate * 2;
  }
  while (warmup_elapsed < warmup_ms * static_cast<double>(n)) {
    for (std::size_t i = 0; i < n; ++i) warmup_elapsed += time_batch_ms(stream, iters[i], calls[i]) * iters[i];
  }
  std::vector<std::vector<double>> ms(n);
  for (int r = 0; r < rounds; ++r) {
    for (std::size_t j = 0; j < n; ++j) {
      const std::size_t i = (j + static_cast<std::size_t>(r)) % n;
      ms[i].push_back(time_batch_ms(stream, iters[i], calls[i]));
    }
  }
  return ms;
}

Operands::Operands(gk::DataType t, const Shape& s)
    : A(s.m * s.k * element_bytes(t)), B(s.k * s.n * element_bytes(t)), D(s.m * s.n * element_bytes(t)) {
  std::vector<std::byte> host(std::max(A.bytes(), B.bytes()));
  fill_uniform(t, host.data(), s.m * s.k, 7);
  BENCH_CUDA(cudaMemcpy(A.get(), host.data(), A.bytes(), cudaMemcpyHostToDevice));
  fill_uniform(t, host.data(), s.k * s.n, 8);
  BENCH_CUDA(cudaMemcpy(B.get(), host.data(), B.bytes(), cudaMemcpyHostToDevice));
}

double tflops(const Shape& s, double ms) {
  return 2.0 * s.m * s.n * s.k / (ms * 1e-3) / 1e12;
}

std::function<void()> plan_call(Context& ctx, gk::Gemm& plan, gk::DataType t, const Shape& s, Operands& o,
                                const gk::TensorView* bias) {
  const auto vA = gk::TensorView::on_gpu(o.A.get(), t, {s.m, s.k}, gk::Layout::RowMajor, ctx.device);
  const auto vB = gk::TensorView::on_gpu(o.B.get(), t, {s.k, s.n}, gk::Layout::RowMajor, ctx.device);
  const auto vD = gk::TensorView::on_gpu(o.D.get(), t, {s.m, s.n}, gk::Layout::RowMajor, ctx.device);
  gk::RunOptions options{ctx.stream, false, false};
  options.bias = bias;
  return [&plan, vA, vB, vD, options] { plan.run(vA, vB, nullptr, vD, 1.0, 0.0, options); };
}

double time_plan(Context& ctx, gk::Gemm& plan, gk::DataType t, const Shape& s, Operands& o,
                 const gk::TensorView* bias) {
  return quick_ms(ctx.stream, plan_call(ctx, plan, t, s, o, bias));
}

double time_cublas(Context& ctx, gk::DataType t, const Shape& s, Operands& o) {
  return quick_ms(ctx.stream, [&] { cublas_gemm(ctx.cublas, t, s, o.A.get(), o.B.get(), o.D.get()); });
}

}  // namespace bench
