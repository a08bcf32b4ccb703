// tools/gemmkit/plan_options.hpp: the plan and the problem that the shared options give, made once for every
// command that takes them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "gemmkit/conv2d.hpp"
#include "gemmkit/gemm.hpp"
#include "gemmkit/kernel_spec.hpp"
#include "options.hpp"
#include "verify/conv_reference.hpp"

namespace gemmkit::cli {

// A Gemm, or with --grouped a GroupedGemm (the same configuration options), or with --conv a Conv2d; `adjust` may
// change the options first.
std::unique_ptr<Plan> make_plan(const Values& args, bool grouped, const std::function<void(GemmOptions&)>& adjust = {});

// The Conv2d problem the options give (defaults, conv_table's: a 3x3 conv of 64 channels on 1 x 56 x 56).
verify::ConvShape conv_shape(const Values& args);

// A GEMM's problem from --m --n --k (--batch, default 1); nullopt without --m.
struct GemmExtents {
  std::int64_t m, n, k, batch;
};
std::optional<GemmExtents> gemm_extents(const Values& args);

// The kernel run() picks for the options' problem (--conv sizes, or a GEMM's --m --n --k); nullopt without one.
std::optional<KernelSpec> sized_spec(Plan& plan, const Values& args);
// The plan as a GEMM plan, for options that name one GEMM's problem; ConfigError for a grouped or conv plan.
Gemm& gemm_plan(Plan& plan);

// Commands that launch kernels ask for a GPU before they allocate anything: the user reads what works without one,
// not a failed cudaMalloc.
void require_gpu(const std::string& need, const std::string& without);

// gemmkit run's plan. Given --cc, the plan's rules are checked before the GPU is asked for, so that a bad option
// reads as such on any machine; without --cc the plan asks the GPU for its compute capability.
std::unique_ptr<Plan> plan_to_run(const Values& args, bool grouped);

struct Problem {
  std::int64_t m, n, k, batch, repeat;
  double alpha, beta;
};

// gemmkit run's sizes: every operand, batch included, within 2^31-1 elements (so every product fits, and no host
// or device buffer is larger than 16 GiB). Checked before the plan is made.
Problem run_problem(const Values& args);

}  // namespace gemmkit::cli
