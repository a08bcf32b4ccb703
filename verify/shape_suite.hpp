// verify/shape_suite.hpp: the benchmark's shape suite (issue 15), by group; shared by gemmkit_bench --only suite and
// gemmkit tune --suite.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gemmkit::verify {

// One problem of the suite: D (m x n) = A (m x k) @ B (k x n).
struct SuiteShape {
  std::string group;
  std::int64_t m, n, k;
  std::string text() const;  // "MxNxK"
};

// The groups in order: today (the four original benchmark shapes), square (1024-16384 with 3000, 6144, 12288),
// long_k (small M, N; long K), llm16 / llm128 / llm1024 / llm8192 (Llama-3 8B/70B projections N x K at M = 16 ...
// 8192) and skinny (M = 1 and 8).
const std::vector<std::string>& suite_groups();

// The shapes of the groups named in `groups` (comma-separated; "llm" stands for the four llm groups; "" or "all": every
// group), in suite order. Throws std::invalid_argument naming an unknown group and listing the known ones.
std::vector<SuiteShape> shape_suite(const std::string& groups = "");

}  // namespace gemmkit::verify
