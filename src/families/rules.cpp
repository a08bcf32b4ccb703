// src/families/rules.cpp: the rules, type support and name and template parts every kernel family shares.
#include "families/rules.hpp"

#include <algorithm>
#include <sstream>

#include "gemmkit/errors.hpp"

namespace gemmkit::families {

void fail(const std::string& message) {
  throw ConfigError(message);
}

bool is_half(DataType type) {
  return type == DataType::f16 || type == DataType::bf16;
}
bool is_int8(DataType type) {
  return type == DataType::s8 || type == DataType::u8;
}

std::vector<int> vector_widths(DataType element) {
  std::vector<int> out;
  for (int a = 128 / bits_of(element); a * bits_of(element) >= 32; a /= 2) out.push_back(a);
  return out;
}

bool loads_element_by_element(OpClass opclass, int alignment, DataType element) {
  return opclass == OpClass::TensorOp && alignment * bits_of(element) < 32;
}

bool tensor_op_loads_element_by_element(const OperandTypes& types) {
  return is_half(types.a) && types.b == types.a;
}

std::vector<int> vector_loads_only(std::vector<int> alignments, OpClass opclass, DataType element) {
  std::erase_if(alignments, [&](int a) { return loads_element_by_element(opclass, a, element); });
  return alignments;
}

bool moves_16_byte_rows(int alignment, DataType element) {
  return alignment * bits_of(element) % 128 == 0;
}

bool tensor_op_types(const OperandTypes& t) {
  if (t.a != t.b) return false;
  if (t.a == DataType::f16) return t.accumulator == DataType::f32 || t.accumulator == DataType::f16;
  if (t.a == DataType::bf16) return t.accumulator == DataType::f32;
  if (t.a == DataType::f32) return t.accumulator == DataType::f32;
  if (t.a == DataType::f64) return t.accumulator == DataType::f64;
  if (is_int8(t.a)) return t.accumulator == DataType::s32;
  return false;
}

bool layouts_ok_for_tensor_op(const OperandTypes& t) {
  if (!is_int8(t.a)) return true;
  return t.layout_a == Layout::RowMajor && t.layout_b == Layout::ColumnMajor;
}

bool fp8_types(const OperandTypes& t) {
  return fp8_rule_violation(90, 90, OpClass::TensorOp, t).empty() && is_fp8(t.a);
}

namespace {

bool fp8_output(DataType t) {
  return t == DataType::f16 || t == DataType::bf16 || t == DataType::f32;
}

}  // namespace

bool fp8_accumulators_fit(int cta_m, int cta_n, bool cooperative) {
  const int warp_group_rows = cooperative ? cta_m / 2 : cta_m;
  return warp_group_rows * cta_n <= 64 * 192;
}

std::string_view fp8_schedule_variant(const KernelSpec& spec) {
  if (spec.block_scaling == BlockScaling::Blockwise) return "FP8Blockwise";
  return spec.tile.math_operation == MathOperation::MultiplyAddFastAccum ? "FP8FastAccum" : "";
}

void add_fast_accumulation_twins(std::vector<TileDescription>& tiles) {
  const std::size_t promoted = tiles.size();
  for (std::size_t i = 0; i < promoted; ++i) {
    TileDescription fast = tiles[i];
    fast.math_operation = MathOperation::MultiplyAddFastAccum;
    tiles.push_back(fast);
  }
}

std::string fp8_rule_violation(int cc, int kernel_cc, OpClass opclass, const OperandTypes& t) {
  if (!is_fp8(t.a) && !is_fp8(t.b)) return "";
  const std::string types = "(A " + std::string(to_string(t.a)) + ", B " + std::string(to_string(t.b)) + ")";
  if (!is_fp8(t.a) || !is_fp8(t.b)) {
    return "FP8 GEMMs take A and B both in e4m3 or e5m2 " + types + "; convert the other operand to e4m3 or e5m2.";
  }
  if (cc < 90 || kernel_cc < 90) {
    return "FP8 operands " + types +
           " run on SM90 tensor cores (WGMMA) only; gemmkit's SM80 kernels have no FP8 math. Construct the plan "
           "with cc=90 (and no kernel_cc, or kernel_cc=90) for an H100 / H200.";
  }
  if (opclass != OpClass::TensorOp) {
    return "FP8 operands " + types + " run on tensor cores only; use opclass TensorOp, not " +
           std::string(to_string(opclass)) + ".";
  }
  if (t.accumulator != DataType::f32) {
    return "FP8 GEMMs accumulate in f32; got element_accumulator=" + std::string(to_string(t.accumulator)) +
           ". Set element_accumulator=f32 (or leave it unset).";
  }
  if (!fp8_output(t.d) || !(fp8_output(t.c) || t.c == DataType::void_t)) {
    return "FP8 GEMMs write C and D in bf16, f16 or f32 (C may be void: no C); got C=" + std::string(to_string(t.c)) +
           ", D=" + std::string(to_string(t.d)) + ".";
  }
  if (t.layout_a != Layout::RowMajor || t.layout_b != Layout::ColumnMajor) {
    return "FP8 WGMMA reads A and B K-major only: A must be RowMajor and B ColumnMajor (TN); got A " +
           std::string(to_string(t.layout_a)) + ", B " + std::string(to_string(t.layout_b)) +
           ". Store the operand transposed (a column-major B is B^T row-major: in torch, b.t().contiguous().t()) "
           "and set layout_A=RowMajor, layout_B=ColumnMajor.";
  }
  return "";
}

DataType c_or_d(const OperandTypes& types) {
  return types.c == DataType::void_t ? types.d : types.c;
}

OperandTypes operand_types_of(const KernelSpec& spec) {
  OperandTypes t{spec.element_a,           spec.element_b, spec.element_c, spec.element_d,
                 spec.element_accumulator, spec.layout_a,  spec.layout_b,  spec.layout_c};
  t.c = c_or_d(t);
  return t;
}

bool simt_types(const OperandTypes& t) {
  if (t.a != t.b) return false;
  switch (t.a) {
    case DataType::f16: return t.accumulator == DataType::f32 || t.accumulator == DataType::f16;
    case DataType::bf16: return t.accumulator == DataType::f32;
    case DataType::f32: return t.accumulator == DataType::f32;
    case DataType::f64: return t.accumulator == DataType::f64;
    case DataType::s8: return t.accumulator == DataType::s32;
    default: return false;
  }
}

bool output_types_ok(int kernel_cc, const OperandTypes& t) {
  if (t.d == DataType::void_t || t.c == DataType::void_t) return false;
  if (kernel_cc < 90 && t.c != t.d) return false;
  if (is_integer(t.accumulator)) return t.d == DataType::s32 || t.d == DataType::s8;
  return !is_integer(t.d);
}

void check_operand_alignments(const KernelSpec& spec) {
  const std::pair<const char*, std::pair<int, DataType>> operands[] = {
      {"A", {spec.alignment_a, spec.element_a}},
      {"B", {spec.alignment_b, spec.element_b}},
      {"C", {spec.alignment_c, operand_types_of(spec).c}}};
  for (const auto& [name, info] : operands) {
    const auto [alignment, element] = info;
    const int widest = 128 / bits_of(element);
    if (alignment < 1 || alignment > widest || (alignment & (alignment - 1)) != 0) {
      fail(std::string("Alignment ") + std::to_string(alignment) + " of operand " + name +
           " is invalid: it must be a power of two of at most " + std::to_string(widest) + " elements (128 bits of " +
           std::string(to_string(element)) + ").");
    }
  }
}

void check_threadblock_shape(const KernelSpec& spec) {
  const TileDescription& td = spec.tile;
  for (int i = 0; i < 3; ++i) {
    if (td.threadblock_shape[i] <= 0 || td.threadblock_shape[i] % td.cluster_shape[i] != 0) {
      fail("Threadblock shape " + shape_text(td.threadblock_shape) +
           " must be a positive multiple of the cluster shape " + shape_text(td.cluster_shape) +
           " in every dimension.");
    }
  }
}

int smem_bytes_per_stage(const TileDescription& tile, DataType a, DataType b) {
  const Shape3 t = tile.cta_tile();
  return bits_of(a) * t[0] * t[2] / 8 + bits_of(b) * t[2] * t[1] / 8 + 32;
}

void check_shared_memory(const KernelSpec& spec, const DeviceLimits& limits) {
  const TileDescription& td = spec.tile;
  const int per_stage = smem_bytes_per_stage(td, spec.element_a, spec.element_b);
  const long total = static_cast<long>(per_stage) * (td.stages == 0 ? 1 : td.stages);
  if (total <= limits.max_smem_per_block) return;
  std::ostringstream msg;
  msg << "Configuration uses too much shared memory: the mainloop uses " << per_stage << " bytes per stage and "
      << td.stages << " stages for a total of " << total << " bytes, but a block on CC " << limits.cc
      << " can use at most " << limits.max_smem_per_block << " bytes. Reduce the stage count (at most "
      << limits.max_smem_per_block / per_stage << " fit) or the tile shape.";
  fail(msg.str());
}

void check_sm90_stages(const TileDescription& tile) {
  if (tile.stages != 0 && tile.stages < 2) {
    fail("Stage count " + std::to_string(tile.stages) +
         " is invalid for SM90 kernels: use 0 (as many as fit) or an explicit count of at least 2.");
  }
}

bool uses_stream_k(const KernelSpec& spec) {
  return spec.swizzle == Swizzle::StreamK || spec.tile.tile_scheduler == TileScheduler::StreamK;
}

bool uses_tf32(const KernelSpec& spec) {
  return spec.opclass == OpClass::TensorOp && spec.element_a == DataType::f32 &&
         spec.tile.math_operation != MathOperation::MultiplyAddFastF32;
}

DataType instruction_element(DataType element, OpClass opclass, MathOperation math) {
  if (opclass != OpClass::TensorOp || element != DataType::f32) return element;
  switch (math) {
    case MathOperation::MultiplyAddFastF32: return DataType::f32;
    case MathOperation::MultiplyAddFastBF16: return DataType::bf16;
    case MathOperation::MultiplyAddFastF16: return DataType::f16;
    default: return DataType::tf32;
  }
}

std::string instruction_type_in_name(const KernelSpec& spec) {
  const DataType t = instruction_element(spec.element_a, spec.opclass, spec.tile.math_operation);
  return t == spec.element_a || t == spec.element_accumulator ? std::string() : std::string(to_string(t));
}

std::string extended_name(const KernelSpec& spec, const std::string& core) {
  const DataType acc = spec.element_accumulator;
  if (spec.element_a == acc) return core;
  return (spec.element_c != acc ? std::string(to_string(spec.element_c)) + "_" : std::string()) + core + "_" +
         std::string(to_string(spec.element_a));
}

std::string epilogue_suffix(const KernelSpec& spec) {
  const std::string activation(spec.activation_at_launch ? "_act_at_launch" : row_of(spec.activation).in_kernel_name);
  return activation + std::string(row_of(spec.bias).in_kernel_name) + std::string(row_of(spec.scale).in_kernel_name) +
         (spec.visitor ? "_evt" + spec.visitor->digest() : "");
}

void check_activation_compiled_in(const KernelSpec& spec) {
  if (!spec.activation_at_launch) return;
  fail(
      "an activation taken at launch (activation_at_launch) is an SM90 GEMM option (family Sm90Collective); this "
      "spec's family is " +
      std::string(to_string(spec.family)) + ": compile the activation in.");
}

std::string activation_functor(const KernelSpec& spec) {
  // A 16-bit output cannot show the error of the hardware's exp / reciprocal approximations; they are much cheaper.
  const bool approximate = spec.element_d == DataType::f16 || spec.element_d == DataType::bf16;
  if (spec.activation_at_launch) {
    return approximate ? "gemmkit::activation::AtLaunchFor16BitD" : "gemmkit::activation::AtLaunch";
  }
  const ActivationRow& row = row_of(spec.activation);
  return std::string(approximate && !row.cutlass_for_16bit_d.empty() ? row.cutlass_for_16bit_d : row.cutlass);
}

Placeholders common_placeholders(const KernelSpec& spec) {
  auto text = [](int value) { return std::to_string(value); };
  auto cutlass = [](auto value) { return std::string(row_of(value).cutlass); };
  return {
      {"kernel_name", spec.name()},
      {"element_a", cutlass(spec.element_a)},
      {"layout_a", cutlass(spec.layout_a)},
      {"alignment_a", text(spec.alignment_a)},
      {"element_b", cutlass(spec.element_b)},
      {"layout_b", cutlass(spec.layout_b)},
      {"alignment_b", text(spec.alignment_b)},
      {"element_c", cutlass(spec.element_c)},
      {"layout_c", cutlass(spec.layout_c)},
      {"alignment_c", text(spec.alignment_c)},
      {"element_accumulator", cutlass(spec.element_accumulator)},
      {"element_compute", cutlass(spec.element_compute())},
  };
}

Placeholders cta_and_cluster_placeholders(const TileDescription& tile) {
  const Shape3 cta = tile.cta_tile();
  auto text = [](int value) { return std::to_string(value); };
  return {{"cta_m", text(cta[0])},
          {"cta_n", text(cta[1])},
          {"cta_k", text(cta[2])},
          {"cluster_m", text(tile.cluster_shape[0])},
          {"cluster_n", text(tile.cluster_shape[1])},
          {"cluster_k", text(tile.cluster_shape[2])}};
}

KernelSpec as_dense(const KernelSpec& spec, KernelFamily dense) {
  KernelSpec out = spec;
  out.family = dense;
  return out;
}

std::string grouped_name(const std::string& dense_name) {
  const std::size_t gemm = dense_name.find("gemm_");
  if (gemm == std::string::npos) throw Error("internal error: kernel name " + dense_name + " has no gemm part");
  return dense_name.substr(0, gemm) + "gemm_grouped_" + dense_name.substr(gemm + 5);
}

void check_grouped_rules(const KernelSpec& spec) {
  check_activation_compiled_in(spec);
  if (spec.swizzle != Swizzle::Identity1 || spec.tile.tile_scheduler != TileScheduler::Default) {
    fail(
        "Grouped GEMM does not currently support different swizzling functors: its kernels walk the groups' tiles "
        "with their own scheduler. Leave the swizzle at IdentitySwizzle1 and the tile scheduler at Default.");
  }
  if (spec.bias != BiasMode::None) {
    fail("Grouped GEMM kernels have no bias epilogue; pass the bias as C with beta = 1, or use Gemm.");
  }
  if (spec.scale != ScaleMode::None) fail("Grouped GEMM kernels have no scale vectors; use Gemm on SM90.");
}

Placeholders placeholders_for_template(Placeholders values, const std::vector<std::string>& unused,
                                       const std::string& kernel_name) {
  std::erase_if(values,
                [&](const auto& kv) { return std::find(unused.begin(), unused.end(), kv.first) != unused.end(); });
  for (auto& [key, value] : values) {
    if (key == "kernel_name") value = kernel_name;
  }
  return values;
}

}  // namespace gemmkit::families
