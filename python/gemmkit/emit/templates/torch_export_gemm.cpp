// gemmkit/torch_export_gemm.cpp: gemmkit's torch glue for exported Gemm kernels: the checked run and the op's
// registration (gemmkit/torch_export_common.h has what the kinds share).
#include "gemmkit/torch_export_common.h"

namespace {

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
  const int status = run_with_workspace(kernel_module, args, A, device);
  TORCH_CHECK(status == GK_OK, "kernel ", kernel_module.kernel_name(), " refused the problem m=", m, " n=", n, " k=", k,
              " batch=", batch, ": ", status_text(status));
  return D;
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
