// tests/unit/conv2d_setup.hpp: what the Conv2d unit tests build on: plan options, packed NHWC views at a fake
// address, the message of the Error a call throws, res2's wgrad problem, and the CUTLASS 2.x family on SM90.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "gemmkit/conv2d.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/tensor.hpp"
#include "unit/test_env.hpp"

namespace gemmkit::conv2d_setup {

using Extent = std::array<std::int64_t, 4>;

inline Conv2dOptions options(ConvKind kind, DataType element = DataType::f16, DataType accumulator = DataType::f32,
                             int cc = 80) {
  Conv2dOptions o;
  o.kind = kind;
  o.element = element;
  o.element_accumulator = accumulator;
  o.cc = cc;
  return o;
}

// A packed 4-D device view at a fake, 256-byte aligned address: enough for spec_for, which never reads it.
inline TensorView tensor(const Extent& e, DataType dtype = DataType::f16, std::size_t offset = 0) {
  alignas(256) static char base[1024];
  return TensorView::strided(base + offset, dtype, {e[0], e[1], e[2], e[3]}, {e[1] * e[2] * e[3], e[2] * e[3], e[3], 1},
                             0);
}

using testenv::error_of;

// res2's 1x1 64 -> 64 layer at batch 128: wgrad's implicit GEMM is 64 x 64 over K = 128 * 56 * 56 = 401408.
struct Res2Wgrad {
  TensorView dy = tensor({128, 56, 56, 64}), x = tensor({128, 56, 56, 64}), dw = tensor({64, 1, 1, 64});
};

// The CUTLASS 2.x family on an SM90 GPU (kernel_cc=80): SM90's conv kernels have no split-K.
inline Conv2dOptions sm80_on_hopper(ConvKind kind) {
  Conv2dOptions o = options(kind, DataType::f16, DataType::f32, 90);
  o.kernel_cc = 80;
  return o;
}

}  // namespace gemmkit::conv2d_setup
