// src/jit/kernel_loader.hpp: KernelSpec -> cached module on disk -> loaded module, with an in-process map
// so a repeated request does no file I/O.
#pragma once

#include <memory>

#include "gemmkit/cache.hpp"
#include "gemmkit/kernel_spec.hpp"
#include "gemmkit/runtime.hpp"

namespace gemmkit::runtime {

// Emits and builds (or finds) the module in the on-disk cache. Needs nvcc on a miss, never a GPU.
CacheEntry build_kernel(const KernelSpec& spec);

// build_kernel + dlopen, remembered for the life of the process.
std::shared_ptr<KernelModule> load_kernel(const KernelSpec& spec);

}  // namespace gemmkit::runtime
