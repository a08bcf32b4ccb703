// gemmkit/torch_export_common.h: what gemmkit's torch glue for exported kernels (gemmkit/torch_export.h) shares
// across op kinds: the kernel's view of torch tensors and their checks, output allocation, the launch's device and
// error handling, and the op's registration. Each kind's glue (torch_export_gemm.cpp, torch_export_grouped.cpp,
// torch_export_conv2d.cpp) is one translation unit that includes this header: setup.py compiles the one its
// extension needs, the JIT build compiles each once per torch installation and links it (one kind's glue builds in
// about two thirds of the time all three took as one file).
//
// Only the headers it needs: torch/extension.h (pybind11) would triple its build time; output tensors come from
// torch's CUDA allocator directly (ATen/cuda/EmptyTensor.h, no dispatch; a grouped call's Ds share one block)
// or Tensor methods (new_empty, for meta tensors) rather than ATen/ops headers, and the device is switched with the
// CUDA runtime rather than c10/cuda/CUDAGuard.h. Everything here is inline, in an anonymous namespace: each kind's
// library keeps its own copy.
#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/cuda/EmptyTensor.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <torch/library.h>

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "gemmkit/torch_export.h"

namespace {

inline at::ScalarType scalar_type(gk_dtype dtype) {
  switch (dtype) {
    case GK_DTYPE_F16: return at::kHalf;
    case GK_DTYPE_BF16: return at::kBFloat16;
    case GK_DTYPE_F32:
    case GK_DTYPE_TF32: return at::kFloat;  // tf32 operands are stored as float
    case GK_DTYPE_F64: return at::kDouble;
    case GK_DTYPE_S8: return at::kChar;
    case GK_DTYPE_U8: return at::kByte;
    case GK_DTYPE_S32: return at::kInt;
  }
  TORCH_CHECK(false, "unknown gk_dtype ", static_cast<int>(dtype));
}

struct Operand {
  at::ScalarType dtype;
  bool row_major;
  int64_t alignment;
};

inline Operand operand(const gk_torch_operand& op) {
  return {scalar_type(op.dtype), op.layout == GK_ROW_MAJOR, op.alignment};
}

// An exported Gemm kernel: what its binding declared, and where its entry points are.
struct GemmKernel {
  Operand a, b, c, d;  // D has C's layout
  bool has_c;
  gk_torch_entry_points entry_points;
  gk_activation activation = GK_ACTIVATION_IDENTITY;  // for kernels that take it at launch
};

// A checked operand: the kernel's view of a rank-2 or rank-3 tensor.
struct Matrix {
  int64_t rows = 0, cols = 0, batch = 1, ld = 0, batch_stride = 0;
};

inline const char* layout_name(bool row_major) {
  return row_major ? "row-major" : "column-major";
}

inline std::string status_text(int status) {
  switch (status) {
    case GK_ERR_CANNOT_IMPLEMENT: return "CUTLASS can_implement() refused the problem";
    case GK_ERR_WORKSPACE: return "the workspace is missing or too small";
    case GK_ERR_INITIALIZE: return "CUTLASS initialize() failed";
    case GK_ERR_ARGS: return "the arguments are malformed";
    default: return "unknown status " + std::to_string(status);
  }
}

// How errors name an operand: "A", or "As[3]" for group 3 of a list.
struct Name {
  const char* operand;
  int64_t group = -1;
};

inline std::ostream& operator<<(std::ostream& out, const Name& name) {
  out << name.operand;
  if (name.group >= 0) out << "[" << name.group << "]";
  return out;
}

// The rule gemmkit's run applies: contiguous along the layout's fast dimension, rows (or columns) not overlapping.
inline bool fits(const at::Tensor& t, bool row_major) {
  const int64_t rows = t.size(-2), cols = t.size(-1);
  if (row_major) return (cols <= 1 || t.stride(-1) == 1) && t.stride(-2) >= (rows <= 1 ? 0 : cols);
  return (rows <= 1 || t.stride(-2) == 1) && t.stride(-1) >= (cols <= 1 ? 0 : rows);
}

// Rank, dtype, device and layout of one operand, and the kernel's view of it; `batches`: rank 3 is allowed too.
// `first` names the tensor whose device every operand shares.
inline Matrix check_matrix(const at::Tensor& t, const Name& name, const Operand& op, const at::Tensor& first,
                           const Name& first_name, bool batches) {
  if (batches) {
    TORCH_CHECK_VALUE(t.dim() == 2 || t.dim() == 3, name, " must be a matrix or a batch of matrices (rank 2 or 3); ",
                      "got shape ", t.sizes());
  } else {
    TORCH_CHECK_VALUE(t.dim() == 2, name, " must be a matrix (rank 2): a grouped kernel takes one matrix per group; ",
                      "got shape ", t.sizes());
  }
  TORCH_CHECK_VALUE(t.scalar_type() == op.dtype, name, " has dtype ", t.scalar_type(), " but the kernel was built for ",
                    op.dtype);
  TORCH_CHECK_VALUE(t.device() == first.device(), name, " is on ", t.device(), " but ", first_name, " is on ",
                    first.device(), "; every tensor must be on ", first_name, "'s device");
  TORCH_CHECK_VALUE(fits(t, op.row_major), name, " has shape ", t.sizes(), " and strides ", t.strides(),
                    " but the kernel reads it ", layout_name(op.row_major), "; pass a ", layout_name(op.row_major),
                    " tensor (", op.row_major ? "x.contiguous()" : "x.mT.contiguous().mT",
                    ") or export a kernel for this layout");
  Matrix m;
  m.rows = t.size(-2);
  m.cols = t.size(-1);
  m.ld = op.row_major ? t.stride(-2) : t.stride(-1);
  if (m.ld == 0) m.ld = op.row_major ? std::max<int64_t>(m.cols, 1) : std::max<int64_t>(m.rows, 1);
  if (t.dim() == 3) {
    m.batch = t.size(0);
    m.batch_stride = m.batch > 1 ? t.stride(0) : 0;
  }
  return m;
}

// The kernel's vector accesses: leading dimension, batch stride and address multiples of the alignment, and with
// `aligned_extents` (CUTLASS 2.x grouped kernels) the contiguous extent too.
inline void check_alignment(const at::Tensor& t, const Name& name, const Operand& op, const Matrix& m,
                            bool aligned_extents) {
  const auto address = t.is_meta() ? 0 : reinterpret_cast<std::uintptr_t>(t.data_ptr());
  const bool aligned = m.ld % op.alignment == 0 && m.batch_stride % op.alignment == 0 &&
                       address % static_cast<std::uintptr_t>(op.alignment * t.element_size()) == 0;
  TORCH_CHECK_VALUE(aligned, name, ": its leading dimension ", m.ld, m.batch > 1 ? ", batch stride " : "",
                    m.batch > 1 ? std::to_string(m.batch_stride) : std::string(), " and address must be multiples of ",
                    op.alignment, " elements (", op.alignment * t.element_size(),
                    " bytes), the kernel's alignment; pad the leading dimension or export a kernel with a smaller "
                    "alignment");
  const int64_t extent = op.row_major ? m.cols : m.rows;
  TORCH_CHECK_VALUE(!aligned_extents || extent % op.alignment == 0, name, " is ", m.rows, " x ", m.cols, ": its ",
                    op.row_major ? "rows" : "columns", " (", extent, " elements) must be a multiple of ", op.alignment,
                    " elements, since this CUTLASS 2.x kernel reads whole vectors; pad them or export "
                    "a kernel with a smaller alignment");
}

inline Matrix check_operand(const at::Tensor& t, const Name& name, const Operand& op, const at::Tensor& A) {
  const Matrix m = check_matrix(t, name, op, A, Name{"A"}, /*batches=*/true);
  check_alignment(t, name, op, m, /*aligned_extents=*/false);
  return m;
}

// An output in `d`'s dtype and layout on `like`'s device, (batch x) rows x cols; CUDA tensors straight from torch's
// caching allocator (on the device's current stream), meta tensors (torch.compile's tracing) through new_empty.
inline at::Tensor allocate_output(const Operand& d, const at::Tensor& like, std::optional<int64_t> batch, int64_t rows,
                                  int64_t cols) {
  std::vector<int64_t> sizes{rows, cols}, strides{d.row_major ? cols : 1, d.row_major ? 1 : rows};
  if (batch) {
    sizes.insert(sizes.begin(), *batch);
    strides.insert(strides.begin(), rows * cols);
  }
  if (like.is_meta()) return like.new_empty_strided(sizes, strides, like.options().dtype(d.dtype));
  return at::detail::empty_strided_cuda(sizes, strides, d.dtype, like.device());
}

inline int multiprocessor_count(int device) {
  int count = 0;
  TORCH_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) == cudaSuccess,
              "cannot read the multiprocessor count of CUDA device ", device);
  return count;
}

// A failed launch as an error with CUDA's reason; other statuses are the caller's to report.
inline void check_launch(int status, gk_kernel_name_fn kernel_name, gk_last_cuda_error_fn last_cuda_error) {
  if (status != GK_ERR_LAUNCH) return;
  const auto error = static_cast<cudaError_t>(last_cuda_error());
  TORCH_CHECK(false, "launching ", kernel_name(), " failed: ", cudaGetErrorName(error), " (", cudaGetErrorString(error),
              ")");
}

// Runs a single-problem module (GEMM or conv entry points) on the current stream of `device`, its workspace taken from
// torch's allocator like `like`'s memory: stream-ordered like the launch, so the block is reused only after the
// kernel. A failed launch throws with CUDA's reason; other statuses are returned for the caller to report.
template <class EntryPoints, class Args>
int run_with_workspace(const EntryPoints& module, const Args& args, const at::Tensor& like, int device) {
  const size_t workspace_bytes = module.workspace_size(&args);
  at::Tensor workspace;
  if (workspace_bytes > 0) {
    workspace = like.new_empty({static_cast<int64_t>(workspace_bytes)}, like.options().dtype(at::kByte));
  }
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device).stream();
  const int status = module.run(&args, workspace_bytes > 0 ? workspace.data_ptr() : nullptr, stream);
  check_launch(status, module.kernel_name, module.last_cuda_error);
  return status;
}

// Makes `device` current for the launch and restores the caller's device afterwards.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    TORCH_CHECK(cudaGetDevice(&previous_) == cudaSuccess, "cannot read the current CUDA device");
    if (previous_ != device) TORCH_CHECK(cudaSetDevice(device) == cudaSuccess, "cannot switch to CUDA device ", device);
  }
  ~DeviceGuard() {
    int current = previous_;
    if (cudaGetDevice(&current) == cudaSuccess && current != previous_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

// The registrations live as long as the process: the ops stay callable while their extension is loaded.
std::mutex libraries_mutex;
std::vector<std::unique_ptr<torch::Library>> libraries;
thread_local std::string last_error;

// Defines `schema` in the namespace `ns` and lets `implement` register its one function for every device (CUDA
// tensors run, meta and fake tensors, as torch.compile traces, get the outputs' shapes only): what TORCH_LIBRARY
// expands to, with the namespace known only when the extension is imported. NULL, or the reason it failed.
template <class Implement>
inline const char* register_op(const char* ns, const char* schema, Implement&& implement) {
  try {
    auto definition = std::make_unique<torch::Library>(torch::Library::DEF, ns, std::nullopt, __FILE__, __LINE__);
    definition->def(schema);
    auto implementation = std::make_unique<torch::Library>(
        torch::Library::IMPL, ns, c10::DispatchKey::CompositeExplicitAutograd, __FILE__, __LINE__);
    implement(*implementation);
    const std::lock_guard<std::mutex> lock(libraries_mutex);
    libraries.push_back(std::move(definition));
    libraries.push_back(std::move(implementation));
    return nullptr;
  } catch (const std::exception& error) {
    last_error = error.what();
    return last_error.c_str();
  }
}

}  // namespace
