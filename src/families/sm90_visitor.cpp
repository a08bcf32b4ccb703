// src/families/sm90_visitor.cpp: an epilogue visitor tree as CUTLASS 3.x SM90 fusion callbacks: one CUTLASS node per
// tree node, joined by a topological visitor (a value used twice is computed once), and the code that fills their
// arguments from the launch's visitor operands.
#include "families/sm90_visitor.hpp"

#include <string>

#include "gemmkit/errors.hpp"

namespace gemmkit::families {
namespace {

using epilogue::ComputeOp;
using epilogue::Node;
using epilogue::NodeKind;
using epilogue::ReduceOp;

std::string cutlass_type(DataType type) {
  return std::string(row_of(type).cutlass);
}

std::string layout_tag(Layout layout) {
  return std::string(row_of(layout).cutlass);
}

// Compute functors as one-parameter templates (Sm90Compute's template template argument).
std::string compute_functor(const Node& node) {
  switch (node.op) {
    case ComputeOp::Add: return "cutlass::plus";
    case ComputeOp::Subtract: return "cutlass::minus";
    case ComputeOp::Multiply: return "cutlass::multiplies";
    case ComputeOp::Divide: return "cutlass::divides";
    case ComputeOp::MultiplyAdd: return "cutlass::homogeneous_multiply_add";
    case ComputeOp::Maximum: return "gemmkit::sm90::visitor::Maximum";
    case ComputeOp::Minimum: return "gemmkit::sm90::visitor::Minimum";
    case ComputeOp::Negate: return "cutlass::negate";
    case ComputeOp::Activation: return std::string(row_of(node.activation).cutlass);
    case ComputeOp::Convert: return "cutlass::epilogue::thread::Identity";
  }
  return "";
}

std::string reduce_functor(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "cutlass::plus";
    case ReduceOp::Max: return "gemmkit::sm90::visitor::Maximum";
    case ReduceOp::Min: return "gemmkit::sm90::visitor::Minimum";
  }
  return "";
}

std::string atomic_functor(ReduceOp op) {
  return op == ReduceOp::Sum ? "cutlass::atomic_add" : "cutlass::atomic_maximum";
}

std::string reduction_identity(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "ElementCompute(0)";
    case ReduceOp::Max: return "-cutlass::platform::numeric_limits<ElementCompute>::infinity()";
    case ReduceOp::Min: return "cutlass::platform::numeric_limits<ElementCompute>::infinity()";
  }
  return "";
}

constexpr const char* kRound = "cutlass::FloatRoundStyle::round_to_nearest";

// The CUTLASS node type of tree node i (declared as Node<i>).
std::string node_type(const Node& node, std::size_t i) {
  const std::string n = std::to_string(i);
  const std::string element = node.element ? cutlass_type(*node.element) : "ElementCompute";
  switch (node.kind) {
    case NodeKind::Accumulator: return "using Node" + n + " = fusion::Sm90AccFetch;\n";
    case NodeKind::Source: return "using Node" + n + " = fusion::Sm90SrcFetch<ElementC>;\n";
    case NodeKind::Matrix:
      return "using Aux" + n + " = cutlass::epilogue::collective::detail::AuxLoadDescriptor<EpilogueDescriptor, " +
             layout_tag(node.layout) + ", " + element + ">;\nusing Node" + n + " = fusion::Sm90AuxLoad<Aux" + n +
             "::Stages, EpilogueDescriptor::EpilogueTile, " + element + ", Aux" + n + "::Stride, Aux" + n +
             "::SmemLayoutAtom, Aux" + n + "::CopyOpS2R>;\n";
    case NodeKind::RowBroadcast:
      return "using Node" + n + " = fusion::Sm90RowBroadcast<0, CtaTile, " + element +
             ", ElementCompute, cute::Stride<cute::_0, cute::_1, int64_t>, 1>;\n";
    case NodeKind::ColumnBroadcast:
      return "using Node" + n + " = fusion::Sm90ColBroadcast<0, CtaTile, " + element +
             ", ElementCompute, cute::Stride<cute::_1, cute::_0, int64_t>, 1>;\n";
    case NodeKind::Scalar:
    case NodeKind::Constant: return "using Node" + n + " = fusion::Sm90ScalarBroadcast<ElementCompute>;\n";
    case NodeKind::Compute: {
      const std::string out = node.op == ComputeOp::Convert ? element : "ElementCompute";
      return "using Node" + n + " = fusion::Sm90Compute<" + compute_functor(node) + ", " + out +
             ", ElementCompute, " + kRound + ">;\n";
    }
    case NodeKind::Store:
      return "using Store" + n + " = cutlass::epilogue::collective::detail::AuxStoreDescriptor<EpilogueDescriptor, " +
             layout_tag(node.layout) + ", " + element + ">;\nusing Node" + n + " = fusion::Sm90AuxStore<Store" + n +
             "::Stages, EpilogueDescriptor::EpilogueTile, " + element + ", " + kRound + ", Store" + n +
             "::Stride, Store" + n + "::SmemLayoutAtom, Store" + n + "::CopyOpR2S>;\n";
    // Each CTA reduces its tile, then adds (or maxes) it into the output with atomics: an output without a batch
    // stride reduces over the batches too. run() starts the output at the identity.
    case NodeKind::RowReduction:
    case NodeKind::ColumnReduction: {
      const bool row = node.kind == NodeKind::RowReduction;
      const std::string fn = reduce_functor(node.reduce);
      return "using Node" + n + " = fusion::Sm90" + (row ? "Row" : "Col") + "Reduction<" + fn + ", " + fn + ", " +
             atomic_functor(node.reduce) + ", 0, CtaTile, " + element + ", ElementCompute, " + kRound +
             ", cute::Stride<" + (row ? "cute::_0, cute::_1" : "cute::_1, cute::_0") + ", int64_t>>;\n";
    }
    case NodeKind::ScalarReduction:
      return "using Node" + n + " = fusion::Sm90ScalarReduction<" + reduce_functor(node.reduce) + ", " +
             atomic_functor(node.reduce) + ", " + element + ", ElementCompute, " + kRound +
             ", cute::Stride<cute::_0, cute::_0, int64_t>>;\n";
  }
  return "";
}

// Statements filling node i's arguments (`arg` names them) from operand v[i].
std::string node_arguments(const Node& node, std::size_t i, const std::string& arg) {
  const std::string v = "args.visitor[" + std::to_string(i) + "]";
  const std::string element = node.element ? cutlass_type(*node.element) : "ElementCompute";
  switch (node.kind) {
    case NodeKind::Matrix:
      return "  " + arg + ".ptr_aux = static_cast<const " + element + "*>(" + v + ".ptr);\n  " + arg +
             ".dAux = gemmkit::sm90::make_stride<typename Aux" + std::to_string(i) + "::Stride>(" + v + ".ld, " + v +
             ".batch_stride);\n";
    case NodeKind::RowBroadcast:
      return "  " + arg + ".ptr_row = static_cast<const " + element + "*>(" + v + ".ptr);\n  " + arg +
             ".dRow = {cute::_0{}, cute::_1{}, " + v + ".batch_stride};\n";
    case NodeKind::ColumnBroadcast:
      return "  " + arg + ".ptr_col = static_cast<const " + element + "*>(" + v + ".ptr);\n  " + arg +
             ".dCol = {cute::_1{}, cute::_0{}, " + v + ".batch_stride};\n";
    case NodeKind::Scalar:
    case NodeKind::Constant: return "  " + arg + ".scalars[0] = ElementCompute(" + v + ".value);\n";
    case NodeKind::Compute:
      return node.op == ComputeOp::Activation && node.activation == Activation::LeakyReLU
                 ? "  gemmkit::module::set_leaky_alpha(" + arg + ", " + v + ".value, 0);\n"
                 : "";
    case NodeKind::Store:
      return "  " + arg + ".ptr_aux = static_cast<" + element + "*>(" + v + ".ptr);\n  " + arg +
             ".dAux = gemmkit::sm90::make_stride<typename Store" + std::to_string(i) + "::Stride>(" + v + ".ld, " +
             v + ".batch_stride);\n";
    case NodeKind::RowReduction:
    case NodeKind::ColumnReduction: {
      const bool row = node.kind == NodeKind::RowReduction;
      return "  " + arg + (row ? ".ptr_row" : ".ptr_col") + " = " + v + ".ptr;\n  " + arg +
             ".reduction_identity = " + reduction_identity(node.reduce) + ";\n  " + arg + (row ? ".dRow" : ".dCol") +
             " = {" + (row ? "cute::_0{}, cute::_1{}, " : "cute::_1{}, cute::_0{}, ") + v + ".batch_stride};\n";
    }
    case NodeKind::ScalarReduction:
      return "  " + arg + ".ptr_scalar = static_cast<" + element + "*>(" + v + ".ptr);\n  " + arg +
             ".reduction_identity = " + reduction_identity(node.reduce) + ";\n  " + arg +
             ".dScalar = {cute::_0{}, cute::_0{}, " + v + ".batch_stride};\n";
    default: return "";
  }
}

}  // namespace

Placeholders sm90_visitor_placeholders(const epilogue::Epilogue& tree) {
  const std::vector<Node>& nodes = tree.nodes();
  // The visitor's last op is what D receives: a conversion of the tree's last node to D's type.
  const std::size_t count = nodes.size() + 1;
  std::string types;
  std::string edges;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    types += node_type(nodes[i], i);
    std::string seq;
    for (int input : nodes[i].inputs) seq += (seq.empty() ? "" : ", ") + std::to_string(input);
    edges += "    cute::seq<" + seq + ">,\n";
  }
  const std::string last = std::to_string(nodes.size());
  types += "using Node" + last + " = fusion::Sm90Compute<cutlass::epilogue::thread::Identity, ElementD, ElementCompute, " +
           kRound + ">;\n";
  edges += "    cute::seq<" + std::to_string(nodes.size() - 1) + ">";
  std::string ops;
  for (std::size_t i = 0; i < count; ++i) ops += (i ? ", Node" : "Node") + std::to_string(i);
  types += "using Fusion = fusion::Sm90TopologicalVisitor<ElementCompute, cute::tuple<\n" + edges + ">,\n    " + ops +
           ">;\n";

  // Up to four ops the visitor's arguments are a struct of op_0..op_3; beyond, a cute::tuple.
  std::string fill;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const std::string arg =
        count <= 4 ? "fusion_args.op_" + std::to_string(i) : "cute::get<" + std::to_string(i) + ">(fusion_args)";
    fill += node_arguments(nodes[i], i, arg);
  }
  return {{"visitor_nodes", types}, {"visitor_arguments", fill}, {"visitor_count", std::to_string(nodes.size())}};
}

void check_sm90_visitor(const epilogue::Epilogue& tree, const KernelSpec& spec) {
  for (const Node& node : tree.nodes()) {
    const std::string where = "epilogue " + std::string(epilogue::to_string(node.kind)) +
                              (node.name.empty() ? "" : " '" + node.name + "'");
    if (node.kind == NodeKind::ScalarReduction || node.kind == NodeKind::RowReduction ||
        node.kind == NodeKind::ColumnReduction) {
      if (node.reduce == ReduceOp::Min) {
        throw ConfigError(where + ": a reduction sums or takes the maximum (with atomics); min is not offered.");
      }
      if (node.element != DataType::f32) {
        throw ConfigError(where + ": a reduction writes f32 (it accumulates with atomics); declare it f32.");
      }
    }
    if ((node.kind == NodeKind::Matrix || node.kind == NodeKind::Store) && node.element &&
        (*node.element == DataType::f64 || *node.element == DataType::tf32)) {
      throw ConfigError(where + ": " + std::string(to_string(*node.element)) +
                        " tensors are not offered in an SM90 epilogue; use f16, bf16, f32 or an 8-bit type.");
    }
  }
  if (spec.tile.epilogue_schedule == EpilogueSchedule::NoSmemWarpSpecialized) {
    throw ConfigError("epilogue: a visitor tree needs the TMA epilogue; leave the tile's epilogue schedule Auto or "
                      "set a TmaWarpSpecialized one.");
  }
}

}  // namespace gemmkit::families
