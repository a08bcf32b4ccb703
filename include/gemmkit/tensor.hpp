// include/gemmkit/tensor.hpp: TensorView, a non-owning pointer + dtype + shape + strides + where it lives.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "gemmkit/types.hpp"

namespace gemmkit {

inline constexpr int kMaxRank = 6;

struct TensorView {
  void* data = nullptr;
  DataType dtype = DataType::f16;
  int rank = 0;
  std::array<std::int64_t, kMaxRank> shape{};
  std::array<std::int64_t, kMaxRank> strides{};  // in elements
  int device = -1;                               // CUDA device id, or -1 for host memory

  bool on_device() const { return device >= 0; }
  std::int64_t numel() const;
  std::string shape_string() const;
  std::string strides_string() const;

  // Packed tensors in a layout: the last two dimensions are the matrix; leading dimensions are the batch.
  static TensorView host(void* data, DataType dtype, std::initializer_list<std::int64_t> shape,
                         Layout layout = Layout::RowMajor);
  static TensorView on_gpu(void* data, DataType dtype, std::initializer_list<std::int64_t> shape,
                           Layout layout = Layout::RowMajor, int device = 0);
  // Any strides (in elements); device = -1 for host memory.
  static TensorView strided(void* data, DataType dtype, std::initializer_list<std::int64_t> shape,
                            std::initializer_list<std::int64_t> strides, int device = -1);
};

}  // namespace gemmkit
