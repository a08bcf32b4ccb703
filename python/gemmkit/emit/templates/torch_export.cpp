// gemmkit/torch_export.cpp: gemmkit's torch glue for exported kernels (gemmkit/torch_export.h): tensors checked
// against the compiled kernel, the kernel's C arguments (abi.h), the launch on torch's current stream with a
// workspace from torch's allocator, and the op's registration; for grouped kernels also the per-group metadata,
// packed into pinned memory and sent in one copy per call. One translation unit for every exported kernel:
// setup.py compiles it into the extension, the JIT build compiles it once per torch installation and links it.
//
// Only the headers it needs: torch/extension.h (pybind11) would triple its build time; output tensors come from
// torch's CUDA allocator directly (ATen/cuda/EmptyTensor.h, no dispatch; a grouped call's Ds share one block)
// or Tensor methods (new_empty, for meta tensors) rather than ATen/ops headers, and the device is switched with the
// CUDA runtime rather than c10/cuda/CUDAGuard.h.
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

at::ScalarType scalar_type(gk_dtype dtype) {
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

Operand operand(const gk_torch_operand& op) {
  return {scalar_type(op.dtype), op.layout == GK_ROW_MAJOR, op.alignment};
}

// An exported Gemm kernel: what its binding declared, and where its entry points are.
struct GemmKernel {
  Operand a, b, c, d;  // D has C's layout
  bool has_c;
  gk_torch_entry_points entry_points;
};

// A checked operand: the kernel's view of a rank-2 or rank-3 tensor.
struct Matrix {
  int64_t rows = 0, cols = 0, batch = 1, ld = 0, batch_stride = 0;
};

const char* layout_name(bool row_major) {
  return row_major ? "row-major" : "column-major";
}

std::string status_text(int status) {
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

std::ostream& operator<<(std::ostream& out, const Name& name) {
  out << name.operand;
  if (name.group >= 0) out << "[" << name.group << "]";
  return out;
}

// The rule gemmkit's run applies: contiguous along the layout's fast dimension, rows (or columns) not overlapping.
bool fits(const at::Tensor& t, bool row_major) {
  const int64_t rows = t.size(-2), cols = t.size(-1);
  if (row_major) return (cols <= 1 || t.stride(-1) == 1) && t.stride(-2) >= (rows <= 1 ? 0 : cols);
  return (rows <= 1 || t.stride(-2) == 1) && t.stride(-1) >= (cols <= 1 ? 0 : rows);
}

// Rank, dtype, device and layout of one operand, and the kernel's view of it; `batches`: rank 3 is allowed too.
// `first` names the tensor whose device every operand shares.
Matrix check_matrix(const at::Tensor& t, const Name& name, const Operand& op, const at::Tensor& first,
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
void check_alignment(const at::Tensor& t, const Name& name, const Operand& op, const Matrix& m, bool aligned_extents) {
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

Matrix check_operand(const at::Tensor& t, const Name& name, const Operand& op, const at::Tensor& A) {
  const Matrix m = check_matrix(t, name, op, A, Name{"A"}, /*batches=*/true);
  check_alignment(t, name, op, m, /*aligned_extents=*/false);
  return m;
}

// An output in `d`'s dtype and layout on `like`'s device, (batch x) rows x cols; CUDA tensors straight from torch's
// caching allocator (on the device's current stream), meta tensors (torch.compile's tracing) through new_empty.
at::Tensor allocate_output(const Operand& d, const at::Tensor& like, std::optional<int64_t> batch, int64_t rows,
                           int64_t cols) {
  std::vector<int64_t> sizes{rows, cols}, strides{d.row_major ? cols : 1, d.row_major ? 1 : rows};
  if (batch) {
    sizes.insert(sizes.begin(), *batch);
    strides.insert(strides.begin(), rows * cols);
  }
  if (like.is_meta()) return like.new_empty_strided(sizes, strides, like.options().dtype(d.dtype));
  return at::detail::empty_strided_cuda(sizes, strides, d.dtype, like.device());
}

// A grouped call's outputs, (rows, cols) each in D's layout: on CUDA, carved out of one block from torch's
// allocator at 256-byte aligned offsets, so that a call of many groups allocates once; on meta tensors, one each.
// Each output has a storage of its own (its data pointer holds a reference to the block), because torch requires a
// custom op's outputs not to alias one another (views of one storage would).
void release_block(void* block) {
  delete static_cast<c10::Storage*>(block);
}

std::vector<at::Tensor> allocate_grouped_outputs(const Operand& d, const at::Tensor& like,
                                                 const std::vector<std::pair<int64_t, int64_t>>& extents) {
  std::vector<at::Tensor> out;
  out.reserve(extents.size());
  if (like.is_meta()) {
    for (const auto& [rows, cols] : extents) out.push_back(allocate_output(d, like, std::nullopt, rows, cols));
    return out;
  }
  const int64_t element = static_cast<int64_t>(c10::elementSize(d.dtype));
  std::vector<int64_t> offsets;  // in bytes
  offsets.reserve(extents.size());
  int64_t bytes = 0;
  for (const auto& [rows, cols] : extents) {
    offsets.push_back(bytes);
    bytes += (rows * cols * element + 255) / 256 * 256;
  }
  const at::Tensor block =
      at::detail::empty_cuda({std::max<int64_t>(bytes, 1)}, at::kByte, like.device(), std::nullopt);
  auto* base = static_cast<char*>(block.data_ptr());
  const caffe2::TypeMeta dtype = c10::scalarTypeToTypeMeta(d.dtype);
  for (size_t g = 0; g < extents.size(); ++g) {
    const auto [rows, cols] = extents[g];
    c10::DataPtr data(base + offsets[g], new c10::Storage(block.storage()), &release_block, block.device());
    c10::Storage storage(c10::Storage::use_byte_size_t(), static_cast<size_t>(rows * cols * element), std::move(data),
                         /*allocator=*/nullptr, /*resizable=*/false);
    at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(std::move(storage), block.key_set(), dtype);
    const std::array<int64_t, 2> sizes{rows, cols}, strides{d.row_major ? cols : 1, d.row_major ? 1 : rows};
    t.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides);
    out.push_back(std::move(t));
  }
  return out;
}

int multiprocessor_count(int device) {
  int count = 0;
  TORCH_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) == cudaSuccess,
              "cannot read the multiprocessor count of CUDA device ", device);
  return count;
}

// A failed launch as an error with CUDA's reason; other statuses are the caller's to report.
void check_launch(int status, gk_kernel_name_fn kernel_name, gk_last_cuda_error_fn last_cuda_error) {
  if (status != GK_ERR_LAUNCH) return;
  const auto error = static_cast<cudaError_t>(last_cuda_error());
  TORCH_CHECK(false, "launching ", kernel_name(), " failed: ", cudaGetErrorName(error), " (", cudaGetErrorString(error),
              ")");
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

// D = act(alpha * A @ B + beta * C); `activation_parameter` is leaky_relu's slope.
at::Tensor run_gemm(const GemmKernel& kernel, const at::Tensor& A, const at::Tensor& B,
                    const std::optional<at::Tensor>& C, double alpha, double beta, double activation_parameter) {
  TORCH_CHECK_VALUE(A.is_cuda() || A.is_meta(), "A is on ", A.device(), "; the kernel runs on CUDA tensors");
  const Matrix a = check_operand(A, Name{"A"}, kernel.a, A);
  const Matrix b = check_operand(B, Name{"B"}, kernel.b, A);
  TORCH_CHECK_VALUE(a.cols == b.rows, "A is ", a.rows, " x ", a.cols, " (M x K) but B is ", b.rows, " x ", b.cols,
                    " (K x N); their K extents must agree");
  TORCH_CHECK_VALUE(a.batch == b.batch || a.batch == 1 || b.batch == 1, "A has a batch of ", a.batch, " and B of ",
                    b.batch, "; they must be equal, or one of them 1 (broadcast)");
  const bool c_given = C.has_value() && C->defined();
  TORCH_CHECK_VALUE(!c_given || kernel.has_c, "the kernel was built without a source operand C; pass C=None");
  TORCH_CHECK_VALUE(c_given || beta == 0.0, "beta is ", beta, " but no C was given; pass C or beta=0");
  const int64_t m = a.rows, n = b.cols, k = a.cols, batch = std::max(a.batch, b.batch);
  const bool batched = A.dim() == 3 || B.dim() == 3;
  Matrix c;
  if (c_given) {
    c = check_operand(*C, Name{"C"}, kernel.c, A);
    TORCH_CHECK_VALUE(c.rows == m && c.cols == n, "C is ", c.rows, " x ", c.cols, " but A @ B is ", m, " x ", n);
    TORCH_CHECK_VALUE(c.batch == 1 || c.batch == batch, "C has a batch of ", c.batch, " but the GEMM's batch is ",
                      batch);
  }
  at::Tensor D = allocate_output(kernel.d, A, batched ? std::optional<int64_t>(batch) : std::nullopt, m, n);
  if (A.is_meta() || m == 0 || n == 0 || batch == 0) return D;
  TORCH_CHECK_VALUE(k > 0, "K is 0: the kernel needs K >= 1");
  TORCH_CHECK_VALUE(m <= INT32_MAX && n <= INT32_MAX && k <= INT32_MAX && batch <= INT32_MAX, "the problem ", m, " x ",
                    n, " x ", k, " exceeds 2^31-1 in one dimension");
  const Matrix d = check_operand(D, Name{"D"}, kernel.d, A);

  const int device = A.get_device();
  const DeviceGuard guard(device);
  gk_gemm_args args{};
  args.m = static_cast<int32_t>(m);
  args.n = static_cast<int32_t>(n);
  args.k = static_cast<int32_t>(k);
  args.batch = static_cast<int32_t>(batch);
  args.A = A.data_ptr();
  args.B = B.data_ptr();
  args.C = c_given ? C->data_ptr() : nullptr;
  args.D = D.data_ptr();
  args.lda = a.ld;
  args.ldb = b.ld;
  args.ldc = c_given ? c.ld : d.ld;
  args.ldd = d.ld;
  args.batch_stride_A = a.batch_stride;
  args.batch_stride_B = b.batch_stride;
  args.batch_stride_C = c_given ? c.batch_stride : 0;
  args.batch_stride_D = d.batch_stride;
  args.alpha = alpha;
  args.beta = beta;
  args.activation_params[0] = activation_parameter;
  args.device_id = device;
  args.sm_count = multiprocessor_count(device);
  args.raster_order = 0;  // gemmkit's defaults: the heuristic raster order, swizzle 1, one split
  args.max_swizzle_size = 1;
  args.splits = 1;

  const gk_torch_entry_points& kernel_module = kernel.entry_points;
  // Stream-ordered like the launch: torch's allocator reuses the block only after the kernel on this stream.
  const size_t workspace_bytes = kernel_module.workspace_size(&args);
  at::Tensor workspace;
  if (workspace_bytes > 0) {
    workspace = A.new_empty({static_cast<int64_t>(workspace_bytes)}, A.options().dtype(at::kByte));
  }
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device).stream();
  const int status = kernel_module.run(&args, workspace_bytes > 0 ? workspace.data_ptr() : nullptr, stream);
  check_launch(status, kernel_module.kernel_name, kernel_module.last_cuda_error);
  TORCH_CHECK(status == GK_OK, "kernel ", kernel_module.kernel_name(), " refused the problem m=", m, " n=", n, " k=", k,
              " batch=", batch, ": ", status_text(status));
  return D;
}

// ---- grouped kernels --------------------------------------------------------------------------------------------

// An exported grouped kernel: the operands it describes (gk_grouped_describe) and its entry points.
struct GroupedKernel {
  Operand a, b, c, d;  // D has C's layout
  bool aligned_extents;
  gk_torch_grouped_entry_points entry_points;
};

GroupedKernel grouped_kernel(const gk_torch_grouped_entry_points& entry_points) {
  const gk_grouped_info& info = *entry_points.describe();
  const auto operand_of = [](int32_t dtype, int32_t layout, int32_t alignment) {
    return operand(gk_torch_operand{static_cast<gk_dtype>(dtype), static_cast<gk_layout>(layout), alignment});
  };
  return {operand_of(info.element_a, info.layout_a, info.alignment_a),
          operand_of(info.element_b, info.layout_b, info.alignment_b),
          operand_of(info.element_c, info.layout_c, info.alignment_c),
          operand_of(info.element_d, info.layout_c, info.alignment_d),
          info.aligned_extents != 0,
          entry_points};
}

// While a stream is captured into a CUDA graph (torch captures in the global mode), calls such as cudaHostAlloc or
// cudaEventQuery would invalidate the capture; this thread relaxes the mode while it manages its pinned buffers.
class RelaxedCapture {
 public:
  explicit RelaxedCapture(bool capturing) : active_(capturing) {
    if (active_) cudaThreadExchangeStreamCaptureMode(&mode_);
  }
  ~RelaxedCapture() {
    if (active_) cudaThreadExchangeStreamCaptureMode(&mode_);
  }
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;

 private:
  bool active_;
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

// Pinned host buffers for the packed metadata of grouped calls, so that each call sends it in one asynchronous
// copy. A buffer is reused once the copy that read it has finished (an event recorded after the copy); a buffer
// whose copy was captured into a CUDA graph is read by every replay, so it is never reused nor freed (the process
// keeps it: a few KB per captured call).
class PinnedBuffers {
 public:
  // Packs `problems` into a free buffer and queues its copy to `device_metadata` (`bytes` long) on `stream`.
  void upload(const GroupedKernel& kernel, const gk_grouped_args& args, const std::vector<gk_grouped_problem>& problems,
              void* device_metadata, size_t bytes, cudaStream_t stream) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    TORCH_CHECK(cudaStreamIsCapturing(stream, &capture) == cudaSuccess, "cannot query the stream's capture status");
    const bool capturing = capture != cudaStreamCaptureStatusNone;
    Buffer& buffer = take(bytes, args.device_id, capturing);
    struct Release {  // on every exit, errors included
      PinnedBuffers& owner;
      Buffer& buffer;
      ~Release() {
        const std::lock_guard<std::mutex> lock(owner.mutex_);
        buffer.busy = false;
      }
    } release{*this, buffer};
    const gk_torch_grouped_entry_points& module = kernel.entry_points;
    int32_t failed = -1;
    const int status = module.pack(&args, problems.data(), buffer.host, bytes, &failed);
    TORCH_CHECK(status == GK_OK, "kernel ", module.kernel_name(), " refused group ", failed, ": ", status_text(status));
    TORCH_CHECK(cudaMemcpyAsync(device_metadata, buffer.host, bytes, cudaMemcpyHostToDevice, stream) == cudaSuccess,
                "cannot copy the grouped metadata to the GPU: ", cudaGetErrorString(cudaGetLastError()));
    if (capturing) {
      buffer.kept_by_graph = true;
    } else {
      TORCH_CHECK(cudaEventRecord(buffer.copied, stream) == cudaSuccess, "cannot record an event on the stream");
      buffer.copy_recorded = true;
    }
  }

 private:
  struct Buffer {
    void* host = nullptr;
    size_t bytes = 0;
    int device = 0;  // of its event
    cudaEvent_t copied = nullptr;
    bool copy_recorded = false, busy = false, kept_by_graph = false;
  };

  Buffer& take(size_t bytes, int device, bool capturing) {
    const RelaxedCapture relaxed(capturing);
    const std::lock_guard<std::mutex> lock(mutex_);
    for (Buffer& buffer : buffers_) {
      if (buffer.busy || buffer.kept_by_graph || buffer.device != device || buffer.bytes < bytes) continue;
      if (buffer.copy_recorded && cudaEventQuery(buffer.copied) != cudaSuccess) {
        cudaGetLastError();  // cudaErrorNotReady: still copying, which is no error for later calls
        continue;
      }
      buffer.busy = true;
      return buffer;
    }
    Buffer buffer;
    buffer.bytes = std::max<size_t>(bytes, 4096);  // most calls of a process then share a few buffers
    buffer.device = device;
    TORCH_CHECK(cudaHostAlloc(&buffer.host, buffer.bytes, cudaHostAllocPortable) == cudaSuccess, "cannot allocate ",
                buffer.bytes, " bytes of pinned host memory: ", cudaGetErrorString(cudaGetLastError()));
    TORCH_CHECK(cudaEventCreateWithFlags(&buffer.copied, cudaEventDisableTiming) == cudaSuccess,
                "cannot create a CUDA event");
    buffer.busy = true;
    return buffers_.emplace_back(buffer);
  }

  std::mutex mutex_;
  std::deque<Buffer> buffers_;  // stable addresses; never freed (the process may exit while copies are queued)
};

PinnedBuffers pinned_buffers;

// D[g] = act(alpha * As[g] @ Bs[g] + beta * Cs[g]) for every group in one launch; `activation_parameter` is
// leaky_relu's slope. Groups with an empty D are skipped; one with K = 0 but a non-empty D is refused.
std::vector<at::Tensor> run_grouped(const GroupedKernel& kernel, at::TensorList As, at::TensorList Bs,
                                    const std::optional<at::TensorList>& Cs, double alpha, double beta,
                                    double activation_parameter) {
  const int64_t groups = static_cast<int64_t>(As.size());
  const bool c_given = Cs.has_value();
  TORCH_CHECK_VALUE(groups > 0, "As is empty; pass at least one group");
  TORCH_CHECK_VALUE(
      static_cast<int64_t>(Bs.size()) == groups && (!c_given || static_cast<int64_t>(Cs->size()) == groups), "As has ",
      groups, " tensors, Bs ", Bs.size(), c_given ? ", Cs " : "", c_given ? std::to_string(Cs->size()) : std::string(),
      "; pass one A, B", c_given ? " and C" : "", " per group");
  TORCH_CHECK_VALUE(c_given || beta == 0.0, "beta is ", beta, " but no Cs were given; pass Cs or beta=0");
  TORCH_CHECK_VALUE(groups <= INT32_MAX, "the kernel takes at most 2^31-1 groups");
  const at::Tensor& first = As[0];
  const Name first_name{"As", 0};
  TORCH_CHECK_VALUE(first.is_cuda() || first.is_meta(), first_name, " is on ", first.device(),
                    "; the kernel runs on CUDA tensors");
  // Every check that needs no output first, then the outputs in one allocation, then the rest.
  std::vector<std::array<Matrix, 3>> checked(static_cast<size_t>(groups));  // a, b, c per group
  std::vector<std::pair<int64_t, int64_t>> extents(static_cast<size_t>(groups));
  for (int64_t g = 0; g < groups; ++g) {
    const Name a_name{"As", g}, b_name{"Bs", g}, c_name{"Cs", g};
    auto& [a, b, c] = checked[static_cast<size_t>(g)];
    a = check_matrix(As[g], a_name, kernel.a, first, first_name, /*batches=*/false);
    b = check_matrix(Bs[g], b_name, kernel.b, first, first_name, /*batches=*/false);
    TORCH_CHECK_VALUE(a.cols == b.rows, a_name, " is ", a.rows, " x ", a.cols, " (M x K) but ", b_name, " is ", b.rows,
                      " x ", b.cols, " (K x N); their K extents must agree");
    if (c_given) {
      c = check_matrix((*Cs)[g], c_name, kernel.c, first, first_name, /*batches=*/false);
      TORCH_CHECK_VALUE(c.rows == a.rows && c.cols == b.cols, c_name, " is ", c.rows, " x ", c.cols, " but ", a_name,
                        " @ ", b_name, " is ", a.rows, " x ", b.cols);
    }
    extents[static_cast<size_t>(g)] = {a.rows, b.cols};
  }
  std::vector<at::Tensor> D = allocate_grouped_outputs(kernel.d, first, extents);
  std::vector<gk_grouped_problem> problems(static_cast<size_t>(groups));
  bool any_work = false;
  for (int64_t g = 0; g < groups; ++g) {
    const Name a_name{"As", g}, b_name{"Bs", g}, c_name{"Cs", g}, d_name{"D", g};
    const auto& [a, b, c] = checked[static_cast<size_t>(g)];
    const int64_t m = a.rows, n = b.cols, k = a.cols;
    if (m == 0 || n == 0) continue;  // nothing to compute; the kernel skips the group and reads none of its pointers
    TORCH_CHECK_VALUE(k > 0, a_name, " and ", b_name, ": K is 0 but ", d_name, " is ", m, " x ", n,
                      "; the kernel needs K >= 1 (D is then beta * C, activated: compute that group without it)");
    TORCH_CHECK_VALUE(m <= INT32_MAX && n <= INT32_MAX && k <= INT32_MAX, "group ", g, ": the problem ", m, " x ", n,
                      " x ", k, " exceeds 2^31-1 in one dimension");
    if (first.is_meta()) continue;
    const at::Tensor& out = D[static_cast<size_t>(g)];
    const Matrix d = check_matrix(out, d_name, kernel.d, first, first_name, /*batches=*/false);
    check_alignment(As[g], a_name, kernel.a, a, kernel.aligned_extents);
    check_alignment(Bs[g], b_name, kernel.b, b, kernel.aligned_extents);
    if (c_given) check_alignment((*Cs)[g], c_name, kernel.c, c, kernel.aligned_extents);
    check_alignment(out, d_name, kernel.d, d, kernel.aligned_extents);
    gk_grouped_problem& p = problems[static_cast<size_t>(g)];
    p.m = static_cast<int32_t>(m);
    p.n = static_cast<int32_t>(n);
    p.k = static_cast<int32_t>(k);
    p.A = As[g].data_ptr();
    p.B = Bs[g].data_ptr();
    p.C = c_given ? (*Cs)[g].data_ptr() : nullptr;
    p.D = out.data_ptr();
    p.lda = a.ld;
    p.ldb = b.ld;
    p.ldc = c_given ? c.ld : d.ld;
    p.ldd = d.ld;
    any_work = true;
  }
  if (!any_work) return D;

  const int device = first.get_device();
  const DeviceGuard guard(device);
  const gk_torch_grouped_entry_points& module = kernel.entry_points;
  gk_grouped_args args{};
  args.groups = static_cast<int32_t>(groups);
  args.device_id = device;
  args.sm_count = multiprocessor_count(device);
  args.alpha = alpha;
  args.beta = beta;
  args.activation_params[0] = activation_parameter;
  // One block from torch's allocator, stream-ordered like the launch: the metadata, then the workspace.
  const size_t metadata_bytes = module.metadata_bytes(args.groups);
  const size_t workspace_offset = (metadata_bytes + 255) / 256 * 256;
  const size_t workspace_bytes = module.workspace_size(&args);
  const at::Tensor buffer = at::detail::empty_cuda({static_cast<int64_t>(workspace_offset + workspace_bytes)},
                                                   at::kByte, first.device(), std::nullopt);
  auto* metadata = static_cast<char*>(buffer.data_ptr());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device).stream();
  pinned_buffers.upload(kernel, args, problems, metadata, metadata_bytes, stream);
  const int status = module.run(&args, metadata, workspace_bytes > 0 ? metadata + workspace_offset : nullptr, stream);
  check_launch(status, module.kernel_name, module.last_cuda_error);
  TORCH_CHECK(status == GK_OK, "kernel ", module.kernel_name(), " refused the call of ", groups,
              " groups: ", status_text(status));
  return D;
}

// ---- Conv2d (fprop) kernels -------------------------------------------------------------------------------------

// An exported Conv2d fprop kernel: its element types and vectors, and where its entry points are.
struct Conv2dKernel {
  at::ScalarType input, weight, output;
  int64_t alignment_input, alignment_weight, alignment_output;
  gk_torch_conv2d_entry_points entry_points;
};

// A 4-D tensor (N, C, H, W) in channels_last memory of `dtype` on `first`'s device, whose channels and address are
// multiples of `alignment`.
void check_channels_last(const at::Tensor& t, const char* name, at::ScalarType dtype, int64_t alignment,
                         const at::Tensor& first) {
  TORCH_CHECK_VALUE(t.dim() == 4, name, " must be 4-D, (N, C, H, W) activations or (K, C, R, S) filters; got shape ",
                    t.sizes());
  TORCH_CHECK_VALUE(t.scalar_type() == dtype, name, " has dtype ", t.scalar_type(), " but the kernel was built for ",
                    dtype);
  TORCH_CHECK_VALUE(t.device() == first.device(), name, " is on ", t.device(), " but input is on ", first.device(),
                    "; every tensor must be on input's device");
  TORCH_CHECK_VALUE(t.is_contiguous(at::MemoryFormat::ChannelsLast), name, " has shape ", t.sizes(), " and strides ",
                    t.strides(),
                    " but the kernel reads channels_last memory (NHWC / KRSC) in place; pass "
                    "x.contiguous(memory_format=torch.channels_last)");
  const auto address = t.is_meta() ? 0 : reinterpret_cast<std::uintptr_t>(t.data_ptr());
  TORCH_CHECK_VALUE(
      t.size(1) % alignment == 0 && address % static_cast<std::uintptr_t>(alignment * t.element_size()) == 0, name,
      " has ", t.size(1), " channels; its channel count and address must be multiples of ", alignment,
      " elements, the vectors the kernel reads; pad the channels or export a kernel with a "
      "smaller alignment");
}

// One (h, w) pair of the schema's int[2] arguments, each at least `least`.
std::array<int64_t, 2> pair(c10::IntArrayRef values, const char* name, int64_t least) {
  TORCH_CHECK_VALUE(values.size() == 2, name, " must be an int or a pair (h, w); got ", values);
  TORCH_CHECK_VALUE(values[0] >= least && values[1] >= least, name, " must be at least ", least, "; got ", values);
  return {values[0], values[1]};
}

// y = act(alpha * conv2d(x, w) + beta * C), cross-correlation as torch.nn.functional.conv2d (groups = 1).
at::Tensor run_conv2d(const Conv2dKernel& kernel, const at::Tensor& x, const at::Tensor& w,
                      const std::optional<at::Tensor>& C, c10::IntArrayRef stride_arg, c10::IntArrayRef padding_arg,
                      c10::IntArrayRef dilation_arg, double alpha, double beta, double activation_parameter) {
  TORCH_CHECK_VALUE(x.is_cuda() || x.is_meta(), "input is on ", x.device(), "; the kernel runs on CUDA tensors");
  check_channels_last(x, "input", kernel.input, kernel.alignment_input, x);
  check_channels_last(w, "weight", kernel.weight, kernel.alignment_weight, x);
  const auto stride = pair(stride_arg, "stride", 1), padding = pair(padding_arg, "padding", 0),
             dilation = pair(dilation_arg, "dilation", 1);
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), wd = x.size(3);
  const int64_t k = w.size(0), r = w.size(2), s = w.size(3);
  TORCH_CHECK_VALUE(w.size(1) == c, "input has ", c, " channels but weight ", w.size(1),
                    "; the kernel computes groups = 1, where they are equal");
  const int64_t p = (h + 2 * padding[0] - dilation[0] * (r - 1) - 1) / stride[0] + 1;
  const int64_t q = (wd + 2 * padding[1] - dilation[1] * (s - 1) - 1) / stride[1] + 1;
  TORCH_CHECK_VALUE(p >= 1 && q >= 1, "the filter ", r, " x ", s, " (dilation ", dilation[0], " x ", dilation[1],
                    ") is larger than the padded input ", h + 2 * padding[0], " x ", wd + 2 * padding[1]);
  const bool c_given = C.has_value() && C->defined();
  TORCH_CHECK_VALUE(c_given || beta == 0.0, "beta is ", beta, " but no C was given; pass C or beta=0");
  if (c_given) {
    check_channels_last(*C, "C", kernel.output, kernel.alignment_output, x);
    TORCH_CHECK_VALUE(C->sizes() == at::IntArrayRef({n, k, p, q}), "C has shape ", C->sizes(), " but the output is (",
                      n, ", ", k, ", ", p, ", ", q, ")");
  }
  const std::vector<int64_t> sizes{n, k, p, q}, strides{p * q * k, 1, q * k, k};  // channels_last
  at::Tensor y = x.is_meta() ? x.new_empty_strided(sizes, strides, x.options().dtype(kernel.output))
                             : at::detail::empty_strided_cuda(sizes, strides, kernel.output, x.device());
  if (x.is_meta() || n == 0) return y;
  TORCH_CHECK_VALUE(k % kernel.alignment_output == 0, "weight has ", k, " filters: the output's channels must be a ",
                    "multiple of ", kernel.alignment_output, ", the vectors the kernel writes");
  for (const int64_t extent :
       {n, h, wd, c, k, r, s, p, q, padding[0], padding[1], stride[0], stride[1], dilation[0], dilation[1]}) {
    TORCH_CHECK_VALUE(extent <= INT32_MAX, "an extent or parameter of ", extent, " exceeds 2^31-1");
  }

  const int device = x.get_device();
  const DeviceGuard guard(device);
  gk_conv2d_args args{};
  args.n = static_cast<int32_t>(n), args.h = static_cast<int32_t>(h), args.w = static_cast<int32_t>(wd);
  args.c = static_cast<int32_t>(c), args.k = static_cast<int32_t>(k), args.r = static_cast<int32_t>(r);
  args.s = static_cast<int32_t>(s), args.p = static_cast<int32_t>(p), args.q = static_cast<int32_t>(q);
  args.pad_h = static_cast<int32_t>(padding[0]), args.pad_w = static_cast<int32_t>(padding[1]);
  args.stride_h = static_cast<int32_t>(stride[0]), args.stride_w = static_cast<int32_t>(stride[1]);
  args.dilation_h = static_cast<int32_t>(dilation[0]), args.dilation_w = static_cast<int32_t>(dilation[1]);
  args.split_k_slices = 1;
  args.A = x.data_ptr();
  args.B = w.data_ptr();
  args.C = c_given ? C->data_ptr() : nullptr;
  args.D = y.data_ptr();
  args.alpha = alpha;
  args.beta = beta;
  args.activation_params[0] = activation_parameter;
  args.device_id = device;

  const gk_torch_conv2d_entry_points& kernel_module = kernel.entry_points;
  const auto problem = [&] {
    return "input (" + std::to_string(n) + ", " + std::to_string(c) + ", " + std::to_string(h) + ", " +
           std::to_string(wd) + ") and weight (" + std::to_string(k) + ", " + std::to_string(c) + ", " +
           std::to_string(r) + ", " + std::to_string(s) + ")";
  };
  const int implementable = kernel_module.can_implement(&args);
  TORCH_CHECK_VALUE(implementable == GK_OK, "kernel ", kernel_module.kernel_name(), " cannot compute ", problem(), ": ",
                    status_text(implementable),
                    " (e.g. an optimized kernel takes filters of at most 32 x 32); export one for this problem");
  const size_t workspace_bytes = kernel_module.workspace_size(&args);
  at::Tensor workspace;
  if (workspace_bytes > 0) {
    workspace = x.new_empty({static_cast<int64_t>(workspace_bytes)}, x.options().dtype(at::kByte));
  }
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device).stream();
  const int status = kernel_module.run(&args, workspace_bytes > 0 ? workspace.data_ptr() : nullptr, stream);
  check_launch(status, kernel_module.kernel_name, kernel_module.last_cuda_error);
  TORCH_CHECK(status == GK_OK, "kernel ", kernel_module.kernel_name(), " refused ", problem(), ": ",
              status_text(status));
  return y;
}

// The registrations live as long as the process: the ops stay callable while their extension is loaded.
std::mutex libraries_mutex;
std::vector<std::unique_ptr<torch::Library>> libraries;
thread_local std::string last_error;

// Defines `schema` in the namespace `ns` and lets `implement` register its one function for every device (CUDA
// tensors run, meta and fake tensors, as torch.compile traces, get the outputs' shapes only): what TORCH_LIBRARY
// expands to, with the namespace known only when the extension is imported. NULL, or the reason it failed.
template <class Implement>
const char* register_op(const char* ns, const char* schema, Implement&& implement) {
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

extern "C" const char* gk_torch_register_gemm_v1(const char* ns, const char* schema, const gk_torch_gemm_kernel* k,
                                                 const gk_torch_entry_points* entry_points) {
  return register_op(ns, schema, [&](torch::Library& library) {
    const GemmKernel kernel{operand(k->a), operand(k->b), operand(k->c), operand(k->d), k->has_c != 0, *entry_points};
    if (k->takes_slope) {
      library.impl("run",
                   [kernel](const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C, double alpha,
                            double beta, double slope) { return run_gemm(kernel, A, B, C, alpha, beta, slope); });
    } else {
      library.impl("run", [kernel](const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C,
                                   double alpha, double beta) { return run_gemm(kernel, A, B, C, alpha, beta, 0.0); });
    }
  });
}

extern "C" const char* gk_torch_register_grouped_v1(const char* ns, const char* schema, int takes_slope,
                                                    const gk_torch_grouped_entry_points* entry_points) {
  return register_op(ns, schema, [&](torch::Library& library) {
    const GroupedKernel kernel = grouped_kernel(*entry_points);
    if (takes_slope) {
      library.impl("run",
                   [kernel](at::TensorList As, at::TensorList Bs, const std::optional<at::TensorList>& Cs, double alpha,
                            double beta, double slope) { return run_grouped(kernel, As, Bs, Cs, alpha, beta, slope); });
    } else {
      library.impl("run",
                   [kernel](at::TensorList As, at::TensorList Bs, const std::optional<at::TensorList>& Cs, double alpha,
                            double beta) { return run_grouped(kernel, As, Bs, Cs, alpha, beta, 0.0); });
    }
  });
}

extern "C" const char* gk_torch_register_conv2d_v1(const char* ns, const char* schema, const gk_torch_conv2d_kernel* k,
                                                   const gk_torch_conv2d_entry_points* entry_points) {
  return register_op(ns, schema, [&](torch::Library& library) {
    const Conv2dKernel kernel{scalar_type(k->input), scalar_type(k->weight), scalar_type(k->output), k->alignment_input,
                              k->alignment_weight,   k->alignment_output,    *entry_points};
    if (k->takes_slope) {
      library.impl("run", [kernel](const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& C,
                                   c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                   double alpha, double beta, double slope) {
        return run_conv2d(kernel, x, w, C, stride, padding, dilation, alpha, beta, slope);
      });
    } else {
      library.impl("run", [kernel](const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& C,
                                   c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                   double alpha, double beta) {
        return run_conv2d(kernel, x, w, C, stride, padding, dilation, alpha, beta, 0.0);
      });
    }
  });
}
