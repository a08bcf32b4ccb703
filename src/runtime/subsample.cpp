// src/runtime/subsample.cpp: the strided 1x1 convolution's row copy.
#include "runtime/subsample.hpp"

#include "runtime/cuda_check.hpp"

namespace gemmkit::runtime {

void keep_strided_rows(const void* input, const StridedPixels& x, void* kept, cudaStream_t stream) {
  // Whole image rows (W*C contiguous elements, tens of KB) move at copy bandwidth; gathering single pixels with a 3-D
  // copy (rows of C elements) ran slower than the conv kernel on the H200 (bench/results/2026-12-01/*-s7-1*).
  const auto row = static_cast<std::size_t>(x.w * x.c * x.element_bytes);
  // Consecutive kept rows lie stride_h image rows apart, across images too (H = stride_h * P).
  GK_CUDA_CHECK(cudaMemcpy2DAsync(kept, row, input, row * static_cast<std::size_t>(x.stride[0]), row,
                                  static_cast<std::size_t>(x.n * x.p()), cudaMemcpyDefault, stream));
}

}  // namespace gemmkit::runtime
