// include/gemmkit/jit.hpp: KernelSpec -> compiled module in the on-disk kernel cache, one kernel or many at once.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <vector>

#include "gemmkit/cache.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/kernel_spec.hpp"
#include "gemmkit/results.hpp"

namespace gemmkit {

// JSON as `gemmkit compile --json` prints it: kernel_name, cache ("hit" or "miss"), seconds, module_path, cache_key.
void to_json(nlohmann::ordered_json& json, const CompiledKernel& kernel);

// Renders the spec and builds (or finds) its module in the cache (DiskCache::default_root(), read on every call).
// Needs nvcc on a miss, never a GPU. Throws ConfigError for an invalid spec, CompileError when nvcc fails.
CompiledKernel build_kernel(const KernelSpec& spec);

// build_kernel for many specs, as many nvcc processes at once as max_parallel_compiles() allows; a spec given twice
// is built once. The result's order matches `specs`. `progress` hears of every build (see progress_printer).
std::vector<CompiledKernel> compile_many(const std::vector<KernelSpec>& specs, const ProgressCallback& progress = {});

// Whether compiles report on stderr, overriding GEMMKIT_PROGRESS (on by default): each build a caller waits for
// (build_kernel, a Gemm's compile() and first run()) prints its progress, and progress_printer prints at all. Builds
// nobody waits for (run()'s background builds) never print.
void set_progress(bool enabled);

// Whether declaring a Gemm plan starts building its default kernel in the background, when the cache lacks it, so that
// the first run() or compile() finds it built or under way; overrides GEMMKIT_BUILD_AHEAD ("1" on, "0" off, "auto":
// off here; the Python package turns it on in interactive sessions on a machine with a GPU). A plan changed before it
// runs leaves that build to finish (or to be stopped at exit); builds run max_parallel_compiles() at a time.
void set_build_ahead(bool enabled);

// How a long build reports itself on stderr: Bar rewrites one line (what is building, done/total, ETA) and suits a
// terminal; Lines prints one line per finished kernel (logs); Quiet prints nothing.
enum class ProgressStyle { Quiet, Lines, Bar };
// Bar when stderr is a terminal, else Lines; Quiet when progress is off (set_progress, GEMMKIT_PROGRESS=0).
ProgressStyle default_progress_style();
// Prints nothing when progress is off.
ProgressCallback progress_printer(ProgressStyle style);

// Blocks until every kernel that run() chose to build in the background (see Gemm::run) has been built or has failed.
void wait_for_background_compiles();

}  // namespace gemmkit
