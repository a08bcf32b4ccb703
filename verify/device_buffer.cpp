// verify/device_buffer.cpp: cudaMalloc / cudaMemcpy / cudaFree behind one RAII type.
#include "verify/device_buffer.hpp"

#include <cuda_runtime_api.h>

#include "gemmkit/device.hpp"
#include "runtime/cuda_check.hpp"

namespace gemmkit::verify {

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  GK_CUDA_CHECK(cudaMalloc(&data_, bytes));
}

DeviceBuffer::DeviceBuffer(const HostMatrix& host) : DeviceBuffer(host.bytes()) {
  GK_CUDA_CHECK(cudaMemcpy(data_, host.data(), host.bytes(), cudaMemcpyHostToDevice));
}

DeviceBuffer::~DeviceBuffer() {
  cudaFree(data_);
}

TensorView DeviceBuffer::view_like(const HostMatrix& host) const {
  return host.view_at(data_, current_device());
}

void DeviceBuffer::copy_to(HostMatrix& host) const {
  GK_CUDA_CHECK(cudaMemcpy(host.data(), data_, host.bytes(), cudaMemcpyDeviceToHost));
}

}  // namespace gemmkit::verify
