// src/families/sm80_universal.cpp: the Sm80Universal renderer (CUTLASS 2.x device::GemmUniversal).
#include <string>

#include "codegen/cutlass_names.hpp"
#include "families/family.hpp"

namespace gemmkit::codegen {
namespace {

// CUTLASS 2.x's broadcast epilogue (GemmUniversalWithBroadcast) adds a vector along the output's contiguous
// dimension: per column of a row-major D, per row of a column-major D (it runs the transposed problem).
void check_bias(const KernelSpec& spec) {
  const std::string combination = std::string(row_of(spec.bias).cutlass) + " bias with " + std::string(to_string(spec.layout_c)) + " C";
  if (spec.opclass != OpClass::TensorOp) {
    refuse(spec, combination + ": CUTLASS 2.x bias epilogues are TensorOp only, not " +
                     std::string(to_string(spec.opclass)));
  }
  if (spec.swizzle == Swizzle::StreamK) {
    refuse(spec, combination + ": the CUTLASS 2.x bias epilogue has no Stream-K kernel here; use an Identity or "
                               "Horizontal swizzle");
  }
  const bool along_contiguous = (spec.bias == BiasMode::PerColumn) == (spec.layout_c == Layout::RowMajor);
  if (!along_contiguous) {
    refuse(spec, combination + " is not supported by CUTLASS 2.x kernels (their bias runs along D's contiguous "
                               "dimension: PerColumn with RowMajor C, PerRow with ColumnMajor C); use the other C "
                               "layout or an SM90 kernel");
  }
}

void check(const KernelSpec& spec) {
  const TileDescription& tile = spec.tile;
  if (spec.kernel_cc != 80) {
    refuse(spec, "the Sm80Universal family builds SM80 kernels (kernel_cc 80), not kernel_cc " +
                     std::to_string(spec.kernel_cc));
  }
  if (spec.element_c != spec.element_d) {
    refuse(spec, "CUTLASS 2.x kernels need element C == element D (got C " + std::string(to_string(spec.element_c)) +
                     ", D " + std::string(to_string(spec.element_d)) + "); use an SM90 kernel or make them equal");
  }
  if (spec.element_c == DataType::void_t) refuse(spec, "CUTLASS 2.x kernels need a C/D element type, not void");
  if (tile.stages < 2) {
    refuse(spec, "CUTLASS 2.x SM80 kernels need at least 2 pipeline stages (got " + std::to_string(tile.stages) + ")");
  }
  for (int i = 0; i < 3; ++i) {
    if (tile.warp_count[i] < 1 || tile.threadblock_shape[i] % tile.warp_count[i] != 0) {
      refuse(spec, "threadblock shape " + shape_text(tile.threadblock_shape) + " is not divisible by warp count " +
                       shape_text(tile.warp_count));
    }
  }
  const bool int8 = spec.element_a == DataType::s8 || spec.element_a == DataType::u8;
  if (int8 && spec.opclass == OpClass::TensorOp &&
      (spec.layout_a != Layout::RowMajor || spec.layout_b != Layout::ColumnMajor)) {
    refuse(spec, "8-bit integer tensor-op GEMMs need A RowMajor and B ColumnMajor (TN); use OpClass Simt otherwise");
  }
  if (spec.bias != BiasMode::None) check_bias(spec);
}

}  // namespace

Placeholders sm80_placeholders(const KernelSpec& spec) {
  check(spec);
  const TileDescription& tile = spec.tile;
  const Shape3& tb = tile.threadblock_shape;
  const Shape3& inst = tile.instruction_shape;
  auto text = [](int value) { return std::to_string(value); };
  Placeholders out = common_placeholders(spec);
  out.insert(out.end(), {
      {"threadblock_m", text(tb[0])},
      {"threadblock_n", text(tb[1])},
      {"threadblock_k", text(tb[2])},
      {"warp_m", text(tb[0] / tile.warp_count[0])},
      {"warp_n", text(tb[1] / tile.warp_count[1])},
      {"warp_k", text(tb[2] / tile.warp_count[2])},
      {"instruction_m", text(inst[0])},
      {"instruction_n", text(inst[1])},
      {"instruction_k", text(inst[2])},
      {"stages", text(tile.stages)},
      {"swizzle", std::string(row_of(spec.swizzle).cutlass)},
      {"math_operation", std::string(row_of(tile.math_operation).cutlass)},
      {"bias", std::string(row_of(spec.bias).cutlass)},
      {"activation", activation_functor(spec.activation, spec.element_d)},
      {"device_gemm", spec.bias == BiasMode::None ? "GemmUniversal" : "GemmUniversalWithBroadcast"},
      {"opclass", std::string(row_of(spec.opclass).cutlass)},
      {"arch", "cutlass::arch::Sm80"},
  });
  return out;
}

}  // namespace gemmkit::codegen
