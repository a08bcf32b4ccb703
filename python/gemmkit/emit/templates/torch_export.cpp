// gemmkit/torch_export.cpp: gemmkit's torch glue for exported kernels (gemmkit/torch_export.h): tensors checked
// against the compiled kernel, the kernel's C arguments (abi.h), the launch on torch's current stream with a
// workspace from torch's allocator, and the op's registration. One translation unit for every exported kernel:
// setup.py compiles it into the extension, the JIT build compiles it once per torch installation and links it.
//
// Only the headers it needs: torch/extension.h (pybind11) would triple its build time; output tensors come from
// Tensor methods (new_empty) rather than ATen/ops headers, and the device is switched with the CUDA runtime rather
// than c10/cuda/CUDAGuard.h.
#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <torch/library.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
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

// The rule gemmkit's run applies: contiguous along the layout's fast dimension, rows (or columns) not overlapping.
bool fits(const at::Tensor& t, bool row_major) {
  const int64_t rows = t.size(-2), cols = t.size(-1);
  if (row_major) return (cols <= 1 || t.stride(-1) == 1) && t.stride(-2) >= (rows <= 1 ? 0 : cols);
  return (rows <= 1 || t.stride(-2) == 1) && t.stride(-1) >= (cols <= 1 ? 0 : rows);
}

Matrix check_operand(const at::Tensor& t, const char* name, const Operand& op, const at::Tensor& A) {
  TORCH_CHECK_VALUE(t.dim() == 2 || t.dim() == 3, name, " must be a matrix or a batch of matrices (rank 2 or 3); got ",
                    "shape ", t.sizes());
  TORCH_CHECK_VALUE(t.scalar_type() == op.dtype, name, " has dtype ", t.scalar_type(), " but the kernel was built for ",
                    op.dtype);
  TORCH_CHECK_VALUE(t.device() == A.device(), name, " is on ", t.device(), " but A is on ", A.device(),
                    "; every tensor must be on A's device");
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
  const auto address = t.is_meta() ? 0 : reinterpret_cast<std::uintptr_t>(t.data_ptr());
  const bool aligned = m.ld % op.alignment == 0 && m.batch_stride % op.alignment == 0 &&
                       address % static_cast<std::uintptr_t>(op.alignment * t.element_size()) == 0;
  TORCH_CHECK_VALUE(aligned, name, ": its leading dimension ", m.ld, m.batch > 1 ? ", batch stride " : "",
                    m.batch > 1 ? std::to_string(m.batch_stride) : std::string(), " and address must be multiples of ",
                    op.alignment, " elements (", op.alignment * t.element_size(),
                    " bytes), the kernel's alignment; pad the leading dimension or export a kernel with a smaller "
                    "alignment");
  return m;
}

// D in C's layout, on A's device and torch's current stream: (L,) M x N, row-major or column-major.
at::Tensor allocate_output(const GemmKernel& kernel, const at::Tensor& A, int64_t batch, bool batched, int64_t m,
                           int64_t n) {
  const at::TensorOptions options = A.options().dtype(kernel.d.dtype);
  if (kernel.c.row_major) return batched ? A.new_empty({batch, m, n}, options) : A.new_empty({m, n}, options);
  return batched ? A.new_empty_strided({batch, m, n}, {m * n, 1, m}, options)
                 : A.new_empty_strided({m, n}, {1, m}, options);
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
  const Matrix a = check_operand(A, "A", kernel.a, A);
  const Matrix b = check_operand(B, "B", kernel.b, A);
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
    c = check_operand(*C, "C", kernel.c, A);
    TORCH_CHECK_VALUE(c.rows == m && c.cols == n, "C is ", c.rows, " x ", c.cols, " but A @ B is ", m, " x ", n);
    TORCH_CHECK_VALUE(c.batch == 1 || c.batch == batch, "C has a batch of ", c.batch, " but the GEMM's batch is ",
                      batch);
  }
  at::Tensor D = allocate_output(kernel, A, batch, batched, m, n);
  if (A.is_meta() || m == 0 || n == 0 || batch == 0) return D;
  TORCH_CHECK_VALUE(k > 0, "K is 0: the kernel needs K >= 1");
  TORCH_CHECK_VALUE(m <= INT32_MAX && n <= INT32_MAX && k <= INT32_MAX && batch <= INT32_MAX, "the problem ", m, " x ",
                    n, " x ", k, " exceeds 2^31-1 in one dimension");
  const Matrix d = check_operand(D, "D", kernel.d, A);

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
  TORCH_CHECK(cudaDeviceGetAttribute(&args.sm_count, cudaDevAttrMultiProcessorCount, device) == cudaSuccess,
              "cannot read the multiprocessor count of CUDA device ", device);
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
  if (status == GK_ERR_LAUNCH) {
    const auto error = static_cast<cudaError_t>(kernel_module.last_cuda_error());
    TORCH_CHECK(false, "launching ", kernel_module.kernel_name(), " failed: ", cudaGetErrorName(error), " (",
                cudaGetErrorString(error), ")");
  }
  TORCH_CHECK(status == GK_OK, "kernel ", kernel_module.kernel_name(), " refused the problem m=", m, " n=", n, " k=", k,
              " batch=", batch, ": ", status_text(status));
  return D;
}

// The registrations live as long as the process: the ops stay callable while their extension is loaded.
std::mutex libraries_mutex;
std::vector<std::unique_ptr<torch::Library>> libraries;
thread_local std::string last_error;

}  // namespace

extern "C" const char* gk_torch_register_gemm_v1(const char* ns, const char* schema, const gk_torch_gemm_kernel* k,
                                                 const gk_torch_entry_points* entry_points) {
  try {
    const GemmKernel kernel{operand(k->a), operand(k->b), operand(k->c), operand(k->d), k->has_c != 0, *entry_points};
    // What TORCH_LIBRARY expands to, with the namespace known only when the extension is imported.
    auto definition = std::make_unique<torch::Library>(torch::Library::DEF, ns, std::nullopt, __FILE__, __LINE__);
    definition->def(schema);
    // One function for every device: CUDA tensors run, meta and fake tensors (torch.compile) get D's shape only.
    auto implementation = std::make_unique<torch::Library>(
        torch::Library::IMPL, ns, c10::DispatchKey::CompositeExplicitAutograd, __FILE__, __LINE__);
    if (k->takes_slope) {
      implementation->impl(
          "run", [kernel](const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C, double alpha,
                          double beta, double slope) { return run_gemm(kernel, A, B, C, alpha, beta, slope); });
    } else {
      implementation->impl(
          "run", [kernel](const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C, double alpha,
                          double beta) { return run_gemm(kernel, A, B, C, alpha, beta, 0.0); });
    }
    const std::lock_guard<std::mutex> lock(libraries_mutex);
    libraries.push_back(std::move(definition));
    libraries.push_back(std::move(implementation));
    return nullptr;
  } catch (const std::exception& error) {
    last_error = error.what();
    return last_error.c_str();
  }
}
