// src/tuning/tuner.cpp: the search behind Gemm::tune: a bounded candidate set compiled in parallel, each timed on the
// real problem and checked against the heuristic's kernel, the fastest stored in the tuning database.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <functional>
#include <vector>

#include "catalog/catalog.hpp"
#include "gemmkit/compiler.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/jit.hpp"
#include "runtime/cuda_check.hpp"
#include "tuning/choice.hpp"
#include "tuning/tuner.hpp"
#include "util/elements.hpp"

namespace gemmkit::tuning {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void check_tune_options(const TuneOptions& o) {
  if (o.max_candidates < 1) {
    throw ConfigError("TuneOptions::max_candidates must be at least 1; got " + std::to_string(o.max_candidates) + ".");
  }
  if (o.rounds < 1 || o.warmup_calls < 0) {
    throw ConfigError("TuneOptions: rounds must be at least 1 and warmup_calls at least 0.");
  }
  if (!(o.batch_ms > 0) || !(o.warmup_ms >= 0) || !(o.time_budget_s > 0)) {
    throw ConfigError("TuneOptions: batch_ms and time_budget_s must be positive and warmup_ms not negative.");
  }
  if (!(o.min_gain >= 0 && o.min_gain < 1)) {
    throw ConfigError(
        "TuneOptions::min_gain is a fraction in [0, 1) (0.03: 3 % faster than the heuristic's choice); "
        "got " +
        std::to_string(o.min_gain) + ".");
  }
}

// How far two kernels' results may differ, relative to max(|x|, rms of the result): a few units in the last place of
// the coarser of D and the accumulator, growing with sqrt(K) (the kernels may sum K in different orders or splits).
double tolerance(DataType d, DataType accumulator, std::int64_t k) {
  auto eps = [](DataType t) {
    switch (t) {
      case DataType::f16: return 0x1p-10;
      case DataType::bf16: return 0x1p-7;
      case DataType::f32:
      case DataType::tf32: return 0x1p-23;
      case DataType::f64: return 0x1p-52;
      default: return 0.0;  // integers: exact
    }
  };
  return 4.0 * std::max(eps(d), eps(accumulator)) * (1.0 + std::sqrt(static_cast<double>(k)) / 16.0);
}

// D's addressed elements (its whole span, gaps included: no kernel writes them) copied to the host.
std::vector<std::byte> copy_output(const void* data, std::int64_t span, DataType type, cudaStream_t stream) {
  std::vector<std::byte> host(static_cast<std::size_t>(span) * static_cast<std::size_t>(bits_of(type) / 8));
  GK_CUDA_CHECK(cudaMemcpyAsync(host.data(), data, host.size(), cudaMemcpyDeviceToHost, stream));
  GK_CUDA_CHECK(cudaStreamSynchronize(stream));
  return host;
}

// The largest difference of `got` from `want`, relative to max(|want|, rms of want), over at most 2^24 elements
// spread evenly.
double max_difference(DataType type, const std::vector<std::byte>& got, const std::vector<std::byte>& want) {
  const std::size_t count = want.size() / static_cast<std::size_t>(bits_of(type) / 8);
  const std::size_t step = std::max<std::size_t>(1, count >> 24);
  double sum_squares = 0.0;
  std::size_t n = 0;
  for (std::size_t i = 0; i < count; i += step, ++n) {
    const double w = util::element_value(type, want.data(), i);
    if (std::isfinite(w)) sum_squares += w * w;
  }
  const double rms = n == 0 ? 0.0 : std::sqrt(sum_squares / static_cast<double>(n));
  double worst = 0.0;
  for (std::size_t i = 0; i < count; i += step) {
    const double g = util::element_value(type, got.data(), i), w = util::element_value(type, want.data(), i);
    if (std::isnan(g) != std::isnan(w)) return INFINITY;
    if (std::isnan(w) || g == w) continue;
    worst = std::max(worst, std::fabs(g - w) / std::max({std::fabs(w), rms, 1e-30}));
  }
  return worst;
}

// Milliseconds per call of each of `calls`: each warmed up (>= warmup_calls and >= warmup_ms of untimed calls) and
// sized to batches of about batch_ms; then `rounds` rounds, each timing one batch of every call in turn (CUDA events
// on the stream); the median per call. Interleaved, the GPU's clock and thermal drift falls on every candidate
// alike, where timed one after another the same kernel reads several percent apart.
std::vector<double> time_calls(const std::vector<std::function<void()>>& calls, const TuneOptions& o) {
  cudaEvent_t start = nullptr, stop = nullptr;
  GK_CUDA_CHECK(cudaEventCreate(&start));
  GK_CUDA_CHECK(cudaEventCreate(&stop));
  auto batch_ms = [&](const std::function<void()>& call, int iters) {
    GK_CUDA_CHECK(cudaEventRecord(start, o.stream));
    for (int i = 0; i < iters; ++i) call();
    GK_CUDA_CHECK(cudaEventRecord(stop, o.stream));
    GK_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.f;
    GK_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return static_cast<double>(ms) / iters;
  };
  try {
    std::vector<int> iters;
    for (const auto& call : calls) {
      double estimate = batch_ms(call, std::max(1, o.warmup_calls));
      for (double spent = estimate * std::max(1, o.warmup_calls); spent < o.warmup_ms;) {
        const int n = static_cast<int>(std::clamp(std::ceil(o.warmup_ms / estimate / 4), 1.0, 10000.0));
        estimate = batch_ms(call, n);
        spent += estimate * n;
      }
      iters.push_back(static_cast<int>(std::clamp(std::ceil(o.batch_ms / estimate), 1.0, 10000.0)));
    }
    std::vector<std::vector<double>> ms(calls.size());
    for (int r = 0; r < o.rounds; ++r) {
      for (std::size_t c = 0; c < calls.size(); ++c) ms[c].push_back(batch_ms(calls[c], iters[c]));
    }
    std::vector<double> medians;
    for (auto& m : ms) {
      std::nth_element(m.begin(), m.begin() + static_cast<std::ptrdiff_t>(m.size() / 2), m.end());
      medians.push_back(m[m.size() / 2]);
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return medians;
  } catch (...) {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    throw;
  }
}

}  // namespace

void check_options(const TuneOptions& o) {
  check_tune_options(o);
}

std::vector<std::size_t> candidate_indices(const selection::PlanCore& core, const selection::KernelChoices& choices,
                                           const selection::ProblemKey& p, int sm_count, const TuneOptions& options) {
  check_options(options);
  if (core.config.tile) {
    throw ConfigError(
        "tune() chooses among the plan's configurations, but this plan has one set (set_tile_description or "
        "compile with a tile); tune a plan without one.");
  }
  const bool swap = core.cache().transposed;  // the kernel sees D^T's shape, as in choose_tile
  const catalog::ProblemShape shape{swap ? p.n : p.m, swap ? p.m : p.n, p.k, p.batch};
  return catalog::tuning_candidates(choices.tiles, choices.base, shape, sm_count,
                                    static_cast<std::size_t>(options.max_candidates));
}

TuneResult search(const Search& job, const TuneOptions& options) {
  const auto start = Clock::now();
  auto say = [&](const std::string& line) {
    if (options.progress) options.progress(line);
  };
  const selection::KernelChoices& choices = job.choices;
  const selection::ProblemKey& p = job.problem;
  const std::vector<std::size_t>& indices = job.indices;
  TuneResult result;
  std::vector<KernelSpec> specs;
  for (const std::size_t i : indices) {
    specs.push_back(choices.spec(i));
    TuneCandidate candidate;
    candidate.tile = choices.tiles[i];
    candidate.kernel_name = specs.back().name();
    result.candidates.push_back(candidate);
  }
  say("compiling " + std::to_string(specs.size()) + " candidates (" + std::to_string(max_parallel_compiles()) +
      " at a time) ...");
  std::vector<std::string> compile_errors(specs.size());
  try {
    (void)compile_many(specs);
  } catch (const CompileError&) {
    for (std::size_t c = 0; c < specs.size(); ++c) {  // find which ones fail (the others are cache hits now)
      try {
        (void)build_kernel(specs[c]);
      } catch (const CompileError& e) {
        compile_errors[c] = std::string("compile failed: ") + e.what();
      }
    }
    if (!compile_errors[0].empty()) throw;  // the kernel run() uses without tuning must build
  }
  say("compiled in " + std::to_string(static_cast<int>(seconds_since(start))) + " s");

  // The heuristic's kernel (candidate 0) gives the reference result every other candidate must match.
  std::vector<std::byte> reference;
  const double bound = tolerance(job.d_type, job.accumulator, p.k);
  // Each candidate runs once and is checked; those that pass are timed together (time_calls).
  std::vector<std::size_t> timed;
  std::vector<std::function<void()>> calls;
  for (std::size_t c = 0; c < result.candidates.size(); ++c) {
    TuneCandidate& candidate = result.candidates[c];
    if (!compile_errors[c].empty()) {
      candidate.error = compile_errors[c];
      continue;
    }
    if (c > 0 && seconds_since(start) > options.time_budget_s) {
      candidate.error = "over the time budget";
      continue;
    }
    const std::function<void()> call = job.call_with(candidate.tile);
    try {
      call();
      const std::vector<std::byte> out = copy_output(job.d_data, job.d_span, job.d_type, options.stream);
      if (c == 0) {
        reference = out;
      } else if (const double difference = max_difference(job.d_type, out, reference); !(difference <= bound)) {
        candidate.error = "wrong result: differs from the heuristic's kernel by " + std::to_string(difference) +
                          " (relative; bound " + std::to_string(bound) + ")";
        continue;
      }
      timed.push_back(c);
      calls.push_back(call);
    } catch (const CudaError&) {
      throw;  // the context may be unusable: stop
    } catch (const Error& e) {
      if (c == 0) throw;
      candidate.error = e.what();
    }
  }
  const std::vector<double> ms = time_calls(calls, options);
  for (std::size_t t = 0; t < timed.size(); ++t) {
    TuneCandidate& candidate = result.candidates[timed[t]];
    candidate.ms = ms[t];
    candidate.ok = true;
    say(candidate.kernel_name + ": " + std::to_string(candidate.ms) + " ms");
  }
  result.heuristic_ms = result.candidates[0].ms;
  result.best = tuning_winner(result.candidates, options.min_gain);
  result.database = tuning::Database::default_path();
  if (options.store && !result.database.empty()) {
    tuning::Entry entry;
    entry.identity = tuning::identity_of(job.device);
    entry.plan = tuning::plan_key(choices.base);
    entry.m = p.m;
    entry.n = p.n;
    entry.k = p.k;
    entry.batch = p.batch;
    entry.tile = tuning::tile_key(result.winner().tile);
    entry.kernel_name = result.winner().kernel_name;
    entry.ms = result.winner().ms;
    entry.heuristic_ms = result.heuristic_ms;
    tuning::Database(result.database).put(entry);
    result.stored = true;
  }
  result.seconds = seconds_since(start);
  return result;
}

}  // namespace gemmkit::tuning

namespace gemmkit {

std::size_t tuning_winner(const std::vector<TuneCandidate>& candidates, double min_gain) {
  std::size_t fastest = 0;
  for (std::size_t c = 1; c < candidates.size(); ++c) {
    if (candidates[c].ok && (!candidates[fastest].ok || candidates[c].ms < candidates[fastest].ms)) fastest = c;
  }
  if (fastest == 0 || !candidates[0].ok) return fastest;
  return candidates[fastest].ms <= candidates[0].ms * (1.0 - min_gain) ? fastest : 0;
}

void to_json(nlohmann::ordered_json& json, const TuneResult& r) {
  nlohmann::ordered_json candidates = nlohmann::ordered_json::array();
  for (const TuneCandidate& c : r.candidates) {
    nlohmann::ordered_json item = {{"kernel_name", c.kernel_name}, {"ok", c.ok}, {"tile", c.tile}};
    if (c.ok) item["ms"] = c.ms;
    if (!c.error.empty()) item["error"] = c.error;
    candidates.push_back(item);
  }
  json = {{"best", r.winner().kernel_name},
          {"best_ms", r.winner().ms},
          {"heuristic", r.candidates.at(0).kernel_name},
          {"heuristic_ms", r.heuristic_ms},
          {"speedup", r.winner().ms > 0 ? r.heuristic_ms / r.winner().ms : 0.0},
          {"seconds", r.seconds},
          {"stored", r.stored},
          {"database", r.database},
          {"candidates", candidates}};
}

}  // namespace gemmkit
