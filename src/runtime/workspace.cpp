// src/runtime/workspace.cpp: gemmkit's per-device memory pool and the per-launch workspaces taken from it.
#include "runtime/workspace.hpp"

#include <array>
#include <cstdint>
#include <mutex>

#include "runtime/cuda_check.hpp"

namespace gemmkit::runtime {
namespace {

// gemmkit's own pool per device, so that its settings never change the default pool that other libraries use.
// Freed blocks stay in the pool (no release threshold), and a block freed on one stream is never handed to another
// stream by making that stream wait: streams in flight stay independent, each growing the pool by what it holds.
cudaMemPool_t pool_for(int device) {
  static std::mutex mutex;
  static std::array<cudaMemPool_t, 64> pools{};
  if (device < 0 || device >= static_cast<int>(pools.size())) {
    throw CudaError("CUDA device id " + std::to_string(device) + " is out of range.", cudaErrorInvalidDevice);
  }
  std::lock_guard<std::mutex> lock(mutex);
  if (pools[device] != nullptr) return pools[device];
  RelaxedCaptureMode relaxed;  // the first launch may be one being captured
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  cudaMemPool_t pool = nullptr;
  GK_CUDA_CHECK(cudaMemPoolCreate(&pool, &props));
  std::uint64_t keep_everything = UINT64_MAX;
  GK_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_everything));
  int no = 0;
  GK_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &no));
  pools[device] = pool;
  return pool;
}

}  // namespace

LaunchWorkspace::LaunchWorkspace(int device, std::size_t bytes, cudaStream_t stream) : stream_(stream) {
  if (bytes == 0) return;
  GK_CUDA_CHECK(cudaMallocFromPoolAsync(&data_, bytes, pool_for(device), stream));
}

LaunchWorkspace::~LaunchWorkspace() {
  // After the launch in stream order: the next launch on this stream may reuse the block, one in flight elsewhere not.
  if (data_ != nullptr) cudaFreeAsync(data_, stream_);
}

RelaxedCaptureMode::RelaxedCaptureMode() {
  cudaThreadExchangeStreamCaptureMode(&previous_);
}

RelaxedCaptureMode::~RelaxedCaptureMode() {
  cudaThreadExchangeStreamCaptureMode(&previous_);
}

bool is_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  GK_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace gemmkit::runtime
