// src/runtime/kernel_module.cpp: dlopen a generated module, check its ABI, run it with a workspace.
#include <dlfcn.h>

#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "gemmkit/errors.hpp"
#include "runtime/cuda_check.hpp"
#include "runtime/kernel_module.hpp"
#include "runtime/workspace.hpp"

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

// Hands a split kernel's host module the bytes of its cubin.
void bind_cubin(gk_split_bind_fn bind, const std::string& path, const std::string& cubin_path) {
  std::ifstream in(cubin_path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  const std::string image = bytes.str();
  if (!in || image.empty()) {
    throw Error("Cannot read the cubin " + cubin_path + " of kernel module " + path +
                "; clear the cache entry (gemmkit cache clear) to rebuild it.");
  }
  if (bind(image.data(), image.size()) != GK_OK)
    throw Error("Kernel module " + path + " refused its cubin " + cubin_path);
}

}  // namespace

std::shared_ptr<KernelModule> KernelModule::load(const std::string& path, const std::string& cubin_path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    // Keys leave out the host compiler's version: a module imported from a machine with a newer C/C++ runtime
    // fails here, and rebuilding it on this machine replaces it.
    throw Error("Cannot load kernel module " + path + ": " + dlerror() +
                "; if it came from another machine (gemmkit cache import) with a newer glibc or libstdc++, delete its "
                "folder to rebuild it here, and build packs on the oldest system you deploy to");
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
  if (!cubin_path.empty()) bind_cubin(resolve<gk_split_bind_fn>(handle, "gk_split_bind", path), path, cubin_path);
  module->last_cuda_error_ = resolve<gk_last_cuda_error_fn>(handle, "gk_last_cuda_error", path);
  // A module without gk_module_kind is a dense one (modules built before grouped kernels existed).
  const auto kind = reinterpret_cast<gk_module_kind_fn>(dlsym(handle, "gk_module_kind"));
  if (kind != nullptr && kind() == GK_MODULE_GROUPED) {
    module->grouped_describe_ = resolve<gk_grouped_describe_fn>(handle, "gk_grouped_describe", path);
    module->grouped_metadata_bytes_ = resolve<gk_grouped_metadata_bytes_fn>(handle, "gk_grouped_metadata_bytes", path);
    module->grouped_can_implement_ = resolve<gk_grouped_can_implement_fn>(handle, "gk_grouped_can_implement", path);
    module->grouped_workspace_size_ = resolve<gk_grouped_workspace_size_fn>(handle, "gk_grouped_workspace_size", path);
    module->grouped_pack_ = resolve<gk_grouped_pack_fn>(handle, "gk_grouped_pack", path);
    module->grouped_run_ = resolve<gk_grouped_run_fn>(handle, "gk_grouped_run", path);
    module->grouped_run_contiguous_ = resolve<gk_grouped_run_contiguous_fn>(handle, "gk_grouped_run_contiguous", path);
    return module;
  }
  if (kind != nullptr && kind() == GK_MODULE_CONV2D) {
    module->conv2d_can_implement_ = resolve<gk_conv2d_can_implement_fn>(handle, "gk_conv2d_can_implement", path);
    module->conv2d_workspace_size_ = resolve<gk_conv2d_workspace_size_fn>(handle, "gk_conv2d_workspace_size", path);
    module->conv2d_run_ = resolve<gk_conv2d_run_fn>(handle, "gk_conv2d_run", path);
    return module;
  }
  module->can_implement_ = resolve<gk_can_implement_fn>(handle, "gk_can_implement", path);
  module->workspace_size_ = resolve<gk_workspace_size_fn>(handle, "gk_workspace_size", path);
  module->run_ = resolve<gk_run_fn>(handle, "gk_run", path);
  return module;
}

int KernelModule::can_implement(const gk_gemm_args& args) const {
  if (can_implement_ == nullptr) throw Error("internal error: " + kernel_name_ + " has no single-GEMM entry");
  return can_implement_(&args);
}

std::size_t KernelModule::workspace_size(const gk_gemm_args& args) const {
  if (run_ == nullptr) throw Error("internal error: " + kernel_name_ + " has no single-GEMM entry");
  std::lock_guard<std::mutex> lock(workspace_mutex_);
  if (!workspace_known_ || std::memcmp(&workspace_args_, &args, sizeof(args)) != 0) {
    workspace_needed_ = workspace_size_(&args);
    workspace_args_ = args;
    workspace_known_ = true;
  }
  return workspace_needed_;
}

void KernelModule::run(const gk_gemm_args& args, cudaStream_t stream, const Workspace& lent) {
  const std::size_t needed = workspace_size(args);
  if (lent.data != nullptr && lent.bytes < needed) {
    throw ConfigError("Kernel " + kernel_name_ + " needs a workspace of " + std::to_string(needed) +
                      " bytes for this problem but the one passed holds " + std::to_string(lent.bytes) +
                      "; pass a larger one, or none to let gemmkit allocate it in stream order.");
  }
  // Declared before the launch, destroyed after it: the free is ordered after the kernel on the stream.
  std::optional<runtime::LaunchWorkspace> own;
  void* workspace = lent.data;
  if (workspace == nullptr && needed > 0) workspace = own.emplace(args.device_id, needed, stream).get();
  const int status = run_(&args, workspace, stream);
  if (status != GK_OK) {
    fail(status,
         "the problem m=" + std::to_string(args.m) + " n=" + std::to_string(args.n) + " k=" + std::to_string(args.k));
  }
}

void KernelModule::fail(int status, const std::string& problem) const {
  if (status == GK_ERR_LAUNCH) {
    const auto error = static_cast<cudaError_t>(last_cuda_error_());
    throw CudaError(
        "Launching " + kernel_name_ + " failed: " + cudaGetErrorName(error) + " (" + cudaGetErrorString(error) + ")",
        static_cast<int>(error));
  }
  throw ConfigError("Kernel " + kernel_name_ + " refused " + problem + ": " + status_text(status) +
                    ". Check alignment of the leading dimensions or choose another tile description.");
}

void KernelModule::conv2d_run(const gk_conv2d_args& args, cudaStream_t stream) const {
  if (conv2d_run_ == nullptr) throw Error("internal error: " + kernel_name_ + " is not a Conv2d module");
  const auto problem = [&] {
    return "the convolution N=" + std::to_string(args.n) + " H=" + std::to_string(args.h) +
           " W=" + std::to_string(args.w) + " C=" + std::to_string(args.c) + " K=" + std::to_string(args.k) +
           " R=" + std::to_string(args.r) + " S=" + std::to_string(args.s);
  };
  runtime::LaunchWorkspace workspace(args.device_id, conv2d_workspace_size_(&args), stream);
  if (const int status = conv2d_run_(&args, workspace.get(), stream); status != GK_OK) fail(status, problem());
}

void KernelModule::grouped_pack(const gk_grouped_args& args, const gk_grouped_problem* problems, void* host_metadata,
                                std::size_t bytes) const {
  std::int32_t failed = -1;
  const int status = grouped_pack_(&args, problems, host_metadata, bytes, &failed);
  if (status == GK_OK) return;
  if (failed >= 0) {
    throw TensorError("Group " + std::to_string(failed) + ": kernel " + kernel_name_ + " cannot take its tensors (" +
                      status_text(status) + "): check that A, B, C and D are aligned to the kernel's vectors.");
  }
  fail(status, "the grouped problem");
}

void KernelModule::grouped_run(const gk_grouped_args& args, const void* device_metadata, cudaStream_t stream) const {
  runtime::LaunchWorkspace workspace(args.device_id, grouped_workspace_size_(&args), stream);
  const int status = grouped_run_(&args, device_metadata, workspace.get(), stream);
  if (status != GK_OK) fail(status, "a grouped problem of " + std::to_string(args.groups) + " groups");
}

void KernelModule::grouped_run_contiguous(const gk_grouped_args& args, const gk_grouped_contiguous& problem,
                                          void* device_metadata, std::size_t bytes, cudaStream_t stream) const {
  runtime::LaunchWorkspace workspace(args.device_id, grouped_workspace_size_(&args), stream);
  const int status = grouped_run_contiguous_(&args, &problem, device_metadata, bytes, workspace.get(), stream);
  if (status != GK_OK) fail(status, "a contiguous grouped problem of " + std::to_string(args.groups) + " groups");
}

}  // namespace gemmkit
