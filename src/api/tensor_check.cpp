// src/api/tensor_check.cpp: every tensor is checked against the plan before anything runs.
#include "api/tensor_check.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "gemmkit/errors.hpp"

namespace gemmkit::detail {
namespace {

[[noreturn]] void reject(const char* name, const std::string& rule) {
  throw TensorError(std::string("Tensor ") + name + ": " + rule);
}

bool fits(const TensorView& t, Layout layout) {
  const int r = t.rank - 2, c = t.rank - 1;
  const std::int64_t rows = t.shape[r], cols = t.shape[c];
  if (layout == Layout::RowMajor) return (cols <= 1 || t.strides[c] == 1) && t.strides[r] >= (rows <= 1 ? 0 : cols);
  return (rows <= 1 || t.strides[r] == 1) && t.strides[c] >= (cols <= 1 ? 0 : rows);
}

}  // namespace

std::optional<Layout> infer_layout(const TensorView& t) {
  if (t.rank < 2 || t.rank > kMaxRank) return std::nullopt;
  if (fits(t, Layout::RowMajor)) return Layout::RowMajor;
  if (fits(t, Layout::ColumnMajor)) return Layout::ColumnMajor;
  return std::nullopt;
}

MatrixOperand check_operand(const TensorView& t, const char* name, DataType dtype, Layout layout) {
  // An empty tensor addresses nothing (frameworks often give it no storage); any other needs its data.
  const bool no_elements = t.rank >= 0 && t.rank <= kMaxRank &&
                           std::find(t.shape.begin(), t.shape.begin() + t.rank, 0) != t.shape.begin() + t.rank;
  if (t.data == nullptr && !no_elements) reject(name, "data pointer is null.");
  if (t.dtype != dtype) {
    reject(name, "has element type " + std::string(to_string(t.dtype)) + " but the plan expects " +
                     std::string(to_string(dtype)) + ". Convert the tensor or declare the plan with element_" + name +
                     "=" + std::string(to_string(t.dtype)) + ".");
  }
  if (t.rank < 2 || t.rank > kMaxRank) {
    reject(name, "must be of rank 2 to " + std::to_string(kMaxRank) +
                     " (a matrix, or a batch of matrices); received rank " + std::to_string(t.rank) + ", shape " +
                     t.shape_string() + ".");
  }
  for (int i = 0; i < t.rank; ++i) {
    if (t.shape[i] < 0 || t.strides[i] < 0) {
      reject(name, "has a negative extent or stride (shape " + t.shape_string() + ", strides " + t.strides_string() +
                       "); gemmkit reads forward strides only.");
    }
  }
  const int r = t.rank - 2, c = t.rank - 1;
  if (!fits(t, layout)) {
    const auto actual = infer_layout(t);
    reject(name, "has shape " + t.shape_string() + " and strides " + t.strides_string() +
                     (actual ? ", which is " + std::string(to_string(*actual)) : ", which no layout expresses") +
                     ", but the plan expects " + std::string(to_string(layout)) +
                     (actual ? ". Declare the plan with layout_" + std::string(name) + "=" +
                                   std::string(to_string(*actual)) + " (or from this tensor)."
                             : ". Make the tensor contiguous in its last two dimensions (a copy) first."));
  }
  MatrixOperand m;
  m.data = t.data;
  m.rows = t.shape[r];
  m.cols = t.shape[c];
  m.ld = layout == Layout::RowMajor ? t.strides[r] : t.strides[c];
  if (m.ld == 0)
    m.ld = layout == Layout::RowMajor ? std::max<std::int64_t>(m.cols, 1) : std::max<std::int64_t>(m.rows, 1);
  m.inner = layout == Layout::RowMajor ? m.cols : m.rows;
  // The batch count and the span are computed without overflow: neither may pass 2^63.
  bool overflow = false;
  for (int i = 0; i < r; ++i) overflow |= __builtin_mul_overflow(m.batch, t.shape[i], &m.batch);
  const bool empty = std::find(t.shape.begin(), t.shape.begin() + t.rank, 0) != t.shape.begin() + t.rank;
  if (empty && !overflow) return m;  // nothing is addressed
  // The batch dimensions of extent above 1 must fold into one stride, as a reshape would (an extent-1 dimension's
  // stride never matters).
  int inner_batch = -1;
  for (int i = r - 1; i >= 0; --i) {
    if (t.shape[i] == 1) continue;
    std::int64_t folded = 0;
    if (inner_batch >= 0 &&
        (__builtin_mul_overflow(t.strides[inner_batch], t.shape[inner_batch], &folded) || t.strides[i] != folded)) {
      reject(name, "has batch dimensions with strides " + t.strides_string() +
                       " that do not fold into one batch stride; make the batch dimensions contiguous.");
    }
    if (inner_batch < 0) m.batch_stride = t.strides[i];
    inner_batch = i;
  }
  std::int64_t last = 0;
  for (int i = 0; i < t.rank; ++i) {
    std::int64_t step = 0;
    overflow |=
        __builtin_mul_overflow(t.shape[i] - 1, t.strides[i], &step) || __builtin_add_overflow(last, step, &last);
  }
  if (overflow || last == INT64_MAX) {
    reject(name, "has shape " + t.shape_string() + " and strides " + t.strides_string() +
                     ", which address more than 2^63 elements; check the shape and strides.");
  }
  m.span = last + 1;
  return m;
}

MatrixOperand check_vector(const TensorView& t, const char* name, DataType dtype, std::int64_t length,
                           const char* per) {
  const std::string expected =
      std::to_string(length) + " elements of " + std::string(to_string(dtype)) + " (one per output " + per + ")";
  if (t.data == nullptr && t.numel() != 0) reject(name, "data pointer is null.");  // empty: no storage needed
  if (t.dtype != dtype) {
    reject(name, "has element type " + std::string(to_string(t.dtype)) + "; the plan expects " + expected + ".");
  }
  // A device vector is read in place, element by element at least; a host one is copied to an aligned buffer first.
  const auto element_bytes = static_cast<std::uintptr_t>(std::max(1, bits_of(dtype) / 8));
  if (t.on_device() && reinterpret_cast<std::uintptr_t>(t.data) % element_bytes != 0) {
    reject(name, "its address is not a multiple of " + std::to_string(element_bytes) + " bytes, the size of one " +
                     std::string(to_string(dtype)) + " element; allocate it like C.");
  }
  const bool vector = t.rank == 1 || (t.rank == 2 && (t.shape[0] == 1 || t.shape[1] == 1));
  if (!vector || t.numel() != length) {
    reject(name, "has shape " + t.shape_string() + "; the plan expects " + expected + ".");
  }
  for (int i = 0; i < t.rank; ++i) {
    if (t.shape[i] > 1 && t.strides[i] != 1) {
      reject(name, "has strides " + t.strides_string() + "; its elements must be contiguous.");
    }
  }
  MatrixOperand m;
  m.data = t.data;
  m.rows = 1;
  m.cols = length;
  m.ld = length;
  m.span = length;
  return m;
}

bool require_block_scales(bool wanted, const TensorView* scale_a, const TensorView* scale_b) {
  for (const auto& [tensor, name] : {std::pair{scale_a, "scale_a"}, {scale_b, "scale_b"}}) {
    if (tensor != nullptr && !wanted) {
      throw TensorError(std::string("Tensor ") + name +
                        ": the plan has no block scaling; call set_block_scaling(BlockScaling::Blockwise) first.");
    }
    if (tensor == nullptr && wanted) {
      throw TensorError(std::string("Tensor ") + name +
                        ": the plan's FP8 mainloop is block-scaled (Blockwise); pass RunOptions::" + name + ".");
    }
  }
  return wanted;
}

MatrixOperand check_block_scales(const TensorView& t, const char* name, std::int64_t batch, std::int64_t rows,
                                 std::int64_t cols, std::int64_t row_stride, std::int64_t col_stride, int address_bytes,
                                 const std::string& layout) {
  const std::int64_t count = batch * rows * cols;
  const std::string expected = (batch > 1 ? "(" + std::to_string(batch) + ", " : "(") + std::to_string(rows) + ", " +
                               std::to_string(cols) + ") f32, " + layout;
  if (t.data == nullptr && count != 0) reject(name, "data pointer is null.");
  if (t.dtype != DataType::f32) {
    reject(name, "has element type " + std::string(to_string(t.dtype)) + "; the plan expects " + expected + ".");
  }
  const bool batched = t.rank == 3;
  if ((t.rank != 2 && !batched) || (batched && t.shape[0] != batch) || (!batched && batch != 1) ||
      t.shape[t.rank - 2] != rows || t.shape[t.rank - 1] != cols) {
    reject(name, "has shape " + t.shape_string() + "; the plan expects " + expected + ".");
  }
  const std::int64_t wanted[3] = {rows * cols, row_stride, col_stride};
  for (int i = 0; i < t.rank; ++i) {
    if (t.shape[i] > 1 && t.strides[i] != wanted[i + 3 - t.rank]) {
      reject(name, "has strides " + t.strides_string() + "; the plan expects " + expected + ".");
    }
  }
  if (t.on_device() && reinterpret_cast<std::uintptr_t>(t.data) % static_cast<std::uintptr_t>(address_bytes) != 0) {
    reject(name, "its address is not a multiple of " + std::to_string(address_bytes) +
                     " bytes, which the kernel's loads of it need; allocate it on its own.");
  }
  MatrixOperand m;
  m.data = t.data;
  m.rows = rows;
  m.cols = cols;
  m.ld = row_stride;
  m.batch = batch;
  m.batch_stride = rows * cols;
  m.span = count;
  return m;
}

runtime::LaunchOperand launch_operand(const MatrixOperand& m, const TensorView& tensor, DataType dtype) {
  return runtime::LaunchOperand{m.data, tensor.on_device(), bits_of(dtype) / 8, m.ld, m.batch > 1 ? m.batch_stride : 0,
                                m.span};
}

int fitting_alignment(const MatrixOperand& operand, int element_bytes, const int* candidates, int count) {
  const auto address = reinterpret_cast<std::uintptr_t>(operand.data);
  for (int i = 0; i < count; ++i) {
    const int a = candidates[i];
    if (operand.ld % a != 0 || operand.inner % a != 0) continue;
    if (operand.batch > 1 && operand.batch_stride % a != 0) continue;
    if (address % (static_cast<std::uintptr_t>(a) * element_bytes) != 0) continue;
    return a;
  }
  return 0;
}

}  // namespace gemmkit::detail
