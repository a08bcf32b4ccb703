// src/runtime/cuda_check.hpp: the one place CUDA runtime failures become CudaError.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "gemmkit/errors.hpp"

namespace gemmkit::runtime {

[[noreturn]] inline void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  throw CudaError(std::string(call) + " failed: " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) +
                      ") at " + file + ":" + std::to_string(line),
                  static_cast<int>(status));
}

}  // namespace gemmkit::runtime

#define GK_CUDA_CHECK(call)                                                        \
  do {                                                                             \
    cudaError_t gk_status_ = (call);                                               \
    if (gk_status_ != cudaSuccess) {                                               \
      ::gemmkit::runtime::throw_cuda_error(gk_status_, #call, __FILE__, __LINE__); \
    }                                                                              \
  } while (0)
