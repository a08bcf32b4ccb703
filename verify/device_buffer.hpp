// verify/device_buffer.hpp: device memory for the tests, the benchmark and the CLI's run --check, freed at scope exit.
#pragma once

#include <cstddef>

#include "gemmkit/tensor.hpp"
#include "verify/host_matrix.hpp"

namespace gemmkit::verify {

class DeviceBuffer {
 public:
  // `bytes` of uninitialised memory on the current device. Throws CudaError.
  explicit DeviceBuffer(std::size_t bytes);
  // A device copy of `host`'s elements.
  explicit DeviceBuffer(const HostMatrix& host);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  // The buffer as a view shaped like `host` (a copy of it), on the current device.
  TensorView view_like(const HostMatrix& host) const;
  // Copies the buffer's first host.bytes() bytes into `host`.
  void copy_to(HostMatrix& host) const;

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace gemmkit::verify
