// src/codegen/cutlass_names.cpp: the CUTLASS C++ spelling of gemmkit's enums.
#include "codegen/cutlass_names.hpp"

#include "gemmkit/errors.hpp"

namespace gemmkit::codegen {

std::string element_type(DataType type) {
  switch (type) {
    case DataType::f16: return "cutlass::half_t";
    case DataType::bf16: return "cutlass::bfloat16_t";
    case DataType::f32: return "float";
    case DataType::tf32: return "cutlass::tfloat32_t";
    case DataType::f64: return "double";
    case DataType::s8: return "int8_t";
    case DataType::u8: return "uint8_t";
    case DataType::s32: return "int32_t";
    case DataType::void_t: return "void";
  }
  throw Error("internal error: unknown DataType");
}

std::string layout_type(Layout layout) {
  return layout == Layout::RowMajor ? "cutlass::layout::RowMajor" : "cutlass::layout::ColumnMajor";
}

std::string activation_functor(Activation activation, DataType element_d) {
  const std::string ns = "cutlass::epilogue::thread::";
  // A 16-bit output cannot show the error of the hardware's exp / reciprocal approximations; they are much cheaper.
  const bool approximate = element_d == DataType::f16 || element_d == DataType::bf16;
  const std::string transcendental = approximate ? "gemmkit::activation::" : ns;
  switch (activation) {
    case Activation::Identity: return ns + "Identity";
    case Activation::ReLU: return ns + "ReLu";
    case Activation::LeakyReLU: return ns + "LeakyReLU";
    case Activation::GELU: return transcendental + "GELU";
    case Activation::GELUTanh: return ns + "GELU_taylor";
    case Activation::HardSwish: return ns + "HardSwish";
    case Activation::Sigmoid: return transcendental + "Sigmoid";
    case Activation::SiLU: return transcendental + "SiLu";
    case Activation::Tanh: return ns + "Tanh";
  }
  throw Error("internal error: unknown Activation");
}

std::string bias_mode(BiasMode bias) {
  switch (bias) {
    case BiasMode::None: return "None";
    case BiasMode::PerRow: return "PerRow";
    case BiasMode::PerColumn: return "PerColumn";
  }
  throw Error("internal error: unknown BiasMode");
}

std::string shape_text(const Shape3& shape) {
  return std::to_string(shape[0]) + "x" + std::to_string(shape[1]) + "x" + std::to_string(shape[2]);
}

void refuse(const KernelSpec& spec, const std::string& what) { throw ConfigError(spec.name() + ": " + what); }

std::vector<std::pair<std::string, std::string>> common_placeholders(const KernelSpec& spec) {
  auto text = [](int value) { return std::to_string(value); };
  return {
      {"kernel_name", spec.name()},
      {"element_a", element_type(spec.element_a)},
      {"layout_a", layout_type(spec.layout_a)},
      {"alignment_a", text(spec.alignment_a)},
      {"element_b", element_type(spec.element_b)},
      {"layout_b", layout_type(spec.layout_b)},
      {"alignment_b", text(spec.alignment_b)},
      {"element_c", element_type(spec.element_c)},
      {"layout_c", layout_type(spec.layout_c)},
      {"alignment_c", text(spec.alignment_c)},
      {"element_accumulator", element_type(spec.element_accumulator)},
      {"element_compute", element_type(spec.element_compute())},
  };
}

}  // namespace gemmkit::codegen
