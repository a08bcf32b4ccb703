// src/jit/kernel_loader.hpp: KernelSpec -> loaded module (built through the on-disk cache), with an in-process map
// so a repeated request does no file I/O.
#pragma once

#include <memory>

#include "gemmkit/kernel_spec.hpp"
#include "gemmkit/runtime.hpp"

namespace gemmkit::jit {

// build_kernel + dlopen, remembered for the life of the process. Safe to call from many threads at once.
std::shared_ptr<KernelModule> load_kernel(const KernelSpec& spec);

}  // namespace gemmkit::jit
