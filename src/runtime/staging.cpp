// src/runtime/staging.cpp: stream-ordered device copies of host operands.
#include "runtime/staging.hpp"

#include <algorithm>

#include "gemmkit/errors.hpp"
#include "runtime/cuda_check.hpp"
#include "runtime/workspace.hpp"

namespace gemmkit::runtime {

void refuse_staging_under_capture(bool any_host, cudaStream_t stream) {
  if (any_host && is_capturing(stream)) {
    throw TensorError(
        "Host tensors cannot be staged while the stream is being captured into a CUDA graph (the copy back needs a "
        "synchronisation); pass device tensors.");
  }
}

std::size_t LaunchOperand::bytes() const {
  return static_cast<std::size_t>(std::max<std::int64_t>(span, 1)) * element_bytes;
}

Staging::~Staging() {
  for (void* p : buffers_) cudaFreeAsync(p, stream_);
}

void* Staging::on_device(const LaunchOperand& operand, bool copy_in) {
  if (operand.on_device) return operand.data;
  void* device = nullptr;
  GK_CUDA_CHECK(cudaMallocAsync(&device, operand.bytes(), stream_));
  buffers_.push_back(device);
  if (copy_in) GK_CUDA_CHECK(cudaMemcpyAsync(device, operand.data, operand.bytes(), cudaMemcpyHostToDevice, stream_));
  return device;
}

void Staging::copy_back(const LaunchOperand& operand, const void* device) const {
  GK_CUDA_CHECK(cudaMemcpyAsync(operand.data, device, operand.bytes(), cudaMemcpyDeviceToHost, stream_));
}

}  // namespace gemmkit::runtime
