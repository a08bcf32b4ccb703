// include/gemmkit/gemm.hpp: Gemm, the user-facing plan: declare a GEMM in a few words, compile it, run it.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gemmkit/codegen.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/jit.hpp"
#include "gemmkit/kernel_spec.hpp"
#include "gemmkit/runtime.hpp"
#include "gemmkit/tensor.hpp"
#include "gemmkit/tuning.hpp"
#include "gemmkit/types.hpp"

namespace gemmkit {

class KernelModule;
namespace catalog {
struct Target;
enum class Operation;
}  // namespace catalog
namespace detail {
struct MatrixOperand;
}

// What a plan is declared from. Per operand, a representative tensor wins over element_X/layout_X, which win
// over the generic element/layout (giving both a tensor and element_X for one operand is an error).
struct GemmOptions {
  std::optional<DataType> element, element_a, element_b, element_c, element_d, element_accumulator;
  std::optional<Layout> layout, layout_a, layout_b, layout_c;
  const TensorView* A = nullptr;
  const TensorView* B = nullptr;
  const TensorView* C = nullptr;
  const TensorView* D = nullptr;
  std::optional<int> cc;  // the target GPU (e.g. 80, 90); default: the current device's
  // The kernel generation: 80 = CUTLASS 2.x kernels (also on an SM90 GPU), 90 = CUTLASS 3.x. Default: the best
  // for cc.
  std::optional<int> kernel_cc;
};

struct RunOptions {
  cudaStream_t stream = nullptr;     // device tensors run on this stream; host tensors are staged through it
  bool sync = true;                  // wait for the stream before returning (host outputs always land before return)
  bool print_module = false;         // print the generated source before running
  const TensorView* bias = nullptr;  // the bias vector when the plan has one (set_bias): m (per row) or n elements
  // The f32 scale vectors when the plan has them (set_scale): row_scale has m elements (one per output row, e.g. A's
  // per-row FP8 dequantization scales), column_scale n (one per output column, e.g. B's per-column scales).
  const TensorView* row_scale = nullptr;
  const TensorView* column_scale = nullptr;
  // A device buffer lent as the kernel's workspace (frameworks with their own allocator); by default each launch
  // takes one from gemmkit's stream-ordered pool. It must not be in use by another launch in flight.
  Workspace workspace = {};
  // When the shape asks for a kernel that is not built yet, compile it and wait (benchmarks). By default run()
  // launches a kernel already built and compiles the better one in the background (also: GEMMKIT_WAIT_FOR_BEST=1).
  bool wait_for_best = false;
};

// A plan. Its run() (and spec_for) may be called from many threads at once, each on its own stream or on the same
// one; launches in flight never share a workspace, and run() can be captured into a CUDA graph (device tensors).
// Changing the configuration (set_*, construct with a tile, compile with a tile) while another thread runs the
// plan is not supported.
class Gemm {
 public:
  explicit Gemm(const GemmOptions& options);
  virtual ~Gemm();
  Gemm(Gemm&&) noexcept;
  Gemm& operator=(Gemm&&) noexcept;

  int cc() const { return cc_; }
  // The kernel generation the plan uses (80 or 90).
  int kernel_cc() const { return spec().kernel_cc; }
  DataType element_a() const { return types_.a; }
  DataType element_b() const { return types_.b; }
  DataType element_c() const { return types_.c; }
  DataType element_d() const { return types_.d; }
  DataType element_accumulator() const { return types_.accumulator; }
  Layout layout_a() const { return types_.layout_a; }
  Layout layout_b() const { return types_.layout_b; }
  Layout layout_c() const { return types_.layout_c; }

  OpClass opclass() const { return opclass_; }
  // Throws ConfigError naming the combination when this opclass has no kernels for the plan's types/layouts.
  void set_opclass(OpClass opclass);
  std::vector<OpClass> opclasses() const;

  // Every valid configuration for the plan (default first, no duplicates).
  std::vector<TileDescription> tile_descriptions() const;
  // The configuration set on the plan, if any (else the default is chosen per alignment).
  const std::optional<TileDescription>& tile_description() const { return tile_; }
  // Validates before storing; throws ConfigError naming the rule.
  void set_tile_description(const TileDescription& tile);
  // Merges some fields onto the current configuration (or the default one), validates, stores.
  void update_tile_description(const TileDescriptionUpdate& update);

  // The math operation of the plan's kernels (the reference's plan.math_operation); nullopt: the family's default
  // (multiply_add; saturating for 8-bit integers). tile_descriptions() and run() keep to it. An operation only the
  // CUTLASS 2.x kernels offer (3xTF32 and the other fast-f32 modes) switches an SM90 plan that was not given kernel_cc
  // to those kernels (kernel_cc() 80, said once on stderr); given kernel_cc=90, or where no kernel offers it, it is a
  // ConfigError naming the operations on offer. Unsetting it returns to the plan's own generation.
  const std::optional<MathOperation>& math_operation() const { return math_operation_; }
  void set_math_operation(std::optional<MathOperation> math);
  // The math operations the plan's opclass offers for its operands, the default first (on an SM90 plan without
  // kernel_cc, also those of the 2.x kernels).
  std::vector<MathOperation> math_operations() const;

  Swizzle swizzling_functor() const { return swizzle_; }
  void set_swizzling_functor(Swizzle swizzle);
  std::vector<Swizzle> swizzling_functors() const;

  Activation activation() const { return activation_; }
  // The parameter is the leaky_relu slope (ignored by the others); it is a run-time argument (no recompile).
  void set_activation(Activation activation, double parameter = 0.01);
  double activation_parameter() const { return activation_parameter_; }
  static std::vector<Activation> activations();

  // A bias vector added before the activation: D = act(alpha*A@B + beta*C + bias), per output row or column.
  BiasMode bias() const { return bias_; }
  void set_bias(BiasMode bias);

  // Scale vectors (SM90 kernels; f32): D = act(alpha * (acc * row_scale[i] * column_scale[j]) + beta * C + bias),
  // with the vectors given to run() (RunOptions::row_scale / column_scale). Per-tensor scales go into alpha.
  ScaleMode scale() const { return scale_; }
  void set_scale(ScaleMode scale);
  // SM90 persistent tile schedulers: raster order and swizzle size (1, 2, 4 or 8); run-time only, no recompile.
  // max_swizzle_size 0 (the default) lets run() choose per problem: a swizzle for problems many clusters tall and
  // wide, where it pads no tile (catalog::choose_max_swizzle); 1 never swizzles.
  RasterOrder raster_order() const { return raster_order_; }
  void set_raster_order(RasterOrder order);
  int max_swizzle_size() const { return max_swizzle_size_; }
  void set_max_swizzle_size(int size);

  // Split-K and Stream-K on SM90 kernels: run-time arguments of the Stream-K tile scheduler, no recompile.
  // Decomposition::Auto (the default) lets run() choose per problem shape: split-K on a Stream-K kernel for a long K
  // over few output tiles (splits ~ SMs / tiles), else CUTLASS's heuristic; GEMMKIT_SPLIT_K=off turns the automatic
  // split-K off. set_split_k_slices(n > 1) splits every output tile's K extent into n slices, added up in the
  // launch's workspace before the epilogue (the reference's split_k_slices); 1 returns to Auto. set_decomposition
  // forces DataParallel, StreamK or CUTLASS's Heuristic (SplitK: use set_split_k_slices). A forced decomposition runs a
  // Stream-K kernel (the plan's tile must use the Stream-K scheduler if one is set). The reduction mode says whether
  // the slices add up in K order (bitwise reproducible) or as they finish. ConfigError on plans of CUTLASS 2.x
  // kernels.
  Decomposition decomposition() const { return decomposition_; }
  void set_decomposition(Decomposition mode);
  int split_k_slices() const { return splits_; }
  void set_split_k_slices(int slices);
  ReductionMode reduction_mode() const { return reduction_mode_; }
  void set_reduction_mode(ReductionMode mode);
  // The decomposition and split count run() passes the kernel it picks for these tensors (spec_for's); {DataParallel,
  // 1} when that kernel has no Stream-K scheduler. Nothing runs; no GPU needed.
  KSplit k_split_for(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D,
                     double beta = 0.0);

  // The kernel for the widest alignments (or the given ones): a plain value, no I/O. A tile given here is
  // validated and stored in the plan, as the reference does.
  KernelSpec construct(const std::optional<TileDescription>& tile = std::nullopt,
                       std::optional<int> alignment_a = std::nullopt, std::optional<int> alignment_b = std::nullopt,
                       std::optional<int> alignment_c = std::nullopt);
  // Like construct() without storing anything.
  KernelSpec spec(std::optional<int> alignment_a = std::nullopt, std::optional<int> alignment_b = std::nullopt,
                  std::optional<int> alignment_c = std::nullopt) const;
  std::string kernel_name() const { return spec().name(); }
  KernelSource render_source() const;

  // Generates and compiles the kernel (through the on-disk cache); needs nvcc, not a GPU.
  CompiledKernel compile(const std::optional<TileDescription>& tile = std::nullopt);

  // D = act(alpha * A@B + beta * C). Every tensor is checked first; on error nothing runs and D is untouched.
  // C may be null when beta == 0. Host tensors are staged through the GPU. An empty D (M, N or the batch 0) runs
  // nothing; K = 0 with a non-empty D is refused.
  // run() compiles only when the plan has no kernel built at all (loaded, or in the disk cache). When the shape would
  // do better with another configuration that is not built (e.g. Stream-K for a long K), run() launches a built one
  // and compiles the better one in the background; later runs use it once it is ready (see wait_for_background and
  // RunOptions::wait_for_best). A failed background compile is reported once on stderr; run() keeps its kernel.
  void run(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D, double alpha = 1.0,
           double beta = 0.0, const RunOptions& options = {});
  void run(const TensorView& A, const TensorView& B, const TensorView& C, const TensorView& D, double alpha = 1.0,
           double beta = 0.0, const RunOptions& options = {}) {
    run(A, B, &C, D, alpha, beta, options);
  }

  // Autotuning: compiles up to options.max_candidates of the plan's configurations in parallel, times each on these
  // device tensors (warm-up, median of rounds, CUDA events), checks its result against the kernel run() picked
  // before, and stores the fastest in the tuning database, which run() then uses for this plan and shape bucket in
  // every process. D is overwritten. A plan with a tile set has nothing to tune (ConfigError).
  TuneResult tune(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D,
                  const TuneOptions& options = {});
  // The kernels tune() would compile for these tensors, the heuristic's first (nothing runs; no GPU needed).
  std::vector<KernelSpec> tune_candidates(const TensorView& A, const TensorView& B, const TensorView* C,
                                          const TensorView& D, const TuneOptions& options = {});

  // The kernel run() would use for these tensors (same checks, nothing runs; no GPU needed).
  KernelSpec spec_for(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D,
                      double beta = 0.0);

  // The kernel run() would use for an m x n x k problem (a batch of `batch`) on packed device tensors of the plan's
  // types and layouts at cudaMalloc-aligned addresses: what to prebuild for a known shape without its tensors (FP8 on
  // a build machine, `gemmkit plan --m --n --k`, a pack line). Same checks as spec_for; no GPU needed.
  KernelSpec spec_for_problem(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch = 1);
  // Those stand-in tensors, A (m x k), B (k x n) and D (m x n): views of device memory that is never read, for
  // spec_for, k_split_for and max_swizzle_for without tensors.
  std::array<TensorView, 3> stand_in_tensors(std::int64_t m, std::int64_t n, std::int64_t k,
                                             std::int64_t batch = 1) const;
  // The scheduler swizzle run() passes the kernel it picks for these tensors: the plan's max_swizzle_size when set,
  // else catalog::choose_max_swizzle's for that kernel and shape; 0 for kernels without a persistent scheduler.
  int max_swizzle_for(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D,
                      double beta = 0.0);

  // The kernel run() launches for these tensors now: spec_for's when it is loaded, the one standing in for it while
  // it compiles in the background, or "" when run() has loaded neither yet. Nothing is loaded or compiled.
  std::string running_kernel_name(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D,
                                  double beta = 0.0);

  // The plan's kernel for the widest alignments and the other configurations run() picks for some shapes (e.g.
  // Stream-K for a long K): what a prebuilt pack holds for this plan, the default first. No I/O.
  std::vector<KernelSpec> run_time_kernels() const;

  // Blocks until every kernel run() chose to compile in the background is built (or failed); later runs use them.
  static void wait_for_background();
  KernelSpec spec_for(const TensorView& A, const TensorView& B, const TensorView& C, const TensorView& D,
                      double beta = 0.0) {
    return spec_for(A, B, &C, D, beta);
  }

 protected:
  // A plan for another operation than one GEMM (GroupedGemm): its own kernel families, the same configuration API.
  Gemm(const GemmOptions& options, catalog::Operation operation);

  struct RunCache;
  struct Problem;
  Problem check_problem(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D,
                        double beta);
  std::optional<detail::MatrixOperand> check_bias_operand(const TensorView* bias, const Problem& p) const;
  // The scale vectors the plan's ScaleMode asks for: row_scale (m) and column_scale (n), f32.
  std::pair<std::optional<detail::MatrixOperand>, std::optional<detail::MatrixOperand>> check_scale_operands(
      const RunOptions& options, const Problem& p) const;
  // The SMs a choice made without running is made for: the current GPU's, or without one the flagship GPU's of the
  // plan's cc (spec_for on a build machine).
  int sm_count_for_choice() const;
  struct KernelChoices;
  KernelChoices& choices_for(const Problem& p);
  // What run() launches for a problem: a configuration of the tensors' kernel choices and its decomposition, and
  // where parallel split-K replaces it, that kernel's choices, configuration and slice count.
  struct RunChoice {
    KernelChoices* choices;
    std::size_t index;
    KSplit split;
    KernelChoices* parallel;
    std::size_t parallel_index;
    int slices;
    // Launch the parallel kernel: its choices, configuration and split in place of the serial ones.
    void take_parallel() {
      choices = parallel;
      index = parallel_index;
      split = {Decomposition::SplitK, slices};
    }
  };
  RunChoice run_choice(const Problem& p, int sm_count);
  // The max_swizzle_size run() passes with choice `c` (max_swizzle_for).
  int swizzle_for(const RunChoice& c, const Problem& p) const;
  // run_choice without the tuning database: the shape heuristics and parallel split-K (run_choice keeps its answer
  // for the last problem).
  RunChoice heuristic_choice(KernelChoices& choices, const Problem& p, int sm_count);
  // Drops run_choice's remembered answers: for settings that change the choice but keep the loaded kernels.
  void forget_run_choices();
  // Whether run() may take parallel split-K for kernels like `base`: not with a tile, decomposition or Stream-K swizzle
  // set, GEMMKIT_SPLIT_K other than auto, or a family without it (SM90 only, f32 accumulation).
  bool may_split_k_in_parallel(const KernelSpec& base) const;
  // The parallel split-K kernels of these choices (made once), or nullptr where run() does not choose them (see
  // may_split_k_in_parallel; also a batch).
  KernelChoices* parallel_choices(KernelChoices& choices, const Problem& p);
  // The parallel kernel of `c` when it is built (or with `wait`, compiled here); else nullptr, its build started in
  // the background (`building` set while it runs; a failed build leaves it false: the serial choice from then on).
  KernelModule* parallel_module(const RunChoice& c, bool wait, bool& building);
  // While c's parallel kernel builds: a serial kernel already built (c's, else another configuration), never one
  // compiled for the meantime; with none built, the parallel kernel compiled here (and `c` switched to it).
  KernelModule& module_while_parallel_builds(RunChoice& c);
  // spec_for's checks and choice: run_choice's, the parallel kernel in place of the serial one where chosen.
  RunChoice choice_without_running(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D,
                                   double beta);
  RunChoice choice_without_running(const Problem& p);  // the same for a problem already checked
  // The module run() launches for `choice`: with `wait`, that one (compiled if needed); else see run().
  KernelModule& module_for(KernelChoices& choices, std::size_t choice, bool wait);
  // The configuration the plan or the shape picks: a set tile, a forced decomposition's Stream-K kernel, else the
  // shape heuristic (run_choice consults the tuning database after it).
  std::size_t choose_tile(const KernelChoices& choices, const Problem& p, int sm_count) const;
  // Whether a forced decomposition asks for the Stream-K kernel (the plan's swizzle does not already give it).
  bool forces_stream_k_kernel() const;
  // The decomposition run() passes configuration `choice` for this problem.
  KSplit k_split(const KernelChoices& choices, std::size_t choice, const Problem& p, int sm_count) const;
  // Throws ConfigError when the split-K settings do not apply to `spec` (a plan's kernel without a tile: its family).
  void check_k_split_settings(const KernelSpec& spec) const;
  void invalidate();
  // tune()'s candidates for a checked problem: indices into choices.tiles, the heuristic's first.
  std::vector<std::size_t> tuning_indices(const KernelChoices& choices, const Problem& p, int sm_count,
                                          const TuneOptions& options) const;
  // A plan like this one with `tile` set: its run() launches exactly that configuration.
  Gemm with_tile(const TileDescription& tile) const;
  // Sets one configuration field, keeps it only if the plan still validates, and drops stale kernels.
  template <class Field>
  void change_checked(Field& field, Field value);
  KernelSpec base_spec(std::optional<int> alignment_a, std::optional<int> alignment_b,
                       std::optional<int> alignment_c) const;
  // What a derived plan adds to every spec of its own (a Conv2d's kind and iterators); base_spec() calls it last.
  virtual void complete_spec(KernelSpec&) const {}
  std::vector<TileDescription> valid_tiles(const KernelSpec& base) const;

  // The GPU and the requested kernel generation, as the catalog takes them.
  catalog::Target target() const;

  // Whether a problem no vector of the plan's kernels fits may run on the CUTLASS 2.x SIMT kernels instead: a GEMM
  // plan whose opclass, tile, math operation and SM90-only settings were left to gemmkit, for types SIMT computes.
  bool may_take_scalar_kernels() const;
  // The plan that runs this problem: this one, or (may_take_scalar_kernels) its SIMT twin, made on first use with this
  // plan's epilogue and kept until the next change; throws this plan's error when neither takes the problem.
  Gemm& plan_for(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D, double beta);

  // Throws ConfigError when the plan computes another operation than `operation` (e.g. Gemm::run on a grouped plan).
  void require_operation(catalog::Operation operation, const char* what) const;

  catalog::Operation operation_;
  int cc_ = 0;
  std::optional<int> kernel_cc_;  // as requested (GemmOptions::kernel_cc); the plan's is kernel_cc()
  struct Types {
    DataType a, b, c, d, accumulator;
    Layout layout_a, layout_b, layout_c;
  } types_;
  OpClass opclass_ = OpClass::TensorOp;
  bool opclass_pinned_ = false;  // set_opclass was called: the plan keeps to that opclass
  std::optional<TileDescription> tile_;
  std::optional<MathOperation> math_operation_;
  bool kernel_cc_for_math_ = false;  // kernel_cc_ was set to 80 by set_math_operation, not by the options
  Swizzle swizzle_ = Swizzle::Identity1;
  Activation activation_ = Activation::Identity;
  double activation_parameter_ = 0.01;
  BiasMode bias_ = BiasMode::None;
  ScaleMode scale_ = ScaleMode::None;
  RasterOrder raster_order_ = RasterOrder::Heuristic;
  int max_swizzle_size_ = 0;  // 0: run() chooses
  Decomposition decomposition_ = Decomposition::Auto;
  int splits_ = 1;
  ReductionMode reduction_mode_ = ReductionMode::Deterministic;
  std::unique_ptr<RunCache> run_cache_;
};

}  // namespace gemmkit
