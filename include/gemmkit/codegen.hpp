// include/gemmkit/codegen.hpp: KernelSpec -> KernelSource, a pure function (no I/O).
#pragma once

#include <string>

#include "gemmkit/errors.hpp"
#include "gemmkit/kernel_spec.hpp"
#include "gemmkit/results.hpp"

namespace gemmkit {

// Renders the spec through its family's template (templates/*.cu.in). Throws ConfigError, naming the kernel, for a
// spec its family's rules refuse (plans check those rules before they get here).
KernelSource render(const KernelSpec& spec);

}  // namespace gemmkit
