// verify/host_matrix.hpp: host buffers of any element type, filled with test data, and a float64 reference
// GEMM; shared by the CLI, the tests, the benchmark and the examples (verify/, not testing/: the shipped CLI uses it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gemmkit/kernel_spec.hpp"
#include "gemmkit/tensor.hpp"
#include "gemmkit/types.hpp"

namespace gemmkit::verify {

class HostMatrix {
 public:
  // batch x rows x cols in `layout`, packed.
  HostMatrix(DataType dtype, std::int64_t rows, std::int64_t cols, Layout layout, std::int64_t batch = 1);

  DataType dtype() const { return dtype_; }
  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::int64_t batch() const { return batch_; }
  Layout layout() const { return layout_; }
  std::size_t bytes() const { return storage_.size(); }
  void* data() { return storage_.data(); }
  const void* data() const { return storage_.data(); }

  double get(std::int64_t b, std::int64_t r, std::int64_t c) const;
  void set(std::int64_t b, std::int64_t r, std::int64_t c, double value);

  // Integers drawn uniformly from [lo, hi]: exact in every element type, so GEMM results can be compared exactly.
  void fill_integers(std::uint64_t seed, int lo, int hi);
  // Uniform reals in [-1, 1), rounded to the element type.
  void fill_uniform(std::uint64_t seed);

  // A view of this buffer (host) or of a device copy of it at `device_data`.
  TensorView view() const;
  TensorView view_at(void* device_data, int device) const;

 private:
  std::int64_t offset(std::int64_t b, std::int64_t r, std::int64_t c) const;
  DataType dtype_;
  std::int64_t rows_, cols_, batch_;
  Layout layout_;
  std::vector<std::byte> storage_;
};

// What follows the linear combination: act(x + bias), in float64.
struct Epilogue {
  Activation activation = Activation::Identity;
  double parameter = 0.01;           // leaky_relu slope
  const HostMatrix* bias = nullptr;  // 1 x m (per row) or 1 x n (per column)
  BiasMode bias_mode = BiasMode::None;
  const HostMatrix* row_scale = nullptr;     // 1 x m: multiplies A@B per output row (ScaleMode), or none
  const HostMatrix* column_scale = nullptr;  // 1 x n: per output column, or none
};

// The activation functions' exact math (gelu: erf form; gelu_tanh: the tanh approximation).
double apply_activation(Activation activation, double x, double parameter);

// act(alpha * (A@B * row_scale * column_scale) + beta * C + bias) for one output element, in float64 (operands of batch
// 1 broadcast).
double reference_element(const HostMatrix& A, const HostMatrix& B, const HostMatrix* C, double alpha, double beta,
                         std::int64_t b, std::int64_t r, std::int64_t c, const Epilogue& epilogue = {});

// `value` as stored in an element of `dtype` (floats round to nearest, integers with std::lround).
double round_to(DataType dtype, double value);

struct Comparison {
  double max_abs_error = 0.0;
  double max_rel_error = 0.0;  // relative to max(1, |reference|)
  std::int64_t checked = 0;
};

// Compares D against the reference rounded to D's type (so exact arithmetic compares equal) on every element, or on
// `samples` random elements when samples > 0.
Comparison compare_with_reference(const HostMatrix& A, const HostMatrix& B, const HostMatrix* C, const HostMatrix& D,
                                  double alpha, double beta, std::int64_t samples = 0, std::uint64_t seed = 1,
                                  const Epilogue& epilogue = {});

}  // namespace gemmkit::verify
