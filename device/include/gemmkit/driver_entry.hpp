// device/include/gemmkit/driver_entry.hpp: CUDA driver functions through the runtime's cudaGetDriverEntryPoint, so
// that no module links libcuda (a machine without a driver still loads it: builds, packs, the compile tier).
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

namespace gemmkit::module {

// `version`: the CUDA version whose signature of the function we call (12000 = 12.0).
template <class Fn>
bool entry_point(const char* name, Fn& fn, int version = 12000) {
  void* address = nullptr;
  cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 12050
  if (cudaGetDriverEntryPointByVersion(name, &address, version, cudaEnableDefault, &found) != cudaSuccess ||
#else
  (void)version;
  if (cudaGetDriverEntryPoint(name, &address, cudaEnableDefault, &found) != cudaSuccess ||
#endif
      found != cudaDriverEntryPointSuccess) {
    return false;
  }
  fn = reinterpret_cast<Fn>(address);
  return true;
}

}  // namespace gemmkit::module
