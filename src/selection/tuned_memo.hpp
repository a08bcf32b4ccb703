// src/selection/tuned_memo.hpp: one plan's answers from the tuning database, by problem, kept beside its kernels.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>

namespace gemmkit::selection {

// The tuning database's answers for one list of configurations, by problem, for one snapshot of the database: a
// search builds JSON keys of the plan and of every configuration, which costs far more than a kernel launch.
struct TunedMemo {
  std::mutex mutex;
  std::uint64_t snapshot = 0;
  std::map<std::array<std::int64_t, 4>, std::optional<std::size_t>> choices;  // (m, n, k, batch) -> answer
};

}  // namespace gemmkit::selection
