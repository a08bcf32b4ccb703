// src/api/tensor_check.hpp: checking a TensorView against what a plan expects of one operand.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "gemmkit/tensor.hpp"
#include "runtime/staging.hpp"

namespace gemmkit::detail {

// One operand as the kernel sees it: a (batch of) rows x cols matrices with a leading dimension.
struct MatrixOperand {
  void* data = nullptr;
  std::int64_t rows = 0, cols = 0;
  std::int64_t ld = 0;
  std::int64_t inner =
      0;  // the extent along the contiguous dimension (cols when row-major): kernels read it in vectors
  std::int64_t batch = 1;
  std::int64_t batch_stride = 0;  // 0 when batch == 1
  std::int64_t span = 0;          // elements from the first to one past the last addressed element
};

// The layout a tensor's strides express for its last two dimensions, if any (RowMajor preferred when both fit).
std::optional<Layout> infer_layout(const TensorView& tensor);

// Checks dtype, rank (2 to kMaxRank), strides against the layout, collapsible batch dimensions, non-negative extents,
// a span that fits 64 bits.
// Throws TensorError naming the operand and the rule.
MatrixOperand check_operand(const TensorView& tensor, const char* name, DataType dtype, Layout layout);

// A vector operand named `name`: `length` contiguous elements of `dtype` (rank 1, or rank 2 with one extent 1), one
// per output `per` (row or column).
MatrixOperand check_vector(const TensorView& tensor, const char* name, DataType dtype, std::int64_t length,
                           const char* per);

// A packed matrix of f32 block scales named `name`: `batch` matrices of rows x cols (rank 2, or rank 3 with the batch
// first), element (r, c) at r * row_stride + c * col_stride; a device one at an address aligned to `address_bytes`.
// `layout` says how to make one, for the message.
MatrixOperand check_block_scales(const TensorView& tensor, const char* name, std::int64_t batch, std::int64_t rows,
                                 std::int64_t cols, std::int64_t row_stride, std::int64_t col_stride, int address_bytes,
                                 const std::string& layout);

// Whether a run takes block scales (`wanted`: the plan has block scaling): a TensorError names scale_a or scale_b
// when one is given without block scaling or missing with it.
bool require_block_scales(bool wanted, const TensorView* scale_a, const TensorView* scale_b);

// Largest alignment (elements) from `candidates` (widest first) the operand's pointer, leading dimension, contiguous
// extent and batch stride are all divisible by; 0 if none.
int fitting_alignment(const MatrixOperand& operand, int element_bytes, const int* candidates, int count);

// The checked operand as a launch takes it (batch stride 0 for a single matrix: it broadcasts).
runtime::LaunchOperand launch_operand(const MatrixOperand& operand, const TensorView& tensor, DataType dtype);

}  // namespace gemmkit::detail
