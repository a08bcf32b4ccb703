// src/catalog/catalog.cpp: configuration tables for SM80 (CUTLASS 2.x) and SM90 (CUTLASS 3.x), default choice
// and the validation rules checked before any compiler runs.
#include "catalog/catalog.hpp"

#include <algorithm>
#include <sstream>

#include "gemmkit/errors.hpp"

namespace gemmkit::catalog {
namespace {

struct Sm80Tile {
  Shape3 tb;
  Shape3 warps;
  int stages;
};

// Threadblock / warp-count / stage tables per math instruction, the default first.
const std::vector<Sm80Tile> kSm80Half = {
    {{256, 128, 64}, {4, 2, 1}, 3}, {{128, 256, 64}, {2, 4, 1}, 3}, {{256, 128, 32}, {4, 2, 1}, 3},
    {{128, 256, 32}, {2, 4, 1}, 3}, {{256, 64, 64}, {4, 1, 1}, 3},  {{256, 64, 64}, {4, 1, 1}, 4},
    {{64, 256, 64}, {1, 4, 1}, 3},  {{64, 256, 64}, {1, 4, 1}, 4},  {{128, 128, 64}, {2, 2, 1}, 3},
    {{128, 128, 64}, {2, 2, 1}, 4}, {{256, 64, 32}, {4, 1, 1}, 3},  {{256, 64, 32}, {4, 1, 1}, 4},
    {{64, 256, 32}, {1, 4, 1}, 4},  {{128, 128, 32}, {2, 2, 1}, 3}, {{128, 128, 32}, {2, 2, 1}, 4},
    {{128, 128, 32}, {2, 2, 1}, 5}, {{128, 64, 64}, {2, 2, 1}, 3},  {{64, 128, 64}, {2, 2, 1}, 3},
    {{128, 64, 32}, {2, 2, 1}, 6},  {{64, 128, 32}, {2, 2, 1}, 6},  {{64, 64, 64}, {2, 2, 1}, 5},
    {{64, 64, 32}, {2, 2, 1}, 10},
};
const std::vector<Sm80Tile> kSm80Tf32 = {
    {{256, 128, 32}, {4, 2, 1}, 3}, {{128, 256, 32}, {2, 4, 1}, 3}, {{256, 128, 16}, {4, 2, 1}, 3},
    {{128, 256, 16}, {2, 4, 1}, 3}, {{256, 64, 32}, {4, 2, 1}, 3},  {{64, 256, 32}, {2, 4, 1}, 3},
    {{256, 64, 16}, {4, 2, 1}, 4},  {{64, 256, 16}, {2, 4, 1}, 4},  {{128, 128, 32}, {2, 2, 1}, 3},
    {{128, 128, 32}, {2, 2, 1}, 4}, {{128, 128, 16}, {2, 2, 1}, 4}, {{128, 128, 16}, {2, 2, 1}, 5},
    {{128, 64, 32}, {2, 2, 1}, 3},  {{64, 128, 32}, {2, 2, 1}, 3},  {{128, 64, 16}, {2, 2, 1}, 6},
    {{64, 128, 16}, {2, 2, 1}, 6},  {{64, 64, 32}, {2, 2, 1}, 5},   {{64, 64, 16}, {2, 2, 1}, 10},
};
const std::vector<Sm80Tile> kSm80F64 = {
    {{128, 128, 16}, {4, 2, 1}, 3}, {{256, 64, 16}, {4, 2, 1}, 3}, {{64, 256, 16}, {2, 4, 1}, 3},
    {{256, 32, 16}, {4, 1, 1}, 3},  {{32, 256, 16}, {1, 4, 1}, 3}, {{128, 64, 16}, {2, 2, 1}, 3},
    {{64, 128, 16}, {2, 2, 1}, 3},  {{64, 64, 16}, {2, 2, 1}, 4},  {{64, 32, 16}, {2, 2, 1}, 4},
    {{32, 64, 16}, {2, 2, 1}, 4},   {{32, 32, 16}, {2, 2, 1}, 5},  {{16, 32, 16}, {1, 2, 1}, 5},
    {{32, 16, 16}, {2, 1, 1}, 5},
};
const std::vector<Sm80Tile> kSm80Int8 = {
    {{256, 128, 128}, {4, 2, 1}, 3}, {{128, 256, 128}, {2, 4, 1}, 3}, {{256, 128, 64}, {4, 2, 1}, 3},
    {{128, 256, 64}, {2, 4, 1}, 3},  {{256, 64, 128}, {4, 1, 1}, 4},  {{64, 256, 128}, {1, 4, 1}, 4},
    {{128, 128, 128}, {2, 2, 1}, 3}, {{128, 128, 128}, {2, 2, 1}, 4}, {{256, 64, 64}, {4, 1, 1}, 3},
    {{64, 256, 64}, {1, 4, 1}, 4},   {{128, 128, 64}, {2, 2, 1}, 3},  {{128, 128, 64}, {2, 2, 1}, 4},
    {{128, 64, 64}, {2, 2, 1}, 6},   {{64, 128, 64}, {2, 2, 1}, 6},   {{64, 64, 128}, {2, 2, 1}, 5},
    {{64, 64, 64}, {2, 2, 1}, 10},
};
const std::vector<Sm80Tile> kSm80SimtF32 = {
    {{128, 128, 8}, {4, 2, 1}, 4}, {{128, 128, 8}, {4, 2, 1}, 5}, {{256, 128, 8}, {4, 2, 1}, 4},
    {{256, 128, 8}, {4, 2, 1}, 5}, {{128, 256, 8}, {2, 4, 1}, 4}, {{128, 256, 8}, {2, 4, 1}, 5},
    {{128, 64, 8}, {2, 2, 1}, 5},  {{64, 128, 8}, {2, 2, 1}, 5},  {{64, 64, 8}, {2, 1, 1}, 5},
    {{128, 32, 8}, {2, 1, 1}, 5},  {{32, 128, 8}, {1, 2, 1}, 5},
};
const std::vector<Sm80Tile> kSm80SimtF64 = {
    {{128, 128, 8}, {4, 2, 1}, 3}, {{128, 64, 8}, {2, 2, 1}, 4}, {{64, 128, 8}, {2, 2, 1}, 4},
    {{64, 64, 8}, {2, 1, 1}, 5},   {{128, 32, 8}, {2, 1, 1}, 5}, {{32, 128, 8}, {1, 2, 1}, 5},
};
// SIMT for types without a tuned table (f16, int8): one generic configuration, as the reference has.
const std::vector<Sm80Tile> kSm80SimtGeneric = {{{128, 128, 8}, {4, 2, 1}, 2}};

bool is_half(DataType t) { return t == DataType::f16 || t == DataType::bf16; }
bool is_int8(DataType t) { return t == DataType::s8 || t == DataType::u8; }

// Tensor-core math exists for these operand/accumulator combinations.
bool tensor_op_types(const OperandTypes& t) {
  if (t.a != t.b) return false;
  if (t.a == DataType::f16) return t.accumulator == DataType::f32 || t.accumulator == DataType::f16;
  if (t.a == DataType::bf16) return t.accumulator == DataType::f32;
  if (t.a == DataType::f32) return t.accumulator == DataType::f32;
  if (t.a == DataType::f64) return t.accumulator == DataType::f64;
  if (is_int8(t.a)) return t.accumulator == DataType::s32;
  return false;
}

bool simt_types(const OperandTypes& t) {
  if (t.a != t.b) return false;
  switch (t.a) {
    case DataType::f16: return t.accumulator == DataType::f32 || t.accumulator == DataType::f16;
    case DataType::f32: return t.accumulator == DataType::f32;
    case DataType::f64: return t.accumulator == DataType::f64;
    case DataType::s8: return t.accumulator == DataType::s32;
    default: return false;
  }
}

// Integer tensor cores read A row-major and B column-major ("TN") only.
bool layouts_ok_for_tensor_op(const OperandTypes& t) {
  if (!is_int8(t.a)) return true;
  return t.layout_a == Layout::RowMajor && t.layout_b == Layout::ColumnMajor;
}

// C and D of 2.x kernels share one type; 3.x kernels may differ (e.g. f32 C, f16 D).
bool output_types_ok(int kernel_cc, const OperandTypes& t) {
  if (t.d == DataType::void_t || t.c == DataType::void_t) return false;
  if (kernel_cc < 90 && t.c != t.d) return false;
  if (is_integer(t.accumulator)) return t.d == DataType::s32 || t.d == DataType::s8;
  return !is_integer(t.d);
}

Shape3 sm80_instruction(DataType a, OpClass opclass) {
  if (opclass == OpClass::Simt) return {1, 1, 1};
  if (is_half(a)) return {16, 8, 16};
  if (a == DataType::f32) return {16, 8, 8};
  if (a == DataType::f64) return {8, 8, 4};
  return {16, 8, 32};  // int8
}

const std::vector<Sm80Tile>& sm80_table(DataType a, OpClass opclass) {
  if (opclass == OpClass::Simt) {
    if (a == DataType::f32) return kSm80SimtF32;
    if (a == DataType::f64) return kSm80SimtF64;
    return kSm80SimtGeneric;
  }
  if (is_half(a)) return kSm80Half;
  if (a == DataType::f32) return kSm80Tf32;
  if (a == DataType::f64) return kSm80F64;
  return kSm80Int8;
}

std::vector<TileDescription> sm80_tiles(OpClass opclass, const OperandTypes& types, const DeviceLimits& limits) {
  std::vector<TileDescription> out;
  for (const auto& row : sm80_table(types.a, opclass)) {
    TileDescription td;
    td.threadblock_shape = row.tb;
    td.warp_count = row.warps;
    td.stages = row.stages;
    td.instruction_shape = sm80_instruction(types.a, opclass);
    if (is_int8(types.a) && opclass == OpClass::TensorOp) td.math_operation = MathOperation::MultiplyAddSaturate;
    if (smem_bytes_per_stage(td, types.a, types.b) * td.stages > limits.max_smem_per_block) continue;
    out.push_back(td);
    // 3xTF32 ("fast f32") keeps f32 accuracy on tensor cores: offered beside every tf32 configuration.
    if (types.a == DataType::f32 && opclass == OpClass::TensorOp) {
      td.math_operation = MathOperation::MultiplyAddFastF32;
      out.push_back(td);
    }
  }
  return out;
}

struct Sm90Cta {
  int m, n;
};

// CTA tiles (M x N) of the SM90 table; K depth depends on the element width (128 bytes).
const std::vector<Sm90Cta> kSm90Ctas = {{128, 256}, {256, 128}, {128, 128}, {64, 256}, {64, 128}};
const std::vector<Shape3> kSm90Clusters = {{2, 1, 1}, {1, 2, 1}, {1, 1, 1}};

int sm90_tile_k(DataType a) { return 128 * 8 / bits_of(a); }

bool tma_compatible(int alignment, DataType element) { return alignment * bits_of(element) % 128 == 0; }

std::vector<TileDescription> sm90_tiles(const OperandTypes& types, int alignment_a, int alignment_b) {
  const bool tma = tma_compatible(alignment_a, types.a) && tma_compatible(alignment_b, types.b);
  std::vector<TileDescription> out;
  for (const auto& cta : kSm90Ctas) {
    if (is_int8(types.a) && cta.m == 256) continue;
    for (const auto& cluster : kSm90Clusters) {
      TileDescription td;
      td.cluster_shape = cluster;
      td.threadblock_shape = {cta.m * cluster[0], cta.n * cluster[1], sm90_tile_k(types.a)};
      td.warp_count = {4, 1, 1};
      td.stages = 0;
      auto add = [&](KernelSchedule k, EpilogueSchedule e, TileScheduler s) {
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
        add(KernelSchedule::TmaWarpSpecializedCooperative, EpilogueSchedule::TmaWarpSpecializedCooperative,
            TileScheduler::StreamK);
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
  return out;
}

std::string shape_text(const Shape3& s) {
  return std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" + std::to_string(s[2]);
}

[[noreturn]] void fail(const std::string& message) { throw ConfigError(message); }

bool is_auto(KernelSchedule k) { return k == KernelSchedule::Auto; }
bool is_cooperative(KernelSchedule k) {
  return k == KernelSchedule::TmaWarpSpecializedCooperative || k == KernelSchedule::CpAsyncWarpSpecializedCooperative;
}
bool is_tma_schedule(KernelSchedule k) {
  return k == KernelSchedule::TmaWarpSpecialized || k == KernelSchedule::TmaWarpSpecializedPingpong ||
         k == KernelSchedule::TmaWarpSpecializedCooperative;
}

void validate_sm90_stages(const KernelSpec& spec) {
  const auto& td = spec.tile;
  if (td.stages == 0) return;  // the collective builder fits as many stages as shared memory allows
  if (td.stages < 2) {
    fail("Stage count " + std::to_string(td.stages) +
         " is invalid for SM90 kernels: use 0 (as many as fit) or an explicit count of at least 2.");
  }
}

}  // namespace

DeviceLimits limits_for_cc(int cc) {
  // Opt-in shared memory per block (bytes) and SM count of the flagship part of each generation.
  if (cc >= 90) return {cc, 132, 232448};
  if (cc == 80 || cc == 87) return {cc, 108, 166912};
  if (cc == 86 || cc == 89) return {cc, 84, 101376};
  return {cc, 80, 65536};
}

int kernel_cc_for(int cc, OpClass opclass, const OperandTypes& types) {
  if (cc >= 90 && cc < 100 && opclass == OpClass::TensorOp && types.a != DataType::f64) return 90;
  return 80;
}

KernelFamily family_for(int kernel_cc) {
  return kernel_cc >= 90 ? KernelFamily::Sm90Collective : KernelFamily::Sm80Universal;
}

bool computes_transposed(int cc, OpClass opclass, const OperandTypes& types) {
  return kernel_cc_for(cc, opclass, types) >= 90 && types.a == DataType::f32 && types.layout_a == Layout::RowMajor &&
         types.layout_b == Layout::RowMajor;
}

std::vector<OpClass> supported_opclasses(int cc, const OperandTypes& types) {
  std::vector<OpClass> out;
  if (tensor_op_types(types) && layouts_ok_for_tensor_op(types) &&
      output_types_ok(kernel_cc_for(cc, OpClass::TensorOp, types), types)) {
    out.push_back(OpClass::TensorOp);
  }
  if (simt_types(types) && output_types_ok(80, types)) out.push_back(OpClass::Simt);
  return out;
}

std::vector<int> operand_alignments(int cc, OpClass opclass, DataType element, const OperandTypes& types) {
  // SIMT kernels read scalars; f64 tensor-op kernels are built for scalar loads only, as in the reference.
  if (opclass == OpClass::Simt || element == DataType::f64) return {1};
  const int widest = 128 / bits_of(element);
  const bool sm90 = kernel_cc_for(cc, opclass, types) >= 90;
  std::vector<int> out;
  for (int a = widest; a >= 1; a /= 2) {
    // cp.async moves at least 4 bytes; SM80 int8 tensor-op mainloops need 16-byte rows.
    if (a * bits_of(element) < 32) break;
    if (!sm90 && is_int8(types.a) && element == types.a && a < 16) break;
    out.push_back(a);
  }
  return out;
}

int smem_bytes_per_stage(const TileDescription& tile, DataType a, DataType b) {
  const Shape3 t = tile.cta_tile();
  return bits_of(a) * t[0] * t[2] / 8 + bits_of(b) * t[2] * t[1] / 8 + 32;
}

std::vector<TileDescription> tile_descriptions(int cc, OpClass opclass, const OperandTypes& types,
                                               const DeviceLimits& limits, int alignment_a, int alignment_b) {
  const int kernel_cc = kernel_cc_for(cc, opclass, types);
  if (kernel_cc < 90) return sm80_tiles(opclass, types, limits);
  if (alignment_a == 0) alignment_a = operand_alignments(cc, opclass, types.a, types).front();
  if (alignment_b == 0) alignment_b = operand_alignments(cc, opclass, types.b, types).front();
  return sm90_tiles(types, alignment_a, alignment_b);
}

TileDescription default_tile_description(int cc, OpClass opclass, const OperandTypes& types,
                                         const DeviceLimits& limits) {
  const auto all = tile_descriptions(cc, opclass, types, limits);
  if (all.empty()) {
    fail("No " + std::string(to_string(opclass)) + " configuration fits the " +
         std::to_string(limits.max_smem_per_block) + " bytes of shared memory of SM" + std::to_string(cc) + ".");
  }
  return all.front();
}

namespace {

// Relative throughput of a CTA tile's mainloop (larger tiles reuse each loaded byte more).
double tile_efficiency(const Shape3& cta) {
  const int area = cta[0] * cta[1];
  if (area >= 128 * 256) return 1.0;
  if (area >= 128 * 128) return 0.85;
  return 0.65;
}

std::int64_t tile_count(const Shape3& cta, const ProblemShape& p) {
  return ((p.m + cta[0] - 1) / cta[0]) * ((p.n + cta[1] - 1) / cta[1]) * p.batch;
}

bool stream_k(const TileDescription& td) { return td.tile_scheduler == TileScheduler::StreamK; }

}  // namespace

std::size_t choose_tile(const std::vector<TileDescription>& tiles, const KernelSpec& spec, const ProblemShape& shape,
                        int sm_count) {
  if (tiles.size() <= 1 || spec.swizzle == Swizzle::StreamK) return 0;
  // Below a few GFLOP the kernel takes microseconds whatever its tile: keep the default, so one compiled kernel
  // serves every small problem of the plan.
  constexpr double kMinFlopsForShapeChoice = 4e9;
  if (2.0 * shape.m * shape.n * shape.k * shape.batch < kMinFlopsForShapeChoice) return 0;
  const Shape3 default_cta = tiles.front().cta_tile();
  const std::int64_t default_tiles = tile_count(default_cta, shape);
  if (default_tiles >= sm_count) {
    // A last wave that is mostly idle (e.g. 2 waves + 1 tile): Stream-K spreads the work evenly (1.4x measured).
    const std::int64_t last_wave = default_tiles % sm_count;
    if (last_wave == 0 || last_wave * 4 > sm_count || default_tiles > 4 * sm_count) return 0;
    for (std::size_t i = 0; i < tiles.size(); ++i) {
      if (stream_k(tiles[i]) && tiles[i].cta_tile() == default_cta &&
          tiles[i].cluster_shape == tiles.front().cluster_shape) {
        return i;
      }
    }
    return 0;
  }
  // Few output tiles and a long K: split K across SMs with Stream-K, on the smallest Stream-K tile (most work
  // units; measured 2x over the default tile at 512x512x16384 on the H200).
  if (default_tiles * 2 <= sm_count && shape.k >= 8 * std::max(shape.m, shape.n)) {
    std::size_t best = tiles.size();
    for (std::size_t i = 0; i < tiles.size(); ++i) {
      if (!stream_k(tiles[i])) continue;
      const Shape3 c = tiles[i].cta_tile();
      if (best == tiles.size() || c[0] * c[1] < tiles[best].cta_tile()[0] * tiles[best].cta_tile()[1]) best = i;
    }
    if (best != tiles.size()) return best;
  }
  // Otherwise the tile shape with the lowest estimated time, among each shape's first (auto-scheduled) entry.
  std::size_t best = 0;
  double best_cost = 0.0;
  for (std::size_t i = 0; i < tiles.size(); ++i) {
    const TileDescription& td = tiles[i];
    if (stream_k(td) || td.kernel_schedule != tiles.front().kernel_schedule ||
        td.cluster_shape != tiles.front().cluster_shape) {
      continue;
    }
    const Shape3 cta = td.cta_tile();
    const double waves = static_cast<double>((tile_count(cta, shape) + sm_count - 1) / sm_count);
    const double cost = waves * cta[0] * cta[1] / tile_efficiency(cta);
    if (i == 0 || cost < best_cost * 0.97) {  // a clear win only, else keep the earlier (default) entry
      best = i;
      best_cost = cost;
    }
  }
  return best;
}

void validate(const KernelSpec& spec, const DeviceLimits& limits) {
  const auto& td = spec.tile;
  const bool sm90 = spec.family == KernelFamily::Sm90Collective;
  const std::string arch = "SM" + std::to_string(spec.cc);

  // Cluster shape: a Hopper feature, rank 3 with a unit third dimension, at most 8 CTAs (portable size).
  if (!sm90 && td.cluster_shape != Shape3{1, 1, 1}) {
    fail("Cluster shape " + shape_text(td.cluster_shape) + " needs an SM90 tensor-op kernel; " + arch + " " +
         std::string(to_string(spec.opclass)) + " kernels (CUTLASS 2.x) take cluster shape 1x1x1.");
  }
  if (td.cluster_shape[2] != 1) {
    fail("The third dimension of the cluster shape must be 1; got " + shape_text(td.cluster_shape) + ".");
  }
  const int cluster_size = td.cluster_shape[0] * td.cluster_shape[1] * td.cluster_shape[2];
  if (td.cluster_shape[0] < 1 || td.cluster_shape[1] < 1) {
    fail("Cluster dimensions must be positive; got " + shape_text(td.cluster_shape) + ".");
  }
  if (cluster_size > 16) {
    fail("Cluster shape " + shape_text(td.cluster_shape) + " has " + std::to_string(cluster_size) +
         " CTAs; SM90 allows at most 16 (non-portable) and gemmkit launches portable clusters of at most 8.");
  }
  if (cluster_size > 8) {
    fail("Cluster shape " + shape_text(td.cluster_shape) + " has " + std::to_string(cluster_size) +
         " CTAs, a non-portable size; use at most 8 CTAs per cluster (e.g. 2x1x1, 2x2x1, 4x2x1).");
  }
  for (int i = 0; i < 3; ++i) {
    if (td.threadblock_shape[i] <= 0 || td.threadblock_shape[i] % td.cluster_shape[i] != 0) {
      fail("Threadblock shape " + shape_text(td.threadblock_shape) + " must be a positive multiple of the cluster shape " +
           shape_text(td.cluster_shape) + " in every dimension.");
    }
  }

  // Schedules and tile schedulers: SM90 only; kernel/epilogue both auto or neither; Stream-K needs cooperative.
  const bool any_schedule = !is_auto(td.kernel_schedule) || td.epilogue_schedule != EpilogueSchedule::Auto ||
                            td.tile_scheduler != TileScheduler::Default;
  if (!sm90 && any_schedule) {
    fail("Kernel schedules, epilogue schedules and tile schedulers are SM90 features; this is an " + arch + " " +
         std::string(to_string(spec.opclass)) + " (CUTLASS 2.x) kernel. Leave them at their defaults, or use "
         "swizzle = StreamK for Stream-K.");
  }
  if (sm90 && is_auto(td.kernel_schedule) != (td.epilogue_schedule == EpilogueSchedule::Auto)) {
    fail("Kernel and epilogue schedules must either both be auto or neither be auto (got kernel " +
         std::string(to_string(td.kernel_schedule)) + ", epilogue " + std::string(to_string(td.epilogue_schedule)) +
         ").");
  }
  const bool stream_k = td.tile_scheduler == TileScheduler::StreamK || spec.swizzle == Swizzle::StreamK;
  if (sm90 && stream_k && !is_cooperative(td.kernel_schedule)) {
    fail("The Stream-K tile scheduler needs a cooperative kernel schedule (TmaWarpSpecializedCooperative); got " +
         std::string(to_string(td.kernel_schedule)) + ".");
  }
  if (sm90 && is_cooperative(td.kernel_schedule) && td.cta_tile()[0] < 128) {
    fail("Cooperative kernel schedules need a CTA tile M of at least 128; the CTA tile is " +
         shape_text(td.cta_tile()) + ". Use a Pingpong schedule or a larger tile.");
  }
  if (stream_k && spec.opclass != OpClass::TensorOp) {
    fail("Stream-K is only supported with opcode class TensorOp; this plan uses Simt.");
  }
  if (sm90 && spec.swizzle != Swizzle::Identity1 && spec.swizzle != Swizzle::StreamK) {
    fail("Swizzle " + std::string(to_string(spec.swizzle)) +
         " is a CUTLASS 2.x threadblock swizzle; SM90 kernels take IdentitySwizzle1 (persistent scheduler) or "
         "ThreadblockSwizzleStreamK.");
  }
  // An auto epilogue with a fused activation resolves to the TMA epilogue; the no-smem one cannot fuse.
  const bool fused = spec.activation != Activation::Identity || spec.bias != BiasMode::None;
  if (sm90 && fused && td.epilogue_schedule == EpilogueSchedule::NoSmemWarpSpecialized) {
    fail("Fused activations and bias on SM90 kernels need a TMA epilogue (TmaWarpSpecialized, "
         "TmaWarpSpecializedCooperative or auto); got epilogue schedule NoSmemWarpSpecialized.");
  }

  // Alignment: at most one 128-bit vector; TMA mainloops need 16-byte aligned rows.
  const std::pair<const char*, std::pair<int, DataType>> operands[] = {{"A", {spec.alignment_a, spec.element_a}},
                                                                        {"B", {spec.alignment_b, spec.element_b}},
                                                                        {"C", {spec.alignment_c, spec.element_c}}};
  for (const auto& [name, info] : operands) {
    const auto [alignment, element] = info;
    const int widest = 128 / bits_of(element);
    if (alignment < 1 || alignment > widest || (alignment & (alignment - 1)) != 0) {
      fail(std::string("Alignment ") + std::to_string(alignment) + " of operand " + name +
           " is invalid: it must be a power of two of at most " + std::to_string(widest) + " elements (128 bits of " +
           std::string(to_string(element)) + ").");
    }
  }
  const bool tma_operands =
      tma_compatible(spec.alignment_a, spec.element_a) && tma_compatible(spec.alignment_b, spec.element_b);
  if (sm90 && !tma_operands && cluster_size > 1) {
    fail("Cluster shape " + shape_text(td.cluster_shape) + " needs TMA loads, which need 16-byte aligned rows; "
         "A/B alignments " + std::to_string(spec.alignment_a) + "/" + std::to_string(spec.alignment_b) +
         " take cp.async kernels with cluster shape 1x1x1.");
  }
  const bool tma_epilogue = td.epilogue_schedule == EpilogueSchedule::TmaWarpSpecialized ||
                            td.epilogue_schedule == EpilogueSchedule::TmaWarpSpecializedCooperative;
  if (sm90 && fused && td.epilogue_schedule == EpilogueSchedule::Auto &&
      !tma_compatible(spec.alignment_c, spec.element_c)) {
    fail("Fused activations and bias on SM90 kernels store C and D with TMA, which needs 16-byte aligned rows; "
         "alignment " + std::to_string(spec.alignment_c) + " of " + std::string(to_string(spec.element_c)) +
         " is narrower. Pad the leading dimensions of C and D, or use kernel_cc 80 (CUTLASS 2.x kernels).");
  }
  if (sm90 && tma_epilogue && !tma_compatible(spec.alignment_c, spec.element_c)) {
    fail("Epilogue schedule " + std::string(to_string(td.epilogue_schedule)) +
         " stores D with TMA, which needs 16-byte aligned rows of C and D; their alignment is " +
         std::to_string(spec.alignment_c) + ". Use NoSmemWarpSpecialized or pad the leading dimension.");
  }
  if (sm90 && is_tma_schedule(td.kernel_schedule) &&
      (!tma_compatible(spec.alignment_a, spec.element_a) || !tma_compatible(spec.alignment_b, spec.element_b))) {
    fail("Kernel schedule " + std::string(to_string(td.kernel_schedule)) +
         " loads A and B with TMA, which needs 16-byte aligned rows (alignment " +
         std::to_string(128 / bits_of(spec.element_a)) + " for " + std::string(to_string(spec.element_a)) + "); got A " +
         std::to_string(spec.alignment_a) + ", B " + std::to_string(spec.alignment_b) +
         ". Use a CpAsync schedule or pad the leading dimensions.");
  }

  // 2.x tiles: warps divide the threadblock, stages in range, shared memory fits.
  if (!sm90) {
    for (int i = 0; i < 3; ++i) {
      if (td.warp_count[i] <= 0 || td.threadblock_shape[i] % td.warp_count[i] != 0) {
        fail("Warp count " + shape_text(td.warp_count) + " must divide the threadblock shape " +
             shape_text(td.threadblock_shape) + ".");
      }
    }
    if (td.stages < 2) {
      fail("Stage count " + std::to_string(td.stages) + " is invalid for " + arch +
           " (CUTLASS 2.x) kernels: use at least 2 (3 or more for multistage tensor-op kernels).");
    }
  } else {
    validate_sm90_stages(spec);
  }
  const int per_stage = smem_bytes_per_stage(td, spec.element_a, spec.element_b);
  const long total = static_cast<long>(per_stage) * (td.stages == 0 ? 1 : td.stages);
  if (total > limits.max_smem_per_block) {
    std::ostringstream msg;
    msg << "Configuration uses too much shared memory: the mainloop uses " << per_stage
        << " bytes per stage and " << td.stages << " stages for a total of " << total
        << " bytes, but a block on CC " << limits.cc << " can use at most " << limits.max_smem_per_block
        << " bytes. Reduce the stage count (at most " << limits.max_smem_per_block / per_stage
        << " fit) or the tile shape.";
    fail(msg.str());
  }
  if (!sm90 && spec.bias != BiasMode::None) {
    // CUTLASS 2.x broadcasts the bias along D's contiguous dimension only, with tensor-op, non-Stream-K kernels.
    const bool along_rows = spec.layout_c == Layout::RowMajor;
    if (spec.opclass != OpClass::TensorOp || stream_k) {
      fail("A fused bias on CUTLASS 2.x kernels needs a TensorOp kernel without Stream-K; use an SM90 kernel or "
           "drop the bias.");
    }
    if ((spec.bias == BiasMode::PerColumn) != along_rows) {
      fail(std::string("A per-") + (spec.bias == BiasMode::PerRow ? "row" : "column") + " bias with " +
           std::string(to_string(spec.layout_c)) + " C is not available in CUTLASS 2.x kernels (their bias runs "
           "along D's contiguous dimension: per-column with RowMajor C, per-row with ColumnMajor C). Use the other C "
           "layout, or an SM90 kernel.");
    }
  }
  if (spec.family == KernelFamily::Sm80Universal && spec.element_c != spec.element_d) {
    fail("CUTLASS 2.x kernels need element C (" + std::string(to_string(spec.element_c)) + ") equal to element D (" +
         std::string(to_string(spec.element_d)) + ").");
  }
}

}  // namespace gemmkit::catalog
