// src/tuning/choice.hpp: run()'s one hook into the tuning database: the tuned configuration for a problem, if any.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "gemmkit/tuning.hpp"
#include "selection/tuned_memo.hpp"

namespace gemmkit::tuning {

// The problem as the user wrote it (A is m x k, B is k x n): the database's shapes.
struct Problem {
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
};

// One plan's tuned_choice answers by problem (kept with its kernel choices).
using LookupMemo = selection::TunedMemo;

// The index into `tiles` (a plan's configurations for one alignment triple, `base` being its kernel without a tile)
// of the configuration the tuning database holds for this problem on the current device, when that kernel is in the
// kernel cache (or loaded); nullopt otherwise, and then run() chooses by its heuristic. Reads the database once per
// process (a snapshot, refreshed after this process writes it); `memo` (the plan's, for these `tiles`) answers a
// repeated problem with a map lookup.
std::optional<std::size_t> tuned_choice(const KernelSpec& base, const std::vector<TileDescription>& tiles,
                                        const Problem& problem, LookupMemo& memo);

// tuned_choice's decision over given entries and identity; `built` says whether a kernel can run without a compile.
std::optional<std::size_t> choose(const std::vector<Entry>& entries, const Identity& identity, const KernelSpec& base,
                                  const std::vector<TileDescription>& tiles, const Problem& problem,
                                  const std::function<bool(const KernelSpec&)>& built);

// Whether the kernel is in the disk cache (no build). Memoised per process once true.
bool kernel_built(const KernelSpec& spec);

// Drops this process's snapshot of the database (called after every write).
void forget_snapshot();

}  // namespace gemmkit::tuning
