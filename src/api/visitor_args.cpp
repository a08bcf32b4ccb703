// src/api/visitor_args.cpp: the tensors and scalars an epilogue visitor tree names, checked against the tree and the
// problem before anything runs, and laid out one operand per tree node as the launch takes them.
#include "api/visitor_args.hpp"

#include <cstdint>
#include <string>

#include "api/tensor_check.hpp"
#include "catalog/catalog.hpp"
#include "gemmkit/errors.hpp"

namespace gemmkit::detail {
namespace {

using epilogue::Node;
using epilogue::NodeKind;

[[noreturn]] void refuse(const Node& node, const std::string& what) {
  throw TensorError("Visitor argument '" + node.name + "' (" + std::string(epilogue::to_string(node.kind)) +
                    "): " + what);
}

const VisitorArgument* find_argument(const RunOptions& options, const std::string& name) {
  for (const VisitorArgument& a : options.visitor_args) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

// The shape a node's tensor has, as messages write it.
std::string expected_shape(const Node& node, std::int64_t m, std::int64_t n, std::int64_t batch) {
  const std::string b = batch > 1 ? std::to_string(batch) + ", " : "";
  switch (node.kind) {
    case NodeKind::RowBroadcast:
    case NodeKind::RowReduction: return "(" + b + "1, " + std::to_string(n) + ")";
    case NodeKind::ColumnBroadcast:
    case NodeKind::ColumnReduction: return "(" + b + std::to_string(m) + ", 1)";
    case NodeKind::ScalarReduction: return batch > 1 ? "(" + std::to_string(batch) + ",)" : "(1,)";
    default: return "(" + b + std::to_string(m) + ", " + std::to_string(n) + ")";
  }
}

// A vector (or per-batch scalar) operand: `length` contiguous elements per batch, every other extent 1 but an
// optional leading batch extent; returns its batch stride (0: one vector for every batch).
std::int64_t check_vector_shape(const Node& node, const TensorView& t, std::int64_t length, std::int64_t batch,
                                const std::string& expected) {
  std::int64_t elements = 1;
  for (int i = 0; i < t.rank; ++i) elements *= t.shape[i];
  // A per-batch scalar may be (L,); a per-batch vector has its (1, n) or (m, 1) after the L.
  const bool batched =
      batch > 1 && t.rank >= (length == 1 ? 1 : 2) && t.shape[0] == batch && elements == batch * length;
  // The last two extents say which vector it is: (1, n) a row, (m, 1) a column; a 1-D tensor is a row (as in the
  // reference), so a column of m needs its (m, 1).
  const bool column = node.kind == NodeKind::ColumnBroadcast || node.kind == NodeKind::ColumnReduction;
  const bool row = node.kind == NodeKind::RowBroadcast || node.kind == NodeKind::RowReduction;
  const bool oriented =
      t.rank < 2 || (column && t.shape[t.rank - 1] == 1) || (row && t.shape[t.rank - 2] == 1) || (!row && !column);
  if ((column && t.rank < 2 && length != 1) || !oriented || (!batched && elements != length)) {
    refuse(node, "has shape " + t.shape_string() + "; the tree expects " + expected +
                     (batch > 1 ? " (or one vector for every batch)" : "") + ".");
  }
  for (int i = batched ? 1 : 0; i < t.rank; ++i) {
    if (t.shape[i] > 1 && t.strides[i] != 1) {
      refuse(node, "has strides " + t.strides_string() + "; its elements must be contiguous.");
    }
  }
  return batched ? t.strides[0] : 0;
}

runtime::VisitorOperand tensor_operand(const Node& node, const TensorView& t, std::int64_t m, std::int64_t n,
                                       std::int64_t batch, int access) {
  const DataType element = *node.element;
  const std::string expected = expected_shape(node, m, n, batch);
  if (t.dtype != element) {
    refuse(node, "has element type " + std::string(to_string(t.dtype)) + "; the tree expects " +
                     std::string(to_string(element)) + " of shape " + expected + ".");
  }
  if (t.data == nullptr) refuse(node, "data pointer is null.");
  const int bytes = bits_of(element) / 8;
  runtime::VisitorOperand out;
  out.output = epilogue::is_output(node.kind);
  runtime::LaunchOperand launch{t.data, t.on_device(), bytes, 0, 0, 0};
  if (node.kind == NodeKind::Matrix || node.kind == NodeKind::Store) {
    const MatrixOperand x = check_operand(t, node.name.c_str(), element, node.layout);
    if (x.rows != m || x.cols != n || (x.batch != 1 && x.batch != batch)) {
      refuse(node, "has shape " + t.shape_string() + "; the tree expects " + expected + ".");
    }
    if (node.kind == NodeKind::Store && x.batch != batch) {
      refuse(node, "is an output of " + std::to_string(batch) + " batches; give it shape " + expected + ".");
    }
    // The kernel moves these tiles in vectors: aligned rows (or columns) and address.
    if ((x.ld * bytes) % access != 0 || (x.batch > 1 && (x.batch_stride * bytes) % access != 0) ||
        (t.on_device() && reinterpret_cast<std::uintptr_t>(t.data) % static_cast<std::uintptr_t>(access) != 0)) {
      refuse(node, "its address, leading dimension (" + std::to_string(x.ld) +
                       ") and batch stride must be multiples of " + std::to_string(access) +
                       " bytes (the kernel's vector); pad it or allocate it like D.");
    }
    launch = launch_operand(x, t, element);
  } else {
    const bool row = node.kind == NodeKind::RowBroadcast || node.kind == NodeKind::RowReduction;
    const std::int64_t length = node.kind == NodeKind::ScalarReduction ? 1 : row ? n : m;
    const std::int64_t batch_stride = check_vector_shape(node, t, length, batch, expected);
    if (access > 0 &&
        ((length * bytes) % access != 0 || (batch_stride * bytes) % access != 0 ||
         (t.on_device() && reinterpret_cast<std::uintptr_t>(t.data) % static_cast<std::uintptr_t>(access)))) {
      refuse(node, "the kernel reads it in vectors of " + std::to_string(access) + " bytes: its address, length (" +
                       std::to_string(length) + ") and batch stride must be multiples of that.");
    }
    launch.ld = length;
    launch.batch_stride = batch_stride;
    launch.span = batch_stride > 0 ? batch_stride * (batch - 1) + length : length;
  }
  out.tensor = launch;
  // The atomics accumulate into the output: zero bytes start a sum; all-ones bytes start a maximum (the f32 atomic
  // max compares as int for positive values and as unsigned for negative ones, and 0xffffffff loses both ways).
  if (epilogue::is_reduction(node.kind)) out.fill_byte = node.reduce == epilogue::ReduceOp::Sum ? 0x00 : 0xff;
  return out;
}

void check_argument_names(const epilogue::Epilogue& tree, const RunOptions& options) {
  for (const VisitorArgument& a : options.visitor_args) {
    if (a.name != "C" && a.name != "D" && tree.find(a.name) == nullptr) {
      std::string names;
      for (const Node* node : tree.inputs()) names += (names.empty() ? "" : ", ") + node->name;
      for (const Node* node : tree.outputs()) names += (names.empty() ? "" : ", ") + node->name;
      throw TensorError("Visitor argument '" + a.name +
                        "': the epilogue has no tensor or scalar of that name (it has " +
                        (names.empty() ? std::string("none") : names) + ").");
    }
  }
}

// A scalar node's value: visitor_args' number, else (for alpha and beta) run()'s.
double scalar_value(const Node& node, const RunOptions& options, double alpha, double beta) {
  const VisitorArgument* a = find_argument(options, node.name);
  if (a != nullptr && a->tensor) refuse(node, "is a scalar; pass a number, not a tensor.");
  if (a == nullptr && node.name != "alpha" && node.name != "beta") {
    refuse(node, "is missing: pass it in visitor_args (a number).");
  }
  return a != nullptr ? a->value : node.name == "alpha" ? alpha : beta;
}

}  // namespace

std::vector<runtime::VisitorOperand> check_visitor_args(const KernelSpec& spec, const RunOptions& options, double alpha,
                                                        double beta, std::int64_t m, std::int64_t n,
                                                        std::int64_t batch) {
  const epilogue::Epilogue& tree = *spec.visitor;
  check_argument_names(tree, options);
  std::vector<runtime::VisitorOperand> operands;
  for (const Node& node : tree.nodes()) {
    runtime::VisitorOperand operand;
    switch (node.kind) {
      case NodeKind::Constant: operand.value = node.value; break;
      case NodeKind::Scalar: operand.value = scalar_value(node, options, alpha, beta); break;
      case NodeKind::Matrix:
      case NodeKind::RowBroadcast:
      case NodeKind::ColumnBroadcast:
      case NodeKind::Store:
      case NodeKind::RowReduction:
      case NodeKind::ColumnReduction:
      case NodeKind::ScalarReduction: {
        const VisitorArgument* a = find_argument(options, node.name);
        if (a == nullptr || !a->tensor) {
          refuse(node, std::string(a == nullptr ? "is missing" : "is a number") + ": pass a tensor of shape " +
                           expected_shape(node, m, n, batch) + " and type " + std::string(to_string(*node.element)) +
                           " in visitor_args.");
        }
        operand = tensor_operand(node, *a->tensor, m, n, batch,
                                 catalog::family_of(spec.family).visitor_access_bytes(spec, node));
        break;
      }
      default: break;
    }
    operands.push_back(operand);
  }
  return operands;
}

bool plain_vectors_per_batch(const epilogue::PlainForm& form, const RunOptions& options) {
  for (const std::string* name : {&form.bias_name, &form.row_scale_name, &form.column_scale_name}) {
    const VisitorArgument* a = name->empty() ? nullptr : find_argument(options, *name);
    if (a != nullptr && a->tensor && a->tensor->rank == 3 && a->tensor->shape[0] > 1) return true;
  }
  return false;
}

RunOptions plain_run_options(const epilogue::Epilogue& tree, const epilogue::PlainForm& form, const RunOptions& options,
                             double& alpha, double& beta) {
  check_argument_names(tree, options);
  if (options.bias != nullptr || options.row_scale != nullptr || options.column_scale != nullptr) {
    throw TensorError(
        "RunOptions bias / row_scale / column_scale: the plan's epilogue visitor tree takes its tensors in "
        "visitor_args, by the names the tree gives them.");
  }
  auto factor = [&](const epilogue::Factor& f) {
    return f.name.empty() ? f.value : scalar_value(*tree.find(f.name), options, alpha, beta);
  };
  const double tree_alpha = factor(form.alpha);
  beta = form.beta ? factor(*form.beta) : 0.0;
  alpha = tree_alpha;
  auto vector = [&](const std::string& name) -> const TensorView* {
    if (name.empty()) return nullptr;
    const VisitorArgument* a = find_argument(options, name);
    if (a == nullptr || !a->tensor) {
      refuse(*tree.find(name), std::string(a == nullptr ? "is missing" : "is a number") +
                                   ": pass its tensor (one vector for every batch) in visitor_args.");
    }
    return &*a->tensor;
  };
  RunOptions plain = options;
  plain.visitor_args.clear();
  plain.bias = vector(form.bias_name);
  plain.row_scale = vector(form.row_scale_name);
  plain.column_scale = vector(form.column_scale_name);
  return plain;
}

const TensorView* visitor_tensor(const RunOptions& options, const char* name, const TensorView* given) {
  const VisitorArgument* a = find_argument(options, name);
  if (a == nullptr || !a->tensor) return given;
  if (given != nullptr && (given->data != a->tensor->data || given->shape != a->tensor->shape)) {
    throw TensorError(std::string("Visitor argument '") + name + "': run() was given another " + name +
                      "; pass one of them, or the same tensor twice.");
  }
  return &*a->tensor;
}

}  // namespace gemmkit::detail
