// src/codegen/cutlass_names.cpp: the CUTLASS C++ spelling of gemmkit's enums.
#include "codegen/cutlass_names.hpp"

#include "gemmkit/errors.hpp"

namespace gemmkit::codegen {

std::string activation_functor(Activation activation, DataType element_d) {
  const ActivationRow& row = row_of(activation);
  // A 16-bit output cannot show the error of the hardware's exp / reciprocal approximations; they are much cheaper.
  const bool approximate = element_d == DataType::f16 || element_d == DataType::bf16;
  return std::string(approximate && !row.cutlass_for_16bit_d.empty() ? row.cutlass_for_16bit_d : row.cutlass);
}

void refuse(const KernelSpec& spec, const std::string& what) { throw ConfigError(spec.name() + ": " + what); }

std::vector<std::pair<std::string, std::string>> common_placeholders(const KernelSpec& spec) {
  auto text = [](int value) { return std::to_string(value); };
  auto cutlass = [](auto value) { return std::string(row_of(value).cutlass); };
  return {
      {"kernel_name", spec.name()},
      {"element_a", cutlass(spec.element_a)},
      {"layout_a", cutlass(spec.layout_a)},
      {"alignment_a", text(spec.alignment_a)},
      {"element_b", cutlass(spec.element_b)},
      {"layout_b", cutlass(spec.layout_b)},
      {"alignment_b", text(spec.alignment_b)},
      {"element_c", cutlass(spec.element_c)},
      {"layout_c", cutlass(spec.layout_c)},
      {"alignment_c", text(spec.alignment_c)},
      {"element_accumulator", cutlass(spec.element_accumulator)},
      {"element_compute", cutlass(spec.element_compute())},
  };
}

}  // namespace gemmkit::codegen
