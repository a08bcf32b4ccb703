// src/epilogue/plain_form.hpp: the epilogue trees that say what a plan's own settings say,
// D = act(alpha * (acc * row_scale * column_scale) + beta * C + bias), recognised so that they run on the fused
// kernels those settings build (the same kernel, the same speed) instead of a visitor kernel of their own.
#pragma once

#include <optional>
#include <string>

#include "gemmkit/enums.hpp"
#include "gemmkit/epilogue.hpp"

namespace gemmkit::epilogue {

// A factor of the linear combination: a scalar given at run time by `name`, or the number `value` written in the tree.
struct Factor {
  std::string name;  // empty: the constant `value`
  double value = 1.0;
  bool operator==(const Factor&) const = default;
};

struct PlainForm {
  Factor alpha;
  std::optional<Factor> beta;  // set: the tree reads C
  BiasMode bias = BiasMode::None;
  std::string bias_name;
  ScaleMode scale = ScaleMode::None;
  std::string row_scale_name, column_scale_name;
  Activation activation = Activation::Identity;
  double activation_parameter = 0.01;
  bool operator==(const PlainForm&) const = default;
};

// The plain form of `tree` when it has one; nullopt for any other tree: a second output, an aux input, a compute
// other than the final activation, a bias not of C's type `element_c`, scale vectors not f32.
std::optional<PlainForm> plain_form(const Epilogue& tree, DataType element_c);

}  // namespace gemmkit::epilogue
