// src/api/kernel_spec.cpp: KernelSpec and TileDescription: names (reference format), canonical record, printing.
#include "gemmkit/kernel_spec.hpp"

#include <nlohmann/json.hpp>

#include <sstream>

namespace gemmkit {

std::string shape_text(const Shape3& s) {
  return std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" + std::to_string(s[2]);
}

std::string shape_list(const Shape3& s) {
  return "[" + std::to_string(s[0]) + ", " + std::to_string(s[1]) + ", " + std::to_string(s[2]) + "]";
}

namespace {

// Tensor-core f32 GEMMs run on tf32 instructions unless 3xTF32 (fast f32) is asked for.
bool uses_tf32(const KernelSpec& spec) {
  return spec.opclass == OpClass::TensorOp && spec.element_a == DataType::f32 &&
         spec.tile.math_operation != MathOperation::MultiplyAddFastF32;
}

// Our additions to the reference's names, so that different kernels never share a name.
std::string epilogue_suffix(const KernelSpec& spec) {
  return std::string(row_of(spec.activation).in_kernel_name) + std::string(row_of(spec.bias).in_kernel_name);
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

  std::string core(row_of(spec.element_accumulator).in_kernel_name);
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
  name << "cutlass_" << row_of(spec.opclass).in_kernel_name << '_' << extended << '_' << tb[0]
       << 'x' << tb[1] << '_' << tb[2] << 'x' << spec.tile.stages << '_' << layout_letter(kernel_a)
       << layout_letter(kernel_b) << "_align" << alignment;
  name << row_of(spec.swizzle).in_kernel_name << epilogue_suffix(spec);
  return name.str();
}

std::string sm90_name(const KernelSpec& spec) {
  std::string core(row_of(spec.element_accumulator).in_kernel_name);
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
       << row_of(spec.tile.kernel_schedule).in_kernel_name << row_of(spec.tile.epilogue_schedule).in_kernel_name;
  if (uses_stream_k(spec)) name << "_stream_k";
  name << epilogue_suffix(spec);
  return name.str();
}

}  // namespace

Shape3 TileDescription::cta_tile() const {
  return {threadblock_shape[0] / cluster_shape[0], threadblock_shape[1] / cluster_shape[1],
          threadblock_shape[2] / cluster_shape[2]};
}

std::vector<TileDescription::Field> TileDescription::fields() const {
  return {{"cluster_shape", "ClusterShape", shape_list(cluster_shape)},
          {"threadblock_shape", "ThreadblockShape", shape_list(threadblock_shape)},
          {"warp_count", "WarpCount", shape_list(warp_count)},
          {"stages", "Stages", stages == 0 ? std::string("Auto") : std::to_string(stages)},
          {"instruction_shape", "InstructionShape", shape_list(instruction_shape)},
          {"kernel_schedule", "Kernel schedule", std::string(gemmkit::to_string(kernel_schedule))},
          {"epilogue_schedule", "Epilogue schedule", std::string(gemmkit::to_string(epilogue_schedule))},
          {"tile_scheduler", "TileScheduler", std::string(gemmkit::to_string(tile_scheduler))},
          {"math_operation", "MathOperation", std::string(gemmkit::to_string(math_operation))}};
}

std::string TileDescription::to_string() const {
  std::string out = "{\n";
  for (const Field& field : fields()) out += "  " + std::string(field.label) + ": " + field.value + "\n";
  return out + "}";
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

DataType KernelSpec::element_compute() const {
  return is_integer(element_accumulator) ? DataType::f32 : element_accumulator;
}

std::string KernelSpec::arch_flag() const {
  // wgmma and setmaxnreg exist only in the arch-specific sm_90a target.
  return "sm_" + std::to_string(cc) + (cc == 90 ? "a" : "");
}

void to_json(nlohmann::ordered_json& json, const TileDescription& tile) {
  json = {{"threadblock_shape", tile.threadblock_shape},
          {"warp_count", tile.warp_count},
          {"stages", tile.stages},
          {"instruction_shape", tile.instruction_shape},
          {"cluster_shape", tile.cluster_shape},
          {"kernel_schedule", to_string(tile.kernel_schedule)},
          {"epilogue_schedule", to_string(tile.epilogue_schedule)},
          {"tile_scheduler", to_string(tile.tile_scheduler)},
          {"math_operation", to_string(tile.math_operation)}};
}

void to_json(nlohmann::ordered_json& json, const KernelSpec& spec) {
  json = {{"kernel_name", spec.name()},
          {"cc", spec.cc},
          {"kernel_cc", spec.kernel_cc},
          {"family", to_string(spec.family)},
          {"opclass", to_string(spec.opclass)},
          {"element_a", to_string(spec.element_a)},
          {"element_b", to_string(spec.element_b)},
          {"element_c", to_string(spec.element_c)},
          {"element_d", to_string(spec.element_d)},
          {"element_accumulator", to_string(spec.element_accumulator)},
          {"layout_a", to_string(spec.layout_a)},
          {"layout_b", to_string(spec.layout_b)},
          {"layout_c", to_string(spec.layout_c)},
          {"alignment", {spec.alignment_a, spec.alignment_b, spec.alignment_c}},
          {"swizzle", to_string(spec.swizzle)},
          {"activation", to_string(spec.activation)},
          {"bias", to_string(spec.bias)},
          {"arch", spec.arch_flag()},
          {"tile", spec.tile}};
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
