// tests/support/grouped_probe_reference.cpp: the grouped probe's host side: element encodings, small-integer groups
// in an arena, and the float64 reference every D is checked against (all groups in parallel).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gemmkit/abi.h"
#include "grouped_probe.hpp"

namespace grouped_probe {

// ---- Elements ---------------------------------------------------------------------------------------------------

std::size_t element_bytes(int dtype) {
  switch (dtype) {
    case GK_DTYPE_F16:
    case GK_DTYPE_BF16: return 2;
    case GK_DTYPE_F32:
    case GK_DTYPE_TF32: return 4;
    default:
      throw Skip(std::string("the probe handles f16, bf16, f32 and tf32 operands, not dtype ") + std::to_string(dtype));
  }
}

void encode(int dtype, double value, unsigned char* at) {
  const float f = static_cast<float>(value);
  if (dtype == GK_DTYPE_F16) {
    const __half h = __float2half_rn(f);
    std::memcpy(at, &h, sizeof h);
  } else if (dtype == GK_DTYPE_BF16) {
    const __nv_bfloat16 b = __float2bfloat16_rn(f);
    std::memcpy(at, &b, sizeof b);
  } else {
    std::memcpy(at, &f, sizeof f);  // tf32 operands live in f32 storage
  }
}

double decode(int dtype, const unsigned char* at) {
  if (dtype == GK_DTYPE_F16) {
    __half h;
    std::memcpy(&h, at, sizeof h);
    return __half2float(h);
  }
  if (dtype == GK_DTYPE_BF16) {
    __nv_bfloat16 b;
    std::memcpy(&b, at, sizeof b);
    return __bfloat162float(b);
  }
  float f;
  std::memcpy(&f, at, sizeof f);
  return f;
}

namespace {

double round_to(int dtype, double value) {
  unsigned char bytes[8];
  encode(dtype, value, bytes);
  return decode(dtype, bytes);
}

// Relative rounding step of an output element type.
double epsilon(int dtype) {
  return dtype == GK_DTYPE_F16 ? 0x1p-10 : dtype == GK_DTYPE_BF16 ? 0x1p-7 : 0x1p-20;
}

// ---- The reference ----------------------------------------------------------------------------------------------

double activate(const Epilogue& e, double x) {
  const std::string& a = e.activation;
  if (a == "identity") return x;
  if (a == "relu") return x > 0 ? x : 0;
  if (a == "leaky_relu") return x > 0 ? x : x * e.slope;
  if (a == "sigmoid") return 1 / (1 + std::exp(-x));
  if (a == "silu") return x / (1 + std::exp(-x));
  if (a == "tanh") return std::tanh(x);
  if (a == "gelu") return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
  if (a == "gelu_tanh") return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
  if (a == "hardswish") return x * std::clamp(x + 3, 0.0, 6.0) / 6;
  throw Skip("the probe has no reference for activation '" + a + "'");
}

// Identity, ReLU and LeakyReLU (slope 0.25) of small integers are exact in f32; the others are compared within a
// couple of output rounding steps.
bool exact(const Epilogue& e) {
  return e.activation == "identity" || e.activation == "relu" || e.activation == "leaky_relu";
}

// Checks one group's D: the m x n result where A, B, C define one (m, n, k all > 0), the sentinel everywhere else in
// its allocation. Returns the first mismatch, or "".
std::string check_group(const Arena& arena, const Group& g, const Epilogue& e) {
  const bool computed = g.m > 0 && g.n > 0 && g.k > 0;
  std::vector<double> a, bt;  // A row by row, B column by column: contiguous dot products
  if (computed) {
    a.resize(static_cast<std::size_t>(g.m) * g.k);
    bt.resize(static_cast<std::size_t>(g.n) * g.k);
    for (int i = 0; i < g.m; ++i)
      for (int p = 0; p < g.k; ++p) a[static_cast<std::size_t>(i) * g.k + p] = arena.get(g.A, g.A.index(i, p));
    for (int j = 0; j < g.n; ++j)
      for (int p = 0; p < g.k; ++p) bt[static_cast<std::size_t>(j) * g.k + p] = arena.get(g.B, g.B.index(p, j));
  }
  const int outer = g.D.row_major ? g.D.rows : g.D.cols;
  for (int o = 0; o < outer; ++o) {
    for (int64_t inner = 0; inner < g.D.ld; ++inner) {
      const int i = g.D.row_major ? o : static_cast<int>(inner);
      const int j = g.D.row_major ? static_cast<int>(inner) : o;
      const double got = arena.get(g.D, static_cast<std::size_t>(o) * g.D.ld + inner);
      const bool inside = computed && i < g.m && j < g.n;
      double want = kSentinel, tolerance = 0;
      if (inside) {
        double dot = 0;
        for (int p = 0; p < g.k; ++p)
          dot += a[static_cast<std::size_t>(i) * g.k + p] * bt[static_cast<std::size_t>(j) * g.k + p];
        const double c = g.has_c ? arena.get(g.C, g.C.index(i, j)) : 0.0;
        const double value = activate(e, e.alpha * dot + e.beta * c);
        want = exact(e) ? round_to(g.D.dtype, value) : value;
        tolerance = exact(e) ? 0 : 2 * epsilon(g.D.dtype) * std::fabs(value) + 1e-3;
      }
      if (std::fabs(got - want) > tolerance || std::isnan(got)) {
        char text[200];
        std::snprintf(text, sizeof text, "%dx%dx%d: D(%d, %d) = %g, expected %g%s", g.m, g.n, g.k, i, j, got, want,
                      inside ? "" : " (outside the result: must stay untouched)");
        return text;
      }
    }
  }
  return {};
}

}  // namespace

int pick(std::mt19937_64& rng, int lo, int hi) {
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

int64_t round_up(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

Group make_group(Arena& arena, const gk_grouped_info& info, int m, int n, int k, bool has_c, bool pad,
                 std::mt19937_64& rng) {
  auto matrix = [&](int rows, int cols, int layout, int alignment, int dtype) {
    const bool row_major = layout == GK_ROW_MAJOR;
    const int64_t ld = round_up(std::max(row_major ? cols : rows, 1), alignment) + (pad ? alignment : 0);
    return arena.add(rows, cols, ld, row_major, dtype);
  };
  Group g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.has_c = has_c;
  g.A = matrix(m, k, info.layout_a, info.alignment_a, info.element_a);
  g.B = matrix(k, n, info.layout_b, info.alignment_b, info.element_b);
  g.C = matrix(has_c ? m : 0, has_c ? n : 0, info.layout_c, info.alignment_c, info.element_c);
  g.D = matrix(m, n, info.layout_c, info.alignment_d, info.element_d);
  arena.fill(g.A, [&] { return pick(rng, -2, 2); });
  arena.fill(g.B, [&] { return pick(rng, -2, 2); });
  arena.fill(g.C, [&] { return pick(rng, -3, 3); });
  arena.fill(g.D, [] { return kSentinel; });
  return g;
}

std::string check_groups(const Arena& arena, const std::vector<Group>& groups, const Epilogue& e) {
  std::vector<std::string> errors(groups.size());
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> workers;
  const unsigned threads = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), 32));
  for (unsigned t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      for (std::size_t g = next++; g < groups.size(); g = next++) errors[g] = check_group(arena, groups[g], e);
    });
  }
  for (auto& worker : workers) worker.join();
  for (std::size_t g = 0; g < groups.size(); ++g) {
    if (!errors[g].empty()) return "group " + std::to_string(g) + " " + errors[g];
  }
  return {};
}

}  // namespace grouped_probe
