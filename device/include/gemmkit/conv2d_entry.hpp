// device/include/gemmkit/conv2d_entry.hpp: the extern "C" entry points of a Conv2d module (abi.h). Included last by
// a generated conv source, after it has declared gemmkit_kernel::kName (the kernel's name) and
// gemmkit_kernel::Module (a conv family's glue: what gemmkit::module::run needs, over gk_conv2d_args).
#pragma once

#include "gemmkit/module_common.hpp"

#include "gemmkit/launch_glue.hpp"

#if !defined(GEMMKIT_SPLIT_DEVICE)

namespace gemmkit_kernel {
using LaunchGlue = gemmkit::LaunchGlue<Module>;  // what gk_conv2d_run prepares and launches
}  // namespace gemmkit_kernel

namespace gemmkit::conv2d {

// GK_OK or GK_ERR_ARGS: pointers present, extents positive, C present when beta is not 0.
inline int check_args(const gk_conv2d_args* a) {
  if (a == nullptr || a->A == nullptr || a->B == nullptr || a->D == nullptr) return GK_ERR_ARGS;
  if (a->C == nullptr && a->beta != 0.0) return GK_ERR_ARGS;
  const int32_t extents[] = {a->n, a->h, a->w,        a->c,        a->k,          a->r,          a->s,
                             a->p, a->q, a->stride_h, a->stride_w, a->dilation_h, a->dilation_w, a->split_k_slices};
  for (int32_t e : extents) {
    if (e < 1) return GK_ERR_ARGS;
  }
  if (a->pad_h < 0 || a->pad_w < 0) return GK_ERR_ARGS;
  return GK_OK;
}

}  // namespace gemmkit::conv2d

namespace {
// This thread's last prepared launch. Internal linkage: a function-local static in the (template) glue would be
// a GNU "unique" symbol, shared by every module in the process that holds the same kernel type.
thread_local gemmkit_kernel::LaunchGlue::Cache launch_cache;
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
  if (int status = gemmkit::conv2d::check_args(args); status != GK_OK) return status;
  return gemmkit::module::can_implement<gemmkit_kernel::Module>(*args);
}

GK_EXPORT size_t gk_conv2d_workspace_size(const gk_conv2d_args* args) {
  if (gemmkit::conv2d::check_args(args) != GK_OK) return 0;
  return gemmkit::module::workspace_size<gemmkit_kernel::Module>(*args);
}

GK_EXPORT int gk_conv2d_run(const gk_conv2d_args* args, void* workspace, void* stream) {
  if (int status = gemmkit::conv2d::check_args(args); status != GK_OK) return status;
  return gemmkit::module::run<gemmkit_kernel::LaunchGlue>(launch_cache, *args, workspace,
                                                          static_cast<cudaStream_t>(stream));
}

#endif  // !GEMMKIT_SPLIT_DEVICE
