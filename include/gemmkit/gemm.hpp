// include/gemmkit/gemm.hpp: Gemm, the user-facing plan: declare a GEMM in a few words, compile it, run it.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gemmkit/epilogue.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/kernel_spec.hpp"
#include "gemmkit/plan.hpp"
#include "gemmkit/results.hpp"
#include "gemmkit/tensor.hpp"
#include "gemmkit/types.hpp"

namespace gemmkit {

// A plan. Its run() (and spec_for) may be called from many threads at once, each on its own stream or on the same
// one; launches in flight never share a workspace, and run() can be captured into a CUDA graph (device tensors).
// Changing the configuration (set_*, construct with a tile, compile with a tile) while another thread runs the
// plan is not supported.
class Gemm : public Plan {
 public:
  explicit Gemm(const GemmOptions& options);
  ~Gemm() override;
  Gemm(Gemm&&) noexcept;
  Gemm& operator=(Gemm&&) noexcept;

  // A bias vector added before the activation: D = act(alpha*A@B + beta*C + bias), per output row or column.
  BiasMode bias() const;
  void set_bias(BiasMode bias);

  // Whether the plan's SM90 kernels on CUTLASS's epilogues take a fused activation at launch: one kernel then serves
  // every activation (set_activation builds nothing new), the activation computed as a kernel that compiles it in
  // computes it. The default is GEMMKIT_ACTIVATION_AT_LAUNCH's (on) for 16- and 32-bit operands, off for FP8.
  // Elsewhere (SM80 kernels, visitor trees, the identity's plain linear combination, parallel split-K) the activation
  // stays compiled in; KernelSpec says which.
  bool activation_at_launch() const;
  void set_activation_at_launch(bool at_launch);

  // Scale vectors (SM90 kernels; f32): D = act(alpha * (acc * row_scale[i] * column_scale[j]) + beta * C + bias),
  // with the vectors given to run() (RunOptions::row_scale / column_scale). Per-tensor scales go into alpha.
  ScaleMode scale() const;
  void set_scale(ScaleMode scale);
  // Block scales applied in the FP8 mainloop (SM90 kernels, e4m3 / e5m2 A and B): Blockwise multiplies each 128-deep
  // K block's products by A's scale of the row and B's scale of the 128 x 128 block (the DeepSeek-V3 format), with
  // the scales given to run() (RunOptions::scale_a / scale_b). It replaces the scale vectors; alpha, beta, the bias
  // and the activation still apply. ConfigError on plans whose kernels have no block-scaled mainloop.
  BlockScaling block_scaling() const;
  void set_block_scaling(BlockScaling scaling);
  // An epilogue visitor tree (SM90 and CUTLASS 2.x tensor-op kernels): D and every extra output come from the tree,
  // which replaces alpha/beta, the bias, the scales and the activation (they must stay at their defaults). Its
  // tensors and scalars are given to run() by name (RunOptions::visitor_args); tensor types left unset are C's for
  // inputs, D's for stores and f32 for reductions. ConfigError when the plan's kernels cannot take it.
  // A tree of the plain form act(alpha * (acc * row_scale * column_scale) + beta * C + bias) (epilogue::plain_epilogue
  // builds one; any names and order) runs on the fused kernel the same settings build: the same kernel, the same
  // speed, also on kernels without visitor support; bias(), scale() and activation() then report the tree's.
  const std::optional<epilogue::Epilogue>& epilogue_visitor() const;
  void set_epilogue_visitor(std::optional<epilogue::Epilogue> tree);
  // The plan's epilogue as a tree: the visitor tree, else plain_epilogue of its activation, bias and scales.
  epilogue::Epilogue epilogue() const;

  // SM90 persistent tile schedulers: raster order and swizzle size (1, 2, 4 or 8); run-time only, no recompile.
  // max_swizzle_size 0 (the default) lets run() choose per problem: a swizzle for problems many clusters tall and
  // wide, where it pads no tile (catalog::choose_max_swizzle); 1 never swizzles.
  RasterOrder raster_order() const;
  void set_raster_order(RasterOrder order);
  int max_swizzle_size() const;
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
  Decomposition decomposition() const;
  void set_decomposition(Decomposition mode);
  int split_k_slices() const;
  void set_split_k_slices(int slices);
  ReductionMode reduction_mode() const;
  void set_reduction_mode(ReductionMode mode);
  // The decomposition and split count run() passes the kernel it picks for these tensors (spec_for's); {DataParallel,
  // 1} when that kernel has no Stream-K scheduler. Nothing runs; no GPU needed.
  KSplit k_split_for(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D,
                     double beta = 0.0);

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

  KernelSpec spec_for(const TensorView& A, const TensorView& B, const TensorView& C, const TensorView& D,
                      double beta = 0.0) {
    return spec_for(A, B, &C, D, beta);
  }

 private:
  // A plan on another plan's configuration (tune()'s candidates: a copy with a tile set).
  explicit Gemm(std::unique_ptr<selection::PlanCore> core);
  // Whether a problem no vector of the plan's kernels fits may run on CUTLASS 2.x kernels that load its operands
  // element by element instead (tensor-op for f16 and bf16, else SIMT): a plan whose opclass, tile, math operation and
  // SM90-only settings were left to gemmkit, for types SIMT computes.
  bool may_take_scalar_kernels() const;
  // The plan that runs this problem: this one, or (may_take_scalar_kernels) its twin of scalar loads; throws this
  // plan's error when neither takes the problem.
  Gemm& plan_for(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D, double beta);

  // A plain-form tree's own visitor kernel, for vectors the fused kernel cannot take (one per batch).
  Gemm& tree_twin();

  // The CUTLASS 2.x SIMT plan for problems none of this plan's vectors fit (odd leading dimensions), made on first
  // use with this plan's epilogue, and the tree twin; stale once the configuration changes (its generation).
  struct Twin;
  std::unique_ptr<Twin> twin_;
};

}  // namespace gemmkit
