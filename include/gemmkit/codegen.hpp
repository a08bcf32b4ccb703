// include/gemmkit/codegen.hpp: KernelSpec -> KernelSource, a pure function (no I/O).
#pragma once

#include <string>

#include "gemmkit/kernel_spec.hpp"

namespace gemmkit {

// The text of one translation unit: CUTLASS includes, one kernel instantiation, the ABI entry points.
struct KernelSource {
  std::string kernel_name;
  std::string arch_flag;  // e.g. "sm_90a"
  std::string text;
};

// Render the spec through its family's template (templates/*.cu.in). Throws ConfigError for specs the
// template cannot express (the catalog and validation are meant to catch those first).
KernelSource emit(const KernelSpec& spec);

}  // namespace gemmkit
