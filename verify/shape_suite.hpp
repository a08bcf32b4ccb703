// verify/shape_suite.hpp: the benchmark's shape suite, by group (its problems: src/catalog/suite_shapes.hpp); shared
// by gemmkit_bench --only suite and gemmkit tune --suite.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gemmkit::verify {

// One problem of the suite: D (m x n) = A (m x k) @ B (k x n).
struct SuiteShape {
  std::string group;
  std::int64_t m, n, k;
  std::string text() const;  // "MxNxK"
};

// The group of odd extents: packed row-major operands (lda = k, ldb = n, ldd = n) fit no tensor-core
// kernel's vector, so the default plan runs them on the CUTLASS 2.x SIMT kernels.
inline constexpr std::string_view kOddGroup = "odd";

// Which groups a caller takes. TensorCore: every group but odd (gemmkit tune --suite tunes tensor-core kernels, and
// the tests pin the heuristic's tensor-core choices over the suite). WithOdd: odd too (gemmkit_bench's suite).
enum class SuiteGroups { TensorCore, WithOdd };

// The groups in order: today (the four original benchmark shapes), square (1024-16384 with 3000, 6144, 12288),
// long_k (small M, N; long K), llm16 / llm128 / llm1024 / llm8192 (Llama-3 8B/70B projections N x K at M = 16 ...
// 8192), skinny (M = 1 and 8) and, with WithOdd, odd (777x1999x3001, 1001x1003x1005, 4095x4097x4099,
// 8191x8193x1023).
const std::vector<std::string>& suite_groups(SuiteGroups which = SuiteGroups::TensorCore);

// The shapes of the groups named in `groups` (comma-separated; "llm" stands for the four llm groups; "" or "all": every
// group of `which`), in suite order. Throws std::invalid_argument naming an unknown group and listing the known ones.
std::vector<SuiteShape> shape_suite(const std::string& groups = "", SuiteGroups which = SuiteGroups::TensorCore);

}  // namespace gemmkit::verify
