// src/tuning/tuner.hpp: the search behind Gemm::tune, over one plan's kernel choices for one problem.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "gemmkit/results.hpp"
#include "selection/plan_core.hpp"

namespace gemmkit::tuning {

// One search: the configurations to try (indices into choices.tiles, the heuristic's first), D's memory to compare
// their results by, and how to run the problem with one configuration.
struct Search {
  const selection::KernelChoices& choices;
  selection::ProblemKey problem;
  std::vector<std::size_t> indices;
  const void* d_data;
  std::int64_t d_span;  // D's elements from the first to one past the last addressed
  DataType d_type, accumulator;
  int device;
  // A call that runs the problem with that configuration, asynchronously on the options' stream.
  std::function<std::function<void()>(const TileDescription&)> call_with;
};

// Throws ConfigError for options out of range.
void check_options(const TuneOptions& options);
// The configurations a search tries for a problem (indices into choices.tiles, the heuristic's first); ConfigError for
// a plan with a tile set.
std::vector<std::size_t> candidate_indices(const selection::PlanCore& core, const selection::KernelChoices& choices,
                                           const selection::ProblemKey& problem, int sm_count,
                                           const TuneOptions& options);
// Compiles the candidates in parallel, runs and checks each against the first, times those that pass (interleaved
// rounds, CUDA events) and stores the winner in the tuning database when options.store.
TuneResult search(const Search& job, const TuneOptions& options);

}  // namespace gemmkit::tuning
