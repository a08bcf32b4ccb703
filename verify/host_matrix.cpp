// verify/host_matrix.cpp: typed host buffers, deterministic fills and the float64 reference GEMM.
#include "verify/host_matrix.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "gemmkit/errors.hpp"
#include "util/elements.hpp"

namespace gemmkit::verify {
namespace {

int element_bytes(DataType t) {
  if (t == DataType::void_t) throw ConfigError("A host matrix cannot have element type void.");
  return bits_of(t) / 8;
}

}  // namespace

HostMatrix::HostMatrix(DataType dtype, std::int64_t rows, std::int64_t cols, Layout layout, std::int64_t batch)
    : dtype_(dtype),
      rows_(rows),
      cols_(cols),
      batch_(batch),
      layout_(layout),
      storage_(static_cast<std::size_t>(rows * cols * batch * element_bytes(dtype))) {}

std::int64_t HostMatrix::offset(std::int64_t b, std::int64_t r, std::int64_t c) const {
  const std::int64_t within = layout_ == Layout::RowMajor ? r * cols_ + c : c * rows_ + r;
  return b * rows_ * cols_ + within;
}

double HostMatrix::get(std::int64_t b, std::int64_t r, std::int64_t c) const {
  return util::element_value(dtype_, storage_.data(), static_cast<std::size_t>(offset(b, r, c)));
}

void HostMatrix::set(std::int64_t b, std::int64_t r, std::int64_t c, double v) {
  const std::int64_t i = offset(b, r, c);
  std::byte* p = storage_.data();
  switch (dtype_) {
    case DataType::f16: reinterpret_cast<__half*>(p)[i] = __float2half(static_cast<float>(v)); break;
    case DataType::bf16: reinterpret_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16(static_cast<float>(v)); break;
    case DataType::f32:
    case DataType::tf32: reinterpret_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DataType::f64: reinterpret_cast<double*>(p)[i] = v; break;
    case DataType::s8: reinterpret_cast<std::int8_t*>(p)[i] = static_cast<std::int8_t>(std::lround(v)); break;
    case DataType::u8: reinterpret_cast<std::uint8_t*>(p)[i] = static_cast<std::uint8_t>(std::lround(v)); break;
    case DataType::s32: reinterpret_cast<std::int32_t*>(p)[i] = static_cast<std::int32_t>(std::lround(v)); break;
    case DataType::e4m3: reinterpret_cast<__nv_fp8_e4m3*>(p)[i] = __nv_fp8_e4m3(static_cast<float>(v)); break;
    case DataType::e5m2: reinterpret_cast<__nv_fp8_e5m2*>(p)[i] = __nv_fp8_e5m2(static_cast<float>(v)); break;
    case DataType::void_t: break;
  }
}

void HostMatrix::fill_integers(std::uint64_t seed, int lo, int hi) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  for (std::int64_t b = 0; b < batch_; ++b)
    for (std::int64_t r = 0; r < rows_; ++r)
      for (std::int64_t c = 0; c < cols_; ++c) set(b, r, c, dist(rng));
}

void HostMatrix::fill_uniform(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  for (std::int64_t b = 0; b < batch_; ++b)
    for (std::int64_t r = 0; r < rows_; ++r)
      for (std::int64_t c = 0; c < cols_; ++c) set(b, r, c, dist(rng));
}

TensorView HostMatrix::view() const {
  return view_at(const_cast<std::byte*>(storage_.data()), -1);
}

TensorView HostMatrix::view_at(void* data, int device) const {
  TensorView v;
  v.data = data;
  v.dtype = dtype_;
  v.device = device;
  const bool batched = batch_ > 1;
  v.rank = batched ? 3 : 2;
  const int r = v.rank - 2, c = v.rank - 1;
  if (batched) {
    v.shape[0] = batch_;
    v.strides[0] = rows_ * cols_;
  }
  v.shape[r] = rows_;
  v.shape[c] = cols_;
  v.strides[r] = layout_ == Layout::RowMajor ? cols_ : 1;
  v.strides[c] = layout_ == Layout::RowMajor ? 1 : rows_;
  return v;
}

double apply_activation(Activation activation, double x, double parameter) {
  switch (activation) {
    case Activation::Identity: return x;
    case Activation::ReLU: return x > 0 ? x : 0.0;
    case Activation::LeakyReLU: return x > 0 ? x : x * parameter;
    // erfc, not 1 + erf: the sum cancels to double's rounding (1e-16) where GELU's left tail is far smaller.
    case Activation::GELU: return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
    case Activation::GELUTanh: return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case Activation::HardSwish: return x * std::min(std::max(x + 3.0, 0.0), 6.0) / 6.0;
    case Activation::Sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case Activation::SiLU: return x / (1.0 + std::exp(-x));
    case Activation::Tanh: return std::tanh(x);
  }
  return x;
}

double reference_element(const HostMatrix& A, const HostMatrix& B, const HostMatrix* C, double alpha, double beta,
                         std::int64_t b, std::int64_t r, std::int64_t c, const Epilogue& epilogue) {
  const std::int64_t ba = A.batch() > 1 ? b : 0, bb = B.batch() > 1 ? b : 0;
  double sum = 0.0;
  for (std::int64_t k = 0; k < A.cols(); ++k) sum += A.get(ba, r, k) * B.get(bb, k, c);
  if (epilogue.row_scale != nullptr) sum *= epilogue.row_scale->get(0, 0, r);
  if (epilogue.column_scale != nullptr) sum *= epilogue.column_scale->get(0, 0, c);
  double out = alpha * sum;
  if (C != nullptr && beta != 0.0) out += beta * C->get(C->batch() > 1 ? b : 0, r, c);
  if (epilogue.bias_mode == BiasMode::PerRow) out += epilogue.bias->get(0, 0, r);
  if (epilogue.bias_mode == BiasMode::PerColumn) out += epilogue.bias->get(0, 0, c);
  return apply_activation(epilogue.activation, out, epilogue.parameter);
}

double round_to(DataType dtype, double value) {
  HostMatrix one(dtype, 1, 1, Layout::RowMajor);
  one.set(0, 0, 0, value);
  return one.get(0, 0, 0);
}

Comparison compare_with_reference(const HostMatrix& A, const HostMatrix& B, const HostMatrix* C, const HostMatrix& D,
                                  double alpha, double beta, std::int64_t samples, std::uint64_t seed,
                                  const Epilogue& epilogue) {
  Comparison result;
  auto check = [&](std::int64_t b, std::int64_t r, std::int64_t c) {
    const double expected = round_to(D.dtype(), reference_element(A, B, C, alpha, beta, b, r, c, epilogue));
    const double error = std::fabs(D.get(b, r, c) - expected);
    result.max_abs_error = std::max(result.max_abs_error, error);
    result.max_rel_error = std::max(result.max_rel_error, error / std::max(1.0, std::fabs(expected)));
    ++result.checked;
  };
  if (samples <= 0) {
    for (std::int64_t b = 0; b < D.batch(); ++b)
      for (std::int64_t r = 0; r < D.rows(); ++r)
        for (std::int64_t c = 0; c < D.cols(); ++c) check(b, r, c);
    return result;
  }
  std::mt19937_64 rng(seed);
  for (std::int64_t i = 0; i < samples; ++i) {
    check(static_cast<std::int64_t>(rng() % D.batch()), static_cast<std::int64_t>(rng() % D.rows()),
          static_cast<std::int64_t>(rng() % D.cols()));
  }
  return result;
}

}  // namespace gemmkit::verify
