// src/api/conv_tensor_check.hpp: a Conv2d's tensors and geometry checked before anything runs: packed NHWC / KRSC
// tensors of the plan's types, the output size, and the vectors their channels and addresses allow.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "gemmkit/conv2d.hpp"
#include "gemmkit/tensor.hpp"

namespace gemmkit::detail {

using Extent = std::array<std::int64_t, 4>;

std::string extent_text(const Extent& e);

// The operands' roles and layouts by conv kind, for messages.
struct Roles {
  const char *a, *b, *d;
};
Roles roles(ConvKind kind);

// A 4-D packed tensor with channels innermost: its extents. TensorError naming what to change otherwise.
Extent check_packed(const TensorView& t, const std::string& name, DataType dtype);

// An output extent of a convolution along one axis.
std::int64_t output_extent(std::int64_t in, std::int64_t filter, int pad, int stride, int dilation);

// Strides and dilations of at least 1, paddings of at least 0; ConfigError naming the axis otherwise.
void check_geometry(const Conv2dGeometry& g);

// The widest candidate vector (elements) that `channels` and the address allow; 0 when none.
int fitting_vector(const void* data, std::int64_t channels, DataType type, const std::vector<int>& candidates);

}  // namespace gemmkit::detail
