// src/api/gemm_tune.cpp: Gemm::tune and tune_candidates: the plan's checks, then the search of tuning/.
#include <deque>
#include <utility>

#include "api/plan_internal.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"
#include "runtime/kernel_module.hpp"
#include "tuning/tuner.hpp"

namespace gemmkit {
namespace {

void require_device(const TensorView* tensor, const char* name) {
  if (tensor != nullptr && !tensor->on_device()) {
    throw TensorError(std::string("Tensor ") + name +
                      ": tune() times kernels on the GPU and takes device tensors only; copy it to the GPU first.");
  }
}

}  // namespace

std::vector<KernelSpec> Gemm::tune_candidates(const TensorView& A, const TensorView& B, const TensorView* C,
                                              const TensorView& D, const TuneOptions& options) {
  const GemmProblem p = check_gemm_problem(*core_, A, B, C, D, options.beta);
  const selection::KernelChoices& choices = core_->choices_for(p);
  std::vector<KernelSpec> out;
  for (const std::size_t i : tuning::candidate_indices(*core_, choices, p, core_->sm_count_for_choice(), options)) {
    out.push_back(choices.spec(i));
  }
  return out;
}

TuneResult Gemm::tune(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D,
                      const TuneOptions& options) {
  tuning::check_options(options);
  for (const auto& [tensor, name] : {std::pair{&A, "A"}, {&B, "B"}, {C, "C"}, {&D, "D"}}) require_device(tensor, name);
  const GemmProblem p = check_gemm_problem(*core_, A, B, C, D, options.beta);
  if (p.m == 0 || p.n == 0 || p.batch == 0) throw TensorError("Tensor D is empty: tune() has nothing to time.");
  if (C != nullptr && C->data == D.data && options.beta != 0.0) {
    throw TensorError("Tensors C and D: tune() runs every candidate many times, so D must not be C when beta != 0.");
  }
  if (core_->config.bias != BiasMode::None) {
    throw ConfigError("tune() does not take a bias vector yet; tune the plan without set_bias (the same kernels).");
  }
  if (core_->config.scale != ScaleMode::None) {
    throw ConfigError("tune() does not take scale vectors yet; tune the plan without set_scale (the same tiles).");
  }
  if (core_->config.block_scaling != BlockScaling::None) {
    throw ConfigError(
        "tune() does not take block scales yet; a block-scaled plan runs run()'s choice among its 128-wide tiles, or "
        "the tile you set (set_tile_description).");
  }
  const int device = current_device();
  const int sm_count = device_info(device).sm_count;
  if (const selection::RunChoice c = core_->run_choice(p, sm_count); c.alternative != nullptr) {
    switch (c.alternative_kind) {
      case selection::Alternative::TransposedDecode:
        throw ConfigError(
            "tune(): run() computes this decode shape transposed (D^T = B^T A^T on a narrow tile), which tune() does "
            "not time; it needs no tuning entry.");
      case selection::Alternative::StreamK:
        throw ConfigError(
            "tune(): run() computes this shape, one wave of the element-by-element mainloop's tiles, on a Stream-K "
            "kernel, which tune() does not time; it needs no tuning entry (set GEMMKIT_SPLIT_K=off to tune the "
            "data-parallel tiles instead).");
      case selection::Alternative::ParallelSplitK:
        throw ConfigError(
            "tune(): run() computes this shape with parallel split-K (a long K over few output tiles), which tune() "
            "does not time; it needs no tuning entry (set GEMMKIT_SPLIT_K=stream-k to tune the Stream-K kernel's "
            "split-K instead).");
    }
  }
  const selection::KernelChoices& choices = core_->choices_for(p);
  RunOptions run_options;
  run_options.stream = options.stream;
  run_options.sync = false;
  std::deque<Gemm> plans;  // one per candidate, each with its tile set: its run() launches exactly that kernel
  auto call_with = [&](const TileDescription& tile) -> std::function<void()> {
    auto core = std::make_unique<selection::PlanCore>(*core_);
    core->config.tile = tile;
    core->config.decomposition = Decomposition::Auto;  // the candidates are timed serially, as run() chose them
    core->config.splits = 1;
    core->config.reduction_mode = ReductionMode::Deterministic;
    core->invalidate();
    Gemm& plan = plans.emplace_back(Gemm(std::move(core)));
    return [&, &plan = plan] { plan.run(A, B, C, D, options.alpha, options.beta, run_options); };
  };
  const tuning::Search job{choices,
                           p,
                           tuning::candidate_indices(*core_, choices, p, sm_count, options),
                           p.d.data,
                           p.d.span,
                           core_->config.types.d,
                           core_->config.types.accumulator,
                           device,
                           call_with};
  return tuning::search(job, options);
}

}  // namespace gemmkit
