// src/families/sm90_collective.cpp: the Sm90Collective family: CUTLASS 3.x GEMMs from the collective builders (TMA or
// cp.async mainloops, warp-specialized), rendered from templates/sm90_gemm.cu.in with the glue of
// device/include/gemmkit/sm90_gemm.hpp.
#include <algorithm>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "families/rules.hpp"
#include "families/visitor_render.hpp"
#include "gemmkit/errors.hpp"
#include "util/knobs.hpp"

namespace gemmkit::families {
namespace {

struct Cta {
  int m, n;
};

// CTA tiles (M x N) of the SM90 table; K depth depends on the element width (128 bytes). FP8's default is 128 x 192,
// its widest tile (fp8_promotion_fits says why): each promotion waits for the tensor cores to drain, and a wider tile
// does more work per wait; the shape heuristics take 128 x 128 where it fills the waves better. The others have
// 128 x 192 last, with 128 x 64 (cuBLAS's tile for one wave of mid-size squares) and 64 x 64 (one wave of few rows
// over a long K: M = 128 against N = 4096), so that their ties keep the older tiles.
const std::vector<Cta> kCtas = {{128, 256}, {256, 128}, {128, 128}, {64, 256},
                                {64, 128},  {128, 192}, {128, 64},  {64, 64}};
const std::vector<Cta> kFp8Ctas = {{128, 192}, {128, 256}, {256, 128}, {128, 128}, {64, 256}, {64, 128}};
const std::vector<Shape3> kClusters = {{2, 1, 1}, {1, 2, 1}, {1, 1, 1}};

int tile_k(DataType a) {
  return 128 * 8 / bits_of(a);
}

// A table CTA tile in a cluster, 128 bytes deep: the TileDescription every listing starts from (schedules Auto).
TileDescription cluster_tile(const Cta& cta, const Shape3& cluster, DataType a) {
  TileDescription td;
  td.cluster_shape = cluster;
  td.threadblock_shape = {cta.m * cluster[0], cta.n * cluster[1], tile_k(a)};
  td.warp_count = {4, 1, 1};
  return td;
}

// Whether the mainloop is a cooperative kernel; Auto resolves as CUTLASS 4.2's builder does (and as
// gemmkit::sm90::is_cooperative does for the generated source): TMA when A and B move 16-byte rows, then
// cooperative unless the CTA M is 64.
bool is_cooperative(const KernelSpec& spec) {
  switch (spec.tile.kernel_schedule) {
    case KernelSchedule::TmaWarpSpecializedCooperative:
    case KernelSchedule::TmaWarpSpecializedCooperativeSplitN:
    case KernelSchedule::TmaWarpSpecializedCooperativeFP8Overlap:
    case KernelSchedule::TmaWarpSpecializedCooperativeFP8AlternatingPromotion:
    case KernelSchedule::CpAsyncWarpSpecializedCooperative: return true;
    case KernelSchedule::Auto:
      return moves_16_byte_rows(spec.alignment_a, spec.element_a) &&
             moves_16_byte_rows(spec.alignment_b, spec.element_b) && spec.tile.cta_tile()[0] != 64;
    default: return false;
  }
}

// The overlapped FP8 mainloops: the class the template wraps around the builder's collective, the TMA epilogue listed
// with it and its CTA tiles, 64 rows per warp group (one GMMA atom; the cooperative kernel's two warp groups split 128)
// and 128 deep (one promotion per K tile). Column halves need each half to be a GMMA atom and the accumulators and
// one set of partials to fit in registers (fp8_accumulators_fit); alternating K tiles hold two sets of partials.
struct OverlapTiles {
  KernelSchedule schedule;
  std::string_view mainloop;
  EpilogueSchedule epilogue;
  std::vector<Cta> ctas;
};
const std::vector<OverlapTiles> kFp8OverlapTiles = {
    {KernelSchedule::TmaWarpSpecializedCooperativeFP8Overlap,
     "gemmkit::sm90::Fp8OverlappedPromotion",
     EpilogueSchedule::TmaWarpSpecializedCooperative,
     {{128, 192}, {128, 128}}},
    {KernelSchedule::TmaWarpSpecializedPingpongFP8Overlap,
     "gemmkit::sm90::Fp8OverlappedPromotion",
     EpilogueSchedule::TmaWarpSpecialized,
     {{64, 192}, {64, 128}}},
    {KernelSchedule::TmaWarpSpecializedCooperativeFP8AlternatingPromotion,
     "gemmkit::sm90::Fp8AlternatingPromotion",
     EpilogueSchedule::TmaWarpSpecializedCooperative,
     {{128, 128}}},
    {KernelSchedule::TmaWarpSpecializedPingpongFP8AlternatingPromotion,
     "gemmkit::sm90::Fp8AlternatingPromotion",
     EpilogueSchedule::TmaWarpSpecialized,
     {{64, 128}}},
};

// Where the heuristics run gemmkit's loop in place of CUTLASS's on the same CTA tile (always the builder's automatic
// schedule, TMA epilogue, data-parallel): 1.10x its speed over the FP8 benchmark's shapes, none measurably slower
// (docs/fp8.md). Column halves on 128 x 192 (the alternating loop needs registers for three sets of it), alternating K
// tiles where a warp group's tile is 64 x 128 (no second read of A, so it beats the halves there).
const std::vector<std::pair<Cta, KernelSchedule>> kFp8OwnLoopInPlace = {
    {{128, 192}, KernelSchedule::TmaWarpSpecializedCooperativeFP8Overlap},
    {{128, 128}, KernelSchedule::TmaWarpSpecializedCooperativeFP8AlternatingPromotion},
    {{64, 128}, KernelSchedule::TmaWarpSpecializedPingpongFP8AlternatingPromotion},
};

// Whether the FP8 mainloop is one of gemmkit's, whose promotion overlaps the GMMAs (sm90_fp8_overlap.hpp), in
// CUTLASS's cooperative or ping-pong kernel.
bool overlaps_promotion(KernelSchedule k) {
  return std::any_of(kFp8OverlapTiles.begin(), kFp8OverlapTiles.end(),
                     [&](const OverlapTiles& t) { return t.schedule == k; });
}

bool is_tma_schedule(KernelSchedule k) {
  return k == KernelSchedule::TmaWarpSpecialized || k == KernelSchedule::TmaWarpSpecializedPingpong ||
         k == KernelSchedule::TmaWarpSpecializedCooperative ||
         k == KernelSchedule::TmaWarpSpecializedCooperativeSplitN || overlaps_promotion(k);
}

// Whether the cooperative kernel's warp groups split the tile along N (sm90_split_n.hpp).
bool splits_n(const KernelSpec& spec) {
  return spec.tile.kernel_schedule == KernelSchedule::TmaWarpSpecializedCooperativeSplitN;
}

// CTA tiles of the N-split kernels: 192 rows, and each warp group's half of the columns one GMMA atom wide.
constexpr int kSplitNRows = 192;
const std::vector<int> kSplitNColumns = {128, 160, 192};

// Narrow tiles for a few columns: what decode-sized problems (at most 16 rows) run as D^T = B^T A^T, the weights'
// rows in 64-row ping-pong tiles and the tokens in the 16 columns, in clusters of up to four along M that share the
// tokens' loads (catalog::choose_decode_tile picks one).
constexpr Cta kNarrowCta = {64, 16};
const std::vector<int> kNarrowClusterRows = {1, 2, 4};

// The N-split kernel's operands, one rule for its listing and its validation: 16-bit A and B with an f32
// accumulator, and a row-major 16-bit D with C of D's type (or none).
bool split_n_inputs(const OperandTypes& t) {
  return is_half(t.a) && t.b == t.a && t.accumulator == DataType::f32;
}
bool split_n_output(const OperandTypes& t) {
  return bits_of(t.d) == 16 && (t.c == DataType::void_t || t.c == t.d) && t.layout_c == Layout::RowMajor;
}

bool has_fused_epilogue(const KernelSpec& spec) {
  return spec.activation != Activation::Identity || spec.activation_at_launch || spec.bias != BiasMode::None ||
         spec.scale != ScaleMode::None;
}

// C's element, or D's when there is no C: what the TMA epilogue moves, and the bias vector's element.
DataType element_c_or_d(const KernelSpec& spec) {
  return operand_types_of(spec).c;
}

// Whether the kernel runs gemmkit's lean epilogue (device/include/gemmkit/sm90_lean_epilogue.hpp), which takes the
// activation, bias and scale vectors at launch: the Lean epilogue schedule (check_lean says where it applies).
bool lean_epilogue(const KernelSpec& spec) {
  return spec.tile.epilogue_schedule == EpilogueSchedule::Lean;
}

// Where the lean epilogue applies: a dense GEMM (no visitor tree, no parallel split-K) whose row-major C and D move
// 16-byte rows, whose D is 16 or 32 bits wide and whose CTA tile N is a multiple of 32.
void check_lean(const KernelSpec& spec) {
  if (!lean_epilogue(spec)) return;
  if (spec.visitor)
    fail("the Lean epilogue schedule takes no epilogue visitor tree; use TmaWarpSpecialized(Cooperative).");
  if (spec.split_k_mode == SplitKMode::Parallel) {
    fail("the Lean epilogue schedule has no parallel split-K kernel; use the Default tile scheduler without it.");
  }
  if (spec.layout_c != Layout::RowMajor)
    fail("the Lean epilogue schedule stores a row-major D; C and D are column-major.");
  const int d_bits = bits_of(spec.element_d);
  if (d_bits != 16 && d_bits != 32) {
    fail("the Lean epilogue schedule stores D of 16 or 32 bits; D is " + std::string(to_string(spec.element_d)) + ".");
  }
  if (!moves_16_byte_rows(spec.alignment_c, element_c_or_d(spec)) ||
      output_alignment(spec.element_c, spec.element_d, spec.alignment_c) * d_bits != 128) {
    fail("the Lean epilogue schedule moves C and D in 16-byte vectors; their alignment is " +
         std::to_string(spec.alignment_c) + ". Pad the leading dimension or use another epilogue schedule.");
  }
  if (spec.tile.cta_tile()[1] % 32 != 0) {
    fail("the Lean epilogue schedule needs a CTA tile N that is a multiple of 32; it is " +
         shape_text(spec.tile.cta_tile()) + ".");
  }
}

// Where an activation taken at launch applies: CUTLASS's fusions (and the lean epilogue, which takes every activation
// at launch anyway); a parallel split-K kernel applies its activation in its reduction, which compiles it in.
void check_activation_at_launch(const KernelSpec& spec) {
  if (!spec.activation_at_launch) return;
  if (spec.split_k_mode == SplitKMode::Parallel) {
    fail("a parallel split-K kernel compiles its activation into its reduction; take activation_at_launch off.");
  }
}

// Where the N-split cooperative kernel is assembled: 16-bit A and B on TMA with f32 accumulation, a CTA tile of 192 x
// {128, 160, 192} x 64 in a 1x1x1 cluster on the Default tile scheduler, and CUTLASS's TMA epilogue storing a row-major
// 16-bit D (and C of D's type). Stream-K, split-K, the lean epilogue, visitor trees and clusters have no such kernel
// here; the layout algebra of its epilogue was checked on the host for these tiles only.
void check_split_n(const KernelSpec& spec) {
  if (!splits_n(spec)) return;
  const auto refuse = [&](const std::string& why) {
    fail("Kernel schedule TmaWarpSpecializedCooperativeSplitN " + why);
  };
  const OperandTypes types = operand_types_of(spec);
  if (!split_n_inputs(types)) refuse("takes f16 or bf16 A and B with an f32 accumulator.");
  if (!split_n_output(types)) refuse("stores a row-major 16-bit D (and reads C of D's type).");
  const Shape3 cta = spec.tile.cta_tile();
  if (cta[0] != kSplitNRows || cta[2] != 64 ||
      std::find(kSplitNColumns.begin(), kSplitNColumns.end(), cta[1]) == kSplitNColumns.end()) {
    refuse("has CTA tiles of 192 x 128, 192 x 160 or 192 x 192 x 64; the tile is " + shape_text(cta) + ".");
  }
  if (spec.tile.cluster_shape != Shape3{1, 1, 1}) refuse("runs in 1x1x1 clusters.");
  if (uses_stream_k(spec) || spec.split_k_mode == SplitKMode::Parallel) {
    refuse("runs on the Default tile scheduler (no Stream-K or split-K).");
  }
  if (spec.visitor) refuse("takes no epilogue visitor tree.");
  const EpilogueSchedule e = spec.tile.epilogue_schedule;
  if (e != EpilogueSchedule::TmaWarpSpecializedCooperative) {
    refuse("stores D with the TmaWarpSpecializedCooperative epilogue; got " + std::string(to_string(e)) + ".");
  }
}

bool blockwise(const KernelSpec& spec) {
  return spec.block_scaling == BlockScaling::Blockwise;
}

bool fast_accumulation(const KernelSpec& spec) {
  return spec.tile.math_operation == MathOperation::MultiplyAddFastAccum;
}

// FP8 fast accumulation (CUTLASS's FP8FastAccum kernel schedules): TMA mainloops on FP8 operands, on CUTLASS's
// epilogues or the lean one; not with block scales (their promotion is the point) or a visitor tree.
void check_fast_accumulation(const KernelSpec& spec) {
  if (!fast_accumulation(spec)) return;
  if (!is_fp8(spec.element_a)) {
    fail("Math operation multiply_add_fast_accum is FP8's (e4m3 / e5m2 A and B); A is " +
         std::string(to_string(spec.element_a)) + ". Leave math_operation unset.");
  }
  if (spec.block_scaling != BlockScaling::None || spec.visitor) {
    fail(
        "multiply_add_fast_accum takes no block scales and no epilogue visitor tree (block scales are applied at "
        "each promotion, which fast accumulation skips); leave math_operation unset.");
  }
  const KernelSchedule k = spec.tile.kernel_schedule;
  if (k != KernelSchedule::Auto && !is_tma_schedule(k)) {
    fail("multiply_add_fast_accum runs on TMA kernel schedules; got " + std::string(to_string(k)) + ".");
  }
}

// Where CUTLASS's block-scaled FP8 mainloop applies (dispatch policy MainloopSm90TmaGmmaWarpSpecializedBlockwiseFP8):
// FP8 A and B on a cooperative or ping-pong TMA kernel whose CTA tile is 128 deep (one scale per K block) and a
// multiple of 128 wide (one of B's scales per tile column block), under CUTLASS's TMA epilogue. Parallel split-K takes
// it (its slices start on K blocks); Stream-K, visitor trees and the lean epilogue have no block-scaled kernel here.
void check_block_scaling(const KernelSpec& spec) {
  if (!blockwise(spec)) return;
  if (!is_fp8(spec.element_a) || !is_fp8(spec.element_b)) {
    fail("Block scaling scales FP8 operands (e4m3 / e5m2 A and B); A is " + std::string(to_string(spec.element_a)) +
         ". Quantize A and B to FP8, or use scale vectors (set_scale) or alpha.");
  }
  if (spec.scale != ScaleMode::None || spec.visitor) {
    fail("Block scaling replaces the scale vectors and takes no epilogue visitor tree; set the scale to none.");
  }
  if (uses_stream_k(spec)) {
    fail(
        "Block-scaled FP8 kernels run on the Default tile scheduler (no Stream-K or serial split-K; parallel split-K "
        "takes them); use the Default tile scheduler and IdentitySwizzle1.");
  }
  const KernelSchedule k = spec.tile.kernel_schedule;
  if (k != KernelSchedule::Auto && k != KernelSchedule::TmaWarpSpecializedCooperative &&
      k != KernelSchedule::TmaWarpSpecializedPingpong) {
    fail(
        "Block-scaled FP8 mainloops are TmaWarpSpecializedCooperative or TmaWarpSpecializedPingpong; got kernel "
        "schedule " +
        std::string(to_string(k)) + ".");
  }
  const EpilogueSchedule e = spec.tile.epilogue_schedule;
  if (e == EpilogueSchedule::NoSmemWarpSpecialized || e == EpilogueSchedule::Lean) {
    fail(
        "Block-scaled FP8 kernels store D with CUTLASS's TMA epilogue (TmaWarpSpecialized(Cooperative) or auto); "
        "got epilogue schedule " +
        std::string(to_string(e)) + ".");
  }
  if (!moves_16_byte_rows(spec.alignment_c, element_c_or_d(spec))) {
    fail(
        "Block-scaled FP8 kernels store D with CUTLASS's TMA epilogue, which needs 16-byte rows of C and D; their "
        "alignment is " +
        std::to_string(spec.alignment_c) + ". Pad the leading dimension.");
  }
  const Shape3 cta = spec.tile.cta_tile();
  if (cta[2] != 128 || cta[1] % 128 != 0) {
    fail(
        "Block scaling takes one scale per 128-deep K block and per 128 columns of B: the CTA tile must be 128 deep "
        "and a multiple of 128 wide; it is " +
        shape_text(cta) + ". Use a 128 x 128 or 64 x 128 CTA tile.");
  }
}

bool overlaps_promotion(const KernelSpec& spec) {
  return overlaps_promotion(spec.tile.kernel_schedule);
}

const OverlapTiles& overlap_tiles(KernelSchedule k) {
  return *std::find_if(kFp8OverlapTiles.begin(), kFp8OverlapTiles.end(),
                       [&](const OverlapTiles& t) { return t.schedule == k; });
}

// "128 x 192 x 128 or 128 x 128 x 128".
std::string cta_list_text(const std::vector<Cta>& ctas) {
  std::string out;
  for (std::size_t i = 0; i < ctas.size(); ++i) {
    if (i > 0) out += " or ";
    out += std::to_string(ctas[i].m) + " x " + std::to_string(ctas[i].n) + " x 128";
  }
  return out;
}

// Where the overlapped FP8 mainloop applies: FP8 A and B promoted into f32 (not fast accumulation, no block scales)
// on one of its kernel's CTA tiles, on the Default tile scheduler, under that kernel's TMA or no-smem epilogue.
// Stream-K, split-K, visitor trees and the lean epilogue keep CUTLASS's mainloop.
void check_fp8_overlap(const KernelSpec& spec) {
  if (!overlaps_promotion(spec)) return;
  const KernelSchedule k = spec.tile.kernel_schedule;
  const auto refuse = [&](const std::string& why) { fail("Kernel schedule " + std::string(to_string(k)) + " " + why); };
  if (!is_fp8(spec.element_a) || !is_fp8(spec.element_b) || spec.element_accumulator != DataType::f32) {
    refuse("is an FP8 mainloop: e4m3 / e5m2 A and B with an f32 accumulator.");
  }
  if (fast_accumulation(spec) || blockwise(spec)) {
    refuse("promotes into f32 every 128 elements of K; it takes no fast accumulation and no block scales.");
  }
  const OverlapTiles& tiles = overlap_tiles(k);
  const Shape3 cta = spec.tile.cta_tile();
  const bool listed =
      std::any_of(tiles.ctas.begin(), tiles.ctas.end(), [&](const Cta& c) { return c.m == cta[0] && c.n == cta[1]; });
  if (!listed || cta[2] != 128) {
    refuse("has CTA tiles of " + cta_list_text(tiles.ctas) + "; the CTA tile is " + shape_text(cta) + ".");
  }
  // Parallel split-K is a batch of partial-sum GEMMs on this same scheduler; Stream-K's tile scheduler is another.
  if (uses_stream_k(spec)) refuse("runs on the Default tile scheduler (no Stream-K).");
  if (spec.visitor) refuse("takes no epilogue visitor tree.");
  const EpilogueSchedule e = spec.tile.epilogue_schedule;
  if (e != tiles.epilogue && e != EpilogueSchedule::NoSmemWarpSpecialized) {
    refuse("stores D with the " + std::string(to_string(tiles.epilogue)) + " or NoSmemWarpSpecialized epilogue; got " +
           std::string(to_string(e)) + ".");
  }
}

TileScheduler tile_scheduler_of(const KernelSpec& spec) {
  return uses_stream_k(spec) ? TileScheduler::StreamK : spec.tile.tile_scheduler;
}

// Type-level rules: what the collective builders can be instantiated with at all.
void check_types(const KernelSpec& spec) {
  if (spec.kernel_cc != 90) {
    fail("The Sm90Collective family builds SM90 kernels (kernel_cc 90), not kernel_cc " +
         std::to_string(spec.kernel_cc) + ".");
  }
  if (spec.opclass != OpClass::TensorOp) fail("SM90 collective kernels are TensorOp only; use Sm80Universal.");
  if (spec.element_d == DataType::void_t) fail("Element D cannot be void.");
  if (const std::string fp8 = fp8_rule_violation(spec.cc, spec.kernel_cc, spec.opclass, operand_types_of(spec));
      !fp8.empty()) {
    fail(fp8);
  }
  if (is_fp8(spec.element_a) && (spec.alignment_a != 16 || spec.alignment_b != 16)) {
    fail("FP8 operands are loaded with TMA in 16-element (16-byte) vectors: alignment 16 for A and B; got " +
         std::to_string(spec.alignment_a) + "/" + std::to_string(spec.alignment_b) +
         ". Pad K to a multiple of 16 elements.");
  }
}

// Parallel split-K runs the GEMM as a batch of K slices (so one GEMM, not a batch of them) on the persistent
// scheduler; the reduction kernel applies every epilogue (activation, bias, scale vectors).
void check_parallel_split_k(const KernelSpec& spec) {
  if (spec.split_k_mode != SplitKMode::Parallel) return;
  if (uses_stream_k(spec)) {
    fail(
        "Parallel split-K splits K over a batch of partial-sum GEMMs; it does not combine with the Stream-K tile "
        "scheduler or swizzle. Use the Default tile scheduler and IdentitySwizzle1.");
  }
  if (spec.element_accumulator != DataType::f32) {
    fail("Parallel split-K writes f32 partial sums; the accumulator is " +
         std::string(to_string(spec.element_accumulator)) + ".");
  }
}

// Cluster shape: rank 3 with a unit third dimension, at most 8 CTAs (portable size).
void check_cluster(const TileDescription& td) {
  if (td.cluster_shape[2] != 1) {
    fail("The third dimension of the cluster shape must be 1; got " + shape_text(td.cluster_shape) + ".");
  }
  if (td.cluster_shape[0] < 1 || td.cluster_shape[1] < 1) {
    fail("Cluster dimensions must be positive; got " + shape_text(td.cluster_shape) + ".");
  }
  const int cluster_size = td.cluster_shape[0] * td.cluster_shape[1];
  if (cluster_size > 16) {
    fail("Cluster shape " + shape_text(td.cluster_shape) + " has " + std::to_string(cluster_size) +
         " CTAs; SM90 allows at most 16 (non-portable) and gemmkit launches portable clusters of at most 8.");
  }
  if (cluster_size > 8) {
    fail("Cluster shape " + shape_text(td.cluster_shape) + " has " + std::to_string(cluster_size) +
         " CTAs, a non-portable size; use at most 8 CTAs per cluster (e.g. 2x1x1, 2x2x1, 4x2x1).");
  }
}

// Kernel and epilogue schedules, tile schedulers and swizzles, and which of them fit together.
void check_schedules(const KernelSpec& spec) {
  const TileDescription& td = spec.tile;
  if ((td.kernel_schedule == KernelSchedule::Auto) != (td.epilogue_schedule == EpilogueSchedule::Auto)) {
    fail("Kernel and epilogue schedules must either both be auto or neither be auto (got kernel " +
         std::string(to_string(td.kernel_schedule)) + ", epilogue " + std::string(to_string(td.epilogue_schedule)) +
         ").");
  }
  // An explicit one: Auto is not resolved to the cooperative kernel for Stream-K.
  if (uses_stream_k(spec) && (td.kernel_schedule == KernelSchedule::Auto || !is_cooperative(spec))) {
    fail("The Stream-K tile scheduler needs a cooperative kernel schedule (TmaWarpSpecializedCooperative); got " +
         std::string(to_string(td.kernel_schedule)) + ".");
  }
  if (is_cooperative(spec) && td.cta_tile()[0] < 128) {
    fail("Cooperative kernel schedules need a CTA tile M of at least 128; the CTA tile is " +
         shape_text(td.cta_tile()) + ". Use a Pingpong schedule or a larger tile.");
  }
  // The builders' cooperative kernels split M between two warp groups of 64-row GMMA atoms.
  if (is_cooperative(spec) && !splits_n(spec) && td.cta_tile()[0] % 128 != 0) {
    fail(
        "Cooperative kernel schedules split the CTA tile's M between two warp groups of 64 rows each: M must be a "
        "multiple of 128; the CTA tile is " +
        shape_text(td.cta_tile()) + ". For 192 rows use TmaWarpSpecializedCooperativeSplitN.");
  }
  if (td.epilogue_schedule == EpilogueSchedule::Lean && !is_tma_schedule(td.kernel_schedule)) {
    fail(
        "The Lean epilogue schedule runs with a TMA warp-specialized kernel schedule (TmaWarpSpecialized, "
        "TmaWarpSpecializedPingpong or TmaWarpSpecializedCooperative); got " +
        std::string(to_string(td.kernel_schedule)) + ".");
  }
  if (td.epilogue_schedule == EpilogueSchedule::TmaWarpSpecializedCooperative && !is_cooperative(spec)) {
    fail(
        "The TmaWarpSpecializedCooperative epilogue schedule needs a cooperative kernel schedule "
        "(TmaWarpSpecializedCooperative or CpAsyncWarpSpecializedCooperative); got " +
        std::string(to_string(td.kernel_schedule)) + ". Use the TmaWarpSpecialized epilogue schedule with it.");
  }
  if (spec.swizzle != Swizzle::Identity1 && spec.swizzle != Swizzle::StreamK) {
    fail("Swizzle " + std::string(to_string(spec.swizzle)) + " does not apply to SM" + std::to_string(spec.cc) +
         " tensor-op kernels (CUTLASS 3.x): it is a CUTLASS 2.x threadblock swizzle; they take IdentitySwizzle1 "
         "(persistent scheduler) or ThreadblockSwizzleStreamK.");
  }
  // An auto epilogue with a fused activation resolves to the TMA epilogue; the no-smem one cannot fuse.
  if (has_fused_epilogue(spec) && td.epilogue_schedule == EpilogueSchedule::NoSmemWarpSpecialized) {
    fail(
        "Fused activations, bias and scale vectors on SM90 kernels need a TMA epilogue (TmaWarpSpecialized, "
        "TmaWarpSpecializedCooperative or auto); got epilogue schedule NoSmemWarpSpecialized.");
  }
}

// TMA loads and stores need 16-byte aligned rows.
void check_tma_alignments(const KernelSpec& spec) {
  const TileDescription& td = spec.tile;
  const bool tma_operands =
      moves_16_byte_rows(spec.alignment_a, spec.element_a) && moves_16_byte_rows(spec.alignment_b, spec.element_b);
  if (!tma_operands && td.cluster_shape != Shape3{1, 1, 1}) {
    fail("Cluster shape " + shape_text(td.cluster_shape) +
         " needs TMA loads, which need 16-byte aligned rows; "
         "A/B alignments " +
         std::to_string(spec.alignment_a) + "/" + std::to_string(spec.alignment_b) +
         " take cp.async kernels with cluster shape 1x1x1.");
  }
  const bool tma_epilogue = td.epilogue_schedule == EpilogueSchedule::TmaWarpSpecialized ||
                            td.epilogue_schedule == EpilogueSchedule::TmaWarpSpecializedCooperative;
  const bool c_or_d_tma = moves_16_byte_rows(spec.alignment_c, element_c_or_d(spec));
  if (tma_epilogue && !c_or_d_tma) {
    fail("Epilogue schedule " + std::string(to_string(td.epilogue_schedule)) +
         " stores D with TMA, which needs 16-byte aligned rows of C and D; their alignment is " +
         std::to_string(spec.alignment_c) + ". Use NoSmemWarpSpecialized or pad the leading dimension.");
  }
  if (td.epilogue_schedule == EpilogueSchedule::Auto && has_fused_epilogue(spec) && !c_or_d_tma) {
    fail(
        "A fused activation or bias needs the TMA epilogue, which needs 16-byte aligned rows of C and D; their "
        "alignment is " +
        std::to_string(spec.alignment_c) + ". Pad the leading dimension.");
  }
  if (is_tma_schedule(td.kernel_schedule) && !tma_operands) {
    fail("Kernel schedule " + std::string(to_string(td.kernel_schedule)) +
         " loads A and B with TMA, which needs 16-byte aligned rows (alignment " +
         std::to_string(128 / bits_of(spec.element_a)) + " for " + std::string(to_string(spec.element_a)) +
         "); got A " + std::to_string(spec.alignment_a) + ", B " + std::to_string(spec.alignment_b) +
         ". Use a CpAsync schedule or pad the leading dimensions.");
  }
}

// Whether an FP8 tile's promoted accumulators fit in registers (rules.hpp), with Auto resolved as CUTLASS's builder
// does.
bool fp8_promotion_fits(const Cta& cta, KernelSchedule schedule) {
  const bool cooperative =
      schedule == KernelSchedule::TmaWarpSpecializedCooperative || (schedule == KernelSchedule::Auto && cta.m >= 128);
  return fp8_accumulators_fit(cta.m, cta.n, cooperative);
}

// The kernel's name; a lean kernel's carries nothing of the epilogue it takes at launch.
std::string name_of(const KernelSpec& spec) {
  std::string core(row_of(spec.element_accumulator).in_kernel_name);
  core += "0x0x0";
  if (uses_tf32(spec)) core += "tf32";
  core += "gemm";
  const TileDescription& td = spec.tile;
  return "cutlass3x_sm" + std::to_string(spec.kernel_cc) + "_tensorop_" + core + "_" +
         std::string(to_string(spec.element_a)) + "_" + std::string(to_string(spec.element_b)) + "_" +
         std::string(to_string(spec.element_accumulator)) + "_" + std::string(to_string(spec.element_c)) + "_" +
         std::string(to_string(spec.element_d)) + "_" + shape_text(td.threadblock_shape) + "_" +
         shape_text(td.cluster_shape) + "_" + std::to_string(td.stages) + "_" + layout_letter(spec.layout_a) +
         layout_letter(spec.layout_b) + layout_letter(spec.layout_c) + "_align" + std::to_string(spec.alignment_a) +
         std::string(row_of(td.kernel_schedule).in_kernel_name) +
         std::string(row_of(td.math_operation).in_kernel_name) +
         std::string(row_of(td.epilogue_schedule).in_kernel_name) +
         std::string(row_of(tile_scheduler_of(spec)).in_kernel_name) +
         (lean_epilogue(spec) ? std::string() : epilogue_suffix(spec)) +
         std::string(row_of(spec.split_k_mode).in_kernel_name) + std::string(row_of(spec.block_scaling).in_kernel_name);
}

// An FP8 mainloop of CUTLASS's other than the builder's default (block scales, fast accumulation): its kernel
// schedule types derive from the cooperative and ping-pong ones, which the templates cannot tell apart.
bool fp8_mainloop_variant(const KernelSpec& spec) {
  return !fp8_schedule_variant(spec).empty();
}

// The CUTLASS kernel schedule: the tile's, or the FP8 variant's cooperative / ping-pong (or, for fast accumulation,
// plain warp-specialized) schedule, as gemmkit resolves Auto.
std::string kernel_schedule_type(const KernelSpec& spec) {
  if (!fp8_mainloop_variant(spec)) return std::string(row_of(spec.tile.kernel_schedule).cutlass);
  const std::string variant(fp8_schedule_variant(spec));
  if (spec.tile.kernel_schedule == KernelSchedule::TmaWarpSpecialized) {
    return "cutlass::gemm::KernelTmaWarpSpecialized" + variant;
  }
  return std::string("cutlass::gemm::KernelTmaWarpSpecialized") + (is_cooperative(spec) ? "Cooperative" : "Pingpong") +
         variant;
}

// Every SM90 template's: the operands', the mainloop's and the tile scheduler's.
Placeholders mainloop_placeholders(const KernelSpec& spec) {
  Placeholders out = common_placeholders(spec);
  const Placeholders tile = cta_and_cluster_placeholders(spec.tile);
  out.insert(out.end(), tile.begin(), tile.end());
  out.insert(out.end(), {
                            {"element_d", std::string(row_of(spec.element_d).cutlass)},
                            {"element_bias", std::string(row_of(element_c_or_d(spec)).cutlass)},
                            {"kernel_schedule", kernel_schedule_type(spec)},
                            {"tile_scheduler", std::string(row_of(tile_scheduler_of(spec)).cutlass)},
                            {"stages", std::to_string(spec.tile.stages)},
                        });
  return out;
}

// The epilogue schedule as the templates take it. The templates resolve Auto by whether CUTLASS's own kernel schedule
// is cooperative, which they cannot tell of an FP8 variant's: its TMA epilogue is named here, where the template
// would take one (a fused epilogue, or 16-byte rows of every operand: gemmkit::sm90::ResolvedEpilogueSchedule).
std::string epilogue_schedule_of(const KernelSpec& spec) {
  const EpilogueSchedule e = spec.tile.epilogue_schedule;
  if (!fp8_mainloop_variant(spec) || e != EpilogueSchedule::Auto) return std::string(row_of(e).cutlass);
  const bool tma_everywhere =
      moves_16_byte_rows(spec.alignment_a, spec.element_a) && moves_16_byte_rows(spec.alignment_b, spec.element_b) &&
      moves_16_byte_rows(spec.alignment_c, element_c_or_d(spec)) &&
      bits_of(spec.element_d) * output_alignment(spec.element_c, spec.element_d, spec.alignment_c) % 128 == 0;
  if (!has_fused_epilogue(spec) && !tma_everywhere) return std::string(row_of(e).cutlass);
  return is_cooperative(spec) ? "cutlass::epilogue::TmaWarpSpecializedCooperative"
                              : "cutlass::epilogue::TmaWarpSpecialized";
}

// sm90_gemm.cu.in's and sm90_gemm_visitor.cu.in's: the kernel on one of CUTLASS's epilogues, which compiles the
// epilogue in.
Placeholders cutlass_epilogue_placeholders(const KernelSpec& spec) {
  Placeholders out = mainloop_placeholders(spec);
  out.insert(out.end(),
             {
                 {"alignment_d", std::to_string(output_alignment(spec.element_c, spec.element_d, spec.alignment_c))},
                 {"bias", std::string(row_of(spec.bias).cutlass)},
                 {"scale", std::string(row_of(spec.scale).cutlass)},
                 {"activation", activation_functor(spec)},
                 {"epilogue_schedule", epilogue_schedule_of(spec)},
             });
  if (spec.visitor) {
    // The tree replaces the bias, scale and activation placeholders.
    std::erase_if(out, [](const auto& kv) {
      return kv.first == "bias" || kv.first == "scale" || kv.first == "element_bias" || kv.first == "activation";
    });
    const Placeholders tree = visitor_placeholders(*spec.visitor, spec.family);
    out.insert(out.end(), tree.begin(), tree.end());
  }
  return out;
}

// The kernels the family renders, each from a template and glue header of its own.
enum class Kind {
  Default,
  Blockwise,
  ParallelSplitK,
  BlockwiseParallelSplitK,
  Visitor,
  Lean,
  SplitN,
  Fp8Overlap,
  Fp8OverlapParallelSplitK
};

Kind kind_of(const KernelSpec& spec) {
  if (spec.visitor) return Kind::Visitor;  // its fusion replaces bias, scales and activation
  if (lean_epilogue(spec)) return Kind::Lean;
  if (splits_n(spec)) return Kind::SplitN;
  if (spec.split_k_mode == SplitKMode::Parallel) {  // partial sums, then a reduction
    if (blockwise(spec)) return Kind::BlockwiseParallelSplitK;
    return overlaps_promotion(spec) ? Kind::Fp8OverlapParallelSplitK : Kind::ParallelSplitK;
  }
  if (overlaps_promotion(spec)) return Kind::Fp8Overlap;
  return blockwise(spec) ? Kind::Blockwise : Kind::Default;
}

// The glue header and a class template of gemmkit's that derives the builder's collective (empty: the builder's own),
// for the templates that take either.
Placeholders with_glue(Placeholders out, std::string_view glue, std::string_view own_mainloop) {
  out.insert(out.end(), {{"glue_header", std::string(glue)},
                         {"own_mainloop_open", own_mainloop.empty() ? "" : std::string(own_mainloop) + "<"},
                         {"own_mainloop_close", own_mainloop.empty() ? "" : ">"}});
  return out;
}

// The placeholders of sm90_gemm.cu.in, which serves three mainloops: its glue, the mainloop's operand layouts, the
// module class and a class template of gemmkit's that derives the builder's collective (empty: the builder's own). A
// block-scaled mainloop pairs each operand's layout with its scales' and takes its own module.
Placeholders with_mainloop(Placeholders out, std::string_view glue, std::string layout_a, std::string layout_b,
                           std::string module, std::string_view own_mainloop = {}, std::string_view own_epilogue = {}) {
  out = with_glue(std::move(out), glue, own_mainloop);
  out.insert(out.end(), {{"mainloop_layout_a", std::move(layout_a)},
                         {"mainloop_layout_b", std::move(layout_b)},
                         {"module", std::move(module)},
                         {"own_epilogue_open", own_epilogue.empty() ? "" : std::string(own_epilogue) + "<"},
                         {"own_epilogue_close", own_epilogue.empty() ? "" : ">"}});
  return out;
}

// Where three stages of C instead of the builder's four give the mainloop a fifth stage (sm90_source_stages.hpp): the
// column halves' 128 x 192 tile with a C as wide as D, 16 bits (D then is stored through C's buffers). Other tiles
// keep their stage count either way (128 x 128: six).
bool three_source_stages(const KernelSpec& spec) {
  const Shape3 cta = spec.tile.cta_tile();
  return spec.tile.kernel_schedule == KernelSchedule::TmaWarpSpecializedCooperativeFP8Overlap && cta[0] == 128 &&
         cta[1] == 192 && spec.element_c != DataType::void_t && bits_of(spec.element_c) == 16 &&
         bits_of(spec.element_d) == 16;
}

// Every placeholder but those named.
Placeholders without(Placeholders out, std::initializer_list<std::string_view> names) {
  std::erase_if(out, [&](const auto& kv) { return std::find(names.begin(), names.end(), kv.first) != names.end(); });
  return out;
}

// sm90_gemm_parallel.cu.in's: its glue and mainloop as with_glue's, the mainloop's operand layouts, and the block
// scales' configuration of a block-scaled mainloop (else void).
Placeholders with_partials_mainloop(const KernelSpec& spec, std::string_view glue, std::string_view own_mainloop) {
  Placeholders out = with_glue(cutlass_epilogue_placeholders(spec), glue, own_mainloop);
  const bool scaled = blockwise(spec);
  out.insert(out.end(), {{"mainloop_layout_a", scaled ? "cute::tuple<LayoutA, gemmkit::sm90::LayoutSFA>" : "LayoutA"},
                         {"mainloop_layout_b", scaled ? "cute::tuple<LayoutB, gemmkit::sm90::LayoutSFB>" : "LayoutB"},
                         {"block_scales", scaled ? "gemmkit::sm90::BlockScales" : "void"}});
  return out;
}

struct KindRow;
Placeholders cutlass_epilogue_only(const KernelSpec& spec, const KindRow&) {
  return cutlass_epilogue_placeholders(spec);
}

struct KindRow {
  Kind kind;
  std::string_view template_name, glue_header;
  Placeholders (*placeholders)(const KernelSpec&, const KindRow&);
};

// Parallel split-K's partial sums on CUTLASS's mainloop, plain or block-scaled (the row's glue tells them apart).
Placeholders partials_on_cutlass_mainloop(const KernelSpec& spec, const KindRow& row) {
  return with_partials_mainloop(spec, row.glue_header, {});
}

const KindRow& kind_row(Kind kind) {
  static const KindRow kRows[] = {
      {Kind::Default, "sm90_gemm.cu.in", "gemmkit/sm90_gemm.hpp",
       [](const KernelSpec& spec, const KindRow& row) {
         return with_mainloop(cutlass_epilogue_placeholders(spec), row.glue_header, "LayoutA", "LayoutB",
                              "gemmkit::sm90::Module");
       }},
      {Kind::Blockwise, "sm90_gemm.cu.in", "gemmkit/sm90_blockwise.hpp",
       [](const KernelSpec& spec, const KindRow& row) {
         return with_mainloop(cutlass_epilogue_placeholders(spec), row.glue_header,
                              "cute::tuple<LayoutA, gemmkit::sm90::LayoutSFA>",
                              "cute::tuple<LayoutB, gemmkit::sm90::LayoutSFB>", "gemmkit::sm90::BlockwiseModule");
       }},
      {Kind::Fp8Overlap, "sm90_gemm.cu.in", "gemmkit/sm90_fp8_overlap.hpp",
       [](const KernelSpec& spec, const KindRow& row) {
         const bool fewer = three_source_stages(spec);
         return with_mainloop(cutlass_epilogue_placeholders(spec),
                              fewer ? "gemmkit/sm90_source_stages.hpp" : row.glue_header, "LayoutA", "LayoutB",
                              "gemmkit::sm90::Module", overlap_tiles(spec.tile.kernel_schedule).mainloop,
                              fewer ? "gemmkit::sm90::ThreeSourceStages" : "");
       }},
      {Kind::ParallelSplitK, "sm90_gemm_parallel.cu.in", "gemmkit/sm90_gemm.hpp", partials_on_cutlass_mainloop},
      {Kind::BlockwiseParallelSplitK, "sm90_gemm_parallel.cu.in", "gemmkit/sm90_blockwise.hpp",
       partials_on_cutlass_mainloop},
      {Kind::Fp8OverlapParallelSplitK, "sm90_gemm_parallel.cu.in", "gemmkit/sm90_fp8_overlap.hpp",
       [](const KernelSpec& spec, const KindRow& row) {
         return with_partials_mainloop(spec, row.glue_header, overlap_tiles(spec.tile.kernel_schedule).mainloop);
       }},
      {Kind::Visitor, "sm90_gemm_visitor.cu.in", "gemmkit/sm90_gemm.hpp", cutlass_epilogue_only},
      // The lean template takes nothing of the epilogue's settings (they come at launch); its C and D are row-major
      // with 16-byte rows, which validate() checked. How D leaves is GEMMKIT_LEAN_TMA_STORE's: the source differs,
      // so the cache keys do.
      {Kind::Lean, "sm90_gemm_lean.cu.in", "gemmkit/sm90_lean.hpp",
       [](const KernelSpec& spec, const KindRow&) {
         Placeholders out = without(mainloop_placeholders(spec), {"layout_c", "alignment_c", "element_compute"});
         out.emplace_back("tma_store", knobs::flag("GEMMKIT_LEAN_TMA_STORE") ? "true" : "false");
         return out;
       }},
      // Its collectives name the schedules and the Default tile scheduler themselves.
      {Kind::SplitN, "sm90_gemm_split_n.cu.in", "gemmkit/sm90_split_n.hpp",
       [](const KernelSpec& spec, const KindRow&) {
         return without(cutlass_epilogue_placeholders(spec),
                        {"kernel_schedule", "epilogue_schedule", "tile_scheduler"});
       }},
  };
  for (const KindRow& row : kRows) {
    if (row.kind == kind) return row;
  }
  throw Error("internal error: a kernel kind of Sm90Collective has no row");
}

class Sm90Collective final : public Family {
 public:
  KernelFamily id() const override { return KernelFamily::Sm90Collective; }
  int kernel_cc() const override { return 90; }
  std::string_view template_name(const KernelSpec& spec) const override {
    return kind_row(kind_of(spec)).template_name;
  }
  std::string_view glue_header(const KernelSpec& spec) const override { return kind_row(kind_of(spec)).glue_header; }

  // Tensor cores other than f64 (whose kernels are CUTLASS 2.x ones), and FP8.
  bool supports(OpClass opclass, const OperandTypes& types) const override {
    if (opclass != OpClass::TensorOp) return false;
    if (fp8_types(types)) return true;
    return types.a != DataType::f64 && tensor_op_types(types) && layouts_ok_for_tensor_op(types) &&
           output_types_ok(90, types);
  }

  std::vector<int> operand_alignments(OpClass, DataType element, const OperandTypes& types) const override {
    // f64 operands (e.g. a C of another type than A and B) are read as scalars, as in the reference.
    if (element == DataType::f64) return {1};
    if (element == DataType::void_t) return vector_widths(types.d);  // no C: D's vectors decide
    // FP8 mainloops are TMA only (CUTLASS has no cp.async FP8 mainloop).
    if (is_fp8(element)) return {16};
    return vector_widths(element);
  }

  // FP8 lists every configuration twice: with CUTLASS's promotion into f32 every 128 deep, then with fast
  // accumulation; then the tiles of gemmkit's overlapped promotion, the one on the default tile moved first: it is the
  // default.
  std::vector<TileDescription> tile_descriptions(OpClass opclass, const OperandTypes& types, const DeviceLimits& limits,
                                                 int alignment_a, int alignment_b) const override {
    std::vector<TileDescription> out = promoted_tiles(opclass, types, limits, alignment_a, alignment_b);
    if (!is_fp8(types.a)) return out;
    add_fast_accumulation_twins(out);
    // Then gemmkit's overlapped promotions (check_fp8_overlap) in the cooperative and the ping-pong kernel, on
    // CUTLASS's TMA epilogue, in each cluster of the table.
    if (!moves_16_byte_rows(alignment_a, types.a) || !moves_16_byte_rows(alignment_b, types.b)) return out;
    for (const OverlapTiles& tiles : kFp8OverlapTiles) {
      for (const Cta& cta : tiles.ctas) {
        for (const Shape3& cluster : kClusters) {
          TileDescription td = cluster_tile(cta, cluster, types.a);
          td.kernel_schedule = tiles.schedule;
          td.epilogue_schedule = tiles.epilogue;
          out.push_back(td);
        }
      }
    }
    if (const std::optional<TileDescription> default_loop = own_loop_in_place(out.front(), types)) {
      const auto found = std::find(out.begin(), out.end(), *default_loop);
      if (found != out.end()) std::rotate(out.begin(), found, found + 1);
    }
    return out;
  }

  std::optional<TileDescription> own_mainloop_twin(const KernelSpec& spec) const override {
    return own_loop_in_place(spec.tile, operand_types_of(spec));
  }

  // kFp8OwnLoopInPlace's loop for an automatically scheduled FP8 tile with CUTLASS's promotion, if the table has one.
  static std::optional<TileDescription> own_loop_in_place(const TileDescription& td, const OperandTypes& types) {
    const bool builders =
        td.kernel_schedule == KernelSchedule::Auto && td.epilogue_schedule == EpilogueSchedule::Auto &&
        td.tile_scheduler == TileScheduler::Default && td.math_operation == MathOperation::MultiplyAdd;
    if (!fp8_types(types) || !builders) return std::nullopt;
    const Shape3 cta = td.cta_tile();
    for (const auto& [tile, schedule] : kFp8OwnLoopInPlace) {
      if (tile.m != cta[0] || tile.n != cta[1]) continue;
      TileDescription twin = td;
      twin.kernel_schedule = schedule;
      twin.epilogue_schedule = overlap_tiles(schedule).epilogue;
      return twin;
    }
    return std::nullopt;
  }

  std::vector<TileDescription> promoted_tiles(OpClass, const OperandTypes& types, const DeviceLimits&, int alignment_a,
                                              int alignment_b) const {
    const bool tma = moves_16_byte_rows(alignment_a, types.a) && moves_16_byte_rows(alignment_b, types.b);
    const bool fp8 = is_fp8(types.a);
    std::vector<TileDescription> out;
    for (const auto& cta : fp8 ? kFp8Ctas : kCtas) {
      if (is_int8(types.a) && cta.m == 256) continue;
      for (const auto& cluster : kClusters) {
        TileDescription td = cluster_tile(cta, cluster, types.a);
        auto add = [&](KernelSchedule k, EpilogueSchedule e, TileScheduler s) {
          if (fp8 && !fp8_promotion_fits(cta, k)) return;
          td.kernel_schedule = k;
          td.epilogue_schedule = e;
          td.tile_scheduler = s;
          out.push_back(td);
        };
        if (!tma) {
          // Without 16-byte aligned rows TMA cannot load the operands: cp.async mainloops, no-smem epilogue.
          if (cluster != Shape3{1, 1, 1}) continue;
          add(KernelSchedule::Auto, EpilogueSchedule::Auto, TileScheduler::Default);
          if (cta.m >= 128) {
            add(KernelSchedule::CpAsyncWarpSpecializedCooperative, EpilogueSchedule::NoSmemWarpSpecialized,
                TileScheduler::Default);
          }
          continue;
        }
        add(KernelSchedule::Auto, EpilogueSchedule::Auto, TileScheduler::Default);
        if (cta.m >= 128) {
          add(KernelSchedule::TmaWarpSpecializedCooperative, EpilogueSchedule::TmaWarpSpecializedCooperative,
              TileScheduler::Default);
          add(KernelSchedule::TmaWarpSpecializedCooperative, EpilogueSchedule::NoSmemWarpSpecialized,
              TileScheduler::Default);
          // Not on 128 x 64: split-K for long K runs on the smallest Stream-K tile, measured at 128 x 128.
          if (cta.n >= 128) {
            add(KernelSchedule::TmaWarpSpecializedCooperative, EpilogueSchedule::TmaWarpSpecializedCooperative,
                TileScheduler::StreamK);
          }
        }
        if (cta.m * cta.n <= 128 * 128 || cta.m == 64) {
          add(KernelSchedule::TmaWarpSpecializedPingpong, EpilogueSchedule::TmaWarpSpecialized, TileScheduler::Default);
          add(KernelSchedule::TmaWarpSpecializedPingpong, EpilogueSchedule::NoSmemWarpSpecialized,
              TileScheduler::Default);
        }
        if (cta.m * cta.n <= 128 * 128) {
          add(KernelSchedule::TmaWarpSpecialized, EpilogueSchedule::NoSmemWarpSpecialized, TileScheduler::Default);
        }
      }
    }
    // gemmkit's lean epilogue on the TMA mainloops, after CUTLASS's epilogues (ties keep those): one kernel for every
    // plain epilogue of a plan, about half the compile time, a few percent slower (docs/performance.md).
    const int d_bits = bits_of(types.d);
    const bool lean = tma && types.layout_c == Layout::RowMajor && (d_bits == 16 || d_bits == 32);
    if (lean) {
      for (const auto& cta : fp8 ? kFp8Ctas : kCtas) {
        if (is_int8(types.a) && cta.m == 256) continue;
        const KernelSchedule k =
            cta.m >= 128 ? KernelSchedule::TmaWarpSpecializedCooperative : KernelSchedule::TmaWarpSpecializedPingpong;
        if (fp8 && !fp8_promotion_fits(cta, k)) continue;
        for (const auto& cluster : kClusters) {
          TileDescription td = cluster_tile(cta, cluster, types.a);
          td.kernel_schedule = k;
          td.epilogue_schedule = EpilogueSchedule::Lean;
          out.push_back(td);
          // Beside each Stream-K entry above, so that the heuristics' split-K choices (decode shapes, long K) have a
          // quick twin too.
          if (cta.m >= 128 && cta.n >= 128) {
            td.tile_scheduler = TileScheduler::StreamK;
            out.push_back(td);
          }
        }
      }
    }
    // Last, for the tuner, for plans that set them and for the decode choice (the heuristics weigh auto-scheduled
    // entries only): narrow tiles of 16-bit operands, then 192-row tiles on the N-split cooperative kernel
    // (check_split_n).
    if (tma && is_half(types.a) && is_half(types.b)) {
      for (int rows : kNarrowClusterRows) {
        TileDescription td = cluster_tile(kNarrowCta, {rows, 1, 1}, types.a);
        td.kernel_schedule = KernelSchedule::TmaWarpSpecializedPingpong;
        td.epilogue_schedule = EpilogueSchedule::TmaWarpSpecialized;
        out.push_back(td);
      }
    }
    if (lean && split_n_inputs(types) && split_n_output(types)) {
      for (int n : kSplitNColumns) {
        TileDescription td;
        td.threadblock_shape = {kSplitNRows, n, 64};
        td.warp_count = {4, 1, 1};
        td.kernel_schedule = KernelSchedule::TmaWarpSpecializedCooperativeSplitN;
        td.epilogue_schedule = EpilogueSchedule::TmaWarpSpecializedCooperative;
        out.push_back(td);
      }
    }
    return out;
  }

  std::vector<Swizzle> swizzles(OpClass) const override { return {Swizzle::Identity1, Swizzle::StreamK}; }

  // tf32 wgmma cannot read a K-major A together with an N-major B (CUTLASS would swap them internally and need a
  // transposed epilogue).
  bool computes_transposed(OpClass, const OperandTypes& types) const override {
    return types.a == DataType::f32 && types.layout_a == Layout::RowMajor && types.layout_b == Layout::RowMajor;
  }

  bool has_persistent_scheduler() const override { return true; }

  // The fusion loads the bias element by element (AlignmentBias 1): nothing beyond its element's alignment.
  int bias_alignment_bytes(const KernelSpec&) const override { return 1; }

  void validate(const KernelSpec& spec, const DeviceLimits& limits) const override {
    const TileDescription& td = spec.tile;
    check_types(spec);
    // Before the schedule rules: their own messages name what fast accumulation and block scaling take.
    check_fast_accumulation(spec);
    check_block_scaling(spec);
    check_parallel_split_k(spec);
    check_cluster(td);
    check_threadblock_shape(spec);
    check_schedules(spec);
    check_operand_alignments(spec);
    check_tma_alignments(spec);
    check_lean(spec);
    check_activation_at_launch(spec);
    check_split_n(spec);
    check_fp8_overlap(spec);
    check_sm90_stages(td);
    check_shared_memory(spec, limits);
    if (spec.visitor) {
      if (has_fused_epilogue(spec) || spec.split_k_mode != SplitKMode::Serial) {
        fail(
            "an epilogue visitor tree replaces the activation, bias, scale vectors and parallel split-K; put the "
            "activation or bias into the tree instead.");
      }
      check_visitor(*spec.visitor, spec, limits);
    }
  }

  std::string kernel_name(const KernelSpec& spec) const override { return name_of(spec); }

  bool epilogue_at_launch(const KernelSpec& spec) const override { return lean_epilogue(spec); }

  // The same tile and tile scheduler on the lean epilogue (about half the build time, the same numbers), for a kernel
  // on CUTLASS's TMA epilogue; nullopt where the lean epilogue cannot store this D.
  std::optional<TileDescription> quick_twin(const KernelSpec& spec) const override {
    const TileDescription& td = spec.tile;
    const bool tma_epilogue = td.epilogue_schedule == EpilogueSchedule::Auto ||
                              td.epilogue_schedule == EpilogueSchedule::TmaWarpSpecialized ||
                              td.epilogue_schedule == EpilogueSchedule::TmaWarpSpecializedCooperative;
    if (!tma_epilogue || splits_n(spec)) return std::nullopt;  // the lean epilogue has no N-split kernel
    KernelSpec twin = spec;
    twin.tile.kernel_schedule = is_cooperative(spec) ? KernelSchedule::TmaWarpSpecializedCooperative
                                                     : KernelSchedule::TmaWarpSpecializedPingpong;
    twin.tile.epilogue_schedule = EpilogueSchedule::Lean;
    twin.tile.stages = 0;
    try {
      check_schedules(twin);
      check_lean(twin);
      check_block_scaling(twin);
    } catch (const ConfigError&) {
      return std::nullopt;
    }
    return twin.tile;
  }

  bool splits_k_in_parallel() const override { return true; }
  // TMA moves visitor matrices: 16-byte rows and addresses; vectors load element by element.
  int visitor_access_bytes(const KernelSpec&, const epilogue::Node& node) const override {
    return node.kind == epilogue::NodeKind::Matrix || node.kind == epilogue::NodeKind::Store ? 16 : 0;
  }

  // The split build's host module launches one cubin kernel; parallel split-K launches two.
  bool splittable(const KernelSpec& spec) const override { return spec.split_k_mode != SplitKMode::Parallel; }

  Placeholders placeholders(const KernelSpec& spec) const override {
    const KindRow& row = kind_row(kind_of(spec));
    return row.placeholders(spec, row);
  }
};

}  // namespace

const Family& sm90_collective() {
  static const Sm90Collective family;
  return family;
}

}  // namespace gemmkit::families
