// src/jit/kernel_loader.hpp: KernelSpec -> loaded module (built through the on-disk cache), with an in-process map
// so a repeated request does no file I/O.
#pragma once

#include <functional>
#include <memory>

#include "gemmkit/kernel_spec.hpp"
#include "jit/background.hpp"
#include "runtime/kernel_module.hpp"

namespace gemmkit::jit {

// build_kernel + dlopen, remembered for the life of the process. Safe to call from many threads at once.
std::shared_ptr<KernelModule> load_kernel(const KernelSpec& spec);

// The spec's module when it is loaded already or complete in the disk cache (then loaded), else nullptr: never
// compiles.
std::shared_ptr<KernelModule> load_kernel_if_built(const KernelSpec& spec);

// A newly declared plan's default kernel, queued as a background build when build-ahead is on (set_build_ahead,
// GEMMKIT_BUILD_AHEAD) and the cache lacks it. Never throws: a toolchain problem shows at the build that waits.
// `spec` is only asked for when build-ahead is on.
void build_ahead(const std::function<KernelSpec()>& spec);

// Whether build_ahead would queue anything now (set_build_ahead, GEMMKIT_BUILD_AHEAD, this thread's NoBuildAhead).
bool build_ahead_on();

// While one lives on this thread, declared plans build nothing ahead: the plans gemmkit makes for itself (a plan's
// twin of scalar loads, a pack file's plans, a Conv2d's pointwise GEMM) are not the user's declarations.
class NoBuildAhead {
 public:
  NoBuildAhead();
  ~NoBuildAhead();
  NoBuildAhead(const NoBuildAhead&) = delete;
  NoBuildAhead& operator=(const NoBuildAhead&) = delete;
};

// Queues the spec's build as a background build (see jit/background.hpp); load_kernel_if_built finds it once done.
std::shared_ptr<const BackgroundBuild> build_kernel_in_background(const KernelSpec& spec);

}  // namespace gemmkit::jit
