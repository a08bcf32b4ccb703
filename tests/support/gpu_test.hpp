// tests/support/gpu_test.hpp: what every gpu-tier test file starts with: skip without a device, and its compute
// capability.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>

#include "gemmkit/device.hpp"
#include "verify/host_matrix.hpp"

#define REQUIRE_GPU()                                                                \
  do {                                                                               \
    if (gemmkit::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible"; \
  } while (0)

// The current GPU's compute capability (e.g. 90).
inline int device_cc() {
  return gemmkit::device_info(gemmkit::current_device()).cc;
}

// Skip below compute capability `cc` (a literal), saying what needs it: REQUIRE_CC(90, "FP8 GEMMs").
#define REQUIRE_CC(cc, what)                                                                     \
  do {                                                                                           \
    REQUIRE_GPU();                                                                               \
    if (device_cc() < (cc)) GTEST_SKIP() << what << " need an SM" #cc " GPU (H100/H200 for 90)"; \
  } while (0)

// Halves in [-4, 4] in every batch: e4m3 (3 mantissa bits) and e5m2 (2) hold every one of them exactly, so FP8
// products and their f32 sums are exact too.
inline void fill_halves(gemmkit::verify::HostMatrix& m, std::uint64_t seed) {
  m.fill_integers(seed, -8, 8);
  for (std::int64_t b = 0; b < m.batch(); ++b)
    for (std::int64_t r = 0; r < m.rows(); ++r)
      for (std::int64_t c = 0; c < m.cols(); ++c) m.set(b, r, c, m.get(b, r, c) / 2.0);
}
