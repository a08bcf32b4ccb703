// verify/conv_reference.cpp: the float64 reference convolution.
#include "verify/conv_reference.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace gemmkit::verify {
namespace {

std::int64_t out_extent(std::int64_t in, std::int64_t filter, int pad, int stride, int dilation) {
  return (in + 2 * pad - dilation * (filter - 1) - 1) / stride + 1;
}

// Element (i0, i1, i2, i3) of a packed 4-D tensor of `extent` held in `m`.
double at(const HostMatrix& m, const Extent4& e, std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3) {
  return m.get(0, (i0 * e[1] + i1) * e[2] + i2, i3);
}

}  // namespace

std::int64_t ConvShape::p() const {
  return out_extent(h, r, geometry.padding[0], geometry.stride[0], geometry.dilation[0]);
}
std::int64_t ConvShape::q() const {
  return out_extent(w, s, geometry.padding[1], geometry.stride[1], geometry.dilation[1]);
}
Extent4 ConvShape::d(ConvKind kind) const {
  return kind == ConvKind::Fprop ? output() : kind == ConvKind::Dgrad ? input() : filter();
}
double ConvShape::flops() const {
  return 2.0 * static_cast<double>(n * p() * q()) * static_cast<double>(k) * static_cast<double>(r * s * c);
}

HostMatrix conv_tensor(DataType dtype, const Extent4& e) {
  return HostMatrix(dtype, e[0] * e[1] * e[2], e[3], Layout::RowMajor);
}

TensorView conv_view(const HostMatrix& host, const Extent4& e, void* device_data, int device) {
  TensorView v = host.view();
  if (device >= 0) v = host.view_at(device_data, device);
  v.rank = 4;
  v.shape = {e[0], e[1], e[2], e[3], 0, 0};
  v.strides = {e[1] * e[2] * e[3], e[2] * e[3], e[3], 1, 0, 0};
  return v;
}

Comparison compare_conv(ConvKind kind, const ConvShape& sh, const HostMatrix& A, const HostMatrix& B,
                        const HostMatrix* C, const HostMatrix& D, double alpha, double beta, const Epilogue& epilogue) {
  const Extent4 xe = sh.input(), we = sh.filter(), ye = sh.output(), de = sh.d(kind);
  const auto& g = sh.geometry;
  const std::int64_t P = sh.p(), Q = sh.q();
  std::vector<double> acc(static_cast<std::size_t>(de[0] * de[1] * de[2] * de[3]), 0.0);
  auto index = [&](std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3) {
    return static_cast<std::size_t>(((i0 * de[1] + i1) * de[2] + i2) * de[3] + i3);
  };
  // One pass over every (n, p, q, k, r, s, c) that touches the input inside its bounds.
  for (std::int64_t n = 0; n < sh.n; ++n)
    for (std::int64_t p = 0; p < P; ++p)
      for (std::int64_t q = 0; q < Q; ++q)
        for (std::int64_t r = 0; r < sh.r; ++r) {
          const std::int64_t h = p * g.stride[0] - g.padding[0] + r * g.dilation[0];
          if (h < 0 || h >= sh.h) continue;
          for (std::int64_t s = 0; s < sh.s; ++s) {
            const std::int64_t w = q * g.stride[1] - g.padding[1] + s * g.dilation[1];
            if (w < 0 || w >= sh.w) continue;
            for (std::int64_t k = 0; k < sh.k; ++k)
              for (std::int64_t c = 0; c < sh.c; ++c) {
                switch (kind) {
                  case ConvKind::Fprop: acc[index(n, p, q, k)] += at(A, xe, n, h, w, c) * at(B, we, k, r, s, c); break;
                  case ConvKind::Dgrad: acc[index(n, h, w, c)] += at(A, ye, n, p, q, k) * at(B, we, k, r, s, c); break;
                  case ConvKind::Wgrad: acc[index(k, r, s, c)] += at(A, ye, n, p, q, k) * at(B, xe, n, h, w, c); break;
                }
              }
          }
        }
  Comparison result;
  for (std::int64_t i0 = 0; i0 < de[0]; ++i0)
    for (std::int64_t i1 = 0; i1 < de[1]; ++i1)
      for (std::int64_t i2 = 0; i2 < de[2]; ++i2)
        for (std::int64_t i3 = 0; i3 < de[3]; ++i3) {
          double value = alpha * acc[index(i0, i1, i2, i3)];
          if (C != nullptr && beta != 0.0) value += beta * at(*C, de, i0, i1, i2, i3);
          const double expected = round_to(D.dtype(), apply_activation(epilogue.activation, value, epilogue.parameter));
          const double error = std::fabs(at(D, de, i0, i1, i2, i3) - expected);
          result.max_abs_error = std::max(result.max_abs_error, error);
          result.max_rel_error = std::max(result.max_rel_error, error / std::max(1.0, std::fabs(expected)));
          ++result.checked;
        }
  return result;
}

}  // namespace gemmkit::verify
