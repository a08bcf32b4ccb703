// src/api/kernel_spec.cpp: KernelSpec and TileDescription: names (reference format), canonical record, printing.
#include "gemmkit/kernel_spec.hpp"

#include <algorithm>
#include <sstream>

namespace gemmkit {

std::string_view to_string(KernelFamily family) {
  return family == KernelFamily::Sm80Universal ? "sm80_universal" : "sm90_collective";
}

std::string_view to_string(MathOperation op) {
  switch (op) {
    case MathOperation::MultiplyAdd: return "multiply_add";
    case MathOperation::MultiplyAddFastF32: return "multiply_add_fast_f32";
    case MathOperation::MultiplyAddSaturate: return "multiply_add_saturate";
  }
  return "?";
}

std::string_view to_string(KernelSchedule schedule) {
  switch (schedule) {
    case KernelSchedule::Auto: return "ScheduleAuto";
    case KernelSchedule::TmaWarpSpecialized: return "TmaWarpSpecialized";
    case KernelSchedule::TmaWarpSpecializedPingpong: return "TmaWarpSpecializedPingpong";
    case KernelSchedule::TmaWarpSpecializedCooperative: return "TmaWarpSpecializedCooperative";
    case KernelSchedule::CpAsyncWarpSpecialized: return "CpAsyncWarpSpecialized";
    case KernelSchedule::CpAsyncWarpSpecializedPingpong: return "CpAsyncWarpSpecializedPingpong";
    case KernelSchedule::CpAsyncWarpSpecializedCooperative: return "CpAsyncWarpSpecializedCooperative";
  }
  return "?";
}

std::string_view to_string(EpilogueSchedule schedule) {
  switch (schedule) {
    case EpilogueSchedule::Auto: return "ScheduleAuto";
    case EpilogueSchedule::NoSmemWarpSpecialized: return "NoSmemWarpSpecialized";
    case EpilogueSchedule::TmaWarpSpecialized: return "TmaWarpSpecialized";
    case EpilogueSchedule::TmaWarpSpecializedCooperative: return "TmaWarpSpecializedCooperative";
  }
  return "?";
}

std::string_view to_string(TileScheduler scheduler) {
  switch (scheduler) {
    case TileScheduler::Default: return "Default";
    case TileScheduler::Persistent: return "Persistent";
    case TileScheduler::StreamK: return "StreamK";
  }
  return "?";
}

std::string_view to_string(Swizzle swizzle) {
  switch (swizzle) {
    case Swizzle::Identity1: return "IdentitySwizzle1";
    case Swizzle::Identity2: return "IdentitySwizzle2";
    case Swizzle::Identity4: return "IdentitySwizzle4";
    case Swizzle::Identity8: return "IdentitySwizzle8";
    case Swizzle::Horizontal: return "HorizontalSwizzle";
    case Swizzle::StreamK: return "ThreadblockSwizzleStreamK";
  }
  return "?";
}

std::string_view to_string(Activation activation) {
  switch (activation) {
    case Activation::Identity: return "identity";
    case Activation::ReLU: return "relu";
    case Activation::LeakyReLU: return "leaky_relu";
    case Activation::GELU: return "gelu";
    case Activation::GELUTanh: return "gelu_tanh";
    case Activation::HardSwish: return "hardswish";
    case Activation::Sigmoid: return "sigmoid";
    case Activation::SiLU: return "silu";
    case Activation::Tanh: return "tanh";
  }
  return "?";
}

std::string_view to_string(BiasMode bias) {
  switch (bias) {
    case BiasMode::None: return "none";
    case BiasMode::PerRow: return "row";
    case BiasMode::PerColumn: return "column";
  }
  return "?";
}

namespace {

std::string shape_text(const Shape3& s, char sep = 'x') {
  std::ostringstream out;
  out << s[0] << sep << s[1] << sep << s[2];
  return out.str();
}

std::string shape_list(const Shape3& s) {
  std::ostringstream out;
  out << '[' << s[0] << ", " << s[1] << ", " << s[2] << ']';
  return out.str();
}

char short_accumulator(DataType acc) {
  switch (acc) {
    case DataType::s32: return 'i';
    case DataType::f16: return 'h';
    case DataType::f64: return 'd';
    default: return 's';
  }
}

// Tensor-core f32 GEMMs run on tf32 instructions unless 3xTF32 (fast f32) is asked for.
bool uses_tf32(const KernelSpec& spec) {
  return spec.opclass == OpClass::TensorOp && spec.element_a == DataType::f32 &&
         spec.tile.math_operation != MathOperation::MultiplyAddFastF32;
}

std::string_view kernel_schedule_suffix(KernelSchedule schedule) {
  switch (schedule) {
    case KernelSchedule::Auto: return "";
    case KernelSchedule::TmaWarpSpecialized: return "_warpspecialized";
    case KernelSchedule::TmaWarpSpecializedPingpong: return "_warpspecialized_pingpong";
    case KernelSchedule::TmaWarpSpecializedCooperative: return "_warpspecialized_cooperative";
    case KernelSchedule::CpAsyncWarpSpecialized: return "_cpasync_warpspecialized";
    case KernelSchedule::CpAsyncWarpSpecializedPingpong: return "_cpasync_warpspecialized_pingpong";
    case KernelSchedule::CpAsyncWarpSpecializedCooperative: return "_cpasync_warpspecialized_cooperative";
  }
  return "";
}

std::string_view epilogue_schedule_suffix(EpilogueSchedule schedule) {
  switch (schedule) {
    case EpilogueSchedule::Auto: return "";
    case EpilogueSchedule::NoSmemWarpSpecialized: return "_epi_nosmem";
    case EpilogueSchedule::TmaWarpSpecialized:
    case EpilogueSchedule::TmaWarpSpecializedCooperative: return "_epi_tma";
  }
  return "";
}

// Our additions to the reference's names, so that different kernels never share a name.
std::string epilogue_suffix(const KernelSpec& spec) {
  std::string out;
  if (spec.activation != Activation::Identity) out += "_" + std::string(to_string(spec.activation));
  if (spec.bias != BiasMode::None) out += "_bias" + std::string(to_string(spec.bias));
  return out;
}

bool uses_stream_k(const KernelSpec& spec) {
  return spec.swizzle == Swizzle::StreamK || spec.tile.tile_scheduler == TileScheduler::StreamK;
}

std::string sm80_name(const KernelSpec& spec) {
  // A column-major C is computed as the transposed problem (B^T A^T), so the kernel's A/B are B^T and A^T.
  const bool switched = spec.layout_c == Layout::ColumnMajor;
  auto flip = [](Layout l) { return l == Layout::RowMajor ? Layout::ColumnMajor : Layout::RowMajor; };
  const Layout kernel_a = switched ? flip(spec.layout_b) : spec.layout_a;
  const Layout kernel_b = switched ? flip(spec.layout_a) : spec.layout_b;
  const int alignment = switched ? spec.alignment_b : spec.alignment_a;

  std::string core(1, short_accumulator(spec.element_accumulator));
  if (spec.opclass == OpClass::TensorOp) {
    const auto& i = spec.tile.instruction_shape;
    core += std::to_string(i[0]) + std::to_string(i[1]) + std::to_string(i[2]);
    if (uses_tf32(spec)) core += "tf32";
  }
  core += "gemm";
  const DataType acc = spec.element_accumulator;
  std::string extended = core;
  if (spec.element_a != acc) {
    extended = (spec.element_c != acc ? std::string(to_string(spec.element_c)) + "_" : std::string()) + core + "_" +
               std::string(to_string(spec.element_a));
  }
  const auto& tb = spec.tile.threadblock_shape;
  std::ostringstream name;
  name << "cutlass_" << (spec.opclass == OpClass::TensorOp ? "tensorop" : "simt") << '_' << extended << '_' << tb[0]
       << 'x' << tb[1] << '_' << tb[2] << 'x' << spec.tile.stages << '_' << layout_letter(kernel_a)
       << layout_letter(kernel_b) << "_align" << alignment;
  if (spec.swizzle == Swizzle::StreamK) {
    name << "_stream_k";
  } else if (spec.swizzle != Swizzle::Identity1) {
    name << "_" << to_string(spec.swizzle);
  }
  name << epilogue_suffix(spec);
  return name.str();
}

std::string sm90_name(const KernelSpec& spec) {
  std::string core(1, short_accumulator(spec.element_accumulator));
  core += "0x0x0";
  if (uses_tf32(spec)) core += "tf32";
  core += "gemm";
  std::ostringstream name;
  name << "cutlass3x_sm" << spec.kernel_cc << "_tensorop_" << core << '_' << to_string(spec.element_a) << '_'
       << to_string(spec.element_b) << '_' << to_string(spec.element_accumulator) << '_'
       << to_string(spec.element_c) << '_' << to_string(spec.element_d) << '_'
       << shape_text(spec.tile.threadblock_shape) << '_' << shape_text(spec.tile.cluster_shape) << '_'
       << spec.tile.stages << '_' << layout_letter(spec.layout_a) << layout_letter(spec.layout_b)
       << layout_letter(spec.layout_c) << "_align" << spec.alignment_a
       << kernel_schedule_suffix(spec.tile.kernel_schedule) << epilogue_schedule_suffix(spec.tile.epilogue_schedule);
  if (uses_stream_k(spec)) name << "_stream_k";
  name << epilogue_suffix(spec);
  return name.str();
}

}  // namespace

Shape3 TileDescription::cta_tile() const {
  return {threadblock_shape[0] / cluster_shape[0], threadblock_shape[1] / cluster_shape[1],
          threadblock_shape[2] / cluster_shape[2]};
}

std::string TileDescription::to_string() const {
  std::ostringstream out;
  out << "{\n"
      << "  ClusterShape: " << shape_list(cluster_shape) << "\n"
      << "  ThreadblockShape: " << shape_list(threadblock_shape) << "\n"
      << "  WarpCount: " << shape_list(warp_count) << "\n"
      << "  Stages: " << (stages == 0 ? std::string("Auto") : std::to_string(stages)) << "\n"
      << "  InstructionShape: " << shape_list(instruction_shape) << "\n"
      << "  Kernel schedule: " << gemmkit::to_string(kernel_schedule) << "\n"
      << "  Epilogue schedule: " << gemmkit::to_string(epilogue_schedule) << "\n"
      << "  TileScheduler: " << gemmkit::to_string(tile_scheduler) << "\n"
      << "  MathOperation: " << gemmkit::to_string(math_operation) << "\n"
      << "}";
  return out.str();
}

TileDescription TileDescriptionUpdate::applied_to(TileDescription base) const {
  if (threadblock_shape) base.threadblock_shape = *threadblock_shape;
  if (warp_count) base.warp_count = *warp_count;
  if (instruction_shape) base.instruction_shape = *instruction_shape;
  if (cluster_shape) base.cluster_shape = *cluster_shape;
  if (stages) base.stages = *stages;
  if (kernel_schedule) base.kernel_schedule = *kernel_schedule;
  if (epilogue_schedule) base.epilogue_schedule = *epilogue_schedule;
  if (tile_scheduler) base.tile_scheduler = *tile_scheduler;
  if (math_operation) base.math_operation = *math_operation;
  return base;
}

std::string KernelSpec::name() const {
  return family == KernelFamily::Sm90Collective ? sm90_name(*this) : sm80_name(*this);
}

int output_alignment(DataType element_c, DataType element_d, int alignment_c) {
  if (element_c == DataType::void_t || bits_of(element_c) == bits_of(element_d)) return alignment_c;
  return std::clamp(bits_of(element_c) * alignment_c / bits_of(element_d), 1, 128 / bits_of(element_d));
}

DataType KernelSpec::element_compute() const {
  return is_integer(element_accumulator) ? DataType::f32 : element_accumulator;
}

std::string KernelSpec::arch_flag() const {
  // wgmma and setmaxnreg exist only in the arch-specific sm_90a target.
  return "sm_" + std::to_string(cc) + (cc == 90 ? "a" : "");
}

std::string KernelSpec::canonical() const {
  std::ostringstream out;
  out << "cc=" << cc << ";kernel_cc=" << kernel_cc << ";family=" << to_string(family)
      << ";opclass=" << to_string(opclass) << ";A=" << to_string(element_a) << "," << to_string(layout_a) << ","
      << alignment_a << ";B=" << to_string(element_b) << "," << to_string(layout_b) << "," << alignment_b
      << ";C=" << to_string(element_c) << "," << to_string(layout_c) << "," << alignment_c
      << ";D=" << to_string(element_d) << ";acc=" << to_string(element_accumulator)
      << ";tb=" << shape_text(tile.threadblock_shape) << ";warps=" << shape_text(tile.warp_count)
      << ";stages=" << tile.stages << ";inst=" << shape_text(tile.instruction_shape)
      << ";cluster=" << shape_text(tile.cluster_shape) << ";kernel_schedule=" << to_string(tile.kernel_schedule)
      << ";epilogue_schedule=" << to_string(tile.epilogue_schedule)
      << ";tile_scheduler=" << to_string(tile.tile_scheduler) << ";math=" << to_string(tile.math_operation)
      << ";swizzle=" << to_string(swizzle) << ";activation=" << to_string(activation) << ";bias=" << to_string(bias);
  return out.str();
}

}  // namespace gemmkit
