// src/runtime/staging.hpp: operands as a launch takes them, and device copies of the ones that live in host memory.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

namespace gemmkit::runtime {

// One operand of a launch as the plan checked it.
struct LaunchOperand {
  void* data = nullptr;  // device memory, or host memory to stage
  bool on_device = true;
  int element_bytes = 0;
  std::int64_t ld = 0;
  std::int64_t batch_stride = 0;  // 0: one matrix for every batch
  std::int64_t span = 0;          // elements from the first to one past the last addressed element

  std::size_t bytes() const;
};

// Throws TensorError when host tensors would be staged on a stream being captured into a CUDA graph: the copy back
// needs a synchronisation, which capture forbids.
void refuse_staging_under_capture(bool any_host, cudaStream_t stream);

// Device copies of host tensors for one run, allocated and freed in the stream's order.
class Staging {
 public:
  explicit Staging(cudaStream_t stream) : stream_(stream) {}
  ~Staging();
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;

  // The operand itself on the device, else a device copy (copied in when asked).
  void* on_device(const LaunchOperand& operand, bool copy_in = true);
  // Copies a staged operand's device copy back into its host memory, in the stream's order.
  void copy_back(const LaunchOperand& operand, const void* device) const;

 private:
  cudaStream_t stream_;
  std::vector<void*> buffers_;
};

}  // namespace gemmkit::runtime
