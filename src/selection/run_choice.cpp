// src/selection/run_choice.cpp: which configuration run() launches for a problem: a set tile or forced Stream-K
// kernel, the tuning database, the shape heuristics, parallel split-K, and what stands in while the wanted kernel
// builds.
#include <algorithm>
#include <array>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "families/rules.hpp"
#include "gemmkit/errors.hpp"
#include "jit/kernel_loader.hpp"
#include "selection/plan_core.hpp"
#include "util/knobs.hpp"

namespace gemmkit::selection {
namespace {

// GEMMKIT_SPLIT_K (read once per process): "auto" lets run() split K by itself, on SM90 with parallel split-K where
// it applies; "stream-k" only on the Stream-K kernel; "off" never.
enum class AutoSplit { Off, StreamK, Parallel };
AutoSplit automatic_split() {
  static const AutoSplit mode = [] {
    const std::string value = knobs::value("GEMMKIT_SPLIT_K");
    if (value.empty() || value == "auto") return AutoSplit::Parallel;
    if (value == "stream-k") return AutoSplit::StreamK;
    if (value == "off") return AutoSplit::Off;
    throw ConfigError("GEMMKIT_SPLIT_K='" + value + "' is not auto, stream-k or off; unset it or set one of them.");
  }();
  return mode;
}

bool forces_stream_k(Decomposition mode) {
  return mode != Decomposition::Auto;
}
// Parallel split-K's configuration and slices for a problem (catalog::choose_parallel_split), its slices starting on
// 16-byte boundaries of A's elements, and on K blocks of 128 where block scales apply per block.
std::optional<catalog::SplitChoice> parallel_split(const std::vector<TileDescription>& tiles, const KernelSpec& spec,
                                                   const catalog::ProblemShape& shape, int sm_count, DataType a) {
  const int granule = spec.block_scaling == BlockScaling::None ? 128 / bits_of(a) : 128;
  return catalog::choose_parallel_split(tiles, spec, shape, sm_count, granule);
}

}  // namespace

bool automatic_split_k() {
  return automatic_split() != AutoSplit::Off;
}

catalog::ProblemShape PlanCore::kernel_shape(const ProblemKey& p, bool transposed_choice) const {
  const bool swap = cache_->transposed != transposed_choice;  // the kernel sees D^T's shape when it computes D^T
  return {swap ? p.n : p.m, swap ? p.m : p.n, p.k, p.batch};
}

void PlanCore::check_k_split_settings(const KernelSpec& spec) const {
  if (!forces_stream_k(config.decomposition) && config.reduction_mode == ReductionMode::Deterministic) return;
  if (!catalog::family_of(spec.family).has_persistent_scheduler()) {
    throw ConfigError(
        "Split-K slices, a decomposition and a reduction mode apply to SM90 Stream-K kernels; this plan uses CUTLASS "
        "2.x kernels (" +
        std::string(to_string(spec.family)) + "). Use swizzle = ThreadblockSwizzleStreamK for Stream-K there.");
  }
  if (forces_stream_k(config.decomposition) && config.tile && !families::uses_stream_k(spec)) {
    throw ConfigError("Decomposition " + std::string(to_string(config.decomposition)) +
                      " needs the Stream-K tile scheduler, but the plan's tile " + config.tile->to_string() +
                      " has none; set its tile_scheduler to StreamK or set_swizzling_functor(StreamK).");
  }
}

std::size_t PlanCore::choose_tile(const KernelChoices& choices, const ProblemKey& p, int sm_count) const {
  check_k_split_settings(choices.spec(0));
  if (config.tile) return 0;
  const catalog::ProblemShape shape = kernel_shape(p);
  if (forces_stream_k_kernel()) {
    const std::size_t i = catalog::smallest_stream_k(choices.tiles, shape);
    if (i == choices.tiles.size()) {
      throw ConfigError("Decomposition " + std::string(to_string(config.decomposition)) +
                        " needs a Stream-K kernel, and this plan has no valid Stream-K configuration for alignments " +
                        std::to_string(p.alignment_a) + "/" + std::to_string(p.alignment_b) + "/" +
                        std::to_string(p.alignment_c) + ".");
    }
    return i;
  }
  return catalog::choose_tile(choices.tiles, choices.base, shape, sm_count, automatic_split_k());
}

bool PlanCore::forces_stream_k_kernel() const {
  return forces_stream_k(config.decomposition) && config.swizzle != Swizzle::StreamK;
}

KSplit PlanCore::k_split(const KernelChoices& choices, std::size_t choice, const ProblemKey& p, int sm_count) const {
  if (!families::uses_stream_k(choices.spec(choice))) return {Decomposition::DataParallel, 1};
  switch (config.decomposition) {
    case Decomposition::Auto: break;
    case Decomposition::SplitK: return {Decomposition::SplitK, config.splits};
    default: return {config.decomposition, 1};
  }
  if (!automatic_split_k()) return {};
  const catalog::ProblemShape shape = kernel_shape(p);
  return catalog::choose_k_split(choices.tiles[choice], shape, sm_count);
}

bool PlanCore::may_split_k_in_parallel(const KernelSpec& base) const {
  return automatic_split() == AutoSplit::Parallel && !config.tile && config.decomposition == Decomposition::Auto &&
         config.swizzle != Swizzle::StreamK && catalog::family_of(base.family).splits_k_in_parallel() &&
         base.element_accumulator == DataType::f32 && !base.visitor;  // the tree runs in the GEMM's own epilogue
}

namespace {

// The parallel split-K kernel of a base spec: its reduction applies the epilogue, with the activation compiled in.
KernelSpec parallel_split_k(KernelSpec base) {
  base.split_k_mode = SplitKMode::Parallel;
  base.activation_at_launch = false;
  return base;
}

}  // namespace

KernelChoices* PlanCore::alternative_choices(std::unique_ptr<KernelChoices>& slot, int a, int b, int c, KernelSpec base,
                                             bool none_valid_is_none) {
  std::lock_guard<std::mutex> lock(cache_->mutex);
  if (!slot) {
    std::vector<TileDescription> tiles = none_valid_is_none ? valid_tiles_or_none(base) : valid_tiles(base);
    slot = std::make_unique<KernelChoices>(KernelChoices{a, b, c, std::move(base), std::move(tiles), {}});
    slot->slots.resize(slot->tiles.size());
  }
  return slot->tiles.empty() ? nullptr : slot.get();
}

KernelChoices* PlanCore::parallel_choices(KernelChoices& choices, const ProblemKey& p) {
  if (p.batch != 1 || !may_split_k_in_parallel(choices.base)) return nullptr;
  return alternative_choices(choices.parallel, choices.a, choices.b, choices.c, parallel_split_k(choices.base),
                             /*none_valid_is_none=*/false);
}

bool PlanCore::may_transpose_for_decode(const KernelSpec& base) const {
  // Where nothing of the plan's asks for its own orientation: the automatic choice of an SM90 GEMM of 16-bit operands
  // without a visitor tree (whose tensors keep D's orientation) or block scales.
  return config.operation == catalog::Operation::Gemm && base.family == KernelFamily::Sm90Collective &&
         !cache_->transposed && families::is_half(base.element_a) && families::is_half(base.element_b) &&
         !base.visitor && base.block_scaling == BlockScaling::None && !config.tile &&
         config.decomposition == Decomposition::Auto && config.swizzle != Swizzle::StreamK;
}

std::vector<TileDescription> PlanCore::valid_tiles_or_none(const KernelSpec& base) const {
  try {
    return valid_tiles(base);
  } catch (const ConfigError&) {
    return {};
  }
}

KernelChoices* PlanCore::decode_choices(KernelChoices& choices, const ProblemKey& p) {
  if (!may_transpose_for_decode(choices.base) || !catalog::transposes_for_decode(kernel_shape(p))) return nullptr;
  // No valid configuration of the transposed layouts: the plan's own kernels then.
  return alternative_choices(choices.decode, choices.b, choices.a, choices.c, transposed_problem(choices.base),
                             /*none_valid_is_none=*/true);
}

bool PlanCore::may_stream_k_one_wave(const KernelSpec& base) const {
  // The automatic choice of a plain GEMM (no activation, bias or scales) on the 2.x tensor-op kernels whose mainloop
  // loads an operand element by element; the other 2.x kernels and epilogues were not measured this way.
  const bool two_stage = base.family == KernelFamily::Sm80Universal && base.opclass == OpClass::TensorOp &&
                         (families::loads_element_by_element(base.opclass, base.alignment_a, base.element_a) ||
                          families::loads_element_by_element(base.opclass, base.alignment_b, base.element_b));
  return two_stage && config.operation == catalog::Operation::Gemm && automatic_split_k() && !config.tile &&
         config.swizzle != Swizzle::StreamK && config.decomposition == Decomposition::Auto && !base.visitor &&
         !config.fuses_activation_bias_or_scales() && base.split_k_mode == SplitKMode::Serial;
}

KernelChoices* PlanCore::stream_k_choices(KernelChoices& choices) {
  if (!may_stream_k_one_wave(choices.base)) return nullptr;
  KernelSpec twin = choices.base;
  twin.swizzle = Swizzle::StreamK;
  // No Stream-K kernel for the triple: the serial kernels alone.
  return alternative_choices(choices.stream_k, choices.a, choices.b, choices.c, std::move(twin),
                             /*none_valid_is_none=*/true);
}

RunChoice PlanCore::run_choice(const ProblemKey& p, int sm_count) {
  KernelChoices& choices = choices_for(p);
  const std::array<std::int64_t, 5> problem{p.m, p.n, p.k, p.batch, sm_count};
  std::optional<RunChoice> out;
  {
    std::lock_guard<std::mutex> lock(cache_->mutex);
    if (choices.last_choice && choices.last_choice->problem == problem) out = choices.last_choice->choice;
  }
  if (!out) {
    out = heuristic_choice(choices, p, sm_count);
    std::lock_guard<std::mutex> lock(cache_->mutex);
    choices.last_choice = KernelChoices::LastChoice{problem, *out};
  }
  if (out->alternative != nullptr) return *out;
  // Else a configuration measured by Gemm::tune for this plan and shape bucket (tuning database), when it is built;
  // a set tile or a forced Stream-K kernel is the plan's own choice.
  if (!config.tile && !forces_stream_k_kernel()) {
    if (auto tuned = tuned_lookup_ ? tuned_lookup_(choices.base, choices.tiles, p, *choices.tuned) : std::nullopt) {
      out->index = *tuned;
      out->split = k_split(choices, *tuned, p, sm_count);
    }
  }
  return *out;
}

RunChoice PlanCore::heuristic_choice(KernelChoices& choices, const ProblemKey& p, int sm_count) {
  const std::size_t heuristic = choose_tile(choices, p, sm_count);
  RunChoice out{&choices, heuristic, k_split(choices, heuristic, p, sm_count), nullptr, 0, 0, p, sm_count};
  // A decode shape runs transposed on a narrow tile where one fits (catalog::choose_decode_tile): the tokens in its
  // columns, where the plan's own tiles pad them to 64 rows and split K to keep the SMs busy.
  if (KernelChoices* decode = decode_choices(choices, p)) {
    const std::size_t pick = catalog::choose_decode_tile(decode->tiles, kernel_shape(p, true), sm_count);
    if (pick != decode->tiles.size()) {
      out.alternative = decode;
      out.alternative_index = pick;
      out.alternative_kind = Alternative::TransposedDecode;
      return out;
    }
  }
  // One wave of the two-stage mainloop's tiles runs on a Stream-K kernel (catalog::choose_stream_k_one_wave).
  KernelChoices* twins = p.batch == 1 ? stream_k_choices(choices) : nullptr;
  if (twins != nullptr) {
    const std::size_t pick =
        catalog::choose_stream_k_one_wave(choices.tiles[heuristic], twins->tiles, kernel_shape(p), sm_count);
    if (pick != twins->tiles.size()) {
      out.alternative = twins;
      out.alternative_index = pick;
      out.alternative_kind = Alternative::StreamK;
      out.alternative_split = k_split(*twins, pick, p, sm_count);
      return out;
    }
  }
  // Where the heuristic splits K on the Stream-K kernel, parallel split-K instead when a configuration fits: its slices
  // run independently and one kernel adds them, where Stream-K's CTAs wait on each other's partial tiles. It takes
  // precedence over a tuning database entry (tune() times serial configurations only and refuses these shapes).
  // Block-scaled kernels have no Stream-K twin: the split the heuristic would choose for their tile decides.
  const bool would_split =
      out.split.mode == Decomposition::SplitK ||
      (choices.base.block_scaling != BlockScaling::None &&
       catalog::choose_k_split(choices.tiles[heuristic], kernel_shape(p), sm_count).mode == Decomposition::SplitK);
  if (would_split) {
    if (KernelChoices* parallel = parallel_choices(choices, p)) {
      const catalog::ProblemShape shape = kernel_shape(p);
      if (auto pick = parallel_split(parallel->tiles, parallel->base, shape, sm_count, config.types.a)) {
        out.alternative = parallel;
        out.alternative_index = pick->tile;
        out.slices = pick->slices;
      }
    }
  }
  return out;
}

KernelModule* PlanCore::alternative_module(const RunChoice& c, bool wait, bool& building, bool* queued) {
  KernelSlots<KernelModule>& slots = c.alternative->slots;
  const std::size_t i = c.alternative_index;
  std::shared_ptr<const jit::BackgroundBuild> pending;
  {
    std::lock_guard<std::mutex> lock(cache_->mutex);
    if (slots.modules[i]) return slots.modules[i].get();
    pending = slots.pending[i];
  }
  wait = wait || knobs::flag("GEMMKIT_WAIT_FOR_BEST");  // as module_for reads it for the serial kernels
  if (wait || (pending && pending->state() == jit::BackgroundBuild::State::done)) {
    return &module_for(*c.alternative, i, /*wait=*/true);
  }
  if (pending) {  // building, or failed (a warning said so): the serial choice meanwhile, or from now on
    building = !pending->finished();
    return nullptr;
  }
  const KernelSpec spec = c.alternative->spec(i);
  if (auto module = jit::load_kernel_if_built(spec)) {
    std::lock_guard<std::mutex> lock(cache_->mutex);
    if (!slots.modules[i]) slots.modules[i] = std::move(module);
    return slots.modules[i].get();
  }
  auto build = jit::build_kernel_in_background(spec);
  std::lock_guard<std::mutex> lock(cache_->mutex);
  if (!slots.pending[i]) {
    slots.pending[i] = std::move(build);
    if (queued != nullptr) *queued = true;
  }
  building = true;
  return nullptr;
}

std::vector<KernelSpec> PlanCore::neighbour_specs(const RunChoice& c) {
  auto launched = [](const RunChoice& r) {
    return r.alternative != nullptr ? r.alternative->spec(r.alternative_index) : r.choices->spec(r.index);
  };
  std::vector<KernelSpec> out;
  std::set<std::string> seen = {launched(c).canonical()};
  for (std::int64_t ProblemKey::*extent : {&ProblemKey::m, &ProblemKey::n, &ProblemKey::k}) {
    for (const bool twice : {false, true}) {
      ProblemKey q = c.problem;
      q.*extent = twice ? q.*extent * 2 : std::max<std::int64_t>(1, q.*extent / 2);
      KernelSpec spec = launched(heuristic_choice(*c.choices, q, c.sm_count));
      if (seen.insert(spec.canonical()).second) out.push_back(std::move(spec));
    }
  }
  return out;
}

void PlanCore::build_neighbours_ahead(const RunChoice& c) {
  if (c.sm_count <= 0 || !jit::build_ahead_on()) return;
  for (const KernelSpec& spec : neighbour_specs(c)) jit::build_ahead([&] { return spec; });
}

KernelModule& PlanCore::module_while_alternative_builds(RunChoice& c) {
  KernelChoices& serial = *c.choices;
  const ModuleSources<KernelModule> sources{
      [&](std::size_t i) { return jit::load_kernel_if_built(serial.spec(i)); },
      {},
      [&](std::size_t i) { return jit::build_kernel_in_background(serial.spec(i)); },
      [&](std::size_t i) { return quick_twin_of(serial, i); },
      [&, shape = kernel_shape(c.problem)](std::size_t i) {
        return catalog::estimated_time(serial.tiles[i], shape, c.sm_count, c.split.mode);
      }};
  if (KernelModule* module = built_module(serial.slots, cache_->mutex, c.index, sources)) return *module;
  bool building = false;
  KernelModule* alternative = alternative_module(c, /*wait=*/true, building);  // nothing built: the alternative
  c.take_alternative();
  return *alternative;
}

std::vector<KernelSpec> PlanCore::run_time_kernels() const {
  const KernelSpec base = base_spec(std::nullopt, std::nullopt, std::nullopt);
  const std::vector<TileDescription> tiles = valid_tiles(base);
  const int sm_count = catalog::limits_for_cc(config.cc).sm_count;
  const Shape3 cta = tiles.front().cta_tile();
  // Shapes that reach each branch of the run-time choice: one wave plus one tile (wave-quantized: Stream-K), a long
  // K on few tiles (Stream-K on the smallest tile), decode-like ones (64-row tiles, split-K) and mid-sized problems
  // (the cheapest tile shape).
  const std::vector<catalog::ProblemShape> probes = {{cta[0] * (sm_count + 1), cta[1], 8192, 1},
                                                     {512, 512, 16384, 1},
                                                     {16, 4096, 4096, 1},
                                                     {16, 14336, 4096, 1},
                                                     {1024, 1024, 4096, 1},
                                                     {2048, 2048, 2048, 1},
                                                     {4096, 4096, 512, 1},
                                                     {3000, 3000, 3000, 1}};
  std::vector<std::size_t> chosen = {0};
  // The parallel split-K kernels run() picks where it splits K (SM90; see run_choice).
  const bool parallel = may_split_k_in_parallel(base);
  const KernelSpec parallel_base = parallel_split_k(base);
  const std::vector<TileDescription> parallel_tiles =
      parallel ? valid_tiles(parallel_base) : std::vector<TileDescription>{};
  std::vector<std::size_t> parallel_chosen;
  auto add = [](std::vector<std::size_t>& list, std::size_t i) {
    if (std::find(list.begin(), list.end(), i) == list.end()) list.push_back(i);
  };
  if (!config.tile) {
    for (const catalog::ProblemShape& shape : probes) {
      const std::size_t i = catalog::choose_tile(tiles, base, shape, sm_count);
      add(chosen, i);
      if (parallel && catalog::choose_k_split(tiles[i], shape, sm_count).mode == Decomposition::SplitK) {
        if (auto pick = parallel_split(parallel_tiles, parallel_base, shape, sm_count, config.types.a)) {
          add(parallel_chosen, pick->tile);
        }
      }
    }
  }
  std::vector<KernelSpec> out;
  for (const std::size_t i : chosen) {
    KernelSpec s = base;
    s.tile = tiles[i];
    out.push_back(s);
  }
  for (const std::size_t i : parallel_chosen) {
    KernelSpec s = parallel_base;
    s.tile = parallel_tiles[i];
    out.push_back(s);
  }
  // The transposed kernels run() picks for the decode probes (decode_choices).
  if (!config.tile && may_transpose_for_decode(base)) {
    KernelSpec transposed = transposed_problem(base);
    const std::vector<TileDescription> decode = valid_tiles_or_none(transposed);
    std::vector<std::size_t> decode_chosen;
    for (const catalog::ProblemShape& shape : probes) {
      if (!catalog::transposes_for_decode(shape)) continue;
      const std::size_t i = catalog::choose_decode_tile(decode, {shape.n, shape.m, shape.k, shape.batch}, sm_count);
      if (i != decode.size()) add(decode_chosen, i);
    }
    for (const std::size_t i : decode_chosen) {
      transposed.tile = decode[i];
      out.push_back(transposed);
    }
  }
  return out;
}

RunChoice PlanCore::choice_without_running(const ProblemKey& p) {
  RunChoice c = run_choice(p, sm_count_for_choice());
  if (c.alternative != nullptr) c.take_alternative();  // what run() launches once the alternative kernel is built
  return c;
}

int PlanCore::swizzle_for(const RunChoice& c, const ProblemKey& p) const {
  if (!catalog::family_of(c.choices->base.family).has_persistent_scheduler()) return 0;
  if (config.max_swizzle_size != 0) return config.max_swizzle_size;
  return catalog::choose_max_swizzle(c.choices->tiles[c.index], kernel_shape(p, c.transposed()));
}

std::string PlanCore::running_kernel_name(const ProblemKey& p) {
  const RunChoice c = run_choice(p, sm_count_for_choice());
  const std::size_t choice = c.index;
  KernelSlots<KernelModule>& slots = c.choices->slots;
  if (c.alternative != nullptr) {
    std::shared_ptr<const jit::BackgroundBuild> pending;
    {
      std::lock_guard<std::mutex> lock(cache_->mutex);
      const KernelSlots<KernelModule>& alternative = c.alternative->slots;
      if (alternative.modules[c.alternative_index]) return alternative.modules[c.alternative_index]->kernel_name();
      pending = alternative.pending[c.alternative_index];
    }
    // Still building: the serial kernel run() lends meanwhile (module_while_alternative_builds), if loaded.
    if (pending && !pending->finished()) {
      const ModuleSources<KernelModule> loaded_only{
          [](std::size_t) { return std::shared_ptr<KernelModule>(); }, {}, {}, {}, {}};
      const KernelModule* lent = built_module(slots, cache_->mutex, choice, loaded_only);
      return lent != nullptr ? lent->kernel_name() : "";
    }
  }
  // Otherwise run() launches the serial choice (also once the alternative's build failed).
  std::lock_guard<std::mutex> lock(cache_->mutex);
  if (slots.modules[choice]) return slots.modules[choice]->kernel_name();
  const std::size_t stand_in = slots.stand_in[choice];
  if (slots.pending[choice] && stand_in != KernelSlots<KernelModule>::kNone) {
    return slots.modules[stand_in]->kernel_name();
  }
  return "";
}

KernelModule& PlanCore::launch_module(RunChoice& c, bool wait) {
  bool alternative_building = false, alternative_queued = false;
  if (c.alternative != nullptr) {
    if (KernelModule* module = alternative_module(c, wait, alternative_building, &alternative_queued)) {
      c.take_alternative();
      return *module;
    }
  }
  if (alternative_building) {
    const RunChoice serial = c;  // module_while_alternative_builds may switch c to the alternative kernel
    KernelModule& module = module_while_alternative_builds(c);
    if (alternative_queued) build_neighbours_ahead(serial);  // a new shape class; after its stand-in's twin, if any
    return module;
  }
  return module_for(*c.choices, c.index, wait, &c);
}

}  // namespace gemmkit::selection
