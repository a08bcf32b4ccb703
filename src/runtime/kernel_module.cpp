// src/runtime/kernel_module.cpp: dlopen a generated module, check its ABI, run it with a workspace.
#include <dlfcn.h>

#include <cstring>

#include "gemmkit/errors.hpp"
#include "gemmkit/runtime.hpp"
#include "runtime/cuda_check.hpp"

namespace gemmkit {
namespace {

template <class Fn>
Fn resolve(void* handle, const char* symbol, const std::string& path) {
  void* address = dlsym(handle, symbol);
  if (address == nullptr) {
    throw Error("Kernel module " + path + " does not export " + symbol +
                "; it was not built by gemmkit's code generator. Clear the cache entry (gemmkit cache clear).");
  }
  return reinterpret_cast<Fn>(address);
}

std::string status_text(int status) {
  switch (status) {
    case GK_ERR_CANNOT_IMPLEMENT: return "CUTLASS cannot implement these arguments (can_implement failed)";
    case GK_ERR_WORKSPACE: return "the workspace is missing or too small";
    case GK_ERR_INITIALIZE: return "CUTLASS failed to initialize the kernel parameters";
    case GK_ERR_LAUNCH: return "the kernel launch failed";
    case GK_ERR_ARGS: return "the arguments are malformed";
    default: return "unknown status " + std::to_string(status);
  }
}

}  // namespace

std::shared_ptr<KernelModule> KernelModule::load(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    throw Error("Cannot load kernel module " + path + ": " + dlerror());
  }
  std::shared_ptr<KernelModule> module(new KernelModule());
  module->handle_ = handle;
  module->path_ = path;
  const int version = resolve<gk_abi_version_fn>(handle, "gk_abi_version", path)();
  if (version != GK_ABI_VERSION) {
    throw Error("Kernel module " + path + " was built for ABI version " + std::to_string(version) +
                " but this gemmkit speaks version " + std::to_string(GK_ABI_VERSION) + "; it will be rebuilt.");
  }
  module->kernel_name_ = resolve<gk_kernel_name_fn>(handle, "gk_kernel_name", path)();
  module->can_implement_ = resolve<gk_can_implement_fn>(handle, "gk_can_implement", path);
  module->workspace_size_ = resolve<gk_workspace_size_fn>(handle, "gk_workspace_size", path);
  module->run_ = resolve<gk_run_fn>(handle, "gk_run", path);
  module->last_cuda_error_ = resolve<gk_last_cuda_error_fn>(handle, "gk_last_cuda_error", path);
  return module;
}

KernelModule::~KernelModule() {
  if (workspace_ != nullptr) cudaFree(workspace_);
  // The module stays mapped: CUDA keeps references to its kernels until the context is destroyed.
}

int KernelModule::can_implement(const gk_gemm_args& args) const { return can_implement_(&args); }

void* KernelModule::workspace_for(const gk_gemm_args& args) {
  // Workspace size depends only on the problem and scheduler fields; recomputed only when they change.
  if (!workspace_known_ || std::memcmp(&workspace_args_, &args, sizeof(args)) != 0) {
    workspace_needed_ = workspace_size_(&args);
    workspace_args_ = args;
    workspace_known_ = true;
  }
  if (workspace_needed_ == 0) return nullptr;
  if (workspace_needed_ > workspace_bytes_ || workspace_device_ != args.device_id) {
    if (workspace_ != nullptr) GK_CUDA_CHECK(cudaFree(workspace_));
    workspace_ = nullptr;
    workspace_bytes_ = 0;
    GK_CUDA_CHECK(cudaMalloc(&workspace_, workspace_needed_));
    workspace_bytes_ = workspace_needed_;
    workspace_device_ = args.device_id;
  }
  return workspace_;
}

void KernelModule::run(const gk_gemm_args& args, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(workspace_mutex_);
  void* workspace = workspace_for(args);
  const int status = run_(&args, workspace, stream);
  if (status == GK_OK) return;
  if (status == GK_ERR_LAUNCH) {
    const auto error = static_cast<cudaError_t>(last_cuda_error_());
    throw CudaError("Launching " + kernel_name_ + " failed: " + cudaGetErrorName(error) + " (" +
                        cudaGetErrorString(error) + ")",
                    static_cast<int>(error));
  }
  throw ConfigError("Kernel " + kernel_name_ + " refused the problem m=" + std::to_string(args.m) +
                    " n=" + std::to_string(args.n) + " k=" + std::to_string(args.k) + ": " + status_text(status) +
                    ". Check alignment of the leading dimensions or choose another tile description.");
}

}  // namespace gemmkit
