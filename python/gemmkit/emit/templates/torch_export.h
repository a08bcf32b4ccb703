/* gemmkit/torch_export.h: the interface between an exported extension's binding (<name>.cpp, which includes no
   torch header and builds in about a second) and gemmkit's torch glue (gemmkit/torch_export_<kind>.cpp: tensor checks,
   launch, op registration; compiled into the extension by setup.py, taken ready-built from gemmkit's cache by the
   JIT build). Plain C, so that neither side depends on the other's compiler settings. Gemm (with or without an
   epilogue visitor tree), GroupedGemm and Conv2d (fprop, dgrad, wgrad) kernels each have their registration below. */
#ifndef GEMMKIT_TORCH_EXPORT_H
#define GEMMKIT_TORCH_EXPORT_H

#include "gemmkit/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One operand as the kernel was compiled for it (element types and layouts as abi.h spells them). */
typedef struct gk_torch_operand {
  gk_dtype dtype;
  gk_layout layout;
  int alignment; /* in elements: leading dimension, batch stride and address are multiples of it */
} gk_torch_operand;

typedef struct gk_torch_gemm_kernel {
  gk_torch_operand a, b, c, d; /* D has C's layout */
  int has_c;                   /* 0: built without a source operand (element_C = void), so run() refuses a C */
  int takes_slope;             /* 1: run() ends with leaky_relu's slope */
  gk_activation activation;    /* what a kernel that takes its epilogue at launch applies (others compile theirs in) */
} gk_torch_gemm_kernel;

/* ---- Gemm kernels with an epilogue visitor tree ----------------------------------------------------------------
   run(A, B, C, alpha, beta, <the tree's named inputs>, <its named outputs>) -> D. The binding lists the tree's nodes
   in the launch's operand order (gk_gemm_args.visitor), each saying where its operand comes from; the glue checks
   every tensor as the kernel reads or writes it (src/api/visitor_args.cpp's rules) before anything runs. */
typedef enum gk_torch_visitor_kind {
  GK_TORCH_VISITOR_NONE = 0,     /* no run-time data (the accumulator, C, a compute): a zero operand */
  GK_TORCH_VISITOR_CONSTANT = 1, /* a number written in the tree: `value` */
  GK_TORCH_VISITOR_SCALAR = 2,   /* a float argument of run (the tree's alpha and beta are run's own) */
  GK_TORCH_VISITOR_MATRIX = 3,   /* an m x n tensor argument, or (batch, m, n); an input of `layout`, or a store */
  GK_TORCH_VISITOR_ROW = 4,      /* a row vector argument: n values (1, n), or (batch, 1, n) */
  GK_TORCH_VISITOR_COLUMN = 5,   /* a column vector argument: m values (m, 1), or (batch, m, 1) */
  GK_TORCH_VISITOR_PER_BATCH = 6 /* one value (1,), or one per batch (batch,): a scalar reduction's output */
} gk_torch_visitor_kind;

typedef struct gk_torch_visitor_node {
  gk_torch_visitor_kind kind;
  const char* name; /* the run argument it comes from; NULL for NONE and CONSTANT */
  int argument;     /* that argument's position in run's schema; -1 for NONE and CONSTANT */
  gk_dtype dtype;   /* tensors: the element type */
  gk_layout layout; /* matrices */
  int access_bytes; /* the kernel moves the tensor in vectors of this many bytes: its address, leading dimension and
                       batch stride (and a row vector's length) are multiples of it; 0 = element by element */
  int output;       /* 1: the kernel writes the tensor (a store or a reduction) */
  int fill;         /* reductions: the byte run fills the output with first, as the atomics' identity (0x00 for a
                       sum, 0xff for a maximum); -1 for every other node */
  double value;     /* CONSTANT */
} gk_torch_visitor_node;

typedef struct gk_torch_visitor_tree {
  const gk_torch_visitor_node* nodes; /* one per tree node, in the tree's order */
  int count;
  int reads_c; /* 1: the tree reads C, so run requires it; 0: run refuses one */
} gk_torch_visitor_tree;

/* The kernel module's entry points (abi.h), linked into the extension. */
typedef struct gk_torch_entry_points {
  gk_abi_version_fn abi_version;
  gk_kernel_name_fn kernel_name;
  gk_workspace_size_fn workspace_size;
  gk_run_fn run;
  gk_last_cuda_error_fn last_cuda_error;
} gk_torch_entry_points;

/* A grouped kernel module's entry points (abi.h's grouped section), linked into the extension; the module
   describes its own operands (describe), so a grouped binding declares nothing else. */
typedef struct gk_torch_grouped_entry_points {
  gk_abi_version_fn abi_version;
  gk_kernel_name_fn kernel_name;
  gk_last_cuda_error_fn last_cuda_error;
  gk_grouped_describe_fn describe;
  gk_grouped_metadata_bytes_fn metadata_bytes;
  gk_grouped_workspace_size_fn workspace_size;
  gk_grouped_pack_fn pack;
  gk_grouped_run_fn run;
} gk_torch_grouped_entry_points;

/* A Conv2d kernel's kind, which fixes run()'s operands (abi.h's conv section): fprop run(A = input, B = weight, ...)
   -> output; dgrad run(input_size, A = grad_output, B = weight, ...) -> grad_input; wgrad run(weight_size,
   A = grad_output, B = input, ...) -> grad_weight. */
typedef enum gk_torch_conv_kind { GK_TORCH_FPROP = 0, GK_TORCH_DGRAD = 1, GK_TORCH_WGRAD = 2 } gk_torch_conv_kind;

/* How the kernel combines the slices when run() passes split_k_slices > 1. */
typedef enum gk_torch_split_k {
  GK_TORCH_SPLIT_K_NONE = 0,    /* SM90 conv kernels (TMA im2col) do not split the reduction */
  GK_TORCH_SPLIT_K_SERIAL = 1,  /* the direct kernel: the slices add into the output in turn */
  GK_TORCH_SPLIT_K_PARALLEL = 2 /* a parallel split-K module: partial sums in the workspace, then a reduction kernel */
} gk_torch_split_k;

/* A Conv2d kernel: element types of A, B, C and the output D (which tensor each is: gk_torch_conv_kind), all torch
   (N,C,H,W) / (K,C,R,S) tensors in channels_last memory, and the vectors (in channels) it reads and writes them in. */
typedef struct gk_torch_conv2d_kernel {
  gk_torch_conv_kind kind;
  gk_dtype a, b, c, d;
  int alignment_a, alignment_b, alignment_c, alignment_d; /* channel counts and addresses are multiples of them */
  gk_torch_split_k split_k;
  int kernel_cc;   /* 90: a CUTLASS 3.x kernel (TMA im2col: dgrad at unit stride only); 80: CUTLASS 2.x */
  int unit_stride; /* 1: a dgrad kernel for stride 1 only (stride support unity) */
  int takes_slope; /* 1: run() ends with leaky_relu's slope */
} gk_torch_conv2d_kernel;

typedef struct gk_torch_conv2d_entry_points {
  gk_abi_version_fn abi_version;
  gk_kernel_name_fn kernel_name;
  gk_last_cuda_error_fn last_cuda_error;
  gk_conv2d_can_implement_fn can_implement;
  gk_conv2d_workspace_size_fn workspace_size;
  gk_conv2d_run_fn run;
} gk_torch_conv2d_entry_points;

/* Registers the op `run` with `schema` in the torch.ops namespace `ns`, for every device (CUDA tensors run; meta
   and fake tensors get D's shape). NULL on success, else the reason (valid until this thread's next call).
   The version suffix changes with the structs above, so that a stale glue library fails to link. */
const char* gk_torch_register_gemm_v1(const char* ns, const char* schema, const gk_torch_gemm_kernel* kernel,
                                      const gk_torch_entry_points* entry_points);

/* The same for a Gemm kernel with an epilogue visitor tree, whose schema ends with the tree's arguments; `tree` (and
   the nodes it points to) must outlive the registration, as the binding's constants do. The tree replaces the
   kernel's alpha, beta and activation: run refuses an alpha or beta other than 1 and 0 that no scalar of the tree
   reads. */
const char* gk_torch_register_gemm_visitor_v1(const char* ns, const char* schema, const gk_torch_gemm_kernel* kernel,
                                              const gk_torch_visitor_tree* tree,
                                              const gk_torch_entry_points* entry_points);

/* The same for a grouped kernel: run(As, Bs, Cs, alpha, beta[, slope]) -> list of D (`takes_slope` as above). */
const char* gk_torch_register_grouped_v1(const char* ns, const char* schema, int takes_slope,
                                         const gk_torch_grouped_entry_points* entry_points);

/* The same for a Conv2d kernel: run([output size,] A, B, C, stride, padding, dilation, alpha, beta, split_k_mode,
   split_k_slices[, slope]) -> D, the output size being dgrad's input_size or wgrad's weight_size. */
const char* gk_torch_register_conv2d_v2(const char* ns, const char* schema, const gk_torch_conv2d_kernel* kernel,
                                        const gk_torch_conv2d_entry_points* entry_points);

#ifdef __cplusplus
}
#endif

#endif /* GEMMKIT_TORCH_EXPORT_H */
