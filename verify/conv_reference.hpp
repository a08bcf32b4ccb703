// verify/conv_reference.hpp: packed NHWC / KRSC host tensors and the float64 reference convolution (fprop, dgrad,
// wgrad) that the CLI's run --check and the gpu tier compare Conv2d against.
#pragma once

#include <array>
#include <cstdint>

#include "gemmkit/conv2d.hpp"
#include "verify/host_matrix.hpp"

namespace gemmkit::verify {

using Extent4 = std::array<std::int64_t, 4>;

// One convolution's sizes: the input x (n,h,w,c), the filter w (k,r,s,c), the output y (n,p,q,k).
struct ConvShape {
  std::int64_t n = 1, h = 8, w = 8, c = 8, k = 8, r = 3, s = 3;
  Conv2dGeometry geometry;

  std::int64_t p() const;
  std::int64_t q() const;
  Extent4 input() const { return {n, h, w, c}; }
  Extent4 filter() const { return {k, r, s, c}; }
  Extent4 output() const { return {n, p(), q(), k}; }
  // The extents of A, B and C/D for a conv kind (see Conv2dOptions).
  Extent4 a(ConvKind kind) const { return kind == ConvKind::Fprop ? input() : output(); }
  Extent4 b(ConvKind kind) const { return kind == ConvKind::Wgrad ? input() : filter(); }
  Extent4 d(ConvKind kind) const;
  // 2 * multiply-adds, for TFLOP/s.
  double flops() const;
};

// A packed 4-D tensor on the host: rows = e0 * e1 * e2, cols = e3 (channels innermost), as a HostMatrix.
HostMatrix conv_tensor(DataType dtype, const Extent4& extent);
// A 4-D view of such a tensor (host when device < 0, else at `device_data`).
TensorView conv_view(const HostMatrix& host, const Extent4& extent, void* device_data = nullptr, int device = -1);

// act(alpha * conv + beta * C) over every element of D, in float64, compared with D rounded to its type.
Comparison compare_conv(ConvKind kind, const ConvShape& shape, const HostMatrix& A, const HostMatrix& B,
                        const HostMatrix* C, const HostMatrix& D, double alpha, double beta,
                        const Epilogue& epilogue = {});

}  // namespace gemmkit::verify
