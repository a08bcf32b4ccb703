// src/catalog/suite_shapes.hpp: gemmkit's representative problems, by group: the benchmark's shape suite (verify/),
// what `gemmkit tune --suite` tunes, and the problems whose run-time kernels the defaults pack holds (api/packs.cpp).
// Header-only: verify/ reads it without linking the library's internals.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace gemmkit::catalog {

struct SuiteProblem {
  std::string group;
  std::int64_t m, n, k;
};

// Every group's problems, in suite order: today (the four original benchmark shapes), square, long_k (small M and N,
// long K), llm16 / llm128 / llm1024 / llm8192 (Llama-3 8B and 70B projections at M = 16 ... 8192), skinny (the same
// projections at M = 1 and 8) and odd (extents that fit no tensor-core kernel's vector).
inline std::vector<SuiteProblem> suite_problems() {
  // Llama-3 8B and 70B projections, N x K: attention out/qkv-sized, MLP up/gate and down, 70B's MLP.
  constexpr std::int64_t kProjections[][2] = {{4096, 4096}, {14336, 4096}, {4096, 14336}, {28672, 8192}, {8192, 28672}};
  std::vector<SuiteProblem> out;
  for (auto [m, n, k] :
       {std::array<std::int64_t, 3>{2400, 3232, 4096}, {4096, 4096, 4096}, {8192, 8192, 8192}, {16384, 16384, 16384}}) {
    out.push_back({"today", m, n, k});
  }
  for (std::int64_t s : {1024, 2048, 3000, 4096, 6144, 8192, 12288, 16384}) out.push_back({"square", s, s, s});
  for (auto [m, n, k] : {std::array<std::int64_t, 3>{512, 512, 16384}, {1024, 1024, 32768}, {128, 4096, 16384}}) {
    out.push_back({"long_k", m, n, k});
  }
  for (std::int64_t m : {16, 128, 1024, 8192}) {
    for (const auto& nk : kProjections) out.push_back({"llm" + std::to_string(m), m, nk[0], nk[1]});
  }
  for (std::int64_t m : {1, 8}) {
    for (const auto& nk : kProjections) out.push_back({"skinny", m, nk[0], nk[1]});
  }
  // The shapes python/bench/odd_shapes.py times against torch.matmul.
  for (auto [m, n, k] :
       {std::array<std::int64_t, 3>{777, 1999, 3001}, {1001, 1003, 1005}, {4095, 4097, 4099}, {8191, 8193, 1023}}) {
    out.push_back({"odd", m, n, k});
  }
  return out;
}

}  // namespace gemmkit::catalog
