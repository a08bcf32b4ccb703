// src/selection/plan_core.hpp: kernel selection for one plan: its configuration (a value), the kernels each alignment
// triple may use, the choice among them for a problem (heuristic, tuning database, split-K, stand-ins) and the
// modules those choices load or build. Gemm, GroupedGemm and Conv2d each own one; it knows none of them.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "catalog/catalog.hpp"
#include "epilogue/plain_form.hpp"
#include "families/family.hpp"
#include "gemmkit/kernel_spec.hpp"
#include "runtime/kernel_module.hpp"
#include "selection/kernel_slots.hpp"
#include "selection/tuned_memo.hpp"

namespace gemmkit::selection {

// Everything a plan was declared and configured with: what determines its kernels and their run-time arguments.
struct PlanConfig {
  catalog::Operation operation = catalog::Operation::Gemm;
  int cc = 0;
  std::optional<int> kernel_cc;     // as requested; the plan's generation is its family's (PlanCore::kernel_cc)
  bool kernel_cc_for_math = false;  // kernel_cc was set to 80 by a math operation, not by the options
  families::OperandTypes types{};
  OpClass opclass = OpClass::TensorOp;
  bool opclass_pinned = false;  // set_opclass was called: the plan keeps to that opclass
  std::optional<TileDescription> tile;
  std::optional<MathOperation> math_operation;
  Swizzle swizzle = Swizzle::Identity1;
  Activation activation = Activation::Identity;
  double activation_parameter = 0.01;
  BiasMode bias = BiasMode::None;
  std::optional<bool> activation_at_launch;  // nullopt: GEMMKIT_ACTIVATION_AT_LAUNCH says (FP8 operands: off)
  ScaleMode scale = ScaleMode::None;
  BlockScaling block_scaling = BlockScaling::None;
  RasterOrder raster_order = RasterOrder::Heuristic;
  int max_swizzle_size = 0;  // 0: run() chooses
  Decomposition decomposition = Decomposition::Auto;
  int splits = 1;
  ReductionMode reduction_mode = ReductionMode::Deterministic;
  // An epilogue visitor tree in place of the activation, bias and scales (its unset types are the plan's).
  std::optional<epilogue::Epilogue> visitor;
  // The tree's plain form, when it has one: activation, bias and scale above are then the tree's, and the plan runs
  // their fused kernels (no visitor kernel).
  std::optional<epilogue::PlainForm> visitor_plain;

  // The GPU and the requested kernel generation, as the catalog takes them.
  catalog::Target target() const { return {cc, kernel_cc, operation}; }
  // An epilogue beyond the linear combination: an activation other than identity, a bias or scale vectors.
  bool fuses_activation_bias_or_scales() const;
  // Whether kernels that can take the activation at launch should (the plan's choice, else the variable's).
  bool takes_activation_at_launch() const;
};

// A problem as selection sees it: its extents and the widest vectors its operands fit.
struct ProblemKey {
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  int alignment_a = 0, alignment_b = 0, alignment_c = 0;
};

// What a kind of plan adds to the kernels of one alignment triple (a Conv2d's iterators, split-K mode, stages).
struct SpecVariant {
  IteratorAlgorithm iterator_algorithm = IteratorAlgorithm::Analytic;
  StrideSupport stride_support = StrideSupport::Strided;
  SplitKMode split_k_mode = SplitKMode::Serial;
  int stages = 0;  // non-zero: every tile at this pipeline depth, not the family's own
};

struct KernelChoices;

// The kernels that may replace a plan's serial choice for a problem (RunChoice::alternative).
enum class Alternative {
  ParallelSplitK,    // partial sums in slices of K, then a reduction kernel (with its slice count)
  TransposedDecode,  // D^T = B^T A^T on a narrow tile, data-parallel
  StreamK,           // CUTLASS 2.x's Stream-K kernel (one wave of two-stage tiles)
};

// What run() launches for a problem: a configuration of some kernel choices and its decomposition, and where another
// kernel replaces it, that kernel's choices, configuration and kind.
struct RunChoice {
  KernelChoices* choices;
  std::size_t index;
  KSplit split;
  KernelChoices* alternative;
  std::size_t alternative_index;
  int slices;
  // The problem and the SM count it was chosen for: what stand-ins are weighed against, and neighbours start from.
  ProblemKey problem{};
  int sm_count = 0;
  Alternative alternative_kind = Alternative::ParallelSplitK;
  KSplit alternative_split{};  // the Stream-K alternative's decomposition
  // Launch the alternative kernel: its choices, configuration and split in place of the serial ones.
  void take_alternative() {
    choices = alternative;
    index = alternative_index;
    switch (alternative_kind) {
      case Alternative::ParallelSplitK: split = {Decomposition::SplitK, slices}; break;
      case Alternative::TransposedDecode: split = {Decomposition::DataParallel, 1}; break;
      case Alternative::StreamK: split = alternative_split; break;
    }
  }
  // Whether the kernel launched computes the transposed problem (beside the plan's own transposition).
  bool transposed() const { return alternative_kind == Alternative::TransposedDecode && choices == alternative; }
};

// The kernels run() may choose from for one alignment triple: its valid configurations and those loaded so far.
struct KernelChoices {
  int a, b, c;
  KernelSpec base;
  std::vector<TileDescription> tiles;
  KernelSlots<KernelModule> slots;                                   // parallel to tiles, loaded on first use
  std::unique_ptr<TunedMemo> tuned = std::make_unique<TunedMemo>();  // run()'s database answers
  std::unique_ptr<KernelChoices> parallel = nullptr;  // the parallel split-K kernels of this triple (SM90)
  std::unique_ptr<KernelChoices> decode = nullptr;    // the transposed problem's kernels (SM90, decode shapes)
  std::unique_ptr<KernelChoices> stream_k = nullptr;  // the Stream-K twins of this triple (2.x two-stage kernels)
  int stages = 0;
  // The shape heuristics' answer for the last problem (m, n, k, batch, SM count), under the run cache's mutex: they
  // cost about 2 us a call, and a loop of runs repeats one shape.
  struct LastChoice {
    std::array<std::int64_t, 5> problem;
    RunChoice choice;
  };
  std::optional<LastChoice> last_choice = std::nullopt;

  KernelSpec spec(std::size_t choice) const {
    KernelSpec s = base;
    s.tile = tiles[choice];
    return s;
  }
};

// Made afresh whenever the configuration changes. run() may be called from many threads at once: the alignment
// lists are fixed at construction, the kernel choices grow under the mutex and never move (a deque keeps references).
struct RunCache {
  std::vector<int> alignments_a, alignments_b, alignments_c;
  bool transposed = false;       // the kernel computes D^T = B^T A^T (see Family::computes_transposed)
  int kernel_cc = 0;             // the kernel generation of the plan's family
  std::uint64_t generation = 0;  // counts the configurations: what a plan keeps beside the cache is stale when it moves
  std::mutex mutex;
  std::deque<KernelChoices> choices;
};

class PlanCore {
 public:
  // The configuration a kind of plan adds to every spec of its own (a Conv2d's kind); called last by base_spec.
  using CompleteSpec = std::function<void(KernelSpec&)>;
  // The tuning database's configuration for a problem, if any (tuning::tuned_choice); injected so that selection
  // does not depend on the tuner, which depends on it.
  using TunedLookup = std::function<std::optional<std::size_t>(
      const KernelSpec& base, const std::vector<TileDescription>& tiles, const ProblemKey& problem, TunedMemo& memo)>;

  PlanCore(const PlanConfig& config, TunedLookup tuned_lookup);
  // A copy of the configuration and hooks with a run cache of its own (nothing loaded).
  PlanCore(const PlanCore& other);
  PlanCore& operator=(const PlanCore&) = delete;

  PlanConfig config;
  CompleteSpec complete_spec;

  // Drops the loaded kernels and choices: call after every change of the configuration that changes kernels.
  void invalidate();
  // ConfigError when `changes` a setting (`what`) the plan's plain-form visitor tree sets: the tree says it.
  void refuse_beside_plain_tree(bool changes, const char* what) const;
  // Drops the remembered choices only: for settings that change the choice but keep the loaded kernels.
  void forget_run_choices();
  RunCache& cache() const { return *cache_; }
  std::uint64_t generation() const { return cache_->generation; }

  // The plan's kernel without a tile, for the widest alignments or the given ones.
  KernelSpec base_spec(std::optional<int> alignment_a = std::nullopt, std::optional<int> alignment_b = std::nullopt,
                       std::optional<int> alignment_c = std::nullopt) const;
  // The configurations run() may use for `base`: the set tile (validated), else every valid one of the plan's math
  // operation; ConfigError when none is valid.
  std::vector<TileDescription> valid_tiles(const KernelSpec& base) const;
  // base_spec with the first valid tile.
  KernelSpec spec(std::optional<int> alignment_a = std::nullopt, std::optional<int> alignment_b = std::nullopt,
                  std::optional<int> alignment_c = std::nullopt) const;

  // The kernel choices of a problem's alignment triple (and a plan kind's variant), made once.
  KernelChoices& choices_for(const ProblemKey& p, const SpecVariant* variant = nullptr);
  // The module of configuration `choice`: with `wait`, that one (compiled if needed); else one built already stands
  // in while the wanted one compiles in the background (see Gemm::run), weighed on `problem`'s shape when given.
  KernelModule& module_for(KernelChoices& choices, std::size_t choice, bool wait, const RunChoice* problem = nullptr);
  // The configuration of `choices` that is `choice`'s quick twin (its family's), or KernelSlots' kNone.
  std::size_t quick_twin_of(const KernelChoices& choices, std::size_t choice) const;

  // The SMs a choice made without running is made for: the current GPU's, or without one the flagship GPU's of cc.
  int sm_count_for_choice() const;

  // run_choice.cpp: the choice for one problem.
  void check_k_split_settings(const KernelSpec& spec) const;
  bool forces_stream_k_kernel() const;
  // What run() launches for a problem on `sm_count` SMs: the tuning database's configuration, else the heuristic's.
  RunChoice run_choice(const ProblemKey& p, int sm_count);
  // run_choice for a choice made without running: the alternative kernel in place of the serial one where chosen.
  RunChoice choice_without_running(const ProblemKey& p);
  // The module run() launches for `c` (switched to its alternative kernel when that one runs).
  KernelModule& launch_module(RunChoice& c, bool wait);
  // The max_swizzle_size run() passes with choice `c`.
  int swizzle_for(const RunChoice& c, const ProblemKey& p) const;
  // The kernel run() launches now for `p` (spec_for's, a stand-in, or "" when none is loaded).
  std::string running_kernel_name(const ProblemKey& p);
  // The plan's kernel for the widest alignments and the other configurations run() picks for some shapes.
  std::vector<KernelSpec> run_time_kernels() const;
  // The kernels the heuristic picks for the neighbours of `c`'s problem (M, N and K each halved and doubled) other
  // than `c`'s own, in that order, each once: what the first run of a new shape class builds ahead (build-ahead on),
  // since a program that meets one shape tends to meet its neighbours next.
  std::vector<KernelSpec> neighbour_specs(const RunChoice& c);

 private:
  std::size_t choose_tile(const KernelChoices& choices, const ProblemKey& p, int sm_count) const;
  KSplit k_split(const KernelChoices& choices, std::size_t choice, const ProblemKey& p, int sm_count) const;
  bool may_split_k_in_parallel(const KernelSpec& base) const;
  // `slot`'s kernel choices (operand alignments a, b, c): `base` and its valid configurations, made on first use under
  // the run cache's mutex (with none_valid_is_none, none where valid_tiles throws); nullptr when they have none. The
  // alternatives below are each one such slot.
  KernelChoices* alternative_choices(std::unique_ptr<KernelChoices>& slot, int a, int b, int c, KernelSpec base,
                                     bool none_valid_is_none);
  KernelChoices* parallel_choices(KernelChoices& choices, const ProblemKey& p);
  bool may_transpose_for_decode(const KernelSpec& base) const;
  // valid_tiles(base), or none where no configuration of that kernel is valid (no ConfigError).
  std::vector<TileDescription> valid_tiles_or_none(const KernelSpec& base) const;
  // The kernels of the transposed problem beside `choices`, where run() computes `p` as D^T = B^T A^T (a decode
  // shape on an SM90 plan of 16-bit operands, catalog::transposes_for_decode); nullptr elsewhere.
  KernelChoices* decode_choices(KernelChoices& choices, const ProblemKey& p);
  bool may_stream_k_one_wave(const KernelSpec& base) const;
  // The Stream-K twins of `choices` (their tiles on CUTLASS 2.x's Stream-K kernel), where run() may run a one-wave
  // problem of the two-stage mainloop on them (catalog::choose_stream_k_one_wave); nullptr elsewhere.
  KernelChoices* stream_k_choices(KernelChoices& choices);
  RunChoice heuristic_choice(KernelChoices& choices, const ProblemKey& p, int sm_count);
  // `queued`, when given, is set when this call queued the alternative kernel's build (a new shape class).
  KernelModule* alternative_module(const RunChoice& c, bool wait, bool& building, bool* queued = nullptr);
  KernelModule& module_while_alternative_builds(RunChoice& c);
  // neighbour_specs(c), queued with jit::build_ahead (which does nothing unless build-ahead is on).
  void build_neighbours_ahead(const RunChoice& c);
  // The problem's shape as a kernel sees it: transposed when the plan's kernels compute D^T, or (`transposed_choice`)
  // when the choice does.
  catalog::ProblemShape kernel_shape(const ProblemKey& p, bool transposed_choice = false) const;

  TunedLookup tuned_lookup_;
  std::unique_ptr<RunCache> cache_;
};

// The kernel of `spec`'s problem computed as D^T = B^T A^T: A' = B^T, B' = A^T and C' = C^T, the same memory with
// flipped layouts; a bias and scale vectors along rows go along columns. run() swaps the arguments
// (runtime::GemmLaunch::transposed).
KernelSpec transposed_problem(KernelSpec spec);

// The options of GEMMKIT_SPLIT_K that run() reads: whether it may split K by itself at all.
bool automatic_split_k();

}  // namespace gemmkit::selection
