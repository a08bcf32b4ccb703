// src/runtime/grouped_launch.hpp: grouped GEMMs on a loaded grouped module: host operands staged, the list form's
// per-group metadata packed into a reused pinned buffer and sent in one copy, the contiguous form derived on the GPU.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

#include "runtime/kernel_module.hpp"
#include "runtime/staging.hpp"

namespace gemmkit::runtime {

// One group of the list form as the plan checked it (logical shapes: A m x k, B k x n, C and D m x n).
struct GroupOperands {
  LaunchOperand a, b, d;
  std::optional<LaunchOperand> c;
  std::int64_t m = 0, n = 0, k = 0;
};

// What every group of a call shares.
struct GroupedCall {
  double alpha = 1.0, beta = 0.0, activation_parameter = 0.0;
  int device = 0, sm_count = 0;
};

// Pinned host buffers for the list form's metadata, owned by one plan. A buffer is reused once the copy that read
// it has finished, and keeps its packed bytes, so the same list again costs only the copy. A buffer whose copy was
// captured into a CUDA graph is read by every replay, so it is never reused while the plan lives.
class PinnedMetadata {
 public:
  PinnedMetadata() = default;
  ~PinnedMetadata();
  PinnedMetadata(const PinnedMetadata&) = delete;
  PinnedMetadata& operator=(const PinnedMetadata&) = delete;

  // Packs the problems (unless this buffer already holds them) and queues their one copy into `device_metadata`.
  void upload(const KernelModule& module, const gk_grouped_args& args, const std::vector<gk_grouped_problem>& problems,
              void* device_metadata, std::size_t bytes, cudaStream_t stream);

 private:
  struct Buffer {
    void* host = nullptr;
    std::size_t bytes = 0;
    cudaEvent_t copied = nullptr;
    bool copy_recorded = false, busy = false, kept_by_graph = false;
    gk_grouped_args args{};
    std::vector<gk_grouped_problem> packed;
  };
  Buffer& take(std::size_t bytes);

  std::mutex mutex_;
  std::deque<Buffer> buffers_;
};

// The list form: every group in one launch; host D lands before return, device outputs sync when asked.
void launch_grouped(const KernelModule& module, const std::vector<GroupOperands>& groups, const GroupedCall& call,
                    PinnedMetadata& metadata, cudaStream_t stream, bool sync);

// The contiguous (MoE) form on device tensors: no host read of the group sizes, capturable in a CUDA graph.
void launch_grouped_contiguous(const KernelModule& module, const gk_grouped_contiguous& problem, int groups,
                               const GroupedCall& call, cudaStream_t stream, bool sync);

}  // namespace gemmkit::runtime
