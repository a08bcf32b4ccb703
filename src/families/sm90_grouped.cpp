// src/families/sm90_grouped.cpp: the Sm90Grouped family: CUTLASS 3.x ptr-array grouped GEMM (TMA warp-specialized
// cooperative or pingpong kernels over a persistent group scheduler), rendered from templates/sm90_grouped.cu.in with
// the glue of device/include/gemmkit/sm90_grouped.hpp. Cluster, stage and shared-memory rules are the Sm90Collective
// family's.
#include <string>

#include "families/rules.hpp"

namespace gemmkit::families {
namespace {

struct Cta {
  int m, n;
};

// 128x128 first: the groups of a typical call (128-1024 rows) waste the least of it; clusters pad every group.
const std::vector<Cta> kCtas = {{128, 128}, {128, 256}, {256, 128}, {64, 128}, {64, 256}};
const std::vector<Shape3> kClusters = {{1, 1, 1}, {2, 1, 1}, {1, 2, 1}};

bool is_cooperative(const TileDescription& td) {
  return td.kernel_schedule == KernelSchedule::TmaWarpSpecializedCooperative ||
         (td.kernel_schedule == KernelSchedule::Auto && td.cta_tile()[0] >= 128);
}

bool blockwise(const KernelSpec& spec) {
  return spec.block_scaling == BlockScaling::Blockwise;
}

// The ptr-array spellings of the schedules the tile description names by their dense kernels' names. CUTLASS's FP8
// mainloop variants (block scales, fast accumulation) have schedule types of their own, named with Auto resolved.
std::string kernel_schedule_type(const KernelSpec& spec) {
  const std::string_view variant = fp8_schedule_variant(spec);
  if (spec.tile.kernel_schedule == KernelSchedule::Auto && variant.empty()) {
    return std::string(row_of(KernelSchedule::Auto).cutlass);
  }
  return std::string("cutlass::gemm::KernelPtrArrayTmaWarpSpecialized") +
         (is_cooperative(spec.tile) ? "Cooperative" : "Pingpong") + std::string(variant);
}

// The mainloop's operand layouts: pointer tags (one stride per group), each paired with its block scales' layout in a
// block-scaled kernel.
Placeholders mainloop_layouts(const KernelSpec& spec) {
  if (!blockwise(spec)) return {{"mainloop_layout_a", "LayoutA*"}, {"mainloop_layout_b", "LayoutB*"}};
  return {{"mainloop_layout_a", "cute::tuple<LayoutA*, gemmkit::sm90_grouped::LayoutSFA*>"},
          {"mainloop_layout_b", "cute::tuple<LayoutB*, gemmkit::sm90_grouped::LayoutSFB*>"}};
}
std::string epilogue_schedule_type(EpilogueSchedule schedule) {
  switch (schedule) {
    case EpilogueSchedule::TmaWarpSpecializedCooperative:
      return "cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative";
    case EpilogueSchedule::TmaWarpSpecialized: return "cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong";
    default: return std::string(row_of(EpilogueSchedule::Auto).cutlass);
  }
}

void check_schedules(const KernelSpec& spec) {
  const TileDescription& td = spec.tile;
  const KernelSchedule k = td.kernel_schedule;
  if (k != KernelSchedule::Auto && k != KernelSchedule::TmaWarpSpecializedCooperative &&
      k != KernelSchedule::TmaWarpSpecializedPingpong) {
    fail("Grouped SM90 kernels are TMA warp-specialized cooperative or pingpong ptr-array kernels; kernel schedule " +
         std::string(to_string(k)) +
         " has no grouped form. Use TmaWarpSpecializedCooperative, "
         "TmaWarpSpecializedPingpong or auto.");
  }
  const EpilogueSchedule e = td.epilogue_schedule;
  const EpilogueSchedule matching =
      is_cooperative(td) ? EpilogueSchedule::TmaWarpSpecializedCooperative : EpilogueSchedule::TmaWarpSpecialized;
  if (e != EpilogueSchedule::Auto && e != matching) {
    fail("A grouped SM90 kernel's epilogue is the TMA ptr-array epilogue of its own kernel schedule: " +
         std::string(to_string(matching)) + " (or auto), not " + std::string(to_string(e)) + ".");
  }
  if (k == KernelSchedule::TmaWarpSpecializedCooperative && td.cta_tile()[0] < 128) {
    fail("Cooperative kernel schedules need a CTA tile M of at least 128; the CTA tile is " +
         shape_text(td.cta_tile()) + ". Use a Pingpong schedule or a larger tile.");
  }
}

// TMA loads and stores every operand of every group: 16-byte aligned rows throughout.
void check_alignments(const KernelSpec& spec) {
  const int alignment_d = output_alignment(spec.element_c, spec.element_d, spec.alignment_c);
  const std::pair<const char*, std::pair<int, DataType>> operands[] = {{"A", {spec.alignment_a, spec.element_a}},
                                                                       {"B", {spec.alignment_b, spec.element_b}},
                                                                       {"C", {spec.alignment_c, spec.element_c}},
                                                                       {"D", {alignment_d, spec.element_d}}};
  for (const auto& [name, operand] : operands) {
    if (!moves_16_byte_rows(operand.first, operand.second)) {
      fail(std::string("Grouped SM90 kernels load and store every operand with TMA, which needs 16-byte aligned rows; "
                       "operand ") +
           name + " has alignment " + std::to_string(operand.first) + " of " + std::string(to_string(operand.second)) +
           ". Pad the leading dimensions, or use kernel_cc 80.");
    }
  }
}

class Sm90Grouped final : public Family {
 public:
  KernelFamily id() const override { return KernelFamily::Sm90Grouped; }
  int kernel_cc() const override { return 90; }
  std::string_view template_name(const KernelSpec&) const override { return "sm90_grouped.cu.in"; }
  std::string_view glue_header(const KernelSpec&) const override { return "gemmkit/sm90_grouped.hpp"; }
  // A cubin and a host module built side by side (split_entry.hpp), as the SM90 GEMMs.
  bool splittable(const KernelSpec&) const override { return true; }

  // f16, bf16, f32 (tf32) and FP8 tensor cores; tf32 with row-major A and B has no wgmma form (the dense family
  // computes it transposed; groups go to the SM80 grouped family instead).
  bool supports(OpClass opclass, const OperandTypes& types) const override {
    const bool floating = is_half(types.a) || types.a == DataType::f32 || fp8_types(types);
    return opclass == OpClass::TensorOp && floating && types.c != DataType::void_t && !is_integer(types.c) &&
           !is_integer(types.d) && dense().supports(opclass, types) && !dense().computes_transposed(opclass, types);
  }
  // The widest vector only: TMA needs 16-byte aligned rows.
  std::vector<int> operand_alignments(OpClass, DataType element, const OperandTypes&) const override {
    return {128 / bits_of(element)};
  }
  // FP8 lists the tiles whose promoted accumulators fit in registers, then each of them again with fast accumulation
  // (MultiplyAddFastAccum), as the dense family does.
  std::vector<TileDescription> tile_descriptions(OpClass, const OperandTypes& types, const DeviceLimits&, int,
                                                 int) const override {
    const bool fp8 = is_fp8(types.a);
    std::vector<TileDescription> out;
    for (const auto& cta : kCtas) {
      for (const auto& cluster : kClusters) {
        TileDescription td;
        td.cluster_shape = cluster;
        td.threadblock_shape = {cta.m * cluster[0], cta.n * cluster[1], 128 * 8 / bits_of(types.a)};
        td.warp_count = {4, 1, 1};
        td.stages = 0;
        auto add = [&](KernelSchedule k, EpilogueSchedule e) {
          td.kernel_schedule = k;
          td.epilogue_schedule = e;
          if (fp8 && !fp8_accumulators_fit(cta.m, cta.n, is_cooperative(td))) return;
          out.push_back(td);
        };
        add(KernelSchedule::Auto, EpilogueSchedule::Auto);
        if (cta.m >= 128) {
          add(KernelSchedule::TmaWarpSpecializedCooperative, EpilogueSchedule::TmaWarpSpecializedCooperative);
        }
        if (cta.m * cta.n <= 128 * 128 || cta.m == 64) {
          add(KernelSchedule::TmaWarpSpecializedPingpong, EpilogueSchedule::TmaWarpSpecialized);
        }
      }
    }
    if (fp8) add_fast_accumulation_twins(out);
    return out;
  }
  std::vector<Swizzle> swizzles(OpClass) const override { return {Swizzle::Identity1}; }
  bool computes_transposed(OpClass, const OperandTypes&) const override { return false; }
  bool has_persistent_scheduler() const override { return false; }
  int bias_alignment_bytes(const KernelSpec&) const override { return 1; }

  void validate(const KernelSpec& spec, const DeviceLimits& limits) const override {
    check_grouped_rules(spec);
    check_schedules(spec);
    check_alignments(spec);
    dense().validate(as_dense(spec, KernelFamily::Sm90Collective), limits);
  }
  std::string kernel_name(const KernelSpec& spec) const override {
    return grouped_name(dense().kernel_name(as_dense(spec, KernelFamily::Sm90Collective)));
  }
  Placeholders placeholders(const KernelSpec& spec) const override {
    Placeholders out = placeholders_for_template(
        dense().placeholders(as_dense(spec, KernelFamily::Sm90Collective)),
        {"tile_scheduler", "bias", "scale", "element_bias", "glue_header", "mainloop_layout_a", "mainloop_layout_b",
         "module", "own_mainloop_open", "own_mainloop_close", "own_epilogue_open", "own_epilogue_close"},
        spec.name());
    for (auto& [key, value] : out) {
      if (key == "kernel_schedule") value = kernel_schedule_type(spec);
      if (key == "epilogue_schedule") value = epilogue_schedule_type(spec.tile.epilogue_schedule);
    }
    const Placeholders layouts = mainloop_layouts(spec);
    out.insert(out.end(), layouts.begin(), layouts.end());
    out.push_back({"activation_name", std::string(to_string(spec.activation))});
    return out;
  }

 private:
  static const Family& dense() { return sm90_collective(); }
};

}  // namespace

const Family& sm90_grouped() {
  static const Sm90Grouped family;
  return family;
}

}  // namespace gemmkit::families
