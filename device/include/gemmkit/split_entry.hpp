// device/include/gemmkit/split_entry.hpp: a kernel source compiled as two artifacts instead of one (the split path).
// Included by gemmkit/module_entry.hpp when the build defines one of
//   GEMMKIT_SPLIT_DEVICE  nvcc -cubin: only the kernel, as extern "C" gk_device_kernel (cutlass::device_kernel's body,
//                         launch bounds and __grid_constant__ Params), and nothing of the host glue;
//   GEMMKIT_SPLIT_HOST    the host compiler alone: the abi.h entry points, which build the kernel's Params
//                         (GemmKernel::to_underlying_arguments: TMA descriptors, scheduler) and launch the cubin
//                         through the driver API. No __global__ function is instantiated, so no device code is
//                         compiled.
// For CUTLASS 3.x kernel-level operators (the SM90 GEMM, grouped and Conv2d families), whose glue names the kernel
// as gemmkit_kernel::Module::DeviceKernel. Included by module_entry.hpp, grouped_entry.hpp and conv2d_entry.hpp.
#pragma once

#include <cstddef>

#include "cutlass/cutlass.h"
#include "cutlass/device_kernel.h"
#include "gemmkit/module_common.hpp"

namespace gemmkit::split {
using Kernel = typename gemmkit_kernel::Module::DeviceKernel;
}  // namespace gemmkit::split

#if defined(GEMMKIT_SPLIT_DEVICE)

// The kernel, by a name the host finds with cuModuleGetFunction; the same as cutlass::device_kernel<Kernel>.
extern "C" __global__ void __launch_bounds__(gemmkit::split::Kernel::MaxThreadsPerBlock,
                                             gemmkit::split::Kernel::MinBlocksPerMultiprocessor)
    gk_device_kernel(CUTLASS_GRID_CONSTANT typename gemmkit::split::Kernel::Params const params) {
  extern __shared__ char smem[];
  gemmkit::split::Kernel op;
  op(params, smem);
}

#elif defined(GEMMKIT_SPLIT_HOST)

#include <cuda.h>

#include <mutex>
#include <string>
#include <type_traits>

#include "cute/layout.hpp"
#include "gemmkit/driver_entry.hpp"

namespace gemmkit::split {

// The driver functions the launch needs, through the runtime's cudaGetDriverEntryPoint: nothing links libcuda.
struct Driver {
  CUresult (*module_load_data)(CUmodule*, const void*) = nullptr;
  CUresult (*module_get_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*func_set_attribute)(CUfunction, CUfunction_attribute, int) = nullptr;
  CUresult (*func_get_param_info)(CUfunction, size_t, size_t*, size_t*) = nullptr;  // CUDA >= 12.4 drivers
  CUresult (*launch_kernel_ex)(const CUlaunchConfig*, CUfunction, void**, void**) = nullptr;
  bool ok = false;
};

using module::entry_point;

inline const Driver& driver() {
  static const Driver loaded = [] {
    Driver d;
    d.ok = entry_point("cuModuleLoadData", d.module_load_data) &&
           entry_point("cuModuleGetFunction", d.module_get_function) &&
           entry_point("cuFuncSetAttribute", d.func_set_attribute) &&
           entry_point("cuLaunchKernelEx", d.launch_kernel_ex);
    entry_point("cuFuncGetParamInfo", d.func_get_param_info, 12040);  // optional: only checks the Params size
    return d;
  }();
  return loaded;
}

// Driver error codes share the runtime's numbering for the errors a launch meets (invalid value, out of memory,
// no kernel image, invalid handle, launch out of resources...); gk_last_cuda_error reports them as cudaError_t.
inline bool record_driver_error(CUresult result) {
  if (result == CUDA_SUCCESS) return false;
  module::last_cuda_error = static_cast<cudaError_t>(result);
  return true;
}

constexpr int kMaxDevices = 64;

// The cubin image (given once by the loader, gk_split_bind) and, per device, the function loaded from it into the
// device's primary context (the runtime's), with its dynamic shared memory limit raised once.
struct Image {
  std::mutex mutex;
  std::string cubin;
  CUfunction functions[kMaxDevices] = {};
};

inline Image& image() {
  static Image* held = new Image();  // never destroyed: launches may run during static destruction
  return *held;
}

// The function on the calling thread's current device (whose primary context the runtime uses), loaded on first use;
// nullptr after recording the error.
inline CUfunction current_function() {
  const int device = module::current_device();
  Image& img = image();
  if (device < 0 || device >= kMaxDevices) {
    module::last_cuda_error = cudaErrorInvalidDevice;
    return nullptr;
  }
  // The driver calls below use the thread's current context, which a runtime caller may not have made current yet
  // (cudaGetDevice does not): cudaSetDevice makes the device's primary context current, once per thread and device.
  // It is no stream operation, so it is allowed inside a graph capture.
  thread_local int bound_device = -1;
  if (bound_device != device) {
    if (module::record_cuda_error(cudaSetDevice(device))) return nullptr;
    bound_device = device;
  }
  if (CUfunction fn = __atomic_load_n(&img.functions[device], __ATOMIC_ACQUIRE)) return fn;
  std::lock_guard<std::mutex> lock(img.mutex);
  if (img.functions[device] != nullptr) return img.functions[device];
  const Driver& d = driver();
  if (!d.ok) {
    module::last_cuda_error = cudaErrorCallRequiresNewerDriver;
    return nullptr;
  }
  if (img.cubin.empty()) {
    module::last_cuda_error = cudaErrorInvalidKernelImage;  // the loader never bound the cubin
    return nullptr;
  }
  CUmodule mod = nullptr;
  CUfunction fn = nullptr;
  if (record_driver_error(d.module_load_data(&mod, img.cubin.data()))) return nullptr;
  if (record_driver_error(d.module_get_function(&fn, mod, "gk_device_kernel"))) return nullptr;
  if (d.func_get_param_info != nullptr) {
    // The cubin's Params and the host's must be the same struct: a mismatch would launch garbage.
    size_t offset = 0, bytes = 0;
    if (d.func_get_param_info(fn, 0, &offset, &bytes) == CUDA_SUCCESS && bytes != sizeof(typename Kernel::Params)) {
      module::last_cuda_error = cudaErrorInvalidKernelImage;
      return nullptr;
    }
  }
  constexpr int smem = Kernel::SharedStorageSize;
  if (smem >= (48 << 10) &&
      record_driver_error(d.func_set_attribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem))) {
    return nullptr;
  }
  __atomic_store_n(&img.functions[device], fn, __ATOMIC_RELEASE);
  return fn;
}

// Launches `fn` on the stream through the driver API, in clusters of `cluster` CTAs (none given: no cluster launch);
// false after a driver error, which is recorded.
inline bool launch(CUfunction fn, dim3 grid, dim3 block, unsigned shared_bytes, cudaStream_t stream, void** args,
                   const CUlaunchAttribute* cluster = nullptr) {
  CUlaunchConfig config{};
  config.gridDimX = grid.x;
  config.gridDimY = grid.y;
  config.gridDimZ = grid.z;
  config.blockDimX = block.x;
  config.blockDimY = block.y;
  config.blockDimZ = block.z;
  config.sharedMemBytes = shared_bytes;
  config.hStream = reinterpret_cast<CUstream>(stream);
  config.attrs = const_cast<CUlaunchAttribute*>(cluster);
  config.numAttrs = cluster == nullptr ? 0 : 1;
  return !record_driver_error(driver().launch_kernel_ex(&config, fn, args, nullptr));
}

// What GemmUniversalAdapter::run (or ConvUniversalAdapter::run) does, on the cubin through the driver API: a cluster
// launch unless the cluster is 1x1x1.
inline cutlass::Status launch_params(typename Kernel::Params& params, cudaStream_t stream) {
  const CUfunction fn = current_function();
  if (fn == nullptr) return cutlass::Status::kErrorInternal;
  using ClusterShape = typename Kernel::DispatchPolicy::ClusterShape;
  CUlaunchAttribute cluster{};
  cluster.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  cluster.value.clusterDim.x = cute::size<0>(ClusterShape{});
  cluster.value.clusterDim.y = cute::size<1>(ClusterShape{});
  cluster.value.clusterDim.z = cute::size<2>(ClusterShape{});
  void* args[] = {&params};
  const bool launched = launch(fn, Kernel::get_grid_shape(params), Kernel::get_block_shape(), Kernel::SharedStorageSize,
                               stream, args, cute::size(ClusterShape{}) == 1 ? nullptr : &cluster);
  return launched ? cutlass::Status::kSuccess : cutlass::Status::kErrorInternal;
}

// What the adapters' initialize does, without their cudaFuncSetAttribute on device_kernel (which would instantiate
// the kernel here): the workspace initialized, then the Params (TMA descriptors, scheduler).
template <class Arguments>
cutlass::Status prepare_params(const Arguments& arguments, void* workspace, cudaStream_t stream,
                               typename Kernel::Params& params) {
  const cutlass::Status status = Kernel::initialize_workspace(arguments, workspace, stream, nullptr);
  if (status != cutlass::Status::kSuccess) return status;
  params = Kernel::to_underlying_arguments(arguments, workspace);
  return cutlass::Status::kSuccess;
}

// The glue for gemmkit::module::run: the family's own glue (`Base`, e.g. sm90::Module over sm90::ParamsLaunch) with
// its argument mapping (to_arguments: every gk_gemm_args field, scale vectors and split-K scheduler arguments
// included), checks, prepared state, launch cache and workspace reset, of which only two steps differ: `prepare`
// builds the Params with CUTLASS's kernel-level calls (what GemmUniversalAdapter::initialize does, without its
// cudaFuncSetAttribute on device_kernel, which would instantiate the kernel here) and `launch` launches the cubin.
template <class Base>
struct Glue : Base {
  using Prepared = typename Base::Prepared;
  static_assert(std::is_same_v<decltype(Prepared::state), typename Kernel::Params>,
                "the split path launches the kernel's Params: the family's prepared state must be them");

  static cutlass::Status prepare(Prepared& prepared, void* workspace, cudaStream_t stream) {
    const cutlass::Status status = Base::reset_workspace(prepared, workspace, stream);  // initialize_workspace
    if (status != cutlass::Status::kSuccess) return status;
    prepared.state = Kernel::to_underlying_arguments(prepared.arguments, workspace);
    return cutlass::Status::kSuccess;
  }
  static cutlass::Status launch(Prepared& prepared, cudaStream_t stream) {
    return launch_params(prepared.state, stream);
  }
};

// The same for a grouped family's glue (`Base`, sm90_grouped::Module), whose run() takes its prepare and launch steps
// from the glue it is given.
template <class Base>
struct GroupedGlue : Base {
  template <class Arguments>
  static cutlass::Status prepare(const Arguments& arguments, void* workspace, cudaStream_t stream,
                                 typename Kernel::Params& params) {
    return prepare_params(arguments, workspace, stream, params);
  }
  static cutlass::Status launch(typename Kernel::Params& params, cudaStream_t stream) {
    return launch_params(params, stream);
  }
  template <class Cache, class Args>
  static int run(Cache& cache, const Args& args, const void* metadata, void* workspace, cudaStream_t stream) {
    return Base::template run_with<GroupedGlue>(cache, args, metadata, workspace, stream);
  }
};

}  // namespace gemmkit::split

// The cubin this host module launches (the loader reads it from the cache and binds it once, before any launch); the
// module keeps a copy. GK_ERR_ARGS for an empty image.
GK_EXPORT int gk_split_bind(const void* cubin, size_t bytes) {
  if (cubin == nullptr || bytes == 0) return GK_ERR_ARGS;
  gemmkit::split::Image& image = gemmkit::split::image();
  std::lock_guard<std::mutex> lock(image.mutex);
  image.cubin.assign(static_cast<const char*>(cubin), bytes);
  return GK_OK;
}

#endif
