// src/runtime/kernel_module.hpp: a loaded kernel module, behind the C ABI of abi.h (internal: plans hide it).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>

#include "gemmkit/abi.h"
#include "gemmkit/device.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/results.hpp"

namespace gemmkit {

// One generated kernel module, loaded with dlopen: its ABI entry points. Safe to use from many threads at once;
// every launch gets a workspace of its own (see runtime/workspace.hpp), so launches on different streams,
// threads, graphs and devices never share one.
class KernelModule {
 public:
  // Throws Error if the file cannot be loaded or was built for another ABI version.
  // A split kernel's host module (cubin_path not empty) is handed the cubin's bytes (gk_split_bind) before anything
  // else; it loads them into each device's context on its first launch there.
  static std::shared_ptr<KernelModule> load(const std::string& path, const std::string& cubin_path = "");
  ~KernelModule() = default;
  KernelModule(const KernelModule&) = delete;
  KernelModule& operator=(const KernelModule&) = delete;

  const std::string& kernel_name() const { return kernel_name_; }
  const std::string& path() const { return path_; }
  // GK_OK or the gk_status CUTLASS's can_implement() gave.
  int can_implement(const gk_gemm_args& args) const;
  // Device bytes a launch with these arguments needs as its workspace (0 for most kernels; Stream-K needs some).
  std::size_t workspace_size(const gk_gemm_args& args) const;
  // Launches on `stream`, with `workspace` when one is lent (it must hold workspace_size bytes), else with a fresh
  // stream-ordered one. Throws ConfigError if CUTLASS refuses the arguments or the lent workspace is too small,
  // CudaError if the launch fails.
  void run(const gk_gemm_args& args, cudaStream_t stream, const Workspace& workspace = {});

  // A grouped module (gk_module_kind() == GK_MODULE_GROUPED) has the entry points below instead of the ones above.
  bool grouped() const { return grouped_run_ != nullptr; }
  const gk_grouped_info& grouped_info() const { return *grouped_describe_(); }
  std::size_t grouped_metadata_bytes(int groups) const { return grouped_metadata_bytes_(groups); }
  // GK_OK or the gk_status the module gives the call-wide arguments and, when given, a contiguous problem.
  int grouped_can_implement(const gk_grouped_args& args, const gk_grouped_contiguous* contiguous) const {
    return grouped_can_implement_(&args, contiguous);
  }
  // Writes the metadata of args.groups problems into `host_metadata`; throws TensorError naming the first group the
  // kernel cannot take (the plan's own checks are meant to catch it first).
  void grouped_pack(const gk_grouped_args& args, const gk_grouped_problem* problems, void* host_metadata,
                    std::size_t bytes) const;
  // Launches over metadata already in device memory, with a stream-ordered workspace of its own.
  void grouped_run(const gk_grouped_args& args, const void* device_metadata, cudaStream_t stream) const;
  // Derives the metadata into `device_metadata` on the GPU from the row offsets, then launches.
  void grouped_run_contiguous(const gk_grouped_args& args, const gk_grouped_contiguous& problem, void* device_metadata,
                              std::size_t bytes, cudaStream_t stream) const;

  // A Conv2d module (gk_module_kind() == GK_MODULE_CONV2D) has these entries instead. conv2d_run launches with a
  // stream-ordered workspace of its own; ConfigError names the problem when CUTLASS's can_implement refuses it.
  int conv2d_can_implement(const gk_conv2d_args& args) const { return conv2d_can_implement_(&args); }
  // Device workspace bytes a Conv2d module needs (serial split-K's semaphores, parallel split-K's partial sums).
  std::size_t conv2d_workspace_size(const gk_conv2d_args& args) const { return conv2d_workspace_size_(&args); }
  bool conv2d() const { return conv2d_run_ != nullptr; }
  void conv2d_run(const gk_conv2d_args& args, cudaStream_t stream) const;

 private:
  KernelModule() = default;
  // Turns a gk_status other than GK_OK into the exception that says what happened.
  [[noreturn]] void fail(int status, const std::string& problem) const;

  void* handle_ = nullptr;
  std::string path_, kernel_name_;
  gk_can_implement_fn can_implement_ = nullptr;
  gk_workspace_size_fn workspace_size_ = nullptr;
  gk_run_fn run_ = nullptr;
  gk_last_cuda_error_fn last_cuda_error_ = nullptr;
  gk_grouped_describe_fn grouped_describe_ = nullptr;
  gk_grouped_metadata_bytes_fn grouped_metadata_bytes_ = nullptr;
  gk_grouped_can_implement_fn grouped_can_implement_ = nullptr;
  gk_grouped_workspace_size_fn grouped_workspace_size_ = nullptr;
  gk_grouped_pack_fn grouped_pack_ = nullptr;
  gk_grouped_run_fn grouped_run_ = nullptr;
  gk_grouped_run_contiguous_fn grouped_run_contiguous_ = nullptr;
  gk_conv2d_can_implement_fn conv2d_can_implement_ = nullptr;
  gk_conv2d_workspace_size_fn conv2d_workspace_size_ = nullptr;
  gk_conv2d_run_fn conv2d_run_ = nullptr;

  // The last workspace_size() answer: the size depends only on the arguments, and asking CUTLASS costs a rebuild
  // of its argument struct.
  mutable std::mutex workspace_mutex_;
  mutable gk_gemm_args workspace_args_{};
  mutable bool workspace_known_ = false;
  mutable std::size_t workspace_needed_ = 0;
};

}  // namespace gemmkit
