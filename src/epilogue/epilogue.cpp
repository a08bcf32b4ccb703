// src/epilogue/epilogue.cpp: the epilogue graph: expressions that grow it (one node per distinct subexpression),
// the checks an Epilogue makes once, and its canonical text, digest and formulas.
#include "gemmkit/epilogue.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "gemmkit/errors.hpp"
#include "util/sha256.hpp"

namespace gemmkit::epilogue {

struct Expr::Graph {
  std::vector<Node> nodes;
  // One node per distinct subexpression: what `F` used twice needs to be computed once.
  int intern(Node node) {
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      if (nodes[i] == node) return static_cast<int>(i);
    }
    nodes.push_back(std::move(node));
    return static_cast<int>(nodes.size()) - 1;
  }
};

namespace {

Expr leaf(Node node) {
  auto graph = std::make_shared<Expr::Graph>();
  const int index = graph->intern(std::move(node));
  return {graph, index};
}

// Copies `from`'s nodes up to `index` into `into` (once each) and returns where `index` landed.
int merge(Expr::Graph& into, const Expr::Graph& from, int index, std::map<int, int>& moved) {
  if (auto it = moved.find(index); it != moved.end()) return it->second;
  Node node = from.nodes[static_cast<std::size_t>(index)];
  for (int& input : node.inputs) input = merge(into, from, input, moved);
  const int at = into.intern(std::move(node));
  moved[index] = at;
  return at;
}

// A node over `inputs`, in one graph (the first input's, grown by the others').
Expr over(Node node, const std::vector<Expr>& inputs) {
  auto graph = std::make_shared<Expr::Graph>(*inputs.front().graph());
  for (const Expr& input : inputs) {
    std::map<int, int> moved;
    node.inputs.push_back(
        input.graph() == inputs.front().graph() ? input.index() : merge(*graph, *input.graph(), input.index(), moved));
  }
  const int index = graph->intern(std::move(node));
  return {graph, index};
}

// A node holding a named tensor or scalar.
Node named_node(NodeKind kind, std::string name, std::optional<DataType> element, Layout layout) {
  if (name.empty()) throw ConfigError("epilogue: a " + std::string(epilogue::to_string(kind)) + " needs a name.");
  Node node;
  node.kind = kind;
  node.name = std::move(name);
  node.element = element;
  node.layout = layout;
  return node;
}

Expr named(NodeKind kind, std::string name, std::optional<DataType> element, Layout layout = Layout::RowMajor) {
  return leaf(named_node(kind, std::move(name), element, layout));
}

Expr writer(NodeKind kind, const Expr& value, std::string name, std::optional<DataType> element, Layout layout,
            ReduceOp op = ReduceOp::Sum) {
  Node node = named_node(kind, std::move(name), element, layout);
  node.reduce = op;
  return over(std::move(node), {value});
}

int arity(const Node& node) {
  switch (node.kind) {
    case NodeKind::Compute:
      switch (node.op) {
        case ComputeOp::MultiplyAdd: return 3;
        case ComputeOp::Negate:
        case ComputeOp::Activation:
        case ComputeOp::Convert: return 1;
        default: return 2;
      }
    case NodeKind::Store:
    case NodeKind::RowReduction:
    case NodeKind::ColumnReduction:
    case NodeKind::ScalarReduction: return 1;
    default: return 0;
  }
}

std::string number(double value) {
  std::ostringstream out;
  out.precision(17);
  out << value;
  return out.str();
}

// Only what feeds D or an output: a subexpression built and then dropped is not computed.
std::vector<Node> kept(const std::vector<Node>& nodes, int root) {
  std::vector<bool> keep(nodes.size(), false);
  std::vector<int> stack{root};
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (is_output(nodes[i].kind)) stack.push_back(static_cast<int>(i));
  }
  while (!stack.empty()) {
    const int at = stack.back();
    stack.pop_back();
    if (keep[static_cast<std::size_t>(at)]) continue;
    keep[static_cast<std::size_t>(at)] = true;
    for (int input : nodes[static_cast<std::size_t>(at)].inputs) stack.push_back(input);
  }
  // Renumber, then make D's value the last node (everything after it in the graph is an output that D does not read,
  // or one that reads D's value; a final copy of the root keeps the order in both cases).
  std::vector<int> renumber(nodes.size(), -1);
  std::vector<Node> out;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (!keep[i]) continue;
    Node node = nodes[i];
    for (int& input : node.inputs) input = renumber[static_cast<std::size_t>(input)];
    renumber[i] = static_cast<int>(out.size());
    out.push_back(std::move(node));
  }
  const int new_root = renumber[static_cast<std::size_t>(root)];
  if (new_root != static_cast<int>(out.size()) - 1) {
    Node copy;
    copy.kind = NodeKind::Compute;
    copy.op = ComputeOp::Activation;
    copy.activation = Activation::Identity;
    copy.inputs = {new_root};
    out.push_back(std::move(copy));
  }
  return out;
}

}  // namespace

bool is_input(NodeKind kind) {
  return kind == NodeKind::Matrix || kind == NodeKind::RowBroadcast || kind == NodeKind::ColumnBroadcast ||
         kind == NodeKind::Scalar;
}
bool is_output(NodeKind kind) {
  return kind == NodeKind::Store || is_reduction(kind);
}
bool is_reduction(NodeKind kind) {
  return kind == NodeKind::RowReduction || kind == NodeKind::ColumnReduction || kind == NodeKind::ScalarReduction;
}

std::string_view to_string(NodeKind kind) {
  switch (kind) {
    case NodeKind::Accumulator: return "accumulator";
    case NodeKind::Source: return "source";
    case NodeKind::Matrix: return "matrix";
    case NodeKind::RowBroadcast: return "row_broadcast";
    case NodeKind::ColumnBroadcast: return "column_broadcast";
    case NodeKind::Scalar: return "scalar";
    case NodeKind::Constant: return "constant";
    case NodeKind::Compute: return "compute";
    case NodeKind::Store: return "store";
    case NodeKind::RowReduction: return "row_reduction";
    case NodeKind::ColumnReduction: return "column_reduction";
    case NodeKind::ScalarReduction: return "scalar_reduction";
  }
  return "?";
}

std::string_view to_string(ComputeOp op) {
  switch (op) {
    case ComputeOp::Add: return "add";
    case ComputeOp::Subtract: return "subtract";
    case ComputeOp::Multiply: return "multiply";
    case ComputeOp::Divide: return "divide";
    case ComputeOp::MultiplyAdd: return "multiply_add";
    case ComputeOp::Maximum: return "maximum";
    case ComputeOp::Minimum: return "minimum";
    case ComputeOp::Negate: return "negate";
    case ComputeOp::Activation: return "activation";
    case ComputeOp::Convert: return "convert";
  }
  return "?";
}

std::string_view to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
  }
  return "?";
}

Expr::Expr(double constant) {
  Node node;
  node.kind = NodeKind::Constant;
  node.value = constant;
  *this = leaf(std::move(node));
}

Expr acc() {
  return leaf(Node{});
}
Expr source() {
  Node node;
  node.kind = NodeKind::Source;
  return leaf(std::move(node));
}
Expr aux(std::string name, std::optional<DataType> element, Layout layout) {
  return named(NodeKind::Matrix, std::move(name), element, layout);
}
Expr row_broadcast(std::string name, std::optional<DataType> element) {
  return named(NodeKind::RowBroadcast, std::move(name), element);
}
Expr column_broadcast(std::string name, std::optional<DataType> element) {
  return named(NodeKind::ColumnBroadcast, std::move(name), element);
}
Expr scalar(std::string name) {
  return named(NodeKind::Scalar, std::move(name), std::nullopt);
}

Expr compute(ComputeOp op, const std::vector<Expr>& inputs) {
  Node node;
  node.kind = NodeKind::Compute;
  node.op = op;
  if (static_cast<int>(inputs.size()) != arity(node)) {
    throw ConfigError("epilogue: " + std::string(epilogue::to_string(op)) + " takes " + std::to_string(arity(node)) +
                      " inputs, not " + std::to_string(inputs.size()) + ".");
  }
  return over(std::move(node), inputs);
}
Expr operator+(const Expr& a, const Expr& b) {
  return compute(ComputeOp::Add, {a, b});
}
Expr operator-(const Expr& a, const Expr& b) {
  return compute(ComputeOp::Subtract, {a, b});
}
Expr operator*(const Expr& a, const Expr& b) {
  return compute(ComputeOp::Multiply, {a, b});
}
Expr operator/(const Expr& a, const Expr& b) {
  return compute(ComputeOp::Divide, {a, b});
}
Expr operator-(const Expr& a) {
  return compute(ComputeOp::Negate, {a});
}
Expr multiply_add(const Expr& a, const Expr& b, const Expr& c) {
  return compute(ComputeOp::MultiplyAdd, {a, b, c});
}
Expr maximum(const Expr& a, const Expr& b) {
  return compute(ComputeOp::Maximum, {a, b});
}
Expr minimum(const Expr& a, const Expr& b) {
  return compute(ComputeOp::Minimum, {a, b});
}
Expr convert(const Expr& a, DataType element) {
  Node node;
  node.kind = NodeKind::Compute;
  node.op = ComputeOp::Convert;
  node.element = element;
  return over(std::move(node), {a});
}
Expr activation(Activation act, const Expr& a, double parameter) {
  // leaky_relu as max(x, 0) + slope * min(x, 0), the same value in every type: both generations' visitors compute it
  // (CUTLASS 2.x visitor computes take no parameters).
  if (act == Activation::LeakyReLU) return maximum(a, 0.0) + parameter * minimum(a, 0.0);
  Node node;
  node.kind = NodeKind::Compute;
  node.op = ComputeOp::Activation;
  node.activation = act;
  return over(std::move(node), {a});
}
Expr relu(const Expr& a) {
  return activation(Activation::ReLU, a);
}
Expr leaky_relu(const Expr& a, double slope) {
  return activation(Activation::LeakyReLU, a, slope);
}
Expr gelu(const Expr& a) {
  return activation(Activation::GELU, a);
}
Expr gelu_tanh(const Expr& a) {
  return activation(Activation::GELUTanh, a);
}
Expr hardswish(const Expr& a) {
  return activation(Activation::HardSwish, a);
}
Expr sigmoid(const Expr& a) {
  return activation(Activation::Sigmoid, a);
}
Expr silu(const Expr& a) {
  return activation(Activation::SiLU, a);
}
Expr tanh(const Expr& a) {
  return activation(Activation::Tanh, a);
}

Expr store(const Expr& value, std::string name, std::optional<DataType> element, Layout layout) {
  return writer(NodeKind::Store, value, std::move(name), element, layout);
}
Expr row_reduction(const Expr& value, std::string name, ReduceOp op, std::optional<DataType> element) {
  return writer(NodeKind::RowReduction, value, std::move(name), element, Layout::RowMajor, op);
}
Expr column_reduction(const Expr& value, std::string name, ReduceOp op, std::optional<DataType> element) {
  return writer(NodeKind::ColumnReduction, value, std::move(name), element, Layout::RowMajor, op);
}
Expr scalar_reduction(const Expr& value, std::string name, ReduceOp op, std::optional<DataType> element) {
  return writer(NodeKind::ScalarReduction, value, std::move(name), element, Layout::RowMajor, op);
}

namespace {
std::vector<Node> joined(const Expr& d, const std::vector<Expr>& outputs) {
  Expr::Graph graph = *d.graph();
  for (const Expr& output : outputs) {
    std::map<int, int> moved;
    merge(graph, *output.graph(), output.index(), moved);
  }
  return kept(graph.nodes, d.index());
}
}  // namespace

Epilogue::Epilogue(const Expr& d, const std::vector<Expr>& outputs) : Epilogue(joined(d, outputs)) {}

Epilogue::Epilogue(std::vector<Node> nodes) : nodes_(std::move(nodes)) {
  if (nodes_.empty()) throw ConfigError("epilogue: the tree has no node; D needs a value.");
  std::map<std::string, const Node*> by_name;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const Node& node = nodes_[i];
    const std::string where = "epilogue node " + std::to_string(i) + " (" +
                              std::string(epilogue::to_string(node.kind)) +
                              (node.name.empty() ? "" : " '" + node.name + "'") + ")";
    if (static_cast<int>(node.inputs.size()) != arity(node)) {
      throw ConfigError(where + ": takes " + std::to_string(arity(node)) + " inputs, has " +
                        std::to_string(node.inputs.size()) + ".");
    }
    for (int input : node.inputs) {
      if (input < 0 || input >= static_cast<int>(i)) {
        throw ConfigError(where + ": input " + std::to_string(input) + " is not an earlier node.");
      }
    }
    if (node.kind == NodeKind::Compute && node.op == ComputeOp::Activation &&
        node.activation == Activation::LeakyReLU) {
      throw ConfigError(where +
                        ": build leaky_relu with leaky_relu(x, slope) (maximum(x, 0) + slope * minimum(x, 0)).");
    }
    if (!is_input(node.kind) && !is_output(node.kind)) continue;
    if (node.name == "D" || node.name == "C" || node.name == "accum") {
      throw ConfigError(where + ": '" + node.name + "' is reserved (accum, C and D are the GEMM's own); rename it.");
    }
    if (auto [it, fresh] = by_name.emplace(node.name, &node); !fresh) {
      const Node& other = *it->second;
      const bool same_input = is_input(node.kind) && other.kind == node.kind && other.element == node.element &&
                              other.layout == node.layout;
      if (!same_input) {
        throw ConfigError(where + ": the name '" + node.name + "' is already a " +
                          std::string(epilogue::to_string(other.kind)) + "; give each tensor its own name.");
      }
    }
  }
}

std::vector<const Node*> Epilogue::inputs() const {
  std::vector<const Node*> out;
  std::set<std::string> seen;
  for (const Node& node : nodes_) {
    if (is_input(node.kind) && seen.insert(node.name).second) out.push_back(&node);
  }
  return out;
}

std::vector<const Node*> Epilogue::outputs() const {
  std::vector<const Node*> out;
  for (const Node& node : nodes_) {
    if (is_output(node.kind)) out.push_back(&node);
  }
  return out;
}

const Node* Epilogue::find(std::string_view name) const {
  for (const Node& node : nodes_) {
    if (node.name == name && (is_input(node.kind) || is_output(node.kind))) return &node;
  }
  return nullptr;
}

Epilogue Epilogue::with_types(DataType input, DataType output) const {
  std::vector<Node> nodes = nodes_;
  for (Node& node : nodes) {
    if (node.element || node.kind == NodeKind::Scalar || !(is_input(node.kind) || is_output(node.kind))) {
      continue;
    }
    node.element = is_input(node.kind) ? input : node.kind == NodeKind::Store ? output : DataType::f32;
  }
  return Epilogue(std::move(nodes));
}

bool Epilogue::reads_source() const {
  return std::any_of(nodes_.begin(), nodes_.end(), [](const Node& n) { return n.kind == NodeKind::Source; });
}

std::string Epilogue::canonical() const {
  std::string out;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const Node& node = nodes_[i];
    out += std::to_string(i) + ":" + std::string(epilogue::to_string(node.kind));
    if (!node.name.empty()) out += "," + node.name;
    if (node.element) out += "," + std::string(gemmkit::to_string(*node.element));
    if (node.kind == NodeKind::Matrix || node.kind == NodeKind::Store) {
      out += "," + std::string(gemmkit::to_string(node.layout));
    }
    if (node.kind == NodeKind::Compute) {
      out += "," + std::string(epilogue::to_string(node.op));
      if (node.op == ComputeOp::Activation) out += "," + std::string(gemmkit::to_string(node.activation));
    }
    if (node.kind == NodeKind::Constant) out += "," + number(node.value);
    if (is_reduction(node.kind)) out += "," + std::string(epilogue::to_string(node.reduce));
    out += "(";
    for (std::size_t j = 0; j < node.inputs.size(); ++j) out += (j ? "," : "") + std::to_string(node.inputs[j]);
    out += ");";
  }
  return out;
}

std::string Epilogue::digest() const {
  return sha256_hex(canonical()).substr(0, 8);
}

std::string Epilogue::to_string() const {
  std::vector<std::string> text(nodes_.size());
  std::string lines;
  auto binary = [](ComputeOp op) -> const char* {
    switch (op) {
      case ComputeOp::Add: return " + ";
      case ComputeOp::Subtract: return " - ";
      case ComputeOp::Multiply: return " * ";
      case ComputeOp::Divide: return " / ";
      default: return nullptr;
    }
  };
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const Node& node = nodes_[i];
    auto in = [&](int j) { return text[static_cast<std::size_t>(node.inputs[static_cast<std::size_t>(j)])]; };
    switch (node.kind) {
      case NodeKind::Accumulator: text[i] = "accum"; break;
      case NodeKind::Source: text[i] = "C"; break;
      case NodeKind::Constant: text[i] = number(node.value); break;
      case NodeKind::Matrix:
      case NodeKind::RowBroadcast:
      case NodeKind::ColumnBroadcast:
      case NodeKind::Scalar: text[i] = node.name; break;
      case NodeKind::Compute:
        if (const char* op = binary(node.op)) {
          text[i] = "(" + in(0) + op + in(1) + ")";
        } else if (node.op == ComputeOp::Negate) {
          text[i] = "-" + in(0);
        } else if (node.op == ComputeOp::Activation) {
          text[i] = node.activation == Activation::Identity
                        ? in(0)
                        : std::string(gemmkit::to_string(node.activation)) + "(" + in(0) + ")";
        } else if (node.op == ComputeOp::Convert) {
          text[i] = "convert(" + in(0) + ", " + std::string(gemmkit::to_string(*node.element)) + ")";
        } else {
          std::string args;
          for (std::size_t j = 0; j < node.inputs.size(); ++j) args += (j ? ", " : "") + in(static_cast<int>(j));
          text[i] = std::string(epilogue::to_string(node.op)) + "(" + args + ")";
        }
        break;
      case NodeKind::Store:
        lines += node.name + " = " + in(0) + "\n";
        text[i] = node.name;
        break;
      case NodeKind::RowReduction:
      case NodeKind::ColumnReduction:
      case NodeKind::ScalarReduction:
        lines += node.name + " = " + std::string(epilogue::to_string(node.kind)) + "_" +
                 std::string(epilogue::to_string(node.reduce)) + "(" + in(0) + ")\n";
        text[i] = in(0);
        break;
    }
  }
  return lines + "D = " + text.back() + "\n";
}

}  // namespace gemmkit::epilogue
