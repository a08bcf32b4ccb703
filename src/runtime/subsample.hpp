// src/runtime/subsample.hpp: the rows a strided 1x1 convolution reads, packed, so that it runs as a plain GEMM.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>

namespace gemmkit::runtime {

// An NHWC activation and the stride of a 1x1 filter without padding over it. Where H = stride_h * P and
// W = stride_w * Q, the pixels the filter reads, (n, stride_h p, stride_w q), lie stride_w * C elements apart once the
// image rows it skips are dropped: a matrix of N*P*Q rows with a leading dimension of stride_w * C.
struct StridedPixels {
  std::int64_t n = 0, h = 0, w = 0, c = 0;
  std::array<int, 2> stride = {1, 1};
  int element_bytes = 0;

  std::int64_t p() const { return (h - 1) / stride[0] + 1; }
  std::int64_t q() const { return (w - 1) / stride[1] + 1; }
  bool evenly_strided() const { return h == stride[0] * p() && w == stride[1] * q(); }
  // Whether rows must be dropped first (stride_h > 1), and the bytes of the kept rows (N*P rows of W*C elements).
  bool drops_rows() const { return stride[0] > 1; }
  std::int64_t kept_rows_bytes() const { return n * p() * w * c * element_bytes; }
  std::int64_t leading_dimension() const { return stride[1] * c; }
};

// Copies image row stride_h * p of each image of `input` (device or host memory) to row n * P + p of the device
// buffer `kept` (kept_rows_bytes()), in `stream` order: one cudaMemcpy2DAsync of N*P rows of W*C elements.
void keep_strided_rows(const void* input, const StridedPixels& pixels, void* kept, cudaStream_t stream);

}  // namespace gemmkit::runtime
