// device/include/gemmkit/grouped_entry.hpp: the extern "C" entry points of a grouped module (abi.h), defined once
// for both grouped families. Included last by a generated grouped kernel source, after it has declared, in
// namespace gemmkit_kernel, kName (the kernel's name), kActivation (the activation's kernel-name spelling) and
// Module (a family's grouped glue: Traits, Cache, can_implement / workspace_size / run).
#pragma once

#include "gemmkit/grouped_common.hpp"

#include "gemmkit/launch_glue.hpp"

#if defined(GEMMKIT_SPLIT_DEVICE)
// The contiguous form's derivation, in the cubin beside the GEMM kernel: the split path's host module compiles no
// device code.
extern "C" __global__ void __launch_bounds__(gemmkit::grouped::kDeriveMaxThreads)
    gk_derive_contiguous(gemmkit::grouped::ContiguousPlan<gemmkit_kernel::Module::Traits> plan) {
  gemmkit::grouped::derive_contiguous_metadata(plan);
}
#endif

#if !defined(GEMMKIT_SPLIT_DEVICE)

namespace gemmkit_kernel {
using LaunchGlue = gemmkit::GroupedLaunchGlue<Module>;  // what gk_grouped_run prepares and launches
}  // namespace gemmkit_kernel

namespace {
using Traits = gemmkit_kernel::Module::Traits;
using Metadata = gemmkit::grouped::Metadata<Traits>;

// This thread's last prepared launch. Internal linkage: a function-local static in the (template) glue would be
// a GNU "unique" symbol, shared by every module in the process that holds the same kernel type.
thread_local gemmkit_kernel::Module::Cache launch_cache;

constexpr gk_grouped_info kInfo = gemmkit::grouped::describe<Traits>(gemmkit_kernel::kActivation);

#if defined(GEMMKIT_SPLIT_HOST)
// The cubin's gk_derive_contiguous on the calling thread's current device, loaded once per device. The GEMM kernel's
// loading (split::current_function) binds the thread to the device and checks the driver and the image first.
CUfunction derive_function() {
  static std::mutex mutex;
  static CUfunction functions[gemmkit::split::kMaxDevices] = {};
  if (gemmkit::split::current_function() == nullptr) return nullptr;
  const int device = gemmkit::module::current_device();
  std::lock_guard<std::mutex> lock(mutex);
  if (functions[device] != nullptr) return functions[device];
  const gemmkit::split::Driver& d = gemmkit::split::driver();
  CUmodule loaded = nullptr;
  CUfunction fn = nullptr;
  if (gemmkit::split::record_driver_error(d.module_load_data(&loaded, gemmkit::split::image().cubin.data())) ||
      gemmkit::split::record_driver_error(d.module_get_function(&fn, loaded, "gk_derive_contiguous"))) {
    return nullptr;
  }
  functions[device] = fn;
  return fn;
}
#endif

// Enqueues the contiguous form's metadata derivation: in this module, or on the split path in the cubin.
int enqueue_contiguous_metadata(gemmkit::grouped::ContiguousPlan<Traits> plan, cudaStream_t stream) {
#if defined(GEMMKIT_SPLIT_HOST)
  const CUfunction fn = derive_function();
  if (fn == nullptr) return GK_ERR_LAUNCH;
  void* params[] = {&plan};
  const auto [grid, block] = gemmkit::grouped::derive_launch(plan);
  return gemmkit::split::launch(fn, grid, block, 0, stream, params) ? GK_OK : GK_ERR_LAUNCH;
#else
  return gemmkit::grouped::launch_derive_contiguous<Traits>(plan, stream);
#endif
}
}  // namespace

GK_EXPORT int gk_abi_version(void) {
  return GK_ABI_VERSION;
}

GK_EXPORT const char* gk_kernel_name(void) {
  return gemmkit_kernel::kName;
}

GK_EXPORT int gk_last_cuda_error(void) {
  return static_cast<int>(gemmkit::module::last_cuda_error);
}

GK_EXPORT int gk_module_kind(void) {
  return GK_MODULE_GROUPED;
}

GK_EXPORT const gk_grouped_info* gk_grouped_describe(void) {
  return &kInfo;
}

GK_EXPORT size_t gk_grouped_metadata_bytes(int32_t groups) {
  return groups < 1 ? 0 : Metadata::size(groups);
}

GK_EXPORT int gk_grouped_can_implement(const gk_grouped_args* args, const gk_grouped_contiguous* contiguous) {
  if (int status = gemmkit::grouped::check_args(args); status != GK_OK) return status;
  if (contiguous != nullptr) {
    if (int status = gemmkit::grouped::check_contiguous<Traits>(*args, contiguous); status != GK_OK) return status;
  }
  return gemmkit_kernel::Module::can_implement(*args);
}

GK_EXPORT size_t gk_grouped_workspace_size(const gk_grouped_args* args) {
  if (gemmkit::grouped::check_args(args) != GK_OK) return 0;
  return gemmkit_kernel::Module::workspace_size(*args);
}

GK_EXPORT int gk_grouped_pack(const gk_grouped_args* args, const gk_grouped_problem* problems, void* host_metadata,
                              size_t metadata_bytes, int32_t* failed_group) {
  if (int status = gemmkit::grouped::check_args(args); status != GK_OK) return status;
  return gemmkit::grouped::pack<Traits>(*args, problems, host_metadata, metadata_bytes, failed_group);
}

GK_EXPORT int gk_grouped_run(const gk_grouped_args* args, const void* device_metadata, void* workspace, void* stream) {
  if (int status = gemmkit::grouped::check_args(args); status != GK_OK) return status;
  if (device_metadata == nullptr || !gemmkit::grouped::aligned(device_metadata, gemmkit::grouped::kArrayAlignment)) {
    return GK_ERR_ARGS;
  }
  return gemmkit_kernel::LaunchGlue::run(launch_cache, *args, device_metadata, workspace,
                                         static_cast<cudaStream_t>(stream));
}

GK_EXPORT int gk_grouped_run_contiguous(const gk_grouped_args* args, const gk_grouped_contiguous* contiguous,
                                        void* device_metadata, size_t metadata_bytes, void* workspace, void* stream) {
  if (int status = gemmkit::grouped::check_args(args); status != GK_OK) return status;
  if (int status = gemmkit::grouped::check_contiguous<Traits>(*args, contiguous); status != GK_OK) return status;
  if (gemmkit::grouped::is_empty(*contiguous)) return GK_OK;
  if (int status = gemmkit::grouped::check_buffer<Traits>(device_metadata, metadata_bytes, args->groups);
      status != GK_OK) {
    return status;
  }
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  const auto plan = gemmkit::grouped::contiguous_plan<Traits>(*args, *contiguous, device_metadata, metadata_bytes);
  if (int status = enqueue_contiguous_metadata(plan, cuda_stream); status != GK_OK) return status;
  gk_grouped_args entries = *args;  // the GEMM sees the bands as groups of their own
  entries.groups = plan.entries;
  return gemmkit_kernel::LaunchGlue::run(launch_cache, entries, device_metadata, workspace, cuda_stream);
}

#endif  // !GEMMKIT_SPLIT_DEVICE
