// src/runtime/device.cpp: device discovery and properties (queried once per device).
#include <array>
#include <mutex>

#include "runtime/cuda_check.hpp"
#include "runtime/kernel_module.hpp"

namespace gemmkit {

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" status so later calls start clean
    return 0;
  }
  return count;
}

int current_device() {
  int device = 0;
  const cudaError_t status = cudaGetDevice(&device);
  // cudaGetDevice succeeds only with a usable device; the run path pays for nothing more.
  if (status == cudaSuccess) {
    // A thread that never called cudaSetDevice (torch's autograd threads) may have no current context, and the
    // driver calls in a kernel's set-up (TMA descriptors) then fail; binding the device once per thread makes it so.
    thread_local bool bound = false;
    if (!bound && cudaSetDevice(device) == cudaSuccess) bound = true;
    return device;
  }
  cudaGetLastError();
  throw CudaError(std::string("No CUDA device is available (") + cudaGetErrorName(status) +
                      "). Planning, emitting and compiling work without one when the plan is given cc explicitly "
                      "(e.g. cc=90); running a kernel needs a CUDA GPU.",
                  static_cast<int>(status == cudaSuccess ? cudaErrorNoDevice : status));
}

const DeviceInfo& device_info(int device) {
  static std::mutex mutex;
  static std::array<DeviceInfo, 64> infos;
  static std::array<bool, 64> known{};
  if (device < 0 || device >= static_cast<int>(infos.size())) {
    throw CudaError("CUDA device id " + std::to_string(device) + " is out of range.", cudaErrorInvalidDevice);
  }
  std::lock_guard<std::mutex> lock(mutex);
  if (!known[device]) {
    cudaDeviceProp prop{};
    GK_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    DeviceInfo& info = infos[device];
    info.id = device;
    info.cc = prop.major * 10 + prop.minor;
    info.sm_count = prop.multiProcessorCount;
    info.max_smem_per_block = static_cast<int>(prop.sharedMemPerBlockOptin);
    info.name = prop.name;
    known[device] = true;
  }
  return infos[device];
}

}  // namespace gemmkit
