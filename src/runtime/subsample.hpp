// src/runtime/subsample.hpp: the pixels a strided 1x1 convolution reads, packed, so that it runs as a plain GEMM.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>

namespace gemmkit::runtime {

// An NHWC activation and the stride of a 1x1 filter without padding over it.
struct StridedPixels {
  std::int64_t n = 0, h = 0, w = 0, c = 0;
  std::array<int, 2> stride = {1, 1};
  int element_bytes = 0;

  std::int64_t p() const { return (h - 1) / stride[0] + 1; }
  std::int64_t q() const { return (w - 1) / stride[1] + 1; }
  // Whether one 3-D copy gathers them: the rows the filter reads are equally spaced across images (H = stride_h * P)
  // and a slice of the source is a whole number of strided pixels (stride_w divides stride_h * W).
  bool one_copy() const { return h == stride[0] * p() && (stride[0] * w) % stride[1] == 0; }
  std::int64_t packed_bytes() const { return n * p() * q() * c * element_bytes; }
};

// Copies pixel (n, stride_h p, stride_w q) of `input` (device or host memory) to (n, p, q) of the packed device buffer
// `packed`, in `stream` order: one cudaMemcpy3DAsync (rows of C channels, Q per slice, N*P slices). Needs one_copy().
void gather_strided_pixels(const void* input, const StridedPixels& pixels, void* packed, cudaStream_t stream);

}  // namespace gemmkit::runtime
