// gemmkit/torch_export_gemm.cpp: gemmkit's torch glue for exported Gemm kernels, with or without an epilogue visitor
// tree: the checked run and the op's registration (gemmkit/torch_export_common.h has what the kinds share).
#include <ATen/MemoryOverlap.h>
#include <ATen/core/stack.h>

#include "gemmkit/torch_export_common.h"

namespace {

// A call's A, B and C, checked against the kernel, and the problem they make.
struct GemmCall {
  Matrix a, b, c;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  bool batched = false;  // a rank-3 operand: D is (batch, m, n)
  bool c_given = false;
};

GemmCall check_gemm(const GemmKernel& kernel, const at::Tensor& A, const at::Tensor& B,
                    const std::optional<at::Tensor>& C) {
  TORCH_CHECK_VALUE(A.is_cuda() || A.is_meta(), "A is on ", A.device(), "; the kernel runs on CUDA tensors");
  GemmCall call;
  call.a = check_operand(A, Name{"A"}, kernel.a, A);
  call.b = check_operand(B, Name{"B"}, kernel.b, A);
  const Matrix &a = call.a, &b = call.b;
  TORCH_CHECK_VALUE(a.cols == b.rows, "A is ", a.rows, " x ", a.cols, " (M x K) but B is ", b.rows, " x ", b.cols,
                    " (K x N); their K extents must agree");
  TORCH_CHECK_VALUE(a.batch == b.batch || a.batch == 1 || b.batch == 1, "A has a batch of ", a.batch, " and B of ",
                    b.batch, "; they must be equal, or one of them 1 (broadcast)");
  call.c_given = C.has_value() && C->defined();
  TORCH_CHECK_VALUE(!call.c_given || kernel.has_c, "the kernel was built without a source operand C; pass C=None");
  call.m = a.rows;
  call.n = b.cols;
  call.k = a.cols;
  call.batch = std::max(a.batch, b.batch);
  call.batched = A.dim() == 3 || B.dim() == 3;
  if (call.c_given) {
    call.c = check_operand(*C, Name{"C"}, kernel.c, A);
    TORCH_CHECK_VALUE(call.c.rows == call.m && call.c.cols == call.n, "C is ", call.c.rows, " x ", call.c.cols,
                      " but A @ B is ", call.m, " x ", call.n);
    TORCH_CHECK_VALUE(call.c.batch == 1 || call.c.batch == call.batch, "C has a batch of ", call.c.batch,
                      " but the GEMM's batch is ", call.batch);
  }
  return call;
}

at::Tensor allocate_d(const GemmKernel& kernel, const at::Tensor& A, const GemmCall& call) {
  return allocate_output(kernel.d, A, call.batched ? std::optional<int64_t>(call.batch) : std::nullopt, call.m, call.n);
}

// Meta tensors (torch.compile's tracing) and empty outputs launch nothing; a launch needs K >= 1 and int32 extents.
bool launches(const at::Tensor& A, const GemmCall& call) {
  if (A.is_meta() || call.m == 0 || call.n == 0 || call.batch == 0) return false;
  TORCH_CHECK_VALUE(call.k > 0, "K is 0: the kernel needs K >= 1");
  TORCH_CHECK_VALUE(call.m <= INT32_MAX && call.n <= INT32_MAX && call.k <= INT32_MAX && call.batch <= INT32_MAX,
                    "the problem ", call.m, " x ", call.n, " x ", call.k, " exceeds 2^31-1 in one dimension");
  return true;
}

// The launch's operands and gemmkit's default scheduling; the epilogue's values are the caller's to set.
gk_gemm_args gemm_args(const GemmCall& call, const at::Tensor& A, const at::Tensor& B,
                       const std::optional<at::Tensor>& C, const at::Tensor& D, const Matrix& d, int device) {
  gk_gemm_args args{};
  args.m = static_cast<int32_t>(call.m);
  args.n = static_cast<int32_t>(call.n);
  args.k = static_cast<int32_t>(call.k);
  args.batch = static_cast<int32_t>(call.batch);
  args.A = A.data_ptr();
  args.B = B.data_ptr();
  args.C = call.c_given ? C->data_ptr() : nullptr;
  args.D = D.data_ptr();
  args.lda = call.a.ld;
  args.ldb = call.b.ld;
  args.ldc = call.c_given ? call.c.ld : d.ld;
  args.ldd = d.ld;
  args.batch_stride_A = call.a.batch_stride;
  args.batch_stride_B = call.b.batch_stride;
  args.batch_stride_C = call.c_given ? call.c.batch_stride : 0;
  args.batch_stride_D = d.batch_stride;
  args.device_id = device;
  args.sm_count = multiprocessor_count(device);
  args.raster_order = 0;  // gemmkit's defaults: the heuristic raster order, swizzle 1, one split
  args.max_swizzle_size = 1;
  args.splits = 1;
  return args;
}

// D for a checked call, from one launch on the device's current stream; `epilogue(args, device)` sets what the
// kernel's epilogue takes. Meta tensors and an empty D launch nothing.
template <class Epilogue>
at::Tensor launch_gemm(const GemmKernel& kernel, const GemmCall& call, const at::Tensor& A, const at::Tensor& B,
                       const std::optional<at::Tensor>& C, Epilogue&& epilogue) {
  at::Tensor D = allocate_d(kernel, A, call);
  if (!launches(A, call)) return D;
  const int device = A.get_device();
  const DeviceGuard guard(device);
  gk_gemm_args args = gemm_args(call, A, B, C, D, check_operand(D, Name{"D"}, kernel.d, A), device);
  epilogue(args, device);
  const gk_torch_entry_points& kernel_module = kernel.entry_points;
  const int status = run_with_workspace(kernel_module, args, A, device);
  TORCH_CHECK(status == GK_OK, "kernel ", kernel_module.kernel_name(), " refused the problem m=", call.m, " n=", call.n,
              " k=", call.k, " batch=", call.batch, ": ", status_text(status));
  return D;
}

// D = act(alpha * A @ B + beta * C); `activation_parameter` is leaky_relu's slope.
at::Tensor run_gemm(const GemmKernel& kernel, const at::Tensor& A, const at::Tensor& B,
                    const std::optional<at::Tensor>& C, double alpha, double beta, double activation_parameter) {
  const GemmCall call = check_gemm(kernel, A, B, C);
  TORCH_CHECK_VALUE(call.c_given || beta == 0.0, "beta is ", beta, " but no C was given; pass C or beta=0");
  return launch_gemm(kernel, call, A, B, C, [&](gk_gemm_args& args, int) {
    args.alpha = alpha;
    args.beta = beta;
    args.activation_params[0] = activation_parameter;
    args.activation = kernel.activation;
  });
}

// ---- epilogue visitor trees: run(A, B, C, alpha, beta, <the tree's arguments>) -> D ---------------------------

// run's own arguments, before the tree's.
enum RunArgument : int { kA = 0, kB = 1, kC = 2, kAlpha = 3, kBeta = 4 };

struct VisitorTree {
  std::vector<gk_torch_visitor_node> nodes;
  bool reads_c = false;
  bool reads_alpha = false, reads_beta = false;  // whether a scalar node takes run's alpha / beta
};

VisitorTree visitor_tree(const gk_torch_visitor_tree& tree) {
  VisitorTree out;
  out.nodes.assign(tree.nodes, tree.nodes + tree.count);
  out.reads_c = tree.reads_c != 0;
  for (const gk_torch_visitor_node& node : out.nodes) {
    out.reads_alpha |= node.kind == GK_TORCH_VISITOR_SCALAR && node.argument == kAlpha;
    out.reads_beta |= node.kind == GK_TORCH_VISITOR_SCALAR && node.argument == kBeta;
  }
  return out;
}

// What a node's argument is, as messages say it.
const char* role(const gk_torch_visitor_node& node) {
  switch (node.kind) {
    case GK_TORCH_VISITOR_SCALAR: return "a scalar of the epilogue tree";
    case GK_TORCH_VISITOR_MATRIX:
      return node.output ? "an output the epilogue tree stores" : "an input matrix of the epilogue tree";
    case GK_TORCH_VISITOR_ROW:
      return node.output ? "a row reduction of the epilogue tree" : "a row vector of the epilogue tree";
    case GK_TORCH_VISITOR_COLUMN:
      return node.output ? "a column reduction of the epilogue tree" : "a column vector of the epilogue tree";
    case GK_TORCH_VISITOR_PER_BATCH: return "a scalar reduction of the epilogue tree";
    default: return "a node of the epilogue tree";
  }
}

// The shape the tree expects of a node's tensor, with the batch first when there is one.
std::string expected_shape(const gk_torch_visitor_node& node, const GemmCall& call) {
  const std::string batch = call.batch > 1 ? std::to_string(call.batch) + ", " : "";
  switch (node.kind) {
    case GK_TORCH_VISITOR_ROW: return "(" + batch + "1, " + std::to_string(call.n) + ")";
    case GK_TORCH_VISITOR_COLUMN: return "(" + batch + std::to_string(call.m) + ", 1)";
    case GK_TORCH_VISITOR_PER_BATCH: return call.batch > 1 ? "(" + std::to_string(call.batch) + ",)" : "(1,)";
    default: return "(" + batch + std::to_string(call.m) + ", " + std::to_string(call.n) + ")";
  }
}

double visitor_scalar(const gk_torch_visitor_node& node, c10::ArrayRef<c10::IValue> arguments) {
  const c10::IValue& value = arguments[node.argument];
  TORCH_CHECK_VALUE(!value.isNone(), node.name, " (", role(node), ") is missing; pass a number");
  return value.toDouble();
}

// A node's tensor argument: given, of the node's dtype, on A's device, and not written through overlapping elements.
const at::Tensor& visitor_tensor(const gk_torch_visitor_node& node, c10::ArrayRef<c10::IValue> arguments,
                                 const GemmCall& call, const at::Tensor& A) {
  const c10::IValue& value = arguments[node.argument];
  const at::ScalarType dtype = scalar_type(node.dtype);
  TORCH_CHECK_VALUE(value.isTensor(), node.name, " (", role(node), ") is missing; pass a tensor of shape ",
                    expected_shape(node, call), " and dtype ", dtype);
  const at::Tensor& t = value.toTensor();
  TORCH_CHECK_VALUE(t.scalar_type() == dtype, node.name, " (", role(node), ") has dtype ", t.scalar_type(),
                    " but the tree was built for ", dtype);
  TORCH_CHECK_VALUE(t.device() == A.device(), node.name, " is on ", t.device(), " but A is on ", A.device(),
                    "; every tensor must be on A's device");
  const bool overlaps = at::has_internal_overlap(t) == at::MemOverlap::Yes;
  TORCH_CHECK_VALUE(!node.output || !overlaps, node.name, " has strides ", t.strides(),
                    " under which elements share an address, but the kernel writes it; pass a tensor of its own");
  return t;
}

// Whether the address and `extents` (in elements) are multiples of the bytes the kernel moves the tensor in.
bool aligned(const gk_torch_visitor_node& node, const at::Tensor& t, std::initializer_list<int64_t> extents) {
  if (node.access_bytes <= 0) return true;
  const int64_t bytes = static_cast<int64_t>(t.element_size());
  const auto address = t.is_meta() ? 0 : reinterpret_cast<std::uintptr_t>(t.data_ptr());
  for (const int64_t extent : extents) {
    if (extent * bytes % node.access_bytes != 0) return false;
  }
  return address % static_cast<std::uintptr_t>(node.access_bytes) == 0;
}

// An m x n input or store: the rules of gemmkit's run (src/api/visitor_args.cpp).
gk_visitor_operand visitor_matrix(const gk_torch_visitor_node& node, const at::Tensor& t, const GemmCall& call,
                                  const at::Tensor& A) {
  const Operand layout{scalar_type(node.dtype), node.layout == GK_ROW_MAJOR, 1};
  const Matrix x = check_matrix(t, Name{node.name}, layout, A, Name{"A"}, /*batches=*/true);
  TORCH_CHECK_VALUE(x.rows == call.m && x.cols == call.n && (x.batch == 1 || x.batch == call.batch), node.name, " (",
                    role(node), ") has shape ", t.sizes(), " but the tree expects ", expected_shape(node, call));
  TORCH_CHECK_VALUE(!node.output || x.batch == call.batch, node.name, " is an output of ", call.batch,
                    " batches; give it shape ", expected_shape(node, call));
  TORCH_CHECK_VALUE(aligned(node, t, {x.ld, x.batch_stride}), node.name, ": its address, leading dimension (", x.ld,
                    ") and batch stride must be multiples of ", node.access_bytes,
                    " bytes (the kernel's vector); pad it or allocate it like D");
  return {t.is_meta() ? nullptr : t.data_ptr(), x.ld, x.batch > 1 ? x.batch_stride : 0, 0.0};
}

// A row or column vector, or a scalar reduction's output: `length` contiguous elements, every other extent 1 but an
// optional leading batch extent (one vector per batch), as gemmkit's run reads them.
gk_visitor_operand visitor_vector(const gk_torch_visitor_node& node, const at::Tensor& t, const GemmCall& call) {
  const int64_t length = node.kind == GK_TORCH_VISITOR_ROW ? call.n : node.kind == GK_TORCH_VISITOR_COLUMN ? call.m : 1;
  const int64_t rank = t.dim(), elements = t.numel();
  const bool row = node.kind == GK_TORCH_VISITOR_ROW, column = node.kind == GK_TORCH_VISITOR_COLUMN;
  const bool batched =
      call.batch > 1 && rank >= (length == 1 ? 1 : 2) && t.size(0) == call.batch && elements == call.batch * length;
  // The last two extents say which vector it is: (1, n) a row, (m, 1) a column; a 1-D tensor is a row, so a column
  // of m needs its (m, 1).
  const bool oriented = rank < 2 || (column && t.size(-1) == 1) || (row && t.size(-2) == 1) || (!row && !column);
  TORCH_CHECK_VALUE(!(column && rank < 2 && length != 1) && oriented && (batched || elements == length), node.name,
                    " (", role(node), ") has shape ", t.sizes(), " but the tree expects ", expected_shape(node, call),
                    call.batch > 1 ? " (or one vector for every batch)" : "");
  for (int64_t i = batched ? 1 : 0; i < rank; ++i) {
    TORCH_CHECK_VALUE(t.size(i) <= 1 || t.stride(i) == 1, node.name, " has strides ", t.strides(),
                      "; its elements must be contiguous (x.contiguous())");
  }
  const int64_t batch_stride = batched ? t.stride(0) : 0;
  TORCH_CHECK_VALUE(!node.output || !batched || batch_stride >= length, node.name, " has strides ", t.strides(),
                    " under which its batches overlap; the kernel writes it, so pass a tensor of its own");
  TORCH_CHECK_VALUE(aligned(node, t, {length, batch_stride}), node.name, ": the kernel reads it in vectors of ",
                    node.access_bytes, " bytes, so its address, length (", length,
                    ") and batch stride must be multiples of that");
  return {t.is_meta() ? nullptr : t.data_ptr(), length, batch_stride, 0.0};
}

// A reduction's output, set to the atomics' identity before the launch: `height` rows of `width` bytes, `pitch` apart.
struct Fill {
  const char* name;
  void* ptr;
  int value;
  size_t width, pitch, height;
};

// Every node's operand, in the tree's order, after every check: nothing is written before all of them pass.
std::vector<gk_visitor_operand> visitor_operands(const VisitorTree& tree, c10::ArrayRef<c10::IValue> arguments,
                                                 const GemmCall& call, const at::Tensor& A, std::vector<Fill>& fills) {
  std::vector<gk_visitor_operand> operands;
  for (const gk_torch_visitor_node& node : tree.nodes) {
    TORCH_INTERNAL_ASSERT(node.argument < static_cast<int>(arguments.size()), "node argument past run's schema");
    gk_visitor_operand operand{};
    switch (node.kind) {
      case GK_TORCH_VISITOR_NONE: break;
      case GK_TORCH_VISITOR_CONSTANT: operand.value = node.value; break;
      case GK_TORCH_VISITOR_SCALAR: operand.value = visitor_scalar(node, arguments); break;
      case GK_TORCH_VISITOR_MATRIX:
        operand = visitor_matrix(node, visitor_tensor(node, arguments, call, A), call, A);
        break;
      case GK_TORCH_VISITOR_ROW:
      case GK_TORCH_VISITOR_COLUMN:
      case GK_TORCH_VISITOR_PER_BATCH: {
        const at::Tensor& t = visitor_tensor(node, arguments, call, A);
        operand = visitor_vector(node, t, call);
        if (node.fill >= 0) {
          const size_t bytes = t.element_size();
          fills.push_back({node.name, operand.ptr, node.fill, static_cast<size_t>(operand.ld) * bytes,
                           static_cast<size_t>(operand.batch_stride) * bytes,
                           static_cast<size_t>(operand.batch_stride > 0 ? call.batch : 1)});
        }
        break;
      }
    }
    operands.push_back(operand);
  }
  return operands;
}

// The kernel's atomics accumulate into the reductions' outputs: their identity first, on the launch's stream.
void fill_outputs(const std::vector<Fill>& fills, int device) {
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device).stream();
  for (const Fill& fill : fills) {
    const cudaError_t error =
        fill.height == 1 ? cudaMemsetAsync(fill.ptr, fill.value, fill.width, stream)
                         : cudaMemset2DAsync(fill.ptr, fill.pitch, fill.value, fill.width, fill.height, stream);
    TORCH_CHECK(error == cudaSuccess, "cannot fill ", fill.name,
                " (a reduction's output) before the launch: ", cudaGetErrorString(error));
  }
}

// The tree replaces alpha and beta: one that no scalar of the tree reads must keep its neutral value.
void check_unread_scalars(const VisitorTree& tree, double alpha, double beta) {
  TORCH_CHECK_VALUE(tree.reads_alpha || alpha == 1.0, "alpha is ", alpha,
                    " but the epilogue tree has no scalar alpha: the tree computes D; pass alpha=1");
  TORCH_CHECK_VALUE(tree.reads_beta || beta == 0.0, "beta is ", beta,
                    " but the epilogue tree has no scalar beta: the tree computes D; pass beta=0");
}

// D as the tree computes it; the tree's outputs are written in place.
at::Tensor run_visitor_gemm(const GemmKernel& kernel, const VisitorTree& tree, c10::ArrayRef<c10::IValue> arguments) {
  const at::Tensor& A = arguments[kA].toTensor();
  const at::Tensor& B = arguments[kB].toTensor();
  const std::optional<at::Tensor> C = arguments[kC].toOptional<at::Tensor>();
  const double alpha = arguments[kAlpha].toDouble(), beta = arguments[kBeta].toDouble();
  const GemmCall call = check_gemm(kernel, A, B, C);
  TORCH_CHECK_VALUE(!tree.reads_c || call.c_given, "the epilogue tree reads C; pass C");
  TORCH_CHECK_VALUE(tree.reads_c || !call.c_given, "the epilogue tree does not read C; pass C=None");
  check_unread_scalars(tree, alpha, beta);
  std::vector<Fill> fills;
  const std::vector<gk_visitor_operand> operands = visitor_operands(tree, arguments, call, A, fills);
  return launch_gemm(kernel, call, A, B, C, [&](gk_gemm_args& args, int device) {
    args.alpha = alpha;
    args.beta = beta;
    args.visitor = operands.data();
    args.visitor_count = static_cast<int32_t>(operands.size());
    fill_outputs(fills, device);
  });
}

// run's boxed implementation: its schema ends with the tree's arguments, which only the binding knows.
class VisitorGemmRun final : public c10::OperatorKernel {
 public:
  VisitorGemmRun(GemmKernel kernel, VisitorTree tree) : kernel_(std::move(kernel)), tree_(std::move(tree)) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
    const size_t count = op.schema().arguments().size();
    at::Tensor D = run_visitor_gemm(kernel_, tree_, torch::jit::last(*stack, count));
    torch::jit::drop(*stack, count);
    torch::jit::push(*stack, std::move(D));
  }

 private:
  GemmKernel kernel_;
  VisitorTree tree_;
};

GemmKernel gemm_kernel(const gk_torch_gemm_kernel& k, const gk_torch_entry_points& entry_points) {
  return {operand(k.a), operand(k.b), operand(k.c), operand(k.d), k.has_c != 0, entry_points, k.activation};
}

}  // namespace

extern "C" const char* gk_torch_register_gemm_v1(const char* ns, const char* schema, const gk_torch_gemm_kernel* k,
                                                 const gk_torch_entry_points* entry_points) {
  return register_op(ns, schema, [&](torch::Library& library) {
    const GemmKernel kernel = gemm_kernel(*k, *entry_points);
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

extern "C" const char* gk_torch_register_gemm_visitor_v1(const char* ns, const char* schema,
                                                         const gk_torch_gemm_kernel* k,
                                                         const gk_torch_visitor_tree* tree,
                                                         const gk_torch_entry_points* entry_points) {
  return register_op(ns, schema, [&](torch::Library& library) {
    library.impl("run", torch::CppFunction::makeFromBoxedFunctor(
                            std::make_unique<VisitorGemmRun>(gemm_kernel(*k, *entry_points), visitor_tree(*tree))));
  });
}
