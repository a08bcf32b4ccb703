// include/gemmkit/codegen.hpp: KernelSpec -> KernelSource, a pure function (no I/O).
#pragma once

#include <string>

#include "gemmkit/errors.hpp"
#include "gemmkit/kernel_spec.hpp"

namespace gemmkit {

// The text of one translation unit: CUTLASS includes, one kernel instantiation, the ABI entry points.
struct KernelSource {
  std::string kernel_name;
  std::string arch_flag;  // e.g. "sm_90a"
  std::string text;
  // Whether its family can build it as a cubin and a host module (compiler.hpp's split path) instead of one module.
  bool splittable = false;
  // The family's name (enums.hpp, e.g. "sm90_collective"): the manifest records it so that build times can be told
  // per family; not in the cache key (the text already depends on it).
  std::string family = "";
};

// Renders the spec through its family's template (templates/*.cu.in). Throws ConfigError, naming the kernel, for a
// spec its family's rules refuse (plans check those rules before they get here).
KernelSource render(const KernelSpec& spec);

}  // namespace gemmkit
