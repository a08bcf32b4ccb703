/* device/include/gemmkit/abi.h: the C interface every generated module exports (library and modules share it). */
#ifndef GEMMKIT_ABI_H
#define GEMMKIT_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bump whenever a struct below or an entry point changes shape; modules built for another version are rebuilt. */
#define GK_ABI_VERSION 5

typedef enum gk_status {
  GK_OK = 0,
  GK_ERR_CANNOT_IMPLEMENT = 1, /* CUTLASS can_implement() refused the arguments */
  GK_ERR_WORKSPACE = 2,        /* workspace missing or too small */
  GK_ERR_INITIALIZE = 3,       /* CUTLASS initialize() failed */
  GK_ERR_LAUNCH = 4,           /* the launch itself failed; see gk_last_cuda_error() */
  GK_ERR_ARGS = 5              /* malformed gk_gemm_args (null pointer, bad batch) */
} gk_status;

/* The activation and the bias of a module whose epilogue takes them at launch (gk_gemm_args.activation, .bias_mode);
   modules that compile theirs in ignore both. The activations are numbered in gemmkit::Activation's order. */
typedef enum gk_activation {
  GK_ACTIVATION_GELU = 0,
  GK_ACTIVATION_HARDSWISH = 1,
  GK_ACTIVATION_IDENTITY = 2,
  GK_ACTIVATION_LEAKY_RELU = 3, /* slope: activation_params[0] */
  GK_ACTIVATION_RELU = 4,
  GK_ACTIVATION_SIGMOID = 5,
  GK_ACTIVATION_SILU = 6,
  GK_ACTIVATION_TANH = 7,
  GK_ACTIVATION_GELU_TANH = 8
} gk_activation;
typedef enum gk_bias_mode { GK_BIAS_NONE = 0, GK_BIAS_PER_ROW = 1, GK_BIAS_PER_COLUMN = 2 } gk_bias_mode;

/* One operand of an epilogue visitor tree, for the tree node of the same index: a tensor (ptr, with a leading
   dimension and a batch stride in elements, 0 = the same for every batch) or a scalar (value: a named scalar's or a
   constant's; an activation's parameter). Entries of nodes without run-time data are zero. */
typedef struct gk_visitor_operand {
  void* ptr;
  int64_t ld;
  int64_t batch_stride;
  double value;
} gk_visitor_operand;

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
  const void* bias;            /* per-row (m) or per-column (n) vector when the module was built with a bias or is
                                  given one at launch (bias_mode) */
  int32_t device_id;
  int32_t sm_count;         /* multiprocessors of device_id, for persistent and Stream-K schedulers */
  int32_t raster_order;     /* SM90 persistent schedulers: 0 = heuristic, 1 = along M, 2 = along N */
  int32_t max_swizzle_size; /* SM90 persistent schedulers: 1, 2, 4 or 8 */
  int32_t splits;           /* Stream-K / split-K: number of splits, 1 = let the scheduler decide */
  int32_t decomposition;    /* SM90 Stream-K scheduler: 0 = heuristic, 1 = data-parallel, 2 = split-K, 3 = Stream-K */
  int32_t reduction;        /* SM90 Stream-K scheduler: 0 = deterministic (in K order), 1 = nondeterministic */
  int32_t activation;       /* gk_activation, for modules that take it at launch (see gk_activation) */
  /* Scale vectors of f32 when the module was built with them (e.g. FP8 dequantization scales): the accumulator of
     output (i, j) is multiplied by row_scale[i] (m elements) and column_scale[j] (n elements) before alpha; a null
     one counts as all ones. */
  const void* row_scale;
  const void* column_scale;
  /* Modules built with an epilogue visitor tree: one operand per tree node (visitor_count of them); the tree then
     replaces alpha, beta, bias and the activation. Null for every other module. */
  const gk_visitor_operand* visitor;
  int32_t visitor_count;
  int32_t bias_mode; /* gk_bias_mode of `bias`, for modules that take it at launch; others compile theirs in */
} gk_gemm_args;

typedef int (*gk_abi_version_fn)(void);
typedef const char* (*gk_kernel_name_fn)(void);
typedef int (*gk_can_implement_fn)(const gk_gemm_args*);
typedef size_t (*gk_workspace_size_fn)(const gk_gemm_args*);
typedef int (*gk_run_fn)(const gk_gemm_args*, void* workspace, void* stream /* cudaStream_t */);
typedef int (*gk_last_cuda_error_fn)(void);
/* Split modules only (a host module whose kernel is a separate cubin, see gemmkit/split_entry.hpp): hands the module
   the cubin's bytes, which it copies; called once by the loader before any other entry point. */
typedef int (*gk_split_bind_fn)(const void* cubin, size_t bytes);

/* ---- Grouped GEMM modules ---------------------------------------------------------------------------------------
   A module tells its kind through gk_module_kind(); one without that export is a dense (gk_gemm_args) module.
   A grouped module exports gk_abi_version, gk_kernel_name and gk_last_cuda_error as above, then the gk_grouped_*
   entry points below (and none of the dense ones). It runs G independent problems D_g = act(alpha * A_g@B_g +
   beta * C_g) in one launch; element types and layouts are compiled in, shapes / pointers / leading dimensions are
   per group. Its per-group metadata (problem shapes, pointer and stride arrays in CUTLASS's own types) lives in a
   device buffer of gk_grouped_metadata_bytes(G) bytes, filled either
   - from a LIST of gk_grouped_problem: gk_grouped_pack() writes it into a host buffer (pinned, for an async copy);
     the bytes hold no address of their own, so the caller copies them with ONE cudaMemcpyAsync into any device
     buffer of that size and then calls gk_grouped_run() with it, or
   - on the GPU from a CONTIGUOUS (MoE) problem: gk_grouped_run_contiguous() derives it with a small kernel on the
     stream from device-side row offsets, then runs; no host sync, no host read, capturable in a CUDA graph.
   A group with m, n or k == 0 is skipped: its D is not written. */
typedef enum gk_module_kind_t {
  GK_MODULE_GEMM = 0,    /* the dense entry points above */
  GK_MODULE_GROUPED = 1, /* the gk_grouped_* entry points below */
  GK_MODULE_CONV2D = 2   /* the gk_conv2d_* entry points at the end */
} gk_module_kind_t;

/* Element types and layouts, as gk_grouped_describe() reports the ones compiled into a module. */
typedef enum gk_dtype {
  GK_DTYPE_F16 = 1,
  GK_DTYPE_BF16 = 2,
  GK_DTYPE_F32 = 3,
  GK_DTYPE_TF32 = 4,
  GK_DTYPE_F64 = 5,
  GK_DTYPE_S8 = 6,
  GK_DTYPE_U8 = 7,
  GK_DTYPE_S32 = 8,
  GK_DTYPE_E4M3 = 9,
  GK_DTYPE_E5M2 = 10
} gk_dtype;
typedef enum gk_layout { GK_ROW_MAJOR = 0, GK_COLUMN_MAJOR = 1 } gk_layout;

typedef struct gk_grouped_info {
  int32_t element_a, element_b, element_c, element_d;         /* gk_dtype */
  int32_t layout_a, layout_b, layout_c;                       /* gk_layout; D has C's layout */
  int32_t alignment_a, alignment_b, alignment_c, alignment_d; /* elements; pointers and leading dimensions are
                                                                 multiples of them */
  int32_t contiguous;      /* 1 when gk_grouped_run_contiguous() can run (A and C row-major) */
  int32_t aligned_extents; /* 1 when each operand's row (row-major) / column (column-major) length must be a
                              multiple of its alignment too (2.x vector accesses); 0 for TMA kernels (any extent) */
  int32_t block_scaled;    /* 1 when the FP8 mainloop takes block scales: every non-empty group needs scale_a and
                              scale_b (below) */
  const char* activation;  /* as in kernel names: "identity", "relu", "silu", ... */
} gk_grouped_info;

/* What is common to every group of one call. */
typedef struct gk_grouped_args {
  int32_t groups; /* G >= 1 */
  int32_t device_id;
  int32_t sm_count;         /* multiprocessors of device_id: the persistent grid (SM90) or occupancy grid (SM80) */
  int32_t raster_order;     /* SM90 group scheduler: 0 = CUTLASS's default (along M), 1 = along M, 2 = along N */
  int32_t max_swizzle_size; /* SM90 group scheduler: 1, 2, 4 or 8; 0 = CUTLASS's default */
  int32_t reserved;
  double alpha, beta;          /* converted to the kernel's compute type inside the module */
  double activation_params[2]; /* e.g. the leaky_relu slope; unused entries are ignored */
} gk_grouped_args;

/* One group of the LIST form: A is m x k, B is k x n, C and D are m x n (logical shapes); leading dimensions in
   elements. C may be null when beta == 0. Pointers of an empty group are never read.
   A block-scaled module (gk_grouped_info.block_scaled) also reads f32 block scales, with KB = ceil(k / 128) and
   NB = ceil(n / 128): scale_a m x KB row-major (one per row of A and 128-deep K block), scale_b NB x KB row-major
   (one per 128 x 128 block of B^T); other modules ignore both. */
typedef struct gk_grouped_problem {
  int32_t m, n, k;
  int32_t reserved;
  const void* A;
  const void* B;
  const void* C;
  void* D;
  int64_t lda, ldb, ldc, ldd;
  const float* scale_a;
  const float* scale_b;
} gk_grouped_problem;

/* The CONTIGUOUS (MoE) form, as torch._grouped_mm: A is [total_m, k] row-major with the groups stacked along M;
   B holds G matrices k x n, batch_stride_b elements apart ([G, k, n] with a row-major B, [G, n, k] with a
   column-major B: transposed weights); C (optional) and D are [total_m, n] row-major. Group g owns the rows
   [offsets[g-1], offsets[g]) (offsets[-1] = 0); offsets is a device array of G int32, read only by the GPU. Rows
   past offsets[G-1] are not written; offsets are clamped to [0, total_m] and a decreasing one gives an empty group.
   A block-scaled module's f32 scales, KB = ceil(k / 128) and NB = ceil(n / 128): scale_a [total_m, KB] row-major, so
   that group g's are the rows of its own tokens; scale_b [G, NB, KB] row-major, one NB x KB block per group. */
typedef struct gk_grouped_contiguous {
  int32_t total_m, n, k;
  /* A choice made on the GPU, from the group sizes, between this module and a RIVAL whose CTA tile is this one's
     transposed (256 x 128 against 128 x 256): the caller launches both on the stream with the same problem, and each
     derives its metadata only where it is the one to run, else empty groups (its launch computes nothing). The one to
     run needs fewer waves of tiles over args.sm_count SMs, counting sum over groups of ceil(m_g / tile_m) * ceil(n /
     tile_n). 0: no rival, always runs; 1: runs unless the rival needs fewer waves; 2 (the rival): runs only if it
     needs fewer waves. */
  int32_t transposed_rival;
  const void* A;
  const void* B;
  const void* C; /* may be null when beta == 0 */
  void* D;
  const int32_t* offsets;
  int64_t lda, ldb, ldc, ldd;
  int64_t batch_stride_b;
  const float* scale_a; /* block-scaled modules only */
  const float* scale_b;
} gk_grouped_contiguous;

typedef int (*gk_module_kind_fn)(void);
typedef const gk_grouped_info* (*gk_grouped_describe_fn)(void);
/* Bytes of metadata for `groups` groups (both forms); the host and device buffers must be 16-byte aligned.
   A buffer shorter than that is refused with GK_ERR_WORKSPACE. */
typedef size_t (*gk_grouped_metadata_bytes_fn)(int32_t groups);
/* GK_OK, GK_ERR_ARGS or GK_ERR_CANNOT_IMPLEMENT for the call-wide arguments, and for `contiguous` when not null
   (the list form's per-group checks are gk_grouped_pack's). */
typedef int (*gk_grouped_can_implement_fn)(const gk_grouped_args*, const gk_grouped_contiguous* contiguous);
/* Device workspace bytes for a launch (depends on sm_count only); a workspace is never shared by two launches in
   flight. */
typedef size_t (*gk_grouped_workspace_size_fn)(const gk_grouped_args*);
/* Checks every group, then writes the metadata of args->groups problems into host_metadata (metadata_bytes long);
   no allocation, no CUDA call. On GK_ERR_ARGS (null pointer, negative extent, leading dimension shorter than a
   row / column, C null with beta != 0) or GK_ERR_CANNOT_IMPLEMENT (a pointer or leading dimension not a multiple
   of the compiled alignment, or a row / column length not one where gk_grouped_info.aligned_extents says so),
   *failed_group (when not null) is the first bad group and nothing was written. */
typedef int (*gk_grouped_pack_fn)(const gk_grouped_args*, const gk_grouped_problem* problems, void* host_metadata,
                                  size_t metadata_bytes, int32_t* failed_group);
/* Launches on the stream over the metadata of args->groups groups already in device_metadata, with a workspace of
   gk_grouped_workspace_size() bytes. */
typedef int (*gk_grouped_run_fn)(const gk_grouped_args*, const void* device_metadata, void* workspace,
                                 void* stream /* cudaStream_t */);
/* Checks the call (as gk_grouped_can_implement), derives the metadata into device_metadata on the stream, then
   launches: two kernels, no host synchronisation, no allocation; nothing at all when total_m, n or k is 0. */
typedef int (*gk_grouped_run_contiguous_fn)(const gk_grouped_args*, const gk_grouped_contiguous*, void* device_metadata,
                                            size_t metadata_bytes, void* workspace, void* stream /* cudaStream_t */);

/* ---- Conv2d modules ----------------------------------------------------------------------------------------------
   A conv module (gk_module_kind() == GK_MODULE_CONV2D) exports gk_abi_version, gk_kernel_name, gk_last_cuda_error and
   the gk_conv2d_* entry points below. Its kind (fprop, dgrad, wgrad), element types and iterators are compiled in.
   Tensors are packed: the activations x (N,H,W,C) and y (N,P,Q,K) NHWC, the filter w (K,R,S,C) KRSC.
     fprop: D = act(alpha * conv(x, w) + beta * C)      A = x, B = w, C and D (N,P,Q,K)
     dgrad: D = act(alpha * conv_dx(y, w) + beta * C)   A = y, B = w, C and D (N,H,W,C)
     wgrad: D = act(alpha * conv_dw(y, x) + beta * C)   A = y, B = x, C and D (K,R,S,C)
   (cross-correlation, as torch.nn.functional.conv2d). */
typedef struct gk_conv2d_args {
  int32_t n, h, w, c;   /* the input activation */
  int32_t k, r, s;      /* the filter: k filters of r x s x c */
  int32_t p, q;         /* the output activation's height and width */
  int32_t pad_h, pad_w; /* zero padding on each side */
  int32_t stride_h, stride_w;
  int32_t dilation_h, dilation_w;
  int32_t split_k_slices; /* >= 1: the reduction in that many slices; they add into D in turn (serial split-K),
                             or, in a parallel split-K module (name ending _splitk_parallel), write partial sums
                             to the workspace that a reduction kernel then adds and finishes the epilogue on */
  const void* A;
  const void* B;
  const void* C; /* may be null when beta == 0 */
  void* D;
  double alpha, beta;          /* converted to the kernel's compute type inside the module */
  double activation_params[2]; /* e.g. the leaky_relu slope; unused entries are ignored */
  int32_t device_id;
  int32_t reserved[3];
} gk_conv2d_args;

typedef int (*gk_conv2d_can_implement_fn)(const gk_conv2d_args*);
/* Device workspace bytes (serial split-K semaphores; parallel split-K's partial sums, slices x the implicit GEMM's
   m x n accumulators); a workspace is never shared by two launches in flight. */
typedef size_t (*gk_conv2d_workspace_size_fn)(const gk_conv2d_args*);
typedef int (*gk_conv2d_run_fn)(const gk_conv2d_args*, void* workspace, void* stream /* cudaStream_t */);

#ifdef __cplusplus
}
#endif

#endif /* GEMMKIT_ABI_H */
