// src/api/types.cpp: widths and kinds of element types.
#include "gemmkit/types.hpp"

namespace gemmkit {

int bits_of(DataType type) {
  switch (type) {
    case DataType::f16:
    case DataType::bf16: return 16;
    case DataType::f32:
    case DataType::tf32:
    case DataType::s32: return 32;
    case DataType::f64: return 64;
    case DataType::s8:
    case DataType::u8:
    case DataType::e4m3:
    case DataType::e5m2: return 8;
    case DataType::void_t: return 0;
  }
  return 0;
}

bool is_fp8(DataType type) {
  return type == DataType::e4m3 || type == DataType::e5m2;
}

bool is_integer(DataType type) {
  return type == DataType::s8 || type == DataType::u8 || type == DataType::s32;
}

}  // namespace gemmkit
