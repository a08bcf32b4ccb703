// include/gemmkit/packs.hpp: kernel packs, sets of kernels built ahead of time (`gemmkit prebuild`,
// gemmkit.compile_many) and shipped with an application through `gemmkit cache export/import`.
#pragma once

#include <string>
#include <vector>

#include "gemmkit/errors.hpp"
#include "gemmkit/kernel_spec.hpp"

namespace gemmkit {

// The named packs: "defaults" = for cc 80 and 90, f16, bf16, f32 (SIMT) and tf32 (f32 operands on tensor cores)
// elements, and A and B each row- or column-major (C row-major), each plan's kernel plus the configurations run() picks
// for some shapes (Gemm::run_time_kernels). A combination without a kernel takes the nearest one that has one (e.g. an
// f32 accumulator); one without any is left out. Besides: on SM90, each default's quick twin, and the kernels run()
// picks for the benchmark's shape suite on row-major f16 and bf16 plans that accumulate in f32; and what the
// walk-throughs and the reference's notebooks run: every activation of the row-major f16 plans (f16 and f32
// accumulation) and the grouped f16 and bf16 plans (B row- or column-major), on both generations.
std::vector<std::string> pack_names();
// The kernels of a named pack; a ConfigError lists the names for an unknown one. Needs no GPU.
std::vector<KernelSpec> pack_specs(const std::string& name);

// A pack file's kernels. One kernel per line, given as a plan: the options of `gemmkit compile` (`--cc 90 --element
// bf16 --element-accumulator f32 --layout-b col --tile 2`, or `cc=90 element=bf16 ...`); `--run-time-kernels` adds
// the configurations run() picks for some shapes; `--m M --n N --k K [--batch B]` takes instead the kernel run()
// picks for that problem (Gemm::spec_for_problem); `--grouped` a GroupedGemm plan's kernel (element, layout, cc,
// kernel-cc, activation, block-scaling and tile options; with `--run-time-kernels`, GroupedGemm::run_time_kernels).
// Blank lines and text after '#' are ignored. Unset options take the CLI's defaults (element f16, layout row). Throws
// ConfigError naming `what` and the line.
std::vector<KernelSpec> parse_pack(const std::string& text, const std::string& what = "the pack");
std::vector<KernelSpec> read_pack_file(const std::string& path);

}  // namespace gemmkit
