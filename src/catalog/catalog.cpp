// src/catalog/catalog.cpp: the registry of kernel families per architecture, what they offer a plan, and the
// problem-shape heuristic.
#include "catalog/catalog.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <set>
#include <tuple>

#include "families/rules.hpp"
#include "gemmkit/errors.hpp"

namespace gemmkit::catalog {
namespace {

// A family, the operation it computes and the compute capabilities [min_cc, end_cc) it builds kernels for, newest
// family first.
struct Registered {
  const Family& family;
  Operation operation;
  int min_cc, end_cc;
};

const std::vector<Registered>& registry() {
  static const std::vector<Registered> kRegistry = {
      {families::sm90_collective(), Operation::Gemm, 90, 100},
      {families::sm80_universal(), Operation::Gemm, 80, 100},
      {families::sm90_grouped(), Operation::GroupedGemm, 90, 100},
      {families::sm80_grouped(), Operation::GroupedGemm, 80, 100},
      {families::sm90_conv2d(), Operation::Conv2d, 90, 100},
      {families::sm80_conv2d(), Operation::Conv2d, 80, 100},
  };
  return kRegistry;
}

}  // namespace

DeviceLimits limits_for_cc(int cc) {
  // Opt-in shared memory per block (bytes) and SM count of the flagship part of each generation.
  if (cc >= 90) return {cc, 132, 232448};
  if (cc == 80 || cc == 87) return {cc, 108, 166912};
  if (cc == 86 || cc == 89) return {cc, 84, 101376};
  return {cc, 80, 65536};
}

const Family& family_of(KernelFamily id) {
  for (const Registered& r : registry()) {
    if (r.family.id() == id) return r.family;
  }
  throw Error("internal error: kernel family " + std::string(to_string(id)) + " is not registered");
}

std::optional<std::size_t> quick_twin_index(const std::vector<TileDescription>& tiles, const KernelSpec& spec) {
  const std::optional<TileDescription> twin = family_of(spec.family).quick_twin(spec);
  if (!twin) return std::nullopt;
  const auto found = std::find(tiles.begin(), tiles.end(), *twin);
  if (found == tiles.end()) return std::nullopt;
  return static_cast<std::size_t>(found - tiles.begin());
}

namespace {

// The families a target may use, newest first: those built for its cc, no newer than the requested generation.
std::vector<const Family*> families_for(const Target& target) {
  std::vector<const Family*> out;
  for (const Registered& r : registry()) {
    const bool for_cc = r.min_cc <= target.cc && target.cc < r.end_cc;
    if (for_cc && r.operation == target.operation && r.family.kernel_cc() <= target.kernel_cc.value_or(target.cc)) {
      out.push_back(&r.family);
    }
  }
  return out;
}

const Family* supporting_family(const Target& target, OpClass opclass, const OperandTypes& types) {
  for (const Family* family : families_for(target)) {
    if (family->supports(opclass, types)) return family;
  }
  return nullptr;
}

}  // namespace

const Family& family_for(const Target& target, OpClass opclass, const OperandTypes& types) {
  if (const Family* family = supporting_family(target, opclass, types)) return *family;
  throw ConfigError("No " + std::string(to_string(opclass)) + " kernel family of SM" + std::to_string(target.cc) +
                    " supports these operand types and layouts.");
}

int kernel_cc_for(const Target& target, OpClass opclass, const OperandTypes& types) {
  return family_for(target, opclass, types).kernel_cc();
}

std::vector<OpClass> supported_opclasses(const Target& target, const OperandTypes& types) {
  std::vector<OpClass> out;
  for (const auto& row : enum_rows<OpClass>()) {
    if (supporting_family(target, row.value, types) != nullptr) out.push_back(row.value);
  }
  return out;
}

namespace {

// OperandTypes' fields in the order a suggestion prefers changing them: the accumulator, the outputs, B (to match A)
// and A, then the layouts.
constexpr DataType OperandTypes::*kTypeFields[] = {&OperandTypes::accumulator, &OperandTypes::c, &OperandTypes::d,
                                                   &OperandTypes::b, &OperandTypes::a};
constexpr Layout OperandTypes::*kLayoutFields[] = {&OperandTypes::layout_c, &OperandTypes::layout_b,
                                                   &OperandTypes::layout_a};
constexpr std::size_t kFieldCount = std::size(kTypeFields) + std::size(kLayoutFields);

// How far apart two element types are for a suggestion: same kind (float or integer) first, then closest width.
int type_distance(DataType a, DataType b) {
  return (is_integer(a) != is_integer(b) ? 1000 : 0) + std::abs(bits_of(a) - bits_of(b));
}

// `types` with one field (in the order above) set to each other value it may take, nearest first (never void: a
// suggestion does not drop an operand).
std::vector<OperandTypes> variants(const OperandTypes& types, std::size_t field) {
  std::vector<OperandTypes> out;
  if (field >= std::size(kTypeFields)) {
    OperandTypes flipped = types;
    Layout& layout = flipped.*kLayoutFields[field - std::size(kTypeFields)];
    layout = layout == Layout::RowMajor ? Layout::ColumnMajor : Layout::RowMajor;
    return {flipped};
  }
  const DataType current = types.*kTypeFields[field];
  std::vector<DataType> values;
  for (const auto& row : enum_rows<DataType>()) {
    if (row.value != current && row.value != DataType::void_t) values.push_back(row.value);
  }
  std::stable_sort(values.begin(), values.end(),
                   [&](DataType x, DataType y) { return type_distance(current, x) < type_distance(current, y); });
  for (const DataType value : values) {
    out.push_back(types);
    out.back().*kTypeFields[field] = value;
  }
  return out;
}

// Depth-first over `changes` more fields from `first` on, in preference order; the first supported variant wins.
std::optional<OperandTypes> first_supported(const Target& target, const OperandTypes& types, std::size_t first,
                                            int changes) {
  for (std::size_t field = first; field < kFieldCount; ++field) {
    for (const OperandTypes& variant : variants(types, field)) {
      if (changes == 1) {
        if (!supported_opclasses(target, variant).empty()) return variant;
      } else if (auto found = first_supported(target, variant, field + 1, changes - 1)) {
        return found;
      }
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<OperandTypes> nearest_supported(const Target& target, const OperandTypes& types) {
  for (int changes = 1; changes <= 3; ++changes) {
    if (auto found = first_supported(target, types, 0, changes)) return found;
  }
  return std::nullopt;
}

std::vector<int> operand_alignments(const Target& target, OpClass opclass, DataType element,
                                    const OperandTypes& types) {
  return family_for(target, opclass, types).operand_alignments(opclass, element, types);
}

std::vector<TileDescription> tile_descriptions(const Target& target, OpClass opclass, const OperandTypes& types,
                                               const DeviceLimits& limits, int alignment_a, int alignment_b) {
  const Family& family = family_for(target, opclass, types);
  if (alignment_a == 0) alignment_a = family.operand_alignments(opclass, types.a, types).front();
  if (alignment_b == 0) alignment_b = family.operand_alignments(opclass, types.b, types).front();
  std::vector<TileDescription> out = family.tile_descriptions(opclass, types, limits, alignment_a, alignment_b);
  for (TileDescription& td : out) describe_instruction(td, opclass, types);
  return out;
}

void describe_instruction(TileDescription& td, OpClass opclass, const OperandTypes& types) {
  td.instruction_types =
      InstructionTypes{opclass, families::instruction_element(types.a, opclass, td.math_operation),
                       families::instruction_element(types.b, opclass, td.math_operation), types.accumulator};
}

std::vector<MathOperation> math_operations(const Target& target, OpClass opclass, const OperandTypes& types,
                                           const DeviceLimits& limits) {
  std::vector<MathOperation> out;
  for (const TileDescription& td : tile_descriptions(target, opclass, types, limits)) {
    if (std::find(out.begin(), out.end(), td.math_operation) == out.end()) out.push_back(td.math_operation);
  }
  return out;
}

namespace {

// A math operation other than plain multiply-add must be one the family lists for these operands (MultiplyAdd is
// every family's default and needs no check).
void check_math_operation(const KernelSpec& spec, const DeviceLimits& limits) {
  const MathOperation math = spec.tile.math_operation;
  if (math == MathOperation::MultiplyAdd) return;
  const Family& family = family_of(spec.family);
  std::string offered;
  for (const TileDescription& td : family.tile_descriptions(spec.opclass, families::operand_types_of(spec), limits,
                                                            spec.alignment_a, spec.alignment_b)) {
    if (td.math_operation == math) return;
    const std::string name(to_string(td.math_operation));
    if (offered.find(name) == std::string::npos) offered += (offered.empty() ? "" : ", ") + name;
  }
  throw ConfigError("Math operation " + std::string(to_string(math)) + " is not available for " +
                    std::string(to_string(spec.element_a)) + " " + std::string(to_string(spec.opclass)) +
                    " kernels of " + std::string(to_string(spec.family)) + " (kernel_cc " +
                    std::to_string(spec.kernel_cc) + "); they offer " +
                    (offered.empty() ? std::string("multiply_add") : offered) + ".");
}

}  // namespace

void validate(const KernelSpec& spec, const DeviceLimits& limits) {
  check_math_operation(spec, limits);
  if (spec.split_k_mode == SplitKMode::Parallel && !spec.conv && !family_of(spec.family).splits_k_in_parallel()) {
    throw ConfigError(
        "Parallel split-K (split_k_mode parallel) is a Conv2d option and, for GEMMs, an SM90 one "
        "(kernel_cc 90 tensor-op kernels); this spec's family is " +
        std::string(to_string(spec.family)) + ": take serial.");
  }
  if (spec.block_scaling != BlockScaling::None && spec.family != KernelFamily::Sm90Collective &&
      spec.family != KernelFamily::Sm90Grouped) {
    throw ConfigError("Block scaling (" + std::string(to_string(spec.block_scaling)) +
                      ") is a mainloop of SM90 GEMM and grouped GEMM kernels (cc=90, kernel_cc 90); this spec's "
                      "family is " +
                      std::string(to_string(spec.family)) +
                      ". Use Gemm or GroupedGemm on SM90, or per-row scale "
                      "vectors.");
  }
  family_of(spec.family).validate(spec, limits);
}

namespace {

// Relative throughput of a CTA tile's mainloop (larger tiles reuse each loaded byte more).
double tile_efficiency(const Shape3& cta) {
  const int area = cta[0] * cta[1];
  if (area >= 128 * 256) return 1.0;
  if (area >= 128 * 128) return 0.85;
  if (area >= 64 * 128) return 0.65;
  return 0.5;  // 64 x 64: for one wave of few rows (full_wave_of_small_tiles), seldom a cheaper estimate
}

// CTA tiles along M and along N (the last of each partly outside the problem).
std::array<std::int64_t, 2> tiles_along(const Shape3& cta, const ProblemShape& p) {
  return {(p.m + cta[0] - 1) / cta[0], (p.n + cta[1] - 1) / cta[1]};
}

std::int64_t tile_count(const Shape3& cta, const ProblemShape& p) {
  const auto [m, n] = tiles_along(cta, p);
  return m * n * p.batch;
}

int cta_area(const TileDescription& td) {
  return td.cta_tile()[0] * td.cta_tile()[1];
}

bool stream_k(const TileDescription& td) {
  return td.tile_scheduler == TileScheduler::StreamK;
}

// The entries whose estimated times the heuristics compare: the default's kernel schedule and cluster shape, and no
// Stream-K (one per CTA shape, as auto-scheduled).
bool weighed(const TileDescription& td, const TileDescription& front) {
  return !stream_k(td) && td.kernel_schedule == front.kernel_schedule && td.cluster_shape == front.cluster_shape;
}

// Entry i, or the same tile on its family's own mainloop where `tiles` lists that (Family::own_mainloop_twin).
std::size_t with_own_mainloop(const std::vector<TileDescription>& tiles, const KernelSpec& spec, std::size_t i) {
  if (i >= tiles.size()) return i;
  KernelSpec chosen = spec;
  chosen.tile = tiles[i];
  const std::optional<TileDescription> twin = family_of(spec.family).own_mainloop_twin(chosen);
  const auto found = twin ? std::find(tiles.begin(), tiles.end(), *twin) : tiles.end();
  return found != tiles.end() ? static_cast<std::size_t>(found - tiles.begin()) : i;
}

// The entry the heuristics weigh the others against: the default, or, where the default is its family's own
// mainloop (FP8 lists it first), the builders' configuration it runs in place of.
const TileDescription& weighing_front(const std::vector<TileDescription>& tiles, const KernelSpec& spec) {
  const TileDescription& front = tiles.front();
  for (std::size_t i = 1; i < tiles.size(); ++i) {
    // A twin keeps its configuration's tile and cluster: only those entries need the family's answer.
    const TileDescription& td = tiles[i];
    if (td.threadblock_shape != front.threadblock_shape || td.cluster_shape != front.cluster_shape) continue;
    if (with_own_mainloop(tiles, spec, i) == 0) return td;
  }
  return front;
}

// Output tiles as the persistent schedulers count them: CTA tiles, rounded up to whole clusters.
std::int64_t cluster_tile_count(const TileDescription& td, const ProblemShape& p) {
  auto whole_clusters = [](std::int64_t tiles, int cluster) { return (tiles + cluster - 1) / cluster * cluster; };
  const auto [m, n] = tiles_along(td.cta_tile(), p);
  return whole_clusters(m, td.cluster_shape[0]) * whole_clusters(n, td.cluster_shape[1]) * p.batch;
}

// The tile of least estimated time (waves x tile area / efficiency) among the entries `eligible` accepts, then those
// `later` accepts; a later entry must win clearly (3%), else the earlier one stays. Waves count whole clusters: a 2x1
// cluster of 128-row tiles at M = 128 launches an idle CTA beside each busy one. tiles.size() when none is eligible.
template <class Eligible, class Later>
std::size_t cheapest_tile(const std::vector<TileDescription>& tiles, const ProblemShape& shape, int sm_count,
                          Eligible eligible, Later later) {
  std::size_t best = tiles.size();
  double best_cost = 0.0;
  auto weigh = [&](auto accepts) {
    for (std::size_t i = 0; i < tiles.size(); ++i) {
      if (!accepts(tiles[i])) continue;
      const Shape3 cta = tiles[i].cta_tile();
      const double waves = static_cast<double>((cluster_tile_count(tiles[i], shape) + sm_count - 1) / sm_count);
      const double cost = waves * cta[0] * cta[1] / tile_efficiency(cta);
      if (best == tiles.size() || cost < best_cost * 0.97) {
        best = i;
        best_cost = cost;
      }
    }
  };
  weigh(eligible);
  weigh(later);
  return best;
}

template <class Eligible>
std::size_t cheapest_tile(const std::vector<TileDescription>& tiles, const ProblemShape& shape, int sm_count,
                          Eligible eligible) {
  return cheapest_tile(tiles, shape, sm_count, eligible, [](const TileDescription&) { return false; });
}

// An entry in the default's cluster transposed (1x2 for 2x1), where the default's cluster would pad this CTA shape's
// tiles along M or N: a padded cluster runs an idle CTA beside every busy one (M = 128 rows in 2x1 clusters of 128-row
// tiles), which the transposed cluster avoids.
bool transposed_cluster(const TileDescription& td, const TileDescription& front, const ProblemShape& shape) {
  const Shape3 cluster = front.cluster_shape;
  if (cluster[0] == cluster[1] || td.cluster_shape != Shape3{cluster[1], cluster[0], cluster[2]} ||
      td.kernel_schedule != front.kernel_schedule || stream_k(td)) {
    return false;
  }
  const auto [blocks_m, blocks_n] = tiles_along(td.cta_tile(), shape);
  return blocks_m % cluster[0] != 0 || blocks_n % cluster[1] != 0;
}

bool splits_k(const std::vector<TileDescription>& tiles, std::size_t i, const ProblemShape& shape, int sm_count) {
  return i != tiles.size() && choose_k_split(tiles[i], shape, sm_count).mode == Decomposition::SplitK;
}

// Decode-like problems: at most 64 rows against a B of at least 16M elements, which the kernel mostly streams from
// memory, so what counts is how many SMs read it.
constexpr std::int64_t kDecodeRows = 64;
constexpr double kDecodeMinBElements = 16.0 * 1024 * 1024;

// The smallest data-parallel tile the heuristics weigh, when it is 64 x 64 and its tiles fill most of one wave (at
// least 3/4 of the SMs, counting real tiles, and at most one wave of clusters): a problem of few rows and a long K then
// runs unsplit, as cuBLAS runs 128x4096x4096 (64 x 64 tiles in 2x1 clusters), with no partial sums to write and add
// up; tiles.size() otherwise.
std::size_t full_wave_of_small_tiles(const std::vector<TileDescription>& tiles, const TileDescription& front,
                                     const ProblemShape& shape, int sm_count) {
  std::size_t smallest = tiles.size();
  for (std::size_t i = 0; i < tiles.size(); ++i) {
    if (weighed(tiles[i], front) && (smallest == tiles.size() || cta_area(tiles[i]) < cta_area(tiles[smallest]))) {
      smallest = i;
    }
  }
  // 64 x 64 only: one unsplit wave of larger tiles (FP8's smallest is 64 x 128) leaves a long K to too few CTAs, and
  // parallel split-K beats it there.
  if (smallest == tiles.size() || cta_area(tiles[smallest]) > 64 * 64) {
    return tiles.size();
  }
  const bool one_wave = cluster_tile_count(tiles[smallest], shape) <= sm_count;
  const bool fills = tile_count(tiles[smallest].cta_tile(), shape) * 4 >= std::int64_t{3} * sm_count;
  return one_wave && fills ? smallest : tiles.size();
}

}  // namespace

int choose_split_k(std::int64_t output_tiles, std::int64_t k_iterations, int sm_count) {
  if (output_tiles < 1 || sm_count < 1 || output_tiles >= sm_count) return 1;
  const std::int64_t target = (std::int64_t{kSplitKWaves} * sm_count + output_tiles - 1) / output_tiles;
  const std::int64_t most = std::min<std::int64_t>(k_iterations / kMinSplitKIterations, kMaxSplitKSlices);
  return static_cast<int>(std::max<std::int64_t>(1, std::min(target, most)));
}

namespace {

// The most slices whose partial sums (f32, written and read: 8 bytes per output element and slice) cost no more
// memory traffic than reading the operands once (16-bit: 2 bytes per element of the m x k and k x n operands).
std::int64_t partial_sums_cap(const ProblemShape& shape) {
  const std::int64_t outputs = std::max<std::int64_t>(1, shape.m * shape.n);
  return (shape.m + shape.n) * shape.k / (4 * outputs);
}

}  // namespace

SplitChoice choose_split_k_tile(const std::vector<TileDescription>& tiles, const ProblemShape& shape, int sm_count) {
  SplitChoice best;
  if (sm_count < 1) return best;
  double best_cost = 0.0;
  for (std::size_t i = 0; i < tiles.size(); ++i) {
    const TileDescription& td = tiles[i];
    if (!weighed(td, tiles.front())) continue;
    const Shape3 cta = td.cta_tile();
    const std::int64_t output_tiles = cluster_tile_count(td, shape);
    const std::int64_t k_iterations = (shape.k + cta[2] - 1) / cta[2];
    const int slices = static_cast<int>(std::min<std::int64_t>(choose_split_k(output_tiles, k_iterations, sm_count),
                                                               std::max<std::int64_t>(1, partial_sums_cap(shape))));
    const double waves = static_cast<double>((output_tiles * slices + sm_count - 1) / sm_count);
    const double steps = static_cast<double>((k_iterations + slices - 1) / slices);
    const double cost = waves * cta[0] * cta[1] / tile_efficiency(cta) * steps;
    if (i == 0 || cost < best_cost * 0.97) {
      best = {i, slices};
      best_cost = cost;
    }
  }
  return best;
}

bool transposes_for_decode(const ProblemShape& shape) {
  return shape.batch == 1 && shape.m <= kDecodeColumns &&
         static_cast<double>(shape.n) * static_cast<double>(shape.k) >= kDecodeMinBElements;
}

std::size_t choose_decode_tile(const std::vector<TileDescription>& tiles, const ProblemShape& transposed,
                               int sm_count) {
  const auto narrow = [&](const TileDescription& td, int cluster_rows) {
    const Shape3 cta = td.cta_tile();
    return cta[1] >= transposed.n && cta[1] == kDecodeColumns && td.cluster_shape == Shape3{cluster_rows, 1, 1} &&
           td.tile_scheduler == TileScheduler::Default;
  };
  const auto find = [&](int cluster_rows) {
    return static_cast<std::size_t>(
        std::find_if(tiles.begin(), tiles.end(), [&](const TileDescription& td) { return narrow(td, cluster_rows); }) -
        tiles.begin());
  };
  const std::size_t fours = find(4), pairs = find(2);
  if (fours == tiles.size() || pairs == tiles.size() || sm_count < 1) return tiles.size();
  const std::int64_t row_tiles = tile_count(tiles[fours].cta_tile(), transposed);
  if (row_tiles * 100 < std::int64_t{sm_count} * 48) return tiles.size();  // 64 tiles on 132 SMs measured, not fewer
  return row_tiles * 2 <= sm_count ? fours : pairs;
}

namespace {

constexpr int kContiguousWide = 256;

// The configuration of `tiles` (past the front) that differs from the front only in its CTA tile, `shape`; 0 if none.
std::size_t contiguous_sibling(const std::vector<TileDescription>& tiles, const Shape3& shape) {
  const TileDescription& front = tiles.front();
  for (std::size_t i = 1; i < tiles.size(); ++i) {
    const TileDescription& td = tiles[i];
    if (td.cta_tile() == shape && td.cluster_shape == front.cluster_shape &&
        td.kernel_schedule == front.kernel_schedule && td.epilogue_schedule == front.epilogue_schedule &&
        td.math_operation == front.math_operation && !stream_k(td)) {
      return i;
    }
  }
  return 0;
}

}  // namespace

std::size_t choose_contiguous_tile(const KernelSpec& base, const std::vector<TileDescription>& tiles, std::int64_t n,
                                   std::int64_t rows_per_group) {
  if (base.family != KernelFamily::Sm90Grouped || !families::is_half(base.element_a) || tiles.size() <= 1) return 0;
  const Shape3 cta = tiles.front().cta_tile();
  if (n % kContiguousWide == 0) return contiguous_sibling(tiles, {cta[0], kContiguousWide, cta[2]});
  return rows_per_group >= kContiguousWide ? contiguous_sibling(tiles, {kContiguousWide, cta[1], cta[2]}) : 0;
}

std::size_t choose_contiguous_rival(const std::vector<TileDescription>& tiles, std::size_t chosen, std::int64_t n,
                                    std::int64_t rows_per_group) {
  // Where 256 divides N, 128 x 256 never needs more tiles than 256 x 128: nothing to weigh on the GPU. Where the
  // experts average four 256-row tiles or more, the padding of their last tiles decides too little to pay for the
  // second launch.
  constexpr std::int64_t kRivalRowsBelow = 4 * kContiguousWide;
  if (chosen == 0 || n % kContiguousWide == 0 || rows_per_group >= kRivalRowsBelow) return 0;
  const Shape3 cta = tiles[chosen].cta_tile();
  return contiguous_sibling(tiles, {cta[1], cta[0], cta[2]});
}

std::size_t choose_stream_k_one_wave(const TileDescription& data_parallel, const std::vector<TileDescription>& tiles,
                                     const ProblemShape& shape, int sm_count) {
  constexpr double kMinFlops = 1e9;
  const Shape3 cta = data_parallel.cta_tile();
  if (tile_count(cta, shape) * shape.batch > sm_count || shape.k < kStreamKMinKSteps * cta[2] ||
      2.0 * shape.m * shape.n * shape.k * shape.batch < kMinFlops) {
    return tiles.size();
  }
  std::size_t best = tiles.size();
  for (std::size_t i = 0; i < tiles.size(); ++i) {
    const std::int64_t k_steps = (shape.k + tiles[i].cta_tile()[2] - 1) / tiles[i].cta_tile()[2];
    const double steps_per_sm = static_cast<double>(tile_count(tiles[i].cta_tile(), shape) * k_steps) / sm_count;
    if (steps_per_sm >= kStreamKMinStepsPerSm && (best == tiles.size() || cta_area(tiles[i]) > cta_area(tiles[best]))) {
      best = i;
    }
  }
  return best;
}

std::size_t smallest_stream_k(const std::vector<TileDescription>& tiles, const ProblemShape& shape) {
  auto area = [&](std::size_t i) { return cta_area(tiles[i]); };
  auto wasted = [&](std::size_t i) {
    return cluster_tile_count(tiles[i], shape) > tile_count(tiles[i].cta_tile(), shape);
  };
  std::size_t best = tiles.size();
  for (std::size_t i = 0; i < tiles.size(); ++i) {
    if (!stream_k(tiles[i])) continue;
    if (best == tiles.size() || area(i) < area(best) || (area(i) == area(best) && wasted(best) && !wasted(i))) {
      best = i;
    }
  }
  return best;
}

int choose_max_swizzle(const TileDescription& tile, const ProblemShape& shape) {
  const auto [blocks_m, blocks_n] = tiles_along(tile.cta_tile(), shape);
  const int cluster_m = tile.cluster_shape[0], cluster_n = tile.cluster_shape[1];
  if (std::min(blocks_m / cluster_m, blocks_n / cluster_n) < kSwizzleMinClusters) return 1;
  for (const int size : {8, 4, 2}) {
    if (blocks_m % (size * cluster_m) == 0 && blocks_n % (size * cluster_n) == 0) return size;
  }
  return 1;
}

KSplit choose_k_split(const TileDescription& tile, const ProblemShape& shape, int sm_count) {
  const std::int64_t tiles = cluster_tile_count(tile, shape);
  const std::int64_t k_tiles = (shape.k + tile.cta_tile()[2] - 1) / tile.cta_tile()[2];
  if (tiles == 0 || tiles * 2 > sm_count) return {};
  const std::int64_t splits = std::min({sm_count / tiles, k_tiles / kMinKTilesPerSplit, std::int64_t{kMaxSplits}});
  if (splits < 2) return {};
  return {Decomposition::SplitK, static_cast<int>(splits)};
}

namespace {

// choose_tile's pick among the builders' mainloops (see there); index 0 is the default.
// every_size: weigh the tile shapes for a tail wave at any number of waves, not only up to four; where the default is
// its family's own mainloop (FP8), whose 128 x 192 and 128 x 128 tiles run at one speed per tile, so only the waves
// tell them apart (4096^3: 5.3 waves of 128 x 192 against 7.8 of 128 x 128, which ran 8 % faster).
std::size_t choose_builders_tile(const std::vector<TileDescription>& tiles, const TileDescription& front,
                                 const ProblemShape& shape, int sm_count, bool split_k, bool every_size,
                                 int kernel_cc) {
  const std::int64_t default_tiles = tile_count(front.cta_tile(), shape);
  // The tile shape of least estimated time among each shape's first (auto-scheduled) entry in the default's cluster,
  // then in the transposed cluster where the default's pads; tiles.size() if none.
  const auto cheapest_shape = [&] {
    return cheapest_tile(
        tiles, shape, sm_count, [&](const TileDescription& td) { return weighed(td, front); },
        [&](const TileDescription& td) { return transposed_cluster(td, front, shape); });
  };
  if (default_tiles >= sm_count) {
    // A skinny output (M or N well under the default tile's: a 1x1 conv's 64 output channels on a 256-wide tile)
    // leaves most of each tile's MMAs idle: the tile shape of least estimated time instead.
    const Shape3 cta = front.cta_tile();
    auto covered = [](std::int64_t extent, int tile) {
      return static_cast<double>(extent) / static_cast<double>((extent + tile - 1) / tile * tile);
    };
    if (covered(shape.m, cta[0]) * covered(shape.n, cta[1]) < 0.75) {
      if (const std::size_t best = cheapest_shape(); best != tiles.size()) return best;
    }
    const std::int64_t last_wave = default_tiles % sm_count;
    if (last_wave == 0) return 0;
    if (default_tiles > 4 * sm_count) {
      if (!every_size) return 0;
      const std::size_t best = cheapest_shape();
      return best != tiles.size() ? best : 0;
    }
    // A few waves with a partly idle last one (3000^3: 2 waves + 24 tiles): a tile shape that fills the waves better,
    // when the estimate wins clearly (cheapest_tile's 3%); else the default when its last wave is at least half full.
    const std::size_t best = cheapest_shape();
    if (best != tiles.size() && best != 0) return best;
    if (last_wave * 2 >= sm_count) return 0;
    // Else Stream-K spreads the work evenly, so no SM waits out a mostly empty last wave.
    for (std::size_t i = 0; i < tiles.size(); ++i) {
      if (stream_k(tiles[i]) && tiles[i].cta_tile() == front.cta_tile() &&
          tiles[i].cluster_shape == front.cluster_shape) {
        return i;
      }
    }
    return 0;
  }
  const std::size_t stream_k_tile = smallest_stream_k(tiles, shape);
  if (shape.m <= kDecodeRows && static_cast<double>(shape.n) * shape.k * shape.batch >= kDecodeMinBElements) {
    // Not 64 x 64: here the run time is B's reading, and tiles at least 128 wide (or split K) keep more of it in
    // flight per SM than one wave of 64 x 64.
    auto row_tile = [](const TileDescription& td) {
      return td.cta_tile()[0] == kDecodeRows && td.cta_tile()[1] >= 128 && td.cluster_shape == Shape3{1, 1, 1} &&
             td.kernel_schedule == KernelSchedule::Auto && !stream_k(td);
    };
    const std::size_t narrow = cheapest_tile(tiles, shape, sm_count, row_tile);
    std::int64_t most_ctas = 0;  // the 64-row tiles' best SM coverage
    for (const TileDescription& td : tiles) {
      if (row_tile(td)) most_ctas = std::max(most_ctas, tile_count(td.cta_tile(), shape));
    }
    if (split_k && most_ctas * 2 <= sm_count && splits_k(tiles, stream_k_tile, shape, sm_count)) return stream_k_tile;
    if (narrow != tiles.size()) return narrow;
  }
  // Few output tiles and a long K: split K across SMs on the smallest Stream-K tile (most work units, so every SM
  // takes a share of the K loop instead of a few SMs walking all of it).
  const bool few_tiles = default_tiles * 2 <= sm_count && stream_k_tile != tiles.size();
  const bool long_k = few_tiles && (split_k ? splits_k(tiles, stream_k_tile, shape, sm_count)
                                            : shape.k >= 8 * std::max(shape.m, shape.n));
  // Below a GFLOP the kernel takes microseconds whatever its tile: keep the default, so one compiled kernel serves
  // every small problem of the plan; unless each CTA would walk a K of 64 steps or more alone (a 1x1 conv's wgrad,
  // 64 x 64 over K = 100352), where that serial walk is the whole run time.
  constexpr double kMinFlopsForShapeChoice = 1e9;
  constexpr std::int64_t kLongWalkKSteps = 64;
  const bool long_walk = (shape.k + front.cta_tile()[2] - 1) / front.cta_tile()[2] >= kLongWalkKSteps;
  if (2.0 * shape.m * shape.n * shape.k * shape.batch < kMinFlopsForShapeChoice) {
    return long_k && long_walk ? stream_k_tile : 0;
  }
  if (long_k) {
    // Unless the smallest tiles fill one wave: then they run unsplit, with no partial sums to write and add up.
    const std::size_t small = full_wave_of_small_tiles(tiles, front, shape, sm_count);
    return small != tiles.size() ? small : stream_k_tile;
  }
  // Otherwise the tile shape with the lowest estimated time.
  const std::size_t best = cheapest_shape();
  if (best == tiles.size()) return 0;
  // When that is the 64 x 128 tile in one wave, SM90 kernels take 128 x 64 tiles without a cluster (cuBLAS's choice
  // at 1024^3): every tile runs at once, so a cluster's multicast saves nothing. The 2.x two-stage kernels ran the
  // other way (1001^3: 64 x 128 13 % faster than 128 x 64).
  if (kernel_cc >= 90 && tiles[best].cta_tile()[0] == 64 && tiles[best].cta_tile()[1] == 128) {
    for (std::size_t i = 0; i < tiles.size(); ++i) {
      const TileDescription& td = tiles[i];
      const bool wide_rows = td.cta_tile()[0] == 128 && td.cta_tile()[1] == 64;
      if (wide_rows && td.cluster_shape == Shape3{1, 1, 1} && td.kernel_schedule == KernelSchedule::Auto &&
          !stream_k(td) && tile_count(td.cta_tile(), shape) <= sm_count) {
        return i;
      }
    }
  }
  return best;
}

}  // namespace

std::size_t choose_tile(const std::vector<TileDescription>& tiles, const KernelSpec& spec, const ProblemShape& shape,
                        int sm_count, bool split_k) {
  if (tiles.size() <= 1 || spec.swizzle == Swizzle::StreamK) return 0;
  const TileDescription& front = weighing_front(tiles, spec);
  const bool own_mainloop_default = &front != &tiles.front();
  return with_own_mainloop(
      tiles, spec, choose_builders_tile(tiles, front, shape, sm_count, split_k, own_mainloop_default, spec.kernel_cc));
}

std::optional<SplitChoice> choose_parallel_split(const std::vector<TileDescription>& tiles, const KernelSpec& spec,
                                                 const ProblemShape& shape, int sm_count, int k_granule) {
  // Relative mainloop throughput of the CTA shapes with partial sums (64-row tiles ran closer to 128 x 128 than in
  // choose_tile's table, 128 x 64 a little closer still: cuBLAS's tile at 512x512x16384; 64 x 64 well below), and the
  // H200's per-SM f16 rate and memory bandwidth at what the kernels reach (only their ratio matters).
  auto efficiency = [](const Shape3& cta) {
    const int area = cta[0] * cta[1];
    return area >= 128 * 256 ? 1.0 : area < 64 * 128 ? 0.6 : cta[0] == 64 ? 0.8 : 0.85;
  };
  constexpr double kSmFlops = 6e12, kBytesPerSecond = 3e12;
  std::optional<SplitChoice> best;
  double best_seconds = 0;
  for (std::size_t i = 0; i < tiles.size(); ++i) {
    const TileDescription& td = tiles[i];
    if (td.cluster_shape != Shape3{1, 1, 1} || td.kernel_schedule != KernelSchedule::Auto || stream_k(td)) continue;
    const Shape3 cta = td.cta_tile();
    const std::int64_t output_tiles = tile_count(cta, shape);
    for (int slices = 2; slices <= kMaxSplits; ++slices) {
      const std::int64_t slice_k = shape.k / slices;
      if (shape.k % slices != 0 || slice_k % k_granule != 0 || slice_k < std::int64_t{kMinParallelKSteps} * cta[2] ||
          output_tiles * slices > sm_count) {
        continue;
      }
      const double gemm = 2.0 * cta[0] * cta[1] * static_cast<double>(slice_k) / (kSmFlops * efficiency(cta));
      const double partials = 8.0 * slices * static_cast<double>(shape.m) * static_cast<double>(shape.n);
      const double seconds = gemm + partials / kBytesPerSecond;
      if (!best || seconds < best_seconds) {
        best = SplitChoice{i, slices};
        best_seconds = seconds;
      }
    }
  }
  if (best) best->tile = with_own_mainloop(tiles, spec, best->tile);
  return best;
}

double estimated_time(const TileDescription& td, const ProblemShape& shape, int sm_count, Decomposition decomposition) {
  const Shape3 cta = td.cta_tile();
  const double work = static_cast<double>(cta[0]) * cta[1] / tile_efficiency(cta);
  const auto count = static_cast<double>(tile_count(cta, shape));
  const double sms = std::max(sm_count, 1);
  const bool shares_k = stream_k(td) && decomposition != Decomposition::DataParallel;
  return shares_k ? 1.1 * count * work / sms : std::ceil(count / sms) * work;
}

std::vector<std::size_t> tuning_candidates(const std::vector<TileDescription>& tiles, const KernelSpec& spec,
                                           const ProblemShape& shape, int sm_count, std::size_t max) {
  std::vector<std::size_t> out;
  auto add = [&](std::size_t i) {
    if (out.size() < max && std::find(out.begin(), out.end(), i) == out.end()) out.push_back(i);
  };
  if (tiles.empty()) return out;
  add(choose_tile(tiles, spec, shape, sm_count));
  add(0);
  std::vector<std::pair<double, std::size_t>> by_cost;
  for (std::size_t i = 0; i < tiles.size(); ++i) by_cost.emplace_back(estimated_time(tiles[i], shape, sm_count), i);
  std::stable_sort(by_cost.begin(), by_cost.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  // Variety first: the cheapest entry of each CTA shape (data-parallel and Stream-K apart) fills half the budget,
  // then of each cluster and schedule, then whatever is cheapest.
  using Variety = std::tuple<Shape3, Shape3, KernelSchedule, bool>;
  std::set<Variety> shapes, variants;
  for (const auto& [cost, i] : by_cost) {
    const TileDescription& td = tiles[i];
    if (out.size() < (max + 1) / 2 && shapes.insert({td.cta_tile(), {}, {}, stream_k(td)}).second) add(i);
  }
  for (const auto& [cost, i] : by_cost) {
    const TileDescription& td = tiles[i];
    if (variants.insert({td.cta_tile(), td.cluster_shape, td.kernel_schedule, stream_k(td)}).second) add(i);
  }
  for (const auto& entry : by_cost) add(entry.second);
  return out;
}

}  // namespace gemmkit::catalog
