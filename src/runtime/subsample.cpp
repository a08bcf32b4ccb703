// src/runtime/subsample.cpp: the strided 1x1 convolution's gather as one 3-D copy.
#include "runtime/subsample.hpp"

#include "runtime/cuda_check.hpp"

namespace gemmkit::runtime {

void gather_strided_pixels(const void* input, const StridedPixels& x, void* packed, cudaStream_t stream) {
  const auto row = static_cast<std::size_t>(x.c * x.element_bytes);  // one pixel's channels
  // Source: consecutive wanted pixels of an output row are stride_w pixels apart; consecutive output rows (across
  // images too, since H = stride_h * P) stride_h * W pixels apart, i.e. a slice of stride_h * W / stride_w pitches.
  cudaMemcpy3DParms copy{};
  copy.srcPtr = {const_cast<void*>(input), row * x.stride[1], row,
                 static_cast<std::size_t>(x.stride[0] * x.w / x.stride[1])};
  copy.dstPtr = {packed, row, row, static_cast<std::size_t>(x.q())};
  copy.extent = {row, static_cast<std::size_t>(x.q()), static_cast<std::size_t>(x.n * x.p())};
  copy.kind = cudaMemcpyDefault;  // the input may be a host tensor (staged by this copy)
  GK_CUDA_CHECK(cudaMemcpy3DAsync(&copy, stream));
}

}  // namespace gemmkit::runtime
