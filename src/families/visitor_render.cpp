// src/families/visitor_render.cpp: an epilogue visitor tree as CUTLASS fusion callbacks, the SM90 collective
// epilogue's (3.x) or the SM80 visitor epilogue's (2.x): one CUTLASS node per tree node, joined by a topological
// visitor (a value used twice is computed once), and the code that fills their arguments from the launch's visitor
// operands. The two generations' nodes take the same arguments; on 2.x, C is an aux load and D an aux store.
#include "families/visitor_render.hpp"

#include <algorithm>
#include <string>

#include "families/rules.hpp"
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
    case ComputeOp::Maximum: return "gemmkit::module::Maximum";
    case ComputeOp::Minimum: return "gemmkit::module::Minimum";
    case ComputeOp::Negate: return "cutlass::negate";
    case ComputeOp::Activation: return std::string(row_of(node.activation).cutlass);
    case ComputeOp::Convert: return "cutlass::epilogue::thread::Identity";
  }
  return "";
}

std::string reduce_functor(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "cutlass::plus";
    case ReduceOp::Max: return "gemmkit::module::Maximum";
    case ReduceOp::Min: return "gemmkit::module::Minimum";
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

// The CUTLASS 3.x node type of tree node i (declared as Node<i>).
std::string sm90_node_type(const Node& node, std::size_t i) {
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
      return "using Node" + n + " = fusion::Sm90Compute<" + compute_functor(node) + ", " + out + ", ElementCompute, " +
             kRound + ">;\n";
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

// A 2.x stride (M, N, L) of a matrix in `layout` with a dynamic leading dimension and batch stride.
std::string matrix_stride(Layout layout) {
  return layout == Layout::RowMajor ? "cute::Stride<int64_t, cute::_1, int64_t>"
                                    : "cute::Stride<cute::_1, int64_t, int64_t>";
}

// The CUTLASS 2.x node type of tree node i (declared as Node<i>); every node walks the output tile as
// OutputTileThreadMap does.
std::string sm80_node_type(const Node& node, std::size_t i) {
  const std::string n = std::to_string(i);
  const std::string element = node.element ? cutlass_type(*node.element) : "ElementCompute";
  switch (node.kind) {
    case NodeKind::Accumulator: return "using Node" + n + " = visitor2x::VisitorAccFetch;\n";
    case NodeKind::Source:
      return "using Node" + n + " = visitor2x::VisitorAuxLoad<OutputTileThreadMap, ElementC, " +
             matrix_stride(Layout::RowMajor) + ">;\n";
    case NodeKind::Matrix:
      return "using Node" + n + " = visitor2x::VisitorAuxLoad<OutputTileThreadMap, " + element + ", " +
             matrix_stride(node.layout) + ">;\n";
    case NodeKind::RowBroadcast:
      return "using Node" + n + " = visitor2x::VisitorRowBroadcast<OutputTileThreadMap, " + element +
             ", cute::Stride<cute::_0, cute::_1, int64_t>>;\n";
    case NodeKind::ColumnBroadcast:
      return "using Node" + n + " = visitor2x::VisitorColBroadcast<OutputTileThreadMap, " + element +
             ", cute::Stride<cute::_1, cute::_0, int64_t>>;\n";
    case NodeKind::Scalar:
    case NodeKind::Constant: return "using Node" + n + " = visitor2x::VisitorScalarBroadcast<ElementCompute>;\n";
    case NodeKind::Compute: {
      const std::string out = node.op == ComputeOp::Convert ? element : "ElementCompute";
      return "using Node" + n + " = visitor2x::VisitorCompute<" + compute_functor(node) + ", " + out +
             ", ElementCompute, " + kRound + ">;\n";
    }
    case NodeKind::Store:
      return "using Node" + n + " = visitor2x::VisitorAuxStore<OutputTileThreadMap, " + element + ", " + kRound + ", " +
             matrix_stride(node.layout) + ">;\n";
    case NodeKind::RowReduction:
    case NodeKind::ColumnReduction: {
      const bool row = node.kind == NodeKind::RowReduction;
      return "using Node" + n + " = visitor2x::Visitor" + (row ? "Row" : "Col") + "Reduction<" +
             reduce_functor(node.reduce) + ", " + atomic_functor(node.reduce) + ", OutputTileThreadMap, " + element +
             ", ElementCompute, " + kRound + ", cute::Stride<" + (row ? "cute::_0, cute::_1" : "cute::_1, cute::_0") +
             ", int64_t>>;\n";
    }
    case NodeKind::ScalarReduction:
      return "using Node" + n + " = visitor2x::VisitorScalarReduction<" + reduce_functor(node.reduce) + ", " +
             atomic_functor(node.reduce) + ", OutputTileThreadMap, " + element + ", ElementCompute, " + kRound +
             ", cute::Stride<cute::_0, cute::_0, int>>;\n";
  }
  return "";
}

// Statements filling node i's arguments (`arg` names them) from operand v[i].
std::string node_arguments(const Node& node, std::size_t i, const std::string& arg, bool sm80) {
  const std::string v = "args.visitor[" + std::to_string(i) + "]";
  const std::string element = node.element ? cutlass_type(*node.element) : "ElementCompute";
  // 3.x aux loads take a const pointer; 2.x ones do not (they never write through it).
  const std::string load_pointer = sm80 ? element + "*" : "const " + element + "*";
  auto aux_stride = [&](Layout layout) {
    return sm80 ? "gemmkit::module::make_stride<" + matrix_stride(layout) + ">"
                : "gemmkit::module::make_stride<typename " +
                      std::string(node.kind == NodeKind::Store ? "Store" : "Aux") + std::to_string(i) + "::Stride>";
  };
  switch (node.kind) {
    case NodeKind::Source:
      // On 2.x, C is an aux load of the run's C (with C's own strides).
      return sm80 ? "  " + arg + ".ptr_aux = static_cast<ElementC*>(const_cast<void*>(args.C));\n  " + arg +
                        ".dAux = " + aux_stride(Layout::RowMajor) +
                        "(args.ldc, args.batch > 1 ? args.batch_stride_C : 0);\n"
                  : "";
    case NodeKind::Matrix:
      return "  " + arg + ".ptr_aux = static_cast<" + load_pointer + ">(" + v + ".ptr);\n  " + arg +
             ".dAux = " + aux_stride(node.layout) + "(" + v + ".ld, " + v + ".batch_stride);\n";
    case NodeKind::RowBroadcast:
      return "  " + arg + ".ptr_row = static_cast<const " + element + "*>(" + v + ".ptr);\n  " + arg +
             ".dRow = {cute::_0{}, cute::_1{}, " + v + ".batch_stride};\n";
    case NodeKind::ColumnBroadcast:
      return "  " + arg + ".ptr_col = static_cast<const " + element + "*>(" + v + ".ptr);\n  " + arg +
             ".dCol = {cute::_1{}, cute::_0{}, " + v + ".batch_stride};\n";
    case NodeKind::Scalar:
    case NodeKind::Constant: return "  " + arg + ".scalars[0] = ElementCompute(" + v + ".value);\n";
    case NodeKind::Store:
      return "  " + arg + ".ptr_aux = static_cast<" + element + "*>(" + v + ".ptr);\n  " + arg +
             ".dAux = " + aux_stride(node.layout) + "(" + v + ".ld, " + v + ".batch_stride);\n";
    case NodeKind::RowReduction:
    case NodeKind::ColumnReduction: {
      const bool row = node.kind == NodeKind::RowReduction;
      // 3.x reductions take a void pointer, 2.x ones the output's.
      const std::string pointer = sm80 ? "static_cast<" + element + "*>(" + v + ".ptr)" : v + ".ptr";
      return "  " + arg + (row ? ".ptr_row" : ".ptr_col") + " = " + pointer + ";\n  " + arg +
             ".reduction_identity = " + reduction_identity(node.reduce) + ";\n  " + arg + (row ? ".dRow" : ".dCol") +
             " = {" + (row ? "cute::_0{}, cute::_1{}, " : "cute::_1{}, cute::_0{}, ") + v + ".batch_stride};\n";
    }
    case NodeKind::ScalarReduction:
      return "  " + arg + ".ptr_scalar = static_cast<" + element + "*>(" + v + ".ptr);\n  " + arg +
             ".reduction_identity = " + reduction_identity(node.reduce) + ";\n  " + arg +
             ".dScalar = {cute::_0{}, cute::_0{}, " +
             (sm80 ? "static_cast<int>(" + v + ".batch_stride)" : v + ".batch_stride") + "};\n";
    default: return "";
  }
}

}  // namespace

Placeholders visitor_placeholders(const epilogue::Epilogue& tree, KernelFamily family) {
  const bool sm80 = family == KernelFamily::Sm80Universal;
  const std::vector<Node>& nodes = tree.nodes();
  // The visitor's last op is what D receives: on 3.x a conversion of the tree's last node to D's type (the collective
  // stores it), on 2.x the store of D itself.
  const std::size_t count = nodes.size() + 1;
  std::string types;
  std::string edges;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    types += sm80 ? sm80_node_type(nodes[i], i) : sm90_node_type(nodes[i], i);
    std::string seq;
    for (int input : nodes[i].inputs) seq += (seq.empty() ? "" : ", ") + std::to_string(input);
    edges += "    cute::seq<" + seq + ">,\n";
  }
  const std::string last = std::to_string(nodes.size());
  types += sm80 ? "using Node" + last + " = visitor2x::VisitorAuxStore<OutputTileThreadMap, ElementD, " + kRound +
                      ", " + matrix_stride(Layout::RowMajor) + ">;\n"
                : "using Node" + last + " = fusion::Sm90Compute<cutlass::epilogue::thread::Identity, ElementD, " +
                      "ElementCompute, " + kRound + ">;\n";
  edges += "    cute::seq<" + std::to_string(nodes.size() - 1) + ">";
  std::string ops;
  for (std::size_t i = 0; i < count; ++i) ops += (i ? ", Node" : "Node") + std::to_string(i);
  types += std::string("using Fusion = ") +
           (sm80 ? "visitor2x::Sm80TopologicalVisitor" : "fusion::Sm90TopologicalVisitor") +
           "<ElementCompute, cute::tuple<\n" + edges + ">,\n    " + ops + ">;\n";

  // Up to four ops the visitor's arguments are a struct of op_0..op_3; beyond, a cute::tuple.
  auto arg = [&](std::size_t i) {
    return count <= 4 ? "fusion_args.op_" + std::to_string(i) : "cute::get<" + std::to_string(i) + ">(fusion_args)";
  };
  std::string fill;
  for (std::size_t i = 0; i < nodes.size(); ++i) fill += node_arguments(nodes[i], i, arg(i), sm80);
  if (sm80) {
    fill += "  " + arg(nodes.size()) + ".ptr_aux = static_cast<ElementD*>(args.D);\n  " + arg(nodes.size()) +
            ".dAux = gemmkit::module::make_stride<" + matrix_stride(Layout::RowMajor) +
            ">(args.ldd, args.batch > 1 ? args.batch_stride_D : 0);\n";
  }
  return {{"visitor_nodes", types}, {"visitor_arguments", fill}, {"visitor_count", std::to_string(nodes.size())}};
}

namespace {

// The shared memory (bytes) an SM90 TMA epilogue with this tree takes, as CUTLASS 4.2's builder lays it out: epilogue
// tiles of (128 | 64) x 32 elements, C and every aux load in min(tiles, 4) stages, D and every aux store in
// min(tiles, 2) (D reuses C's buffers when they have the same width), plus barriers.
long sm90_epilogue_bytes(const epilogue::Epilogue& tree, const KernelSpec& spec) {
  const Shape3 cta = spec.tile.cta_tile();
  const KernelSchedule schedule = spec.tile.kernel_schedule;
  const bool cooperative = schedule == KernelSchedule::TmaWarpSpecializedCooperative ||
                           schedule == KernelSchedule::CpAsyncWarpSpecializedCooperative ||
                           (schedule == KernelSchedule::Auto && cta[0] != 64);
  const long tile_m = std::min(cooperative ? 128 : 64, cta[0]);
  const long tile_n = std::min(bits_of(spec.element_d) == 8 && !cooperative && cta[1] % 64 == 0 ? 64 : 32, cta[1]);
  const long tile = tile_m * tile_n;
  const long tiles = std::max(1L, static_cast<long>(cta[0]) * cta[1] / tile);
  const long stages_d = std::min(tiles, 2L);
  const bool reuse = bits_of(spec.element_c) == bits_of(spec.element_d) && bits_of(spec.element_d) > 8;
  const long stages_c = reuse ? std::max(std::min(tiles, 4L), stages_d + 1) : std::min(tiles, 4L);
  long bytes =
      tile * bits_of(spec.element_c) / 8 * stages_c + (reuse ? 0 : tile * bits_of(spec.element_d) / 8 * stages_d);
  for (const Node& node : tree.nodes()) {
    if (node.kind == NodeKind::Matrix) bytes += tile * bits_of(*node.element) / 8 * stages_c;
    if (node.kind == NodeKind::Store) bytes += tile * bits_of(*node.element) / 8 * stages_d;
  }
  return bytes + 4096;  // pipeline barriers and alignment
}

}  // namespace

void check_visitor(const epilogue::Epilogue& tree, const KernelSpec& spec, const DeviceLimits& limits) {
  for (const Node& node : tree.nodes()) {
    const std::string where =
        "epilogue " + std::string(epilogue::to_string(node.kind)) + (node.name.empty() ? "" : " '" + node.name + "'");
    if (epilogue::is_reduction(node.kind)) {
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
                        " tensors are not offered in a visitor epilogue; use f16, bf16, f32 or an 8-bit type.");
    }
  }
  if (spec.family == KernelFamily::Sm80Universal) {
    if (spec.opclass != OpClass::TensorOp) {
      throw ConfigError("epilogue: CUTLASS 2.x visitor trees run on tensor-core kernels; set opclass = TensorOp.");
    }
    if (spec.layout_c != Layout::RowMajor) {
      throw ConfigError("epilogue: CUTLASS 2.x visitor trees store a row-major D; make C and D row-major.");
    }
    for (const Node& node : tree.nodes()) {
      const std::string where = "epilogue " + std::string(epilogue::to_string(node.kind)) + " '" + node.name + "'";
      // The 2.x nodes move rows in vectors: a column-major tensor faults on them.
      if ((node.kind == NodeKind::Matrix || node.kind == NodeKind::Store) && node.layout != Layout::RowMajor) {
        throw ConfigError(where +
                          ": CUTLASS 2.x visitor trees take row-major tensors only; use an SM90 plan "
                          "(kernel_cc 90) for a column-major one.");
      }
      // Measured wrong on the H200 (sums over batches differ from a float64 evaluation); SM90 kernels compute it.
      if (node.kind == NodeKind::ScalarReduction) {
        throw ConfigError(where + ": scalar reductions run on SM90 (kernel_cc 90) visitor trees only.");
      }
    }
    return;
  }
  if (spec.tile.epilogue_schedule == EpilogueSchedule::NoSmemWarpSpecialized) {
    throw ConfigError(
        "epilogue: a visitor tree needs the TMA epilogue; leave the tile's epilogue schedule Auto or "
        "set a TmaWarpSpecialized one.");
  }
  // The mainloop needs two stages beside the epilogue's buffers.
  const long epilogue = sm90_epilogue_bytes(tree, spec);
  const long per_stage = smem_bytes_per_stage(spec.tile, spec.element_a, spec.element_b);
  const long stages = spec.tile.stages == 0 ? 2 : spec.tile.stages;
  if (epilogue + stages * per_stage > limits.max_smem_per_block) {
    throw ConfigError("epilogue: the tree's tensors take " + std::to_string(epilogue) +
                      " bytes of shared memory "
                      "beside " +
                      std::to_string(stages) + " mainloop stages of " + std::to_string(per_stage) +
                      " bytes; more than the " + std::to_string(limits.max_smem_per_block) +
                      " a block may use. "
                      "Take a smaller tile, or fewer aux tensors.");
  }
}

}  // namespace gemmkit::families
