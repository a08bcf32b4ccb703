// bench/gemm_section.cpp: GEMM throughput of gemmkit's default plan vs cuBLAS, interleaved per shape, verified.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>

#include "bench.hpp"

namespace bench {
namespace {

// Both libraries accumulate in f32 and round once to the output type, so they may differ by one unit in the
// last place (2^-10 relative for f16, 2^-7 for bf16); the bound allows two. Errors are measured relative to
// max(|expected|, rms), rms = sqrt(K/9) being the typical magnitude of a dot product of uniform [-1, 1) data.
double tolerance(gk::DataType dtype) {
  return dtype == gk::DataType::f16 ? 0x1p-9 : 0x1p-6;
}

constexpr int kReferenceSamples = 256;

struct HostBuffer {
  explicit HostBuffer(std::size_t bytes) : data(std::make_unique_for_overwrite<std::byte[]>(bytes)), bytes(bytes) {}
  std::unique_ptr<std::byte[]> data;
  std::size_t bytes;
};

std::string scientific(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1e", value);
  return buffer;
}

struct Agreement {
  double max_rel = 0.0;
  std::size_t nonfinite = 0;
  std::size_t worst = 0;  // index of the largest difference
};

// Every element of `got` against `want` (both m x n of dtype).
Agreement compare_outputs(gk::DataType dtype, const HostBuffer& got, const HostBuffer& want, std::size_t count,
                          double scale) {
  Agreement total;
  std::mutex mutex;
  parallel_for(count, [&](std::size_t begin, std::size_t end) {
    Agreement local;
    for (std::size_t i = begin; i < end; ++i) {
      const double g = load_element(dtype, got.data.get(), i), w = load_element(dtype, want.data.get(), i);
      if (!std::isfinite(g) || !std::isfinite(w)) {
        ++local.nonfinite;
        continue;
      }
      const double rel = std::fabs(g - w) / std::max(std::fabs(w), scale);
      if (rel > local.max_rel) local = {rel, local.nonfinite, i};
    }
    std::lock_guard<std::mutex> lock(mutex);
    total.nonfinite += local.nonfinite;
    if (local.max_rel > total.max_rel) {
      total.max_rel = local.max_rel;
      total.worst = local.worst;
    }
  });
  return total;
}

// Largest error of `out` against a float64 reference on kReferenceSamples fixed pseudo-random elements.
double reference_error(gk::DataType dtype, const Shape& s, const HostBuffer& A, const HostBuffer& B,
                       const HostBuffer& out, double scale) {
  double worst = 0.0;
  std::uint64_t state = 12345;
  for (int i = 0; i < kReferenceSamples; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const auto r = static_cast<std::int64_t>((state >> 33) % static_cast<std::uint64_t>(s.m));
    const auto c = static_cast<std::int64_t>((state >> 11) % static_cast<std::uint64_t>(s.n));
    double expected = 0.0;
    for (std::int64_t k = 0; k < s.k; ++k) {
      expected += load_element(dtype, A.data.get(), static_cast<std::size_t>(r * s.k + k)) *
                  load_element(dtype, B.data.get(), static_cast<std::size_t>(k * s.n + c));
    }
    const double got = load_element(dtype, out.data.get(), static_cast<std::size_t>(r * s.n + c));
    if (!std::isfinite(got)) return INFINITY;
    worst = std::max(worst, std::fabs(got - expected) / std::max(std::fabs(expected), scale));
  }
  return worst;
}

void copy_to_host(HostBuffer& host, const DeviceBuffer& device) {
  BENCH_CUDA(cudaMemcpy(host.data.get(), device.get(), host.bytes, cudaMemcpyDeviceToHost));
}

struct Timing {
  std::vector<double> ms;  // per call, one value per timed batch
  // (max - min) / median over the batches, as text.
  std::string spread() const {
    const auto [lo, hi] = std::minmax_element(ms.begin(), ms.end());
    return fixed(100.0 * (*hi - *lo) / median(ms), 1) + "%";
  }
  Value json(double flop) const {
    Value v = Value::object();
    v["ms_median"] = median(ms);
    v["ms_min"] = *std::min_element(ms.begin(), ms.end());
    v["ms_max"] = *std::max_element(ms.begin(), ms.end());
    v["tflops"] = flop / (median(ms) * 1e-3) / 1e12;
    return v;
  }
};

}  // namespace

RowResult measure_row(Context& ctx, gk::Gemm& plan, gk::DataType dtype, const Shape& s) {
  const Options& o = ctx.options;
  const std::size_t esize = element_bytes(dtype);
  const auto count_a = static_cast<std::size_t>(s.m * s.k), count_b = static_cast<std::size_t>(s.k * s.n),
             count_d = static_cast<std::size_t>(s.m * s.n);
  HostBuffer hA(count_a * esize), hB(count_b * esize), hD_cublas(count_d * esize), hD_gemmkit(count_d * esize);
  fill_uniform(dtype, hA.data.get(), count_a, 1000 + static_cast<std::uint64_t>(s.m));
  fill_uniform(dtype, hB.data.get(), count_b, 2000 + static_cast<std::uint64_t>(s.n));
  DeviceBuffer dA(hA.bytes), dB(hB.bytes), dD_gemmkit(hD_gemmkit.bytes), dD_cublas(hD_cublas.bytes);
  BENCH_CUDA(cudaMemcpy(dA.get(), hA.data.get(), hA.bytes, cudaMemcpyHostToDevice));
  BENCH_CUDA(cudaMemcpy(dB.get(), hB.data.get(), hB.bytes, cudaMemcpyHostToDevice));
  // All-ones bytes are NaN in f16 and bf16: an element a kernel never writes fails the check.
  BENCH_CUDA(cudaMemset(dD_gemmkit.get(), 0xFF, dD_gemmkit.bytes()));
  BENCH_CUDA(cudaMemset(dD_cublas.get(), 0xFF, dD_cublas.bytes()));

  const auto vA = gk::TensorView::on_gpu(dA.get(), dtype, {s.m, s.k}, gk::Layout::RowMajor, ctx.device);
  const auto vB = gk::TensorView::on_gpu(dB.get(), dtype, {s.k, s.n}, gk::Layout::RowMajor, ctx.device);
  const auto vD = gk::TensorView::on_gpu(dD_gemmkit.get(), dtype, {s.m, s.n}, gk::Layout::RowMajor, ctx.device);
  const gk::RunOptions run_options{ctx.stream, false, false};
  const std::function<void()> run_gemmkit = [&] { plan.run(vA, vB, nullptr, vD, 1.0, 0.0, run_options); };
  const std::function<void()> run_cublas = [&] {
    cublas_gemm(ctx.cublas, dtype, s, dA.get(), dB.get(), dD_cublas.get());
  };

  // 1. One call each, then verify before anything is timed.
  run_gemmkit();
  run_cublas();
  BENCH_CUDA(cudaStreamSynchronize(ctx.stream));
  copy_to_host(hD_gemmkit, dD_gemmkit);
  copy_to_host(hD_cublas, dD_cublas);
  const double scale = std::sqrt(static_cast<double>(s.k) / 9.0);
  const double bound = tolerance(dtype);
  const double cublas_ref_error = reference_error(dtype, s, hA, hB, hD_cublas, scale);
  const double gemmkit_ref_error = reference_error(dtype, s, hA, hB, hD_gemmkit, scale);
  const Agreement agreement = compare_outputs(dtype, hD_gemmkit, hD_cublas, count_d, scale);
  Value check = Value::object();
  check["tolerance"] = bound;
  check["max_rel_diff_vs_cublas"] = agreement.max_rel;
  check["nonfinite"] = static_cast<std::uint64_t>(agreement.nonfinite);
  check["reference_samples"] = kReferenceSamples;
  check["gemmkit_max_rel_error_vs_fp64"] = gemmkit_ref_error;
  check["cublas_max_rel_error_vs_fp64"] = cublas_ref_error;
  if (!(cublas_ref_error <= bound)) {
    throw Failure("cuBLAS's own result is off the float64 reference by " + std::to_string(cublas_ref_error) +
                  " (bound " + std::to_string(bound) + "): the comparison itself is broken");
  }
  if (agreement.nonfinite > 0 || !(agreement.max_rel <= bound) || !(gemmkit_ref_error <= bound)) {
    const std::size_t w = agreement.worst;
    throw Failure("gemmkit's result is wrong: " + std::to_string(agreement.nonfinite) +
                  " non-finite elements, max relative difference to cuBLAS " + std::to_string(agreement.max_rel) +
                  " at (" + std::to_string(w / static_cast<std::size_t>(s.n)) + ", " +
                  std::to_string(w % static_cast<std::size_t>(s.n)) + "), max relative error to float64 " +
                  std::to_string(gemmkit_ref_error) + " (bound " + std::to_string(bound) + ")");
  }

  // 2. Warm-up long enough for the clocks to settle (>= warmup calls and >= warmup_ms per library, interleaved),
  //    then the batch size: a fixed --iters, or enough calls for one batch to take >= batch_ms.
  auto estimate_ms = [&] {
    return std::max(time_batch_ms(ctx.stream, 3, run_gemmkit), time_batch_ms(ctx.stream, 3, run_cublas));
  };
  const double first_estimate = estimate_ms();
  const int warmup = static_cast<int>(std::clamp(std::ceil(o.warmup_ms / first_estimate), double(o.warmup), 1e6));
  for (int i = 0; i < warmup; ++i) {
    run_gemmkit();
    run_cublas();
  }
  BENCH_CUDA(cudaStreamSynchronize(ctx.stream));
  const int iters =
      o.iters > 0 ? o.iters : static_cast<int>(std::clamp(std::ceil(o.batch_ms / estimate_ms()), 3.0, 100000.0));

  // 3. Timed batches, alternating which library goes first so both see the same clock and thermal state.
  Timing gemmkit, cublas;
  for (int r = 0; r < o.repeats; ++r) {
    if (r % 2 == 0) {
      gemmkit.ms.push_back(time_batch_ms(ctx.stream, iters, run_gemmkit));
      cublas.ms.push_back(time_batch_ms(ctx.stream, iters, run_cublas));
    } else {
      cublas.ms.push_back(time_batch_ms(ctx.stream, iters, run_cublas));
      gemmkit.ms.push_back(time_batch_ms(ctx.stream, iters, run_gemmkit));
    }
  }

  // 4. The result after all timed calls must still match.
  copy_to_host(hD_gemmkit, dD_gemmkit);
  const Agreement after = compare_outputs(dtype, hD_gemmkit, hD_cublas, count_d, scale);
  check["max_rel_diff_vs_cublas_after_timing"] = after.max_rel;
  if (after.nonfinite > 0 || !(after.max_rel <= bound)) {
    throw Failure("gemmkit's result changed during the timed runs: max relative difference to cuBLAS " +
                  std::to_string(after.max_rel) + ", " + std::to_string(after.nonfinite) + " non-finite elements");
  }

  const double flop = 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k);
  RowResult row;
  row.ratio = median(cublas.ms) / median(gemmkit.ms);
  row.json["warmup_calls"] = warmup;
  row.json["iters_per_batch"] = iters;
  row.json["batches"] = o.repeats;
  row.json["gemmkit"] = gemmkit.json(flop);
  row.json["cublas"] = cublas.json(flop);
  row.json["ratio"] = row.ratio;
  row.json["check"] = check;
  const double tf_gemmkit = flop / (median(gemmkit.ms) * 1e-3) / 1e12;
  const double tf_cublas = flop / (median(cublas.ms) * 1e-3) / 1e12;
  row.cells = {fixed(tf_gemmkit, 1),
               fixed(tf_cublas, 1),
               fixed(row.ratio, 3),
               fixed(median(gemmkit.ms), 3),
               fixed(median(cublas.ms), 3),
               gemmkit.spread() + " / " + cublas.spread(),
               std::to_string(iters) + "x" + std::to_string(o.repeats),
               "ok (" + scientific(agreement.max_rel) + ")"};
  return row;
}

SectionResult gemm_section(Context& ctx) {
  SectionResult result;
  Table table{{"dtype", "M x N x K", "gemmkit TFLOP/s", "cuBLAS TFLOP/s", "ratio", "gemmkit ms", "cuBLAS ms",
               "spread (max-min)/median", "calls x batches", "check (max rel diff)"},
              {}};
  Value rows = Value::array(), kernels = Value::object(), geomeans = Value::object();
  std::string geomean_lines;
  for (const gk::DataType dtype : ctx.options.dtypes) {
    const std::string type_name(gk::to_string(dtype));
    std::optional<gk::Gemm> plan;
    std::string plan_error;
    try {
      plan.emplace(default_plan(dtype, ctx));
      kernels[type_name] = plan->kernel_name();
    } catch (const std::exception& e) {
      plan_error = std::string("the default plan could not be built: ") + e.what();
    }
    double log_sum = 0.0;
    bool all_ok = true;
    for (const Shape& s : ctx.options.shapes) {
      std::printf("gemm %s %s ...\n", type_name.c_str(), s.text().c_str());
      std::fflush(stdout);
      Value row = Value::object();
      row["dtype"] = type_name;
      row["m"] = s.m;
      row["n"] = s.n;
      row["k"] = s.k;
      std::vector<std::string> cells = {type_name, s.text()};
      try {
        if (!plan_error.empty()) throw Failure(plan_error);
        row["kernel_name"] = planned_spec(*plan, s).name();  // the kernel run() picks
        RowResult measured = measure_row(ctx, *plan, dtype, s);
        row.update(measured.json);
        row["ok"] = true;
        cells.insert(cells.end(), measured.cells.begin(), measured.cells.end());
        log_sum += std::log(measured.ratio);
      } catch (const std::exception& e) {
        all_ok = false;
        result.ok = false;
        row["ok"] = false;
        row["error"] = e.what();
        std::fprintf(stderr, "gemmkit_bench: FAILED gemm %s %s: %s\n", type_name.c_str(), s.text().c_str(), e.what());
        cells.push_back("**FAILED**: " + std::string(e.what()));
        cells.resize(table.header.size(), "-");
        // A sticky CUDA error poisons the context: the remaining rows would fail the same way, loudly.
        (void)cudaGetLastError();
      }
      table.rows.push_back(cells);
      rows.push_back(row);
    }
    const auto n = static_cast<double>(ctx.options.shapes.size());
    if (all_ok && n > 0) {
      const double geomean = std::exp(log_sum / n);
      geomeans[type_name] = geomean;
      geomean_lines += "- " + type_name + ": geometric mean gemmkit/cuBLAS ratio over " +
                       std::to_string(ctx.options.shapes.size()) + " shapes = **" + fixed(geomean, 3) + "**\n";
    } else {
      geomeans[type_name] = nullptr;
      geomean_lines += "- " + type_name + ": no geometric mean (a row failed)\n";
    }
  }
  result.json["rows"] = rows;
  result.json["geomean_ratio"] = geomeans;
  result.json["default_kernels"] = kernels;  // plan.kernel_name(); each row names the kernel run() used
  result.markdown =
      "## GEMM throughput (D = A@B, row-major, f32 accumulate, beta 0)\n\n" + table.markdown() + "\n" + geomean_lines;
  return result;
}

}  // namespace bench
