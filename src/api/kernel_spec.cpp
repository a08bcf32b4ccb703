// src/api/kernel_spec.cpp: KernelSpec and TileDescription: name (by the family), canonical record, printing, JSON.
#include "gemmkit/kernel_spec.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <sstream>
#include <tuple>

#include "catalog/catalog.hpp"

namespace gemmkit {

std::string shape_text(const Shape3& s) {
  return std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" + std::to_string(s[2]);
}

std::string shape_list(const Shape3& s) {
  return "[" + std::to_string(s[0]) + ", " + std::to_string(s[1]) + ", " + std::to_string(s[2]) + "]";
}

Shape3 TileDescription::cta_tile() const {
  return {threadblock_shape[0] / cluster_shape[0], threadblock_shape[1] / cluster_shape[1],
          threadblock_shape[2] / cluster_shape[2]};
}

std::vector<TileDescription::Field> TileDescription::fields() const {
  // threadblock_shape is the cluster's tile (the reference's field and name); its label says so, and cta_tile is
  // what one CTA computes.
  return {{"cluster_shape", "ClusterShape", shape_list(cluster_shape)},
          {"cta_tile", "CTA tile", shape_list(cta_tile())},
          {"threadblock_shape", "ThreadblockShape (cluster tile)", shape_list(threadblock_shape)},
          {"warp_count", "WarpCount", shape_list(warp_count)},
          {"stages", "Stages", stages == 0 ? std::string("Auto") : std::to_string(stages)},
          {"instruction_shape", "InstructionShape", shape_list(instruction_shape)},
          {"kernel_schedule", "Kernel schedule", std::string(gemmkit::to_string(kernel_schedule))},
          {"epilogue_schedule", "Epilogue schedule", std::string(gemmkit::to_string(epilogue_schedule))},
          {"tile_scheduler", "TileScheduler", std::string(gemmkit::to_string(tile_scheduler))},
          {"math_operation", "MathOperation", std::string(gemmkit::to_string(math_operation))}};
}

std::optional<MathInstruction> TileDescription::math_instruction() const {
  if (!instruction_types) return std::nullopt;
  const InstructionTypes& t = *instruction_types;
  return MathInstruction{instruction_shape,     t.element_a,    t.element_b,
                         t.element_accumulator, t.opcode_class, math_operation};
}

bool TileDescription::operator==(const TileDescription& o) const {
  auto configuration = [](const TileDescription& t) {
    return std::tie(t.threadblock_shape, t.warp_count, t.stages, t.instruction_shape, t.cluster_shape,
                    t.kernel_schedule, t.epilogue_schedule, t.tile_scheduler, t.math_operation);
  };
  return configuration(*this) == configuration(o);
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
  return catalog::family_of(family).kernel_name(*this);
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
          {"scale", to_string(spec.scale)},
          {"arch", spec.arch_flag()},
          {"tile", spec.tile}};
  if (spec.conv) {
    json["conv_kind"] = to_string(spec.conv->kind);
    json["iterator_algorithm"] = to_string(spec.conv->iterator_algorithm);
    json["stride_support"] = to_string(spec.conv->stride_support);
    json["split_k_mode"] = to_string(spec.split_k_mode);
  } else if (spec.split_k_mode == SplitKMode::Parallel) {
    json["split_k_mode"] = to_string(spec.split_k_mode);
  }
  if (spec.block_scaling != BlockScaling::None) json["block_scaling"] = to_string(spec.block_scaling);
  if (spec.activation_at_launch) json["activation_at_launch"] = true;
  if (spec.visitor) json["epilogue_visitor"] = spec.visitor->to_string();
}

std::string KernelSpec::canonical() const {
  // A kernel that takes its epilogue at launch serves every activation, bias and scale: one record for all of them.
  const bool at_launch = catalog::family_of(family).epilogue_at_launch(*this);
  const Activation activation = at_launch ? Activation::Identity : this->activation;
  const BiasMode bias = at_launch ? BiasMode::None : this->bias;
  const ScaleMode scale = at_launch ? ScaleMode::None : this->scale;
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
      << ";swizzle=" << to_string(swizzle)
      << ";activation=" << (activation_at_launch && !at_launch ? std::string_view("at_launch") : to_string(activation))
      << ";bias=" << to_string(bias);
  // Records (and so cache keys) of kernels without scale vectors or convolutions stay as they were before them.
  if (scale != ScaleMode::None) out << ";scale=" << to_string(scale);
  if (block_scaling != BlockScaling::None) out << ";block_scaling=" << to_string(block_scaling);
  if (conv) {
    out << ";conv=" << to_string(conv->kind) << ";iterator=" << to_string(conv->iterator_algorithm)
        << ";stride_support=" << to_string(conv->stride_support);
  }
  // Serial records stay as they were before parallel split-K existed.
  if (split_k_mode == SplitKMode::Parallel) out << ";split_k=" << to_string(split_k_mode);
  if (visitor) out << ";visitor=" << visitor->canonical();
  return out.str();
}

}  // namespace gemmkit
