/* device/include/gemmkit/abi.h: the C interface every generated module exports (library and modules share it). */
#ifndef GEMMKIT_ABI_H
#define GEMMKIT_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bump whenever gk_gemm_args or an entry point changes shape; modules built for another version are rebuilt. */
#define GK_ABI_VERSION 1

typedef enum gk_status {
  GK_OK = 0,
  GK_ERR_CANNOT_IMPLEMENT = 1, /* CUTLASS can_implement() refused the arguments */
  GK_ERR_WORKSPACE = 2,        /* workspace missing or too small */
  GK_ERR_INITIALIZE = 3,       /* CUTLASS initialize() failed */
  GK_ERR_LAUNCH = 4,           /* the launch itself failed; see gk_last_cuda_error() */
  GK_ERR_ARGS = 5              /* malformed gk_gemm_args (null pointer, bad batch) */
} gk_status;

/* One GEMM (or a batch of them): D = act(alpha * A@B + beta * C + bias).
   Shapes are logical: A is m x k, B is k x n, C and D are m x n; the layouts are compiled into the module,
   the leading dimensions and batch strides (in elements, 0 = broadcast) are given here. */
typedef struct gk_gemm_args {
  int32_t m, n, k, batch;
  const void* A;
  const void* B;
  const void* C; /* may be null when beta == 0 */
  void* D;
  int64_t lda, ldb, ldc, ldd;
  int64_t batch_stride_A, batch_stride_B, batch_stride_C, batch_stride_D;
  double alpha, beta;          /* converted to the kernel's compute type inside the module */
  double activation_params[2]; /* e.g. the leaky_relu slope; unused entries are ignored */
  const void* bias;            /* per-row (m) or per-column (n) vector when the module was built with a bias */
  int32_t device_id;
  int32_t sm_count;         /* multiprocessors of device_id, for persistent and Stream-K schedulers */
  int32_t raster_order;     /* SM90 persistent schedulers: 0 = heuristic, 1 = along M, 2 = along N */
  int32_t max_swizzle_size; /* SM90 persistent schedulers: 1, 2, 4 or 8 */
  int32_t splits;           /* Stream-K / split-K: number of splits, 1 = let the scheduler decide */
  int32_t reserved[3];
} gk_gemm_args;

typedef int (*gk_abi_version_fn)(void);
typedef const char* (*gk_kernel_name_fn)(void);
typedef int (*gk_can_implement_fn)(const gk_gemm_args*);
typedef size_t (*gk_workspace_size_fn)(const gk_gemm_args*);
typedef int (*gk_run_fn)(const gk_gemm_args*, void* workspace, void* stream /* cudaStream_t */);
typedef int (*gk_last_cuda_error_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* GEMMKIT_ABI_H */
