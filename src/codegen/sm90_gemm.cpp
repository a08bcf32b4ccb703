// src/codegen/sm90_gemm.cpp: the Sm90Collective renderer (CUTLASS 3.x collective builders).
#include <string>

#include "codegen/cutlass_names.hpp"
#include "codegen/families.hpp"

namespace gemmkit::codegen {
namespace {

std::string kernel_schedule_type(KernelSchedule schedule) {
  switch (schedule) {
    case KernelSchedule::Auto: return "cutlass::gemm::collective::KernelScheduleAuto";
    case KernelSchedule::TmaWarpSpecialized: return "cutlass::gemm::KernelTmaWarpSpecialized";
    case KernelSchedule::TmaWarpSpecializedPingpong: return "cutlass::gemm::KernelTmaWarpSpecializedPingpong";
    case KernelSchedule::TmaWarpSpecializedCooperative: return "cutlass::gemm::KernelTmaWarpSpecializedCooperative";
    case KernelSchedule::CpAsyncWarpSpecialized: return "cutlass::gemm::KernelCpAsyncWarpSpecialized";
    case KernelSchedule::CpAsyncWarpSpecializedPingpong: return "cutlass::gemm::KernelCpAsyncWarpSpecializedPingpong";
    case KernelSchedule::CpAsyncWarpSpecializedCooperative:
      return "cutlass::gemm::KernelCpAsyncWarpSpecializedCooperative";
  }
  return {};
}

std::string epilogue_schedule_type(EpilogueSchedule schedule) {
  switch (schedule) {
    case EpilogueSchedule::Auto: return "cutlass::epilogue::collective::EpilogueScheduleAuto";
    case EpilogueSchedule::NoSmemWarpSpecialized: return "cutlass::epilogue::NoSmemWarpSpecialized";
    case EpilogueSchedule::TmaWarpSpecialized: return "cutlass::epilogue::TmaWarpSpecialized";
    case EpilogueSchedule::TmaWarpSpecializedCooperative: return "cutlass::epilogue::TmaWarpSpecializedCooperative";
  }
  return {};
}

bool uses_stream_k(const KernelSpec& spec) {
  return spec.swizzle == Swizzle::StreamK || spec.tile.tile_scheduler == TileScheduler::StreamK;
}

std::string tile_scheduler_type(const KernelSpec& spec) {
  if (uses_stream_k(spec)) return "cutlass::gemm::StreamKScheduler";
  return spec.tile.tile_scheduler == TileScheduler::Persistent ? "cutlass::gemm::PersistentScheduler" : "void";
}

bool is_16_byte_multiple(DataType type, int alignment) { return bits_of(type) * alignment % 128 == 0; }

// Whether the mainloop is a cooperative kernel; Auto resolves as in CUTLASS 4.2's builder (and in
// gemmkit::sm90::is_cooperative): TMA when A and B are 16-byte aligned, then cooperative unless the CTA M is 64.
bool is_cooperative(const KernelSpec& spec) {
  switch (spec.tile.kernel_schedule) {
    case KernelSchedule::TmaWarpSpecializedCooperative:
    case KernelSchedule::CpAsyncWarpSpecializedCooperative: return true;
    case KernelSchedule::Auto:
      return is_16_byte_multiple(spec.element_a, spec.alignment_a) &&
             is_16_byte_multiple(spec.element_b, spec.alignment_b) && spec.tile.cta_tile()[0] != 64;
    default: return false;
  }
}

// C's element, or D's when there is no C: what the TMA epilogue moves, and the bias vector's element.
DataType element_c_or_d(const KernelSpec& spec) {
  return spec.element_c == DataType::void_t ? spec.element_d : spec.element_c;
}

void check(const KernelSpec& spec) {
  const TileDescription& tile = spec.tile;
  if (spec.kernel_cc != 90) {
    refuse(spec, "the Sm90Collective family builds SM90 kernels (kernel_cc 90), not kernel_cc " +
                     std::to_string(spec.kernel_cc));
  }
  if (spec.opclass != OpClass::TensorOp) refuse(spec, "SM90 collective kernels are TensorOp only; use Sm80Universal");
  if (spec.element_d == DataType::void_t) refuse(spec, "element D cannot be void");
  for (int i = 0; i < 3; ++i) {
    if (tile.cluster_shape[i] < 1 || tile.threadblock_shape[i] % tile.cluster_shape[i] != 0) {
      refuse(spec, "threadblock shape " + shape_text(tile.threadblock_shape) + " is not divisible by cluster shape " +
                       shape_text(tile.cluster_shape));
    }
  }
  if (tile.stages < 0) refuse(spec, "stages must be 0 (as many as fit) or a positive count");
  const bool fused = spec.activation != Activation::Identity || spec.bias != BiasMode::None;
  if (fused && tile.epilogue_schedule == EpilogueSchedule::NoSmemWarpSpecialized) {
    refuse(spec, "the NoSmemWarpSpecialized epilogue cannot fuse an activation or bias (CUTLASS drops it); use the "
                 "TmaWarpSpecialized(Cooperative) or Auto epilogue schedule");
  }
  const bool tma_epilogue = tile.epilogue_schedule == EpilogueSchedule::TmaWarpSpecialized ||
                            tile.epilogue_schedule == EpilogueSchedule::TmaWarpSpecializedCooperative ||
                            (tile.epilogue_schedule == EpilogueSchedule::Auto && fused);
  const DataType c_or_d = element_c_or_d(spec);
  if (tma_epilogue && !is_16_byte_multiple(c_or_d, spec.alignment_c)) {
    refuse(spec, "a TMA epilogue (which fused activations and biases need) requires 16-byte aligned C/D accesses "
                 "(alignment " + std::to_string(spec.alignment_c) + " of " + std::string(to_string(c_or_d)) + ")");
  }
  if (tile.epilogue_schedule == EpilogueSchedule::TmaWarpSpecializedCooperative && !is_cooperative(spec)) {
    refuse(spec, "the TmaWarpSpecializedCooperative epilogue needs a cooperative kernel schedule");
  }
  if (uses_stream_k(spec) && !is_cooperative(spec)) {
    refuse(spec, "Stream-K on SM90 needs a cooperative kernel schedule (TmaWarpSpecializedCooperative or "
                 "CpAsyncWarpSpecializedCooperative), not " + std::string(to_string(tile.kernel_schedule)));
  }
}

}  // namespace

Placeholders sm90_placeholders(const KernelSpec& spec) {
  check(spec);
  const TileDescription& tile = spec.tile;
  const Shape3 cta = tile.cta_tile();
  auto text = [](int value) { return std::to_string(value); };
  Placeholders out = common_placeholders(spec);
  out.insert(out.end(), {
      {"element_d", element_type(spec.element_d)},
      {"alignment_d", text(output_alignment(spec.element_c, spec.element_d, spec.alignment_c))},
      {"cta_m", text(cta[0])},
      {"cta_n", text(cta[1])},
      {"cta_k", text(cta[2])},
      {"cluster_m", text(tile.cluster_shape[0])},
      {"cluster_n", text(tile.cluster_shape[1])},
      {"cluster_k", text(tile.cluster_shape[2])},
      {"kernel_schedule", kernel_schedule_type(tile.kernel_schedule)},
      {"tile_scheduler", tile_scheduler_type(spec)},
      {"bias", bias_mode(spec.bias)},
      {"element_bias", element_type(element_c_or_d(spec))},
      {"activation", activation_functor(spec.activation, spec.element_d)},
      {"epilogue_schedule", epilogue_schedule_type(tile.epilogue_schedule)},
      {"stages", text(tile.stages)},
  });
  return out;
}

}  // namespace gemmkit::codegen
