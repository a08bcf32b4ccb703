// src/families/sm90_conv2d.hpp: the Sm90Conv2d family's problem-level rules: what CUTLASS 4.2's SM90 conv kernels
// (TMA im2col) can address, which a kernel spec does not show. Conv2d checks them before it picks a kernel.
#pragma once

#include <array>

#include "families/family.hpp"

namespace gemmkit::families {

// A 2-D convolution's sizes: input (n, h, w, c), filter (k, r, s, c), output (n, p, q, k), and its geometry.
struct ConvExtents {
  int h = 0, w = 0, r = 0, s = 0, p = 0, q = 0;
  std::array<int, 2> stride{1, 1}, padding{0, 0}, dilation{1, 1};
  int split_k_slices = 1;
};

// Throws ConfigError naming the rule (and kernel_cc=80, whose kernels have none of them) when SM90 conv kernels cannot
// run this problem: strided dgrad, split-K, and paddings or dilated filters beyond TMA im2col's ranges.
void check_sm90_conv_problem(ConvKind kind, const ConvExtents& extents);

}  // namespace gemmkit::families
