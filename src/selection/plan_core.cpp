// src/selection/plan_core.cpp: a plan's kernels: its specs per alignment triple, their valid configurations, and the
// modules run() loads or builds for them.
#include "selection/plan_core.hpp"

#include <optional>
#include <string>
#include <utility>

#include "families/rules.hpp"
#include "gemmkit/errors.hpp"
#include "jit/kernel_loader.hpp"
#include "util/knobs.hpp"

namespace gemmkit::selection {

bool PlanConfig::fuses_activation_bias_or_scales() const {
  return activation != Activation::Identity || bias != BiasMode::None || scale != ScaleMode::None;
}

bool PlanConfig::takes_activation_at_launch() const {
  // By default only where measured at the compiled-in kernel's speed: 16- and 32-bit operands, not FP8's shorter
  // mainloop, whose epilogue weighs more.
  const bool measured = !is_fp8(types.a) && !is_fp8(types.b);
  return activation_at_launch.value_or(measured && knobs::flag("GEMMKIT_ACTIVATION_AT_LAUNCH"));
}

PlanCore::PlanCore(const PlanConfig& c, TunedLookup tuned_lookup)
    : config(c), tuned_lookup_(std::move(tuned_lookup)), cache_(std::make_unique<RunCache>()) {}

PlanCore::PlanCore(const PlanCore& other)
    : config(other.config),
      complete_spec(other.complete_spec),
      tuned_lookup_(other.tuned_lookup_),
      cache_(std::make_unique<RunCache>()) {
  invalidate();
}

void PlanCore::invalidate() {
  const auto& t = config.types;
  auto cache = std::make_unique<RunCache>();
  const catalog::Target where = config.target();  // a named value: the family is not tied to a temporary
  const families::Family& family = catalog::family_for(where, config.opclass, t);
  cache->alignments_a = catalog::operand_alignments(where, config.opclass, t.a, t);
  cache->alignments_b = catalog::operand_alignments(where, config.opclass, t.b, t);
  cache->alignments_c = catalog::operand_alignments(where, config.opclass, t.c, t);
  if (family.kernel_cc() >= 90 &&
      (config.fuses_activation_bias_or_scales() || config.visitor || config.block_scaling != BlockScaling::None)) {
    // SM90 kernels fuse an activation, bias, scale vectors or a visitor tree in a TMA epilogue, and block-scaled ones
    // store D with it too: it moves C and D in 16-byte vectors only.
    std::erase_if(cache->alignments_c, [&](int a) { return a * bits_of(families::c_or_d(t)) % 128 != 0; });
  }
  cache->transposed = family.computes_transposed(config.opclass, t);
  cache->kernel_cc = family.kernel_cc();
  cache->generation = cache_->generation + 1;
  cache_ = std::move(cache);
}

void PlanCore::refuse_beside_plain_tree(bool changes, const char* what) const {
  if (changes && config.visitor_plain) {
    throw ConfigError(std::string("the plan's epilogue visitor tree sets its ") + what +
                      "; change the tree (or set the visitor to none first).");
  }
}

void PlanCore::forget_run_choices() {
  std::lock_guard<std::mutex> lock(cache_->mutex);
  for (KernelChoices& choices : cache_->choices) choices.last_choice.reset();
}

KernelSpec transposed_problem(KernelSpec s) {
  auto flip = [](Layout l) { return l == Layout::RowMajor ? Layout::ColumnMajor : Layout::RowMajor; };
  std::swap(s.element_a, s.element_b);
  std::swap(s.alignment_a, s.alignment_b);
  const Layout layout_a = s.layout_a;
  s.layout_a = flip(s.layout_b);
  s.layout_b = flip(layout_a);
  s.layout_c = flip(s.layout_c);
  if (s.bias != BiasMode::None) s.bias = s.bias == BiasMode::PerRow ? BiasMode::PerColumn : BiasMode::PerRow;
  if (s.scale == ScaleMode::PerRow || s.scale == ScaleMode::PerColumn) {
    s.scale = s.scale == ScaleMode::PerRow ? ScaleMode::PerColumn : ScaleMode::PerRow;
  }
  return s;
}

KernelSpec PlanCore::base_spec(std::optional<int> alignment_a, std::optional<int> alignment_b,
                               std::optional<int> alignment_c) const {
  const auto& t = config.types;
  const OpClass opclass = config.opclass;
  KernelSpec s;
  s.cc = config.cc;
  const catalog::Target where = config.target();  // a named value: the family is not tied to a temporary
  const families::Family& family = catalog::family_for(where, opclass, t);
  s.kernel_cc = family.kernel_cc();
  s.family = family.id();
  s.opclass = opclass;
  s.element_a = t.a;
  s.element_b = t.b;
  s.element_c = t.c;
  s.element_d = t.d;
  s.element_accumulator = t.accumulator;
  s.layout_a = t.layout_a;
  s.layout_b = t.layout_b;
  s.layout_c = t.layout_c;
  s.alignment_a = alignment_a.value_or(catalog::operand_alignments(where, opclass, t.a, t).front());
  s.alignment_b = alignment_b.value_or(catalog::operand_alignments(where, opclass, t.b, t).front());
  s.alignment_c = alignment_c.value_or(catalog::operand_alignments(where, opclass, t.c, t).front());
  s.swizzle = config.swizzle;
  s.activation = config.activation;
  // One kernel for every activation of the plan: CUTLASS's epilogues on SM90. A visitor tree of the plain form is
  // these settings; any other tree holds its own activation. Identity alone keeps the plain linear combination; with
  // a bias or scale vectors the fusion has an activation node anyway, which then takes identity at launch.
  s.activation_at_launch = config.fuses_activation_bias_or_scales() && (!config.visitor || config.visitor_plain) &&
                           s.family == KernelFamily::Sm90Collective && config.takes_activation_at_launch();
  s.bias = config.bias;
  s.scale = config.scale;
  s.block_scaling = config.block_scaling;
  if (config.visitor && !config.visitor_plain) s.visitor = config.visitor->with_types(t.c, t.d);
  if (family.computes_transposed(opclass, t)) s = transposed_problem(s);
  if (complete_spec) complete_spec(s);
  return s;
}

std::vector<TileDescription> PlanCore::valid_tiles(const KernelSpec& base) const {
  const auto limits = catalog::limits_for_cc(config.cc);
  if (config.tile) {
    KernelSpec s = base;
    s.tile = *config.tile;
    catalog::validate(s, limits);
    return {*config.tile};
  }
  std::vector<TileDescription> valid;
  std::string last_error = "no configurations";
  const auto listed = catalog::tile_descriptions(config.target(), config.opclass, config.types, limits,
                                                 base.alignment_a, base.alignment_b);
  // run() keeps to one math operation: the plan's, else the default configuration's.
  const MathOperation math =
      config.math_operation.value_or(listed.empty() ? MathOperation::MultiplyAdd : listed.front().math_operation);
  for (const auto& tile : listed) {
    if (tile.math_operation != math) continue;
    KernelSpec s = base;
    s.tile = tile;
    try {
      catalog::validate(s, limits);
      valid.push_back(tile);
    } catch (const ConfigError& e) {
      last_error = e.what();
    }
  }
  if (valid.empty()) {
    throw ConfigError("No valid configuration for " + std::string(to_string(config.opclass)) + " on SM" +
                      std::to_string(config.cc) + " with alignments " + std::to_string(base.alignment_a) + "/" +
                      std::to_string(base.alignment_b) + "/" + std::to_string(base.alignment_c) + ": " + last_error);
  }
  return valid;
}

KernelSpec PlanCore::spec(std::optional<int> alignment_a, std::optional<int> alignment_b,
                          std::optional<int> alignment_c) const {
  KernelSpec s = base_spec(alignment_a, alignment_b, alignment_c);
  s.tile = valid_tiles(s).front();  // the set tile, else the first valid one in catalog order
  return s;
}

KernelChoices& PlanCore::choices_for(const ProblemKey& p, const SpecVariant* variant) {
  auto matches = [&](const KernelChoices& c) {
    if (c.a != p.alignment_a || c.b != p.alignment_b || c.c != p.alignment_c) return false;
    if (variant == nullptr) return true;
    const bool same_iterators = !c.base.conv || (c.base.conv->iterator_algorithm == variant->iterator_algorithm &&
                                                 c.base.conv->stride_support == variant->stride_support);
    return same_iterators && c.base.split_k_mode == variant->split_k_mode && c.stages == variant->stages;
  };
  std::lock_guard<std::mutex> lock(cache_->mutex);
  for (auto& choices : cache_->choices) {
    if (matches(choices)) return choices;
  }
  KernelChoices choices{
      p.alignment_a, p.alignment_b, p.alignment_c, base_spec(p.alignment_a, p.alignment_b, p.alignment_c), {}, {}};
  if (variant != nullptr) {
    if (choices.base.conv) {
      choices.base.conv->iterator_algorithm = variant->iterator_algorithm;
      choices.base.conv->stride_support = variant->stride_support;
    }
    choices.base.split_k_mode = variant->split_k_mode;
  }
  choices.tiles = valid_tiles(choices.base);
  if (variant != nullptr && variant->stages != 0) {
    // Fewer stages than fit take less shared memory: valid wherever the automatic count is.
    for (TileDescription& td : choices.tiles) td.stages = variant->stages;
    choices.stages = variant->stages;
  }
  choices.slots.resize(choices.tiles.size());
  cache_->choices.push_back(std::move(choices));
  return cache_->choices.back();
}

std::size_t PlanCore::quick_twin_of(const KernelChoices& choices, std::size_t choice) const {
  return catalog::quick_twin_index(choices.tiles, choices.spec(choice)).value_or(KernelSlots<KernelModule>::kNone);
}

KernelModule& PlanCore::module_for(KernelChoices& choices, std::size_t choice, bool wait, const RunChoice* problem) {
  {
    std::lock_guard<std::mutex> lock(cache_->mutex);  // the run path's common case: loaded, no knob read
    if (choices.slots.modules[choice]) return *choices.slots.modules[choice];
  }
  wait = wait || knobs::flag("GEMMKIT_WAIT_FOR_BEST");
  // Loaded (perhaps compiled) outside the plan's lock: other threads keep running the kernels already loaded.
  std::function<double(std::size_t)> expected_time;
  if (problem != nullptr && problem->sm_count > 0) {
    expected_time = [&, shape = kernel_shape(problem->problem)](std::size_t i) {
      // run() launches a stand-in with the chosen configuration's split: a Stream-K stand-in of a data-parallel
      // choice runs data-parallel.
      return catalog::estimated_time(choices.tiles[i], shape, problem->sm_count, problem->split.mode);
    };
  }
  const ModuleSources<KernelModule> sources{
      [&](std::size_t i) { return jit::load_kernel_if_built(choices.spec(i)); },
      [&](std::size_t i) { return jit::load_kernel(choices.spec(i)); },
      [&](std::size_t i) { return jit::build_kernel_in_background(choices.spec(i)); },
      [&](std::size_t i) { return quick_twin_of(choices, i); }, expected_time};
  bool queued = false;  // this call met a new shape class: its kernel now builds in the background
  KernelModule& module = module_for_run(choices.slots, cache_->mutex, choice, wait, sources, &queued);
  if (queued && problem != nullptr) build_neighbours_ahead(*problem);
  return module;
}

int PlanCore::sm_count_for_choice() const {
  return cuda_device_count() > 0 ? device_info(current_device()).sm_count : catalog::limits_for_cc(config.cc).sm_count;
}

}  // namespace gemmkit::selection
