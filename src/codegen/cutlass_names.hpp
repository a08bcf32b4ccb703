// src/codegen/cutlass_names.hpp: the CUTLASS C++ spelling of gemmkit's enums, shared by the family renderers.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "gemmkit/kernel_spec.hpp"
#include "gemmkit/types.hpp"

namespace gemmkit::codegen {

// The elementwise functor template, e.g. cutlass::epilogue::thread::ReLu; sigmoid, SiLU and GELU of a 16-bit D use
// gemmkit/activations.hpp (hardware exp / reciprocal approximations).
std::string activation_functor(Activation activation, DataType element_d);
// The placeholders both family templates share: kernel name, A/B/C element, layout and alignment, accumulator
// and compute types.
std::vector<std::pair<std::string, std::string>> common_placeholders(const KernelSpec& spec);

// Throws ConfigError("<kernel name>: <what>") — every emitter error names the kernel it refused.
[[noreturn]] void refuse(const KernelSpec& spec, const std::string& what);

}  // namespace gemmkit::codegen
