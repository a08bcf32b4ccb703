// tests/support/gpu_test.hpp: what every gpu-tier test file starts with: skip without a device, and its compute
// capability.
#pragma once

#include <gtest/gtest.h>

#include "gemmkit/device.hpp"

#define REQUIRE_GPU()                                                                \
  do {                                                                               \
    if (gemmkit::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible"; \
  } while (0)

// The current GPU's compute capability (e.g. 90).
inline int device_cc() {
  return gemmkit::device_info(gemmkit::current_device()).cc;
}
