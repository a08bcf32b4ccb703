// device/include/gemmkit/module_entry.hpp: the extern "C" entry points of abi.h, defined once for every family.
// Included last by a generated kernel source, after it has declared gemmkit_kernel::kName (the kernel's name)
// and gemmkit_kernel::Module (a family's glue class: kBias and what gemmkit::module::run needs, module_common.hpp).
#pragma once

#include "gemmkit/module_common.hpp"

#include "gemmkit/launch_glue.hpp"

#if !defined(GEMMKIT_SPLIT_DEVICE)

namespace gemmkit_kernel {
using LaunchGlue = gemmkit::LaunchGlue<Module>;  // what gk_run prepares and launches
}  // namespace gemmkit_kernel

namespace {
// This thread's last prepared launch. Internal linkage: a function-local static in the (template) glue would be
// a GNU "unique" symbol, shared by every module in the process that holds the same kernel type.
thread_local gemmkit_kernel::LaunchGlue::Cache launch_cache;
constexpr gemmkit::module::Scale kScale = gemmkit::module::scale_of<gemmkit_kernel::Module>;
constexpr int kVisitorCount = gemmkit::module::visitor_count_of<gemmkit_kernel::Module>;
}  // namespace

GK_EXPORT int gk_abi_version(void) {
  return GK_ABI_VERSION;
}

GK_EXPORT const char* gk_kernel_name(void) {
  return gemmkit_kernel::kName;
}

GK_EXPORT int gk_can_implement(const gk_gemm_args* args) {
  if (int status = gemmkit::module::check_args(args, gemmkit_kernel::Module::kBias, kScale, kVisitorCount);
      status != GK_OK)
    return status;
  return gemmkit::module::can_implement<gemmkit_kernel::Module>(*args);
}

GK_EXPORT size_t gk_workspace_size(const gk_gemm_args* args) {
  if (gemmkit::module::check_args(args, gemmkit_kernel::Module::kBias, kScale, kVisitorCount) != GK_OK) return 0;
  return gemmkit::module::workspace_size<gemmkit_kernel::Module>(*args);
}

GK_EXPORT int gk_run(const gk_gemm_args* args, void* workspace, void* stream) {
  if (int status = gemmkit::module::check_args(args, gemmkit_kernel::Module::kBias, kScale, kVisitorCount);
      status != GK_OK)
    return status;
  return gemmkit::module::run<gemmkit_kernel::LaunchGlue>(launch_cache, *args, workspace,
                                                          static_cast<cudaStream_t>(stream));
}

GK_EXPORT int gk_last_cuda_error(void) {
  return static_cast<int>(gemmkit::module::last_cuda_error);
}

#endif  // !GEMMKIT_SPLIT_DEVICE
