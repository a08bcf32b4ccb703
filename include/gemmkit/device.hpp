// include/gemmkit/device.hpp: the CUDA devices as gemmkit sees them.
#pragma once

#include <string>

namespace gemmkit {

struct DeviceInfo {
  int id = 0;
  int cc = 0;  // major * 10 + minor
  int sm_count = 0;
  int max_smem_per_block = 0;  // opt-in maximum, bytes
  std::string name;
};

// Number of visible CUDA devices; 0 when there is none or no driver (never throws).
int cuda_device_count();
// The calling thread's current device. Throws CudaError saying that running needs a GPU when there is none.
int current_device();
// Properties of a device, queried once per process.
const DeviceInfo& device_info(int device);

}  // namespace gemmkit
