// src/catalog/catalog.hpp: which kernel families each architecture uses (the registry), what they offer a plan, and
// the problem-shape heuristic that picks a configuration at run time. Pure data and functions: no I/O, no CUDA.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "families/family.hpp"

namespace gemmkit::catalog {

using families::DeviceLimits;
using families::Family;
using families::OperandTypes;

// What a plan computes: one (batched) GEMM, many GEMMs of different extents in one launch, or a 2-D convolution
// (its kind, fprop / dgrad / wgrad, is in the kernel spec).
enum class Operation { Gemm, GroupedGemm, Conv2d };

// The GPU a plan builds for (cc), the operation and, when the plan asks for one, the kernel generation (kernel_cc: 80
// for CUTLASS 2.x kernels, 90 for 3.x); without one the best family for cc is used.
struct Target {
  Target(int cc, std::optional<int> kernel_cc = std::nullopt, Operation operation = Operation::Gemm)
      : cc(cc), kernel_cc(kernel_cc), operation(operation) {}
  int cc;
  std::optional<int> kernel_cc;
  Operation operation;
};

// The opt-in shared memory and SM count of the flagship GPU of a compute capability.
DeviceLimits limits_for_cc(int cc);

// The family that renders specs of `id`.
const Family& family_of(KernelFamily id);
// The index into `tiles` (a plan's configurations) of `spec`'s quick twin (its family's), or nullopt when it has none
// or the list lacks it.
std::optional<std::size_t> quick_twin_index(const std::vector<TileDescription>& tiles, const KernelSpec& spec);
// The family a plan uses: the first of the target's families (newest first) that supports the operands.
// Throws ConfigError when none does.
const Family& family_for(const Target& target, OpClass opclass, const OperandTypes& types);
int kernel_cc_for(const Target& target, OpClass opclass, const OperandTypes& types);

// Opclasses with kernels for these types/layouts on the target, TensorOp first. Empty: no kernel at all.
std::vector<OpClass> supported_opclasses(const Target& target, const OperandTypes& types);

// The types and layouts nearest to `types` that have a kernel on the target: the fewest fields changed (at most
// three), preferring the accumulator, then C, D, B, A and the layouts. nullopt when none is that near.
std::optional<OperandTypes> nearest_supported(const Target& target, const OperandTypes& types);

// Vector widths (elements) the plan's family accepts for an operand, widest first.
std::vector<int> operand_alignments(const Target& target, OpClass opclass, DataType element, const OperandTypes& types);

// Every configuration of the plan's family, the default first; no duplicates. Alignments 0 mean the widest; narrower
// A/B alignments on SM90 give the cp.async configurations (TMA needs 16-byte aligned rows).
std::vector<TileDescription> tile_descriptions(const Target& target, OpClass opclass, const OperandTypes& types,
                                               const DeviceLimits& limits, int alignment_a = 0, int alignment_b = 0);

// Stamps a configuration with the instruction it issues for these operands (TileDescription::math_instruction).
void describe_instruction(TileDescription& td, OpClass opclass, const OperandTypes& types);
// The math operations the target's family offers for these operands, in the order its configurations list them
// (the default's first).
std::vector<MathOperation> math_operations(const Target& target, OpClass opclass, const OperandTypes& types,
                                           const DeviceLimits& limits);
// Checks every rule of the spec's family (families/); throws ConfigError naming the rule and the numbers.
void validate(const KernelSpec& spec, const DeviceLimits& limits);

// A GEMM's extent as the kernel sees it.
struct ProblemShape {
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
};

// The configuration (index into `tiles`, all valid for `spec`) to run this problem with when the plan has none:
// - a problem that fills the GPU keeps the default (index 0), unless its last wave is mostly idle (Stream-K);
// - a decode-like problem (M <= 64 rows against a large B) takes split-K on the smallest Stream-K tile when the
//   64-row tiles (at least 128 wide) would leave most SMs idle and K is long, else the 64-row tile (cluster 1x1) of
//   least estimated time;
// - other problems under a GFLOP keep the default (one compiled kernel serves them all);
// - few output tiles and a long K: 64 x 64 tiles when one wave of them covers at least 3/4 of the SMs, else the
//   smallest Stream-K tile (split-K, see choose_k_split);
// - otherwise the tile that minimises an estimated time (waves x tile area / tile efficiency).
// These weigh the collective builders' mainloops; the pick then runs on the family's own mainloop for that tile where
// the list holds one (Family::own_mainloop_twin: FP8's overlapped promotion).
// `split_k` false (GEMMKIT_SPLIT_K=off) never chooses for split-K: long K takes Stream-K only when K >= 8 max(M, N)
// (CUTLASS's own decomposition), decode-like problems the 64-row tile.
std::size_t choose_tile(const std::vector<TileDescription>& tiles, const KernelSpec& spec, const ProblemShape& shape,
                        int sm_count, bool split_k = true);

// For a problem on a CUTLASS 2.x kernel whose mainloop loads A or B element by element (the two-stage one), where the
// data-parallel pick `data_parallel` makes at most one wave of output tiles over at least kStreamKMinKSteps of its K
// steps on a problem of at least a GFLOP: the Stream-K configuration to run instead (index into `tiles`, the Stream-K
// kernels' configurations), the largest tile whose K iterations give every SM at least kStreamKMinStepsPerSm of them;
// tiles.size() for other problems, or where no tile does. Such a kernel holds one CTA of four or eight warps per SM,
// each waiting on its loads; Stream-K puts CTAs sharing the tiles' K loops on every SM. On an H100 the largest such
// tile ran best (777 x 1999 x 3001: 256 x 128, 64 tiles, 0.99-1.12x torch.matmul against 0.84-0.95x data-parallel;
// 1001^3: 128 x 128, 15 steps per SM, 0.93-0.97x against 0.90-0.95x, where 256 x 128's 7.6 steps ran 0.70-0.74x).
inline constexpr std::int64_t kStreamKMinKSteps = 16;
inline constexpr double kStreamKMinStepsPerSm = 12;
std::size_t choose_stream_k_one_wave(const TileDescription& data_parallel, const std::vector<TileDescription>& tiles,
                                     const ProblemShape& shape, int sm_count);

// Split-K for a problem with few output tiles of `tile` (at most half the SMs) and a K long enough for every split
// to get at least kMinKTilesPerSplit of the tile's K steps (shorter splits spend more on their fill and the partial
// sums than they save): splits ~ sm_count / tiles, at most kMaxSplits. Otherwise
// CUTLASS's heuristic (Stream-K for a quantized last wave, data-parallel for many tiles).
inline constexpr int kMinKTilesPerSplit = 16;
inline constexpr int kMaxSplits = 16;
KSplit choose_k_split(const TileDescription& tile, const ProblemShape& shape, int sm_count);

// The SM90 persistent scheduler's max_swizzle_size for a problem on `tile` when the plan sets none: 8, 4 or 2 where
// the problem is at least kSwizzleMinClusters clusters tall and wide, so that a wave of tiles in CUTLASS's row order
// would span one of its extents (and stream that operand from memory again every wave), and where the swizzle pads
// no tile: CUTLASS rounds the tile counts up to the swizzle times the cluster, and a padded tile costs a full
// mainloop (swizzle 8 at M = 1024 on 256-row cluster tiles doubles the tiles to run). Else 1.
inline constexpr std::int64_t kSwizzleMinClusters = 24;
int choose_max_swizzle(const TileDescription& tile, const ProblemShape& shape);

// Decode-sized problems: at most kDecodeColumns rows (the tokens) against a B of at least 16M elements (the weights),
// which the GPU spends its time reading. run() computes them as D^T = B^T A^T, the tokens in the columns of a narrow
// tile, as cuBLAS does (docs/performance.md, "Decode shapes").
inline constexpr std::int64_t kDecodeColumns = 16;
bool transposes_for_decode(const ProblemShape& shape);
// For such a problem's transposed shape (`transposed`: M the weights' rows, N the tokens): the narrow tile of
// `tiles` (index; a plan of the transposed layouts' listing) that covers N in one tile, in clusters of four along M
// when those take at most half the SMs (64 tiles of 64 rows: 1.06-1.12× cuBLAS, against 0.63-0.95× without a
// cluster and 0.79-0.91× in pairs), else in pairs (128 tiles in fours ran 16 % slower than in pairs);
// tiles.size() when none fits or when its tiles would leave more than half the SMs idle (split-K does better there).
std::size_t choose_decode_tile(const std::vector<TileDescription>& tiles, const ProblemShape& transposed, int sm_count);

// The MoE form's configuration (index into `tiles`, the configurations of `base`'s plan) for an N and the rows an
// expert gets on average: on SM90 grouped plans of 16-bit operands that set no tile, 128 x 256 tiles where N is a
// multiple of 256, else 256 x 128 where the experts average 256 rows or more; else 0 (the default). Each halves the
// passes over one operand: 128 x 128 tiles read the tokens' rows once per 128 columns and each expert's weights once
// per 128 rows, and on an H100 the 256-expert skewed case read 20.7 GB from DRAM for 7.5 GB of weights (1.07-1.71×
// torch._grouped_mm against 0.66-1.02× on the skewed and sparse cases, docs/performance.md). At N = 1408, five and a
// half 256-wide tiles, 128 x 256 read 0.85× on an H200 (64 experts, even split); 256 x 128 read 1.13× / 0.98× there
// (8 / 64 experts; 128 x 128 0.98× / 1.03×) and 0.97-1.29× on an H100 over three splits (128 x 128 0.86-1.12×).
std::size_t choose_contiguous_tile(const KernelSpec& base, const std::vector<TileDescription>& tiles, std::int64_t n,
                                   std::int64_t rows_per_group);
// Where choose_contiguous_tile takes 256 x 128 (`chosen`, its result; N not a multiple of 256), the average hides what
// decides: the split. Its rival, 128 x 256 (index; 0 for none), is launched beside it, and the GPU runs whichever needs
// fewer waves of tiles on the group sizes it reads (abi.h, gk_grouped_contiguous::transposed_rival). At N = 1408 on an
// H200 the tile of fewer waves was the faster on each of the four splits where the counts differed, by 7-30 % (64
// experts: 256 x 128 1.08× torch._grouped_mm even, 0.98× skewed; 128 x 256 1.01× / 1.25×); on ties the two were
// within 2.1 %. The pair costs two launches (a derivation and the loser's empty GEMM): where experts average 1024 rows
// or more it is not launched, since at 1024 (8 experts, 8192 tokens) the pair read 6-12 % under 256 x 128 alone on
// all three splits of two H100 runs, where at 512 (64 experts) it lifted the skewed split from 0.89-0.96× to 1.03×.
std::size_t choose_contiguous_rival(const std::vector<TileDescription>& tiles, std::size_t chosen, std::int64_t n,
                                    std::int64_t rows_per_group);

// The smallest Stream-K CTA tile of `tiles` (most work units), preferring a cluster that covers no tile outside the
// problem; tiles.size() when there is none.
std::size_t smallest_stream_k(const std::vector<TileDescription>& tiles, const ProblemShape& shape);

// Split-K slices for a problem whose output has `output_tiles` CTA tiles and whose reduction takes `k_iterations`
// steps of the tile's K (Conv2d's default for wgrad, whose implicit GEMM is a small output over a long K = N*P*Q):
// 1 when the output alone fills a wave of `sm_count` CTAs; otherwise enough slices for kSplitKWaves waves of CTAs,
// each slice keeping at least kMinSplitKIterations steps (the mainloop's pipeline fill amortised), at most
// kMaxSplitKSlices (the grid's z extent). A function of its arguments alone (deterministic).
inline constexpr int kSplitKWaves = 4;
inline constexpr int kMinSplitKIterations = 8;
inline constexpr int kMaxSplitKSlices = 65535;
int choose_split_k(std::int64_t output_tiles, std::int64_t k_iterations, int sm_count);

// For a problem that may be split along K: the configuration (index into `tiles`) and its choose_split_k slices
// with the lowest estimated time, waves x tile area / tile efficiency x steps of K per slice, among the entries of
// the default's kernel schedule and cluster shape (no Stream-K); a clear win only, else the earlier entry. Small
// outputs take small tiles here (a 64 x 64 wgrad output on a 256 x 128 tile would compute 8 times its work). The
// slices are also capped so that their partial sums (f32, written and read) move no more bytes than the 16-bit
// operands do: (m + n) k / (4 m n).
struct SplitChoice {
  std::size_t tile = 0;
  int slices = 1;
};
SplitChoice choose_split_k_tile(const std::vector<TileDescription>& tiles, const ProblemShape& shape, int sm_count);

// Parallel split-K on SM90 (KernelSpec::split_k_mode Parallel): K cut into `slices` equal parts, each a batch entry
// of f32 partial sums, added by a reduction kernel that applies the epilogue. For a problem run() would split along
// K: the configuration (index into `tiles`, the parallel kernels' valid ones; cluster 1x1, automatic schedules) and
// slice count of least estimated time, the GEMM's (one wave at most: tiles x slices <= sm_count; time ~ tile area x
// K / slices / tile efficiency) plus the partial sums' traffic (slices x m x n x 8 bytes). Each slice is a multiple of
// `k_granule` elements (16-byte aligned slice starts) and at least kMinParallelKSteps of the tile's K steps. nullopt
// when no slice count of 2..kMaxSplits fits. The model's constants are fitted so that its picks at 512x512x16384,
// 128x4096x4096 and 128x4096x14336 are the configurations that ran fastest there. As choose_tile, the pick then runs
// on the family's own mainloop for that tile where `tiles` (valid for `spec`) holds one.
inline constexpr int kMinParallelKSteps = 8;
std::optional<SplitChoice> choose_parallel_split(const std::vector<TileDescription>& tiles, const KernelSpec& spec,
                                                 const ProblemShape& shape, int sm_count, int k_granule);

// A configuration's time on a problem, in arbitrary units (only ratios mean anything): data-parallel, waves x tile
// area / tile efficiency; a Stream-K kernel launched to share K out (`decomposition` other than DataParallel), the
// work spread evenly over the SMs (plus 10 % for its fix-up).
double estimated_time(const TileDescription& td, const ProblemShape& shape, int sm_count,
                      Decomposition decomposition = Decomposition::Heuristic);

// Up to `max` configurations (indices into `tiles`) worth timing for this problem, for autotuning: choose_tile's pick
// and the default first, then by estimated_time, taking a variety of CTA shapes first, then clusters and schedules.
std::vector<std::size_t> tuning_candidates(const std::vector<TileDescription>& tiles, const KernelSpec& spec,
                                           const ProblemShape& shape, int sm_count, std::size_t max);

}  // namespace gemmkit::catalog
