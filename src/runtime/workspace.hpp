// src/runtime/workspace.hpp: one device workspace per launch, allocated and freed in the launch's stream order.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace gemmkit::runtime {

// A workspace that belongs to exactly one launch: taken from gemmkit's memory pool of `device` in `stream`'s order
// and given back in the same order when this object dies, so no two launches in flight ever share one (Stream-K
// and split-K barriers live in it). Under stream capture both become graph memory nodes, so every replay of the
// graph gets its own workspace too. Zero bytes allocate nothing.
class LaunchWorkspace {
 public:
  LaunchWorkspace(int device, std::size_t bytes, cudaStream_t stream);
  ~LaunchWorkspace();
  LaunchWorkspace(const LaunchWorkspace&) = delete;
  LaunchWorkspace& operator=(const LaunchWorkspace&) = delete;

  void* get() const { return data_; }

 private:
  void* data_ = nullptr;
  cudaStream_t stream_;
};

// While alive, lets this thread make calls that global-mode stream capture forbids (creating a pool, pinned host
// memory, querying an event): gemmkit's own bookkeeping never touches the captured stream, so it cannot corrupt it.
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode();
  ~RelaxedCaptureMode();
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  cudaStreamCaptureMode previous_ = cudaStreamCaptureModeRelaxed;
};

// Whether `stream` is being captured into a CUDA graph (synchronising or copying to pageable memory would break it).
bool is_capturing(cudaStream_t stream);

}  // namespace gemmkit::runtime
