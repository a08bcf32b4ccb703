// device/include/gemmkit/conv2d_entry.hpp: the extern "C" entry points of a Conv2d module (abi.h). Included last by
// a generated conv source, after it has declared gemmkit_kernel::kName (the kernel's name) and
// gemmkit_kernel::Module (the family's conv glue: what gemmkit::module::run needs, over gk_conv2d_args).
#pragma once

#include "gemmkit/module_common.hpp"

namespace {
// This thread's last prepared launch. Internal linkage: a function-local static in the (template) glue would be
// a GNU "unique" symbol, shared by every module in the process that holds the same kernel type.
thread_local gemmkit_kernel::Module::Cache launch_cache;
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
  return GK_MODULE_CONV2D;
}

GK_EXPORT int gk_conv2d_can_implement(const gk_conv2d_args* args) {
  if (int status = gemmkit::sm80_conv2d::check_args(args); status != GK_OK) return status;
  return gemmkit_kernel::Module::can_implement(*args);
}

GK_EXPORT size_t gk_conv2d_workspace_size(const gk_conv2d_args* args) {
  if (gemmkit::sm80_conv2d::check_args(args) != GK_OK) return 0;
  return gemmkit_kernel::Module::workspace_size(*args);
}

GK_EXPORT int gk_conv2d_run(const gk_conv2d_args* args, void* workspace, void* stream) {
  if (int status = gemmkit::sm80_conv2d::check_args(args); status != GK_OK) return status;
  return gemmkit::module::run<gemmkit_kernel::Module>(launch_cache, *args, workspace,
                                                      static_cast<cudaStream_t>(stream));
}
