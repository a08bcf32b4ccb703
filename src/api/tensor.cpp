// src/api/tensor.cpp: TensorView constructors and printing.
#include "gemmkit/tensor.hpp"

#include <algorithm>
#include <sstream>

#include "gemmkit/errors.hpp"

namespace gemmkit {
namespace {

TensorView packed(void* data, DataType dtype, std::initializer_list<std::int64_t> shape, Layout layout, int device) {
  if (shape.size() < 1 || shape.size() > kMaxRank) {
    throw TensorError("A tensor must have rank 1 to " + std::to_string(kMaxRank) + "; got rank " +
                      std::to_string(shape.size()) + ".");
  }
  TensorView view;
  view.data = data;
  view.dtype = dtype;
  view.device = device;
  view.rank = static_cast<int>(shape.size());
  int i = 0;
  for (auto extent : shape) view.shape[i++] = extent;
  std::int64_t stride = 1;
  for (int d = view.rank - 1; d >= 0; --d) {
    view.strides[d] = stride;
    stride *= view.shape[d];
  }
  if (layout == Layout::ColumnMajor && view.rank >= 2) {
    const int r = view.rank - 2, c = view.rank - 1;
    view.strides[r] = 1;
    view.strides[c] = view.shape[r];
  }
  return view;
}

// A rank beyond the view's storage (a view filled in by hand) prints what is stored.
int stored_rank(int rank) {
  return std::clamp(rank, 0, kMaxRank);
}

std::string join(const std::array<std::int64_t, kMaxRank>& values, int rank) {
  std::ostringstream out;
  out << '(';
  for (int i = 0; i < stored_rank(rank); ++i) out << (i ? ", " : "") << values[i];
  if (rank == 1) out << ',';
  out << ')';
  return out.str();
}

}  // namespace

std::int64_t TensorView::numel() const {
  std::int64_t n = 1;
  for (int i = 0; i < stored_rank(rank); ++i) n *= shape[i];
  return n;
}

std::string TensorView::shape_string() const {
  return join(shape, rank);
}
std::string TensorView::strides_string() const {
  return join(strides, rank);
}

TensorView TensorView::host(void* data, DataType dtype, std::initializer_list<std::int64_t> shape, Layout layout) {
  return packed(data, dtype, shape, layout, -1);
}

TensorView TensorView::on_gpu(void* data, DataType dtype, std::initializer_list<std::int64_t> shape, Layout layout,
                              int device) {
  return packed(data, dtype, shape, layout, device);
}

TensorView TensorView::strided(void* data, DataType dtype, std::initializer_list<std::int64_t> shape,
                               std::initializer_list<std::int64_t> strides, int device) {
  if (shape.size() != strides.size()) {
    throw TensorError("shape has " + std::to_string(shape.size()) + " dimensions but strides has " +
                      std::to_string(strides.size()) + "; give one stride per dimension.");
  }
  TensorView view = packed(data, dtype, shape, Layout::RowMajor, device);
  int i = 0;
  for (auto s : strides) view.strides[i++] = s;
  return view;
}

}  // namespace gemmkit
