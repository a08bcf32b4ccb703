// src/epilogue/plain_form.cpp: recognising act(alpha * (acc * row_scale * column_scale) + beta * C + bias) in a tree,
// whatever order its sums and products were written in.
#include "epilogue/plain_form.hpp"

#include <vector>

namespace gemmkit::epilogue {
namespace {

class Matcher {
 public:
  Matcher(const Epilogue& tree, DataType element_c) : nodes_(tree.nodes()), element_c_(element_c) {}

  std::optional<PlainForm> match() {
    int value = static_cast<int>(nodes_.size()) - 1;
    peel_activation(value);
    std::vector<int> terms;
    sum_terms(value, terms);
    bool saw_accumulator = false;
    for (int term : terms) {
      if (!take_term(term, saw_accumulator)) return std::nullopt;
    }
    if (!saw_accumulator) return std::nullopt;
    return form_;
  }

 private:
  const Node& at(int i) const { return nodes_[static_cast<std::size_t>(i)]; }
  bool is(int i, ComputeOp op) const { return at(i).kind == NodeKind::Compute && at(i).op == op; }
  bool is_zero(int i) const { return at(i).kind == NodeKind::Constant && at(i).value == 0.0; }

  // The activation D's value ends in, if any; leaky_relu is the tree max(x, 0) + slope * min(x, 0).
  void peel_activation(int& value) {
    const Node& node = at(value);
    if (is(value, ComputeOp::Activation)) {
      form_.activation = node.activation;
      value = node.inputs[0];
      return;
    }
    if (!is(value, ComputeOp::Add)) return;
    for (int order = 0; order < 2; ++order) {
      const int max = node.inputs[order], scaled = node.inputs[1 - order];
      if (!is(max, ComputeOp::Maximum) || !is(scaled, ComputeOp::Multiply)) continue;
      const int x = at(max).inputs[0], zero = at(max).inputs[1];
      for (int side = 0; side < 2; ++side) {
        const int slope = at(scaled).inputs[side], min = at(scaled).inputs[1 - side];
        if (is_zero(zero) && at(slope).kind == NodeKind::Constant && is(min, ComputeOp::Minimum) &&
            at(min).inputs[0] == x && is_zero(at(min).inputs[1])) {
          form_.activation = Activation::LeakyReLU;
          form_.activation_parameter = at(slope).value;
          value = x;
          return;
        }
      }
    }
  }

  // The terms of a sum; a multiply-add a * b + c is the term a * b and the terms of c.
  void sum_terms(int value, std::vector<int>& terms) const {
    if (is(value, ComputeOp::Add)) {
      for (int input : at(value).inputs) sum_terms(input, terms);
    } else {
      terms.push_back(value);
    }
  }

  // The factors of a product (a multiply-add's product counts as one: see take_term).
  void product_factors(int value, std::vector<int>& factors) const {
    if (is(value, ComputeOp::Multiply)) {
      for (int input : at(value).inputs) product_factors(input, factors);
    } else {
      factors.push_back(value);
    }
  }

  bool take_term(int term, bool& saw_accumulator) {
    if (is(term, ComputeOp::MultiplyAdd)) {
      // a * b + c: the product is one term, c's terms the others.
      const Node& product = at(term);
      std::vector<int> factors;
      product_factors(product.inputs[0], factors);
      product_factors(product.inputs[1], factors);
      std::vector<int> rest;
      sum_terms(product.inputs[2], rest);
      if (!take_product(factors, saw_accumulator)) return false;
      for (int r : rest) {
        if (!take_term(r, saw_accumulator)) return false;
      }
      return true;
    }
    const Node& node = at(term);
    const bool vector = node.kind == NodeKind::RowBroadcast || node.kind == NodeKind::ColumnBroadcast;
    if (vector && form_.bias == BiasMode::None && node.element.value_or(element_c_) == element_c_) {
      // A column of m values is one per output row.
      form_.bias = node.kind == NodeKind::ColumnBroadcast ? BiasMode::PerRow : BiasMode::PerColumn;
      form_.bias_name = node.name;
      return true;
    }
    std::vector<int> factors;
    product_factors(term, factors);
    return take_product(factors, saw_accumulator);
  }

  // alpha * acc * row_scale * column_scale, or beta * C, in any order.
  bool take_product(const std::vector<int>& factors, bool& saw_accumulator) {
    std::optional<Factor> factor;
    bool accumulator = false, source = false;
    std::string row_scale, column_scale;
    for (int f : factors) {
      const Node& node = at(f);
      switch (node.kind) {
        case NodeKind::Accumulator:
          if (accumulator) return false;
          accumulator = true;
          break;
        case NodeKind::Source:
          if (source) return false;
          source = true;
          break;
        case NodeKind::Scalar:
        case NodeKind::Constant:
          if (factor) return false;
          factor = node.kind == NodeKind::Scalar ? Factor{node.name, 1.0} : Factor{"", node.value};
          break;
        case NodeKind::ColumnBroadcast:
        case NodeKind::RowBroadcast: {
          std::string& name = node.kind == NodeKind::ColumnBroadcast ? row_scale : column_scale;
          if (!name.empty() || node.element.value_or(element_c_) != DataType::f32) return false;
          name = node.name;
          break;
        }
        default: return false;
      }
    }
    if (accumulator == source) return false;  // each product scales exactly one of them
    if (source) {
      if (form_.beta || !row_scale.empty() || !column_scale.empty()) return false;
      form_.beta = factor.value_or(Factor{});
      return true;
    }
    if (saw_accumulator) return false;
    saw_accumulator = true;
    form_.alpha = factor.value_or(Factor{});
    form_.row_scale_name = row_scale;
    form_.column_scale_name = column_scale;
    form_.scale = row_scale.empty()      ? (column_scale.empty() ? ScaleMode::None : ScaleMode::PerColumn)
                  : column_scale.empty() ? ScaleMode::PerRow
                                         : ScaleMode::RowAndColumn;
    return true;
  }

  const std::vector<Node>& nodes_;
  DataType element_c_;
  PlainForm form_;
};

}  // namespace

Epilogue plain_epilogue(Activation act, BiasMode bias, ScaleMode scale, double activation_parameter) {
  Expr accumulator = acc();
  if (scale == ScaleMode::PerRow || scale == ScaleMode::RowAndColumn) {
    accumulator = accumulator * column_broadcast("row_scale", DataType::f32);
  }
  if (scale == ScaleMode::PerColumn || scale == ScaleMode::RowAndColumn) {
    accumulator = accumulator * row_broadcast("column_scale", DataType::f32);
  }
  Expr value = scalar("alpha") * accumulator + scalar("beta") * source();
  if (bias == BiasMode::PerRow) value = value + column_broadcast("bias");
  if (bias == BiasMode::PerColumn) value = value + row_broadcast("bias");
  return Epilogue(act == Activation::Identity ? value : activation(act, value, activation_parameter));
}

std::optional<PlainForm> plain_form(const Epilogue& tree, DataType element_c) {
  if (!tree.outputs().empty()) return std::nullopt;  // a second output needs the visitor kernel
  return Matcher(tree, element_c).match();
}

}  // namespace gemmkit::epilogue
