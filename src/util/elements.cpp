// src/util/elements.cpp: host-side element decoding for every element type.
#include "util/elements.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace gemmkit::util {

double element_value(DataType dtype, const void* data, std::size_t i) {
  switch (dtype) {
    case DataType::f16: return __half2float(static_cast<const __half*>(data)[i]);
    case DataType::bf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(data)[i]);
    case DataType::f32:
    case DataType::tf32: return static_cast<const float*>(data)[i];
    case DataType::f64: return static_cast<const double*>(data)[i];
    case DataType::s8: return static_cast<const std::int8_t*>(data)[i];
    case DataType::u8: return static_cast<const std::uint8_t*>(data)[i];
    case DataType::s32: return static_cast<const std::int32_t*>(data)[i];
    case DataType::e4m3: return static_cast<float>(static_cast<const __nv_fp8_e4m3*>(data)[i]);
    case DataType::e5m2: return static_cast<float>(static_cast<const __nv_fp8_e5m2*>(data)[i]);
    case DataType::void_t: break;
  }
  return 0.0;
}

}  // namespace gemmkit::util
