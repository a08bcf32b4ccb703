// include/gemmkit/epilogue.hpp: an epilogue as a value, a small graph of loads, computes, stores and reductions over
// the accumulator (an epilogue visitor tree), and the typed expressions that build one:
//
//   using namespace gemmkit::epilogue;
//   Expr F = scalar("alpha") * acc() + (scalar("beta") * source() + aux("aux"));
//   Expr D = relu(F + 1.0) + column_broadcast("bias") + store(F, "F");
//   plan.set_epilogue_visitor(Epilogue(D));
//
// The value D takes is stored to the plan's D; store() and the reductions write further outputs, named like the
// inputs, whose tensors run() takes by name (RunOptions::visitor_args).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gemmkit/enums.hpp"

namespace gemmkit::epilogue {

enum class NodeKind {
  Accumulator,      // A@B, in the accumulator's type
  Source,           // the GEMM's C
  Matrix,           // a named m x n tensor (an "aux" input)
  RowBroadcast,     // a named row vector: n values, one per column, the same for every row (shape (1, n))
  ColumnBroadcast,  // a named column vector: m values, one per row (shape (m, 1))
  Scalar,           // a named scalar given at run time (alpha, beta, ...)
  Constant,         // a number written in the tree
  Compute,          // an elementwise function of its inputs
  Store,            // writes its input to a named m x n output and passes it on
  RowReduction,     // reduces its input over the rows into a named row vector (1, n), and passes it on
  ColumnReduction,  // reduces its input over the columns into a named column vector (m, 1), and passes it on
  ScalarReduction,  // reduces its input into a named scalar (one value per batch), and passes it on
};

enum class ComputeOp { Add, Subtract, Multiply, Divide, MultiplyAdd, Maximum, Minimum, Negate, Activation, Convert };
enum class ReduceOp { Sum, Max, Min };

struct Node {
  NodeKind kind = NodeKind::Accumulator;
  std::string name;                  // tensors and scalars: the name run() takes them by
  std::optional<DataType> element;   // tensors: the element type; unset = the plan's (C's for inputs, D's for outputs)
  Layout layout = Layout::RowMajor;  // Matrix and Store: the tensor's layout
  ComputeOp op = ComputeOp::Add;     // Compute
  Activation activation = Activation::Identity;  // Compute with op Activation
  double value = 0.0;                            // Constant: the number
  ReduceOp reduce = ReduceOp::Sum;               // the reductions
  std::vector<int> inputs;                       // indices of earlier nodes
  bool operator==(const Node&) const = default;
};

// Nodes that read a named tensor or scalar, nodes that write a named tensor, and the reductions among the latter.
bool is_input(NodeKind kind);
bool is_output(NodeKind kind);
bool is_reduction(NodeKind kind);

std::string_view to_string(NodeKind kind);
std::string_view to_string(ComputeOp op);
std::string_view to_string(ReduceOp op);

class Expr;

// A validated graph in topological order, its nodes deduplicated (one node per distinct subexpression) and its last
// node the value stored to D. Throws ConfigError naming the node when the graph is malformed: a name used for two
// different tensors, a store or reduction named like an input or "D", a node without the inputs its operation takes.
class Epilogue {
 public:
  // `outputs`: stores and reductions D's value does not read (they are part of the tree all the same).
  explicit Epilogue(const Expr& d, const std::vector<Expr>& outputs = {});
  explicit Epilogue(std::vector<Node> nodes);  // the last node is D's value

  const std::vector<Node>& nodes() const { return nodes_; }
  // The nodes that read a named tensor or scalar, and those that write one, in graph order.
  std::vector<const Node*> inputs() const;
  std::vector<const Node*> outputs() const;
  const Node* find(std::string_view name) const;
  // Whether the tree reads C (beta then has no meaning of its own: C enters only through the tree).
  bool reads_source() const;
  // The same tree with every unset tensor type given: `input` for the tensors it reads, `output` for those it
  // stores, f32 for reductions.
  Epilogue with_types(DataType input, DataType output) const;
  // A stable text of the structure, names and types: the cache key's and the kernel name's part.
  std::string canonical() const;
  // 8 hex digits of canonical()'s hash, as kernel names carry it.
  std::string digest() const;
  // The tree as formulas, one line per named value: "F = alpha * accum + ...", ending with "D = ...".
  std::string to_string() const;
  bool operator==(const Epilogue& other) const { return nodes_ == other.nodes_; }

 private:
  std::vector<Node> nodes_;
};

// A node under construction; cheap to copy (it shares the graph it grows).
class Expr {
 public:
  Expr(double constant);  // NOLINT(google-explicit-constructor): `acc() + 1.0` reads as it should
  struct Graph;
  Expr(std::shared_ptr<Graph> graph, int index) : graph_(std::move(graph)), index_(index) {}
  const std::shared_ptr<Graph>& graph() const { return graph_; }
  int index() const { return index_; }

 private:
  std::shared_ptr<Graph> graph_;
  int index_ = 0;
};

Expr acc();
Expr source();  // C
Expr aux(std::string name, std::optional<DataType> element = std::nullopt, Layout layout = Layout::RowMajor);
Expr row_broadcast(std::string name, std::optional<DataType> element = std::nullopt);
Expr column_broadcast(std::string name, std::optional<DataType> element = std::nullopt);
Expr scalar(std::string name);

Expr compute(ComputeOp op, const std::vector<Expr>& inputs);
Expr operator+(const Expr& a, const Expr& b);
Expr operator-(const Expr& a, const Expr& b);
Expr operator*(const Expr& a, const Expr& b);
Expr operator/(const Expr& a, const Expr& b);
Expr operator-(const Expr& a);
Expr multiply_add(const Expr& a, const Expr& b, const Expr& c);  // a * b + c
Expr maximum(const Expr& a, const Expr& b);
Expr minimum(const Expr& a, const Expr& b);
// Rounds to `element` and back: what storing the value in that type and reading it again would give.
Expr convert(const Expr& a, DataType element);
// leaky_relu(x, slope) is built as maximum(x, 0) + slope * minimum(x, 0): its slope is part of the tree.
Expr activation(Activation act, const Expr& a, double parameter = 0.01);
Expr relu(const Expr& a);
Expr leaky_relu(const Expr& a, double slope = 0.01);
Expr gelu(const Expr& a);
Expr gelu_tanh(const Expr& a);
Expr hardswish(const Expr& a);
Expr sigmoid(const Expr& a);
Expr silu(const Expr& a);
Expr tanh(const Expr& a);

// Writes `value` to the output tensor `name` (m x n, like D) and stands for the same value.
Expr store(const Expr& value, std::string name, std::optional<DataType> element = std::nullopt,
           Layout layout = Layout::RowMajor);
// Reduce `value` into an output and stand for the same value: over the rows into a row vector (1, n), over the
// columns into a column vector (m, 1), or over everything into a scalar (per batch).
Expr row_reduction(const Expr& value, std::string name, ReduceOp op = ReduceOp::Sum,
                   std::optional<DataType> element = std::nullopt);
Expr column_reduction(const Expr& value, std::string name, ReduceOp op = ReduceOp::Sum,
                      std::optional<DataType> element = std::nullopt);
Expr scalar_reduction(const Expr& value, std::string name, ReduceOp op = ReduceOp::Sum,
                      std::optional<DataType> element = std::nullopt);

// The tree of a plan's own epilogue settings, act(alpha * (acc * row_scale * column_scale) + beta * C + bias): the
// bias a column (BiasMode::PerRow) or row (PerColumn) broadcast named "bias", the f32 scale vectors "row_scale" and
// "column_scale", as RunOptions names them. Given to a plan as its visitor tree, it runs on the kernel those settings
// build.
Epilogue plain_epilogue(Activation activation = Activation::Identity, BiasMode bias = BiasMode::None,
                        ScaleMode scale = ScaleMode::None, double activation_parameter = 0.01);

}  // namespace gemmkit::epilogue
