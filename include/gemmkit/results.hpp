// include/gemmkit/results.hpp: the plain values plans hand back or take beside tensors: a kernel's generated source,
// a compiled kernel, a lent workspace, and autotuning's options and results.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "gemmkit/kernel_spec.hpp"

namespace gemmkit {

// The text of one translation unit: CUTLASS includes, one kernel instantiation, the ABI entry points.
struct KernelSource {
  std::string kernel_name;
  std::string arch_flag;  // e.g. "sm_90a"
  std::string text;
  // Whether its family can build it as a cubin and a host module (compiler.hpp's split path) instead of one module.
  bool splittable = false;
  // The family's name (enums.hpp, e.g. "sm90_collective"): the manifest records it so that build times can be told
  // per family; not in the cache key (the text already depends on it).
  std::string family = "";
};

// What a build produced: which kernel, where it is cached, and whether nvcc ran.
struct CompiledKernel {
  std::string kernel_name;
  std::string module_path;
  std::string cubin_path;  // built on the split path (GEMMKIT_SPLIT_BUILD): the cubin module_path launches; else empty
  std::string cache_key;
  bool cache_hit = false;
  double build_seconds = 0.0;
};

// A device buffer the caller lends to one launch as its workspace (e.g. from a framework's allocator).
struct Workspace {
  void* data = nullptr;
  std::size_t bytes = 0;
};

// How Gemm::tune searches. The candidates are the plan's configurations (tile_descriptions() for the problem's
// alignments, Stream-K included) ranked by a cheap cost model; the run-time heuristic's choice is always one of them.
struct TuneOptions {
  int max_candidates = 12;       // configurations compiled and timed, at most
  int warmup_calls = 3;          // untimed calls per candidate, at least
  double warmup_ms = 30.0;       // ... and at least this long per candidate
  int rounds = 5;                // rounds of one timed batch per candidate (interleaved); the median is kept
  double batch_ms = 10.0;        // target length of one timed batch
  double time_budget_s = 110.0;  // candidates not yet checked when this is spent are skipped (compiles included)
  double min_gain = 0.03;  // a candidate replaces the heuristic's choice only when this much faster (tuning_winner)
  double alpha = 1.0, beta = 0.0;
  cudaStream_t stream = nullptr;  // where the candidates run
  bool store = true;              // write the winner to the tuning database
  // Progress lines ("compiling 12 candidates ...", one per timed candidate); none when empty.
  std::function<void(const std::string&)> progress;
};

// One configuration tried: its time (median ms per call), or why it was left out.
struct TuneCandidate {
  TileDescription tile;
  std::string kernel_name;
  double ms = 0.0;
  bool ok = false;
  std::string error;  // compile failure, refused problem, wrong result, or "over the time budget"
};

struct TuneResult {
  std::vector<TuneCandidate> candidates;  // the heuristic's choice first
  std::size_t best = 0;                   // index into candidates
  double heuristic_ms = 0.0;              // the kernel run() picked before tuning
  double seconds = 0.0;                   // the whole search, compiles included
  bool stored = false;                    // the winner is in the tuning database
  std::string database;                   // its path
  const TuneCandidate& winner() const { return candidates.at(best); }
};
}  // namespace gemmkit
