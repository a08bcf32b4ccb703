// tests/support/plan_options.hpp: the plan options many tests start from.
#pragma once

#include "gemmkit/gemm.hpp"

namespace gemmkit::testing {

// The reference's basic plan: f16 operands, f32 accumulation, every operand row-major.
inline GemmOptions f16_row(int cc) {
  GemmOptions o;
  o.element = DataType::f16;
  o.layout = Layout::RowMajor;
  o.element_accumulator = DataType::f32;
  o.cc = cc;
  return o;
}

// An FP8 plan as FP8 tensor cores read it (TN): A row-major, B column-major, C and D row-major.
inline GemmOptions fp8_tn(int cc, DataType ab = DataType::e4m3, DataType d = DataType::bf16) {
  GemmOptions o;
  o.element_a = o.element_b = ab;
  o.element_c = o.element_d = d;
  o.layout_a = Layout::RowMajor;
  o.layout_b = Layout::ColumnMajor;
  o.layout_c = Layout::RowMajor;
  o.cc = cc;
  return o;
}

}  // namespace gemmkit::testing
