// device/include/gemmkit/driver_calls.hpp: the driver calls CUTLASS's host code makes by name (cutlass::fill_workspace:
// cuMemsetD8/16/32Async, cuGetErrorString; the epilogue visitor nodes initialize their workspaces with it), defined
// in the module itself on top of the runtime's driver entry points. A module with an unresolved libcuda symbol would
// not load on a machine without a driver, and linking libcuda would tie it to one.
// Include it once, in the generated source of a kernel that reaches fill_workspace.
#pragma once

#include "gemmkit/driver_entry.hpp"

namespace gemmkit::module {

// The driver function `name`, looked up once per signature; null when the driver lacks it.
template <class Fn>
Fn driver_function(const char* name) {
  Fn fn = nullptr;
  return entry_point(name, fn) ? fn : nullptr;
}

}  // namespace gemmkit::module

extern "C" {

CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr ptr, unsigned char value, size_t count, CUstream stream) {
  using Fn = CUresult(CUDAAPI*)(CUdeviceptr, unsigned char, size_t, CUstream);
  static const Fn fn = gemmkit::module::driver_function<Fn>("cuMemsetD8Async");
  return fn != nullptr ? fn(ptr, value, count, stream) : CUDA_ERROR_NOT_FOUND;
}

CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr ptr, unsigned short value, size_t count, CUstream stream) {
  using Fn = CUresult(CUDAAPI*)(CUdeviceptr, unsigned short, size_t, CUstream);
  static const Fn fn = gemmkit::module::driver_function<Fn>("cuMemsetD16Async");
  return fn != nullptr ? fn(ptr, value, count, stream) : CUDA_ERROR_NOT_FOUND;
}

CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr ptr, unsigned int value, size_t count, CUstream stream) {
  using Fn = CUresult(CUDAAPI*)(CUdeviceptr, unsigned int, size_t, CUstream);
  static const Fn fn = gemmkit::module::driver_function<Fn>("cuMemsetD32Async");
  return fn != nullptr ? fn(ptr, value, count, stream) : CUDA_ERROR_NOT_FOUND;
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char** text) {
  using Fn = CUresult(CUDAAPI*)(CUresult, const char**);
  static const Fn fn = gemmkit::module::driver_function<Fn>("cuGetErrorString");
  return fn != nullptr ? fn(error, text) : CUDA_ERROR_NOT_FOUND;
}

}  // extern "C"
