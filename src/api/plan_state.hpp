// src/api/plan_state.hpp: the run-path state of a Gemm plan, shared by Gemm and GroupedGemm: the checked problem,
// the kernels one alignment triple may use, and the per-configuration cache of them.
#pragma once

#include <array>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "api/kernel_slots.hpp"
#include "api/tensor_check.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"
#include "tuning/choice.hpp"

namespace gemmkit {

// Per-plan state of the run path: allowed alignments and the modules already resolved per alignment triple.
struct Gemm::Problem {
  detail::MatrixOperand a, b, c, d;
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  int alignment_a = 0, alignment_b = 0, alignment_c = 0;
};

// The kernels run() may choose from for one alignment triple: its valid configurations and those loaded so far.
struct Gemm::KernelChoices {
  int a, b, c;
  KernelSpec base;
  std::vector<TileDescription> tiles;
  KernelSlots<KernelModule> slots;  // parallel to tiles, loaded on first use
  std::unique_ptr<tuning::LookupMemo> tuned = std::make_unique<tuning::LookupMemo>();  // run()'s database answers
  // The parallel split-K kernels of this triple (SM90), made on first use.
  std::unique_ptr<KernelChoices> parallel = nullptr;
  int stages = 0;  // non-zero: every tile at this pipeline depth (Conv2d's short reductions), not the family's own
  // run()'s shape heuristics' answer for the last problem (m, n, k, batch, SM count) they saw, under RunCache::mutex:
  // they cost about 2 us a call, and a loop of runs repeats one shape.
  struct LastChoice {
    std::array<std::int64_t, 5> problem;
    RunChoice choice;
  };
  std::optional<LastChoice> last_choice = std::nullopt;

  KernelSpec spec(std::size_t choice) const {
    KernelSpec s = base;
    s.tile = tiles[choice];
    return s;
  }
};

// Made afresh whenever the configuration changes. run() may be called from many threads at once: the alignment
// lists are fixed at construction, the kernel choices grow under the mutex and never move (a deque keeps references).
struct Gemm::RunCache {
  std::vector<int> alignments_a, alignments_b, alignments_c;
  bool transposed = false;  // the kernel computes D^T = B^T A^T (see Family::computes_transposed)
  int kernel_cc = 0;        // the kernel generation of the plan's family
  std::mutex mutex;
  std::deque<KernelChoices> choices;
  // Conv2d (kernel_cc 90): the GEMM plan a 1x1, unit-stride, unpadded convolution runs as, one per leaky_relu slope
  // (a run-time value the GEMM plan holds); made on first use, under the mutex, and kept until the next change.
  std::vector<std::pair<double, std::unique_ptr<Gemm>>> pointwise;
  // Conv2d (kernel_cc 90, not pinned): the CUTLASS 2.x plan for the problems SM90 conv kernels cannot run (a Conv2d).
  std::unique_ptr<Gemm> cutlass2_twin;
};

// The plan that takes a problem: `own` when check(own) passes; else, where `may_use_twin`, the plan twin() makes or
// finds (a Gemm's or Conv2d's CUTLASS 2.x twin) when check passes on it; otherwise own's error, rethrown.
template <class Plan, class Check, class Twin>
Plan& plan_taking(Plan& own, bool may_use_twin, const Check& check, const Twin& twin) {
  std::exception_ptr own_error;
  try {
    check(own);
    return own;
  } catch (const Error&) {
    if (!may_use_twin) throw;
    own_error = std::current_exception();
  }
  try {
    Plan& other = twin();
    check(other);
    return other;
  } catch (const Error&) {
    std::rethrow_exception(own_error);
  }
}

}  // namespace gemmkit
