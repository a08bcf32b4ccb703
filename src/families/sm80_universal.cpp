// src/families/sm80_universal.cpp: the Sm80Universal family: CUTLASS 2.x device::GemmUniversal (TensorOp or SIMT),
// rendered from templates/sm80_gemm.cu.in with the glue of device/include/gemmkit/sm80_gemm.hpp.
#include <algorithm>
#include <string>

#include "families/rules.hpp"
#include "families/visitor_render.hpp"

namespace gemmkit::families {
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
// 16-bit operands whose rows fit no cp.async vector (4 bytes or more: an odd leading dimension): CUTLASS's two-stage
// pipelined mainloop, which loads A and B element by element with ordinary loads, as CUTLASS's own align1 tables do.
// 256 x 128 first: 6-8 % faster than 128 x 128 on the large odd shapes (H100); choose_tile takes smaller tiles for
// problems of about one wave.
const std::vector<Sm80Tile> kSm80HalfScalar = {
    {{256, 128, 32}, {4, 2, 1}, 2}, {{128, 128, 32}, {2, 2, 1}, 2}, {{128, 256, 32}, {2, 4, 1}, 2},
    {{64, 128, 32}, {2, 2, 1}, 2},  {{128, 64, 32}, {2, 2, 1}, 2},  {{64, 64, 32}, {2, 2, 1}, 2},
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

Shape3 instruction_shape(DataType a, OpClass opclass) {
  if (opclass == OpClass::Simt) return {1, 1, 1};
  if (is_half(a)) return {16, 8, 16};
  if (a == DataType::f32) return {16, 8, 8};
  if (a == DataType::f64) return {8, 8, 4};
  return {16, 8, 32};  // int8
}

// Whether a tensor-op kernel loads A's or B's rows element by element (kSm80HalfScalar).
bool scalar_rows(OpClass opclass, const OperandTypes& types, int alignment_a, int alignment_b) {
  return loads_element_by_element(opclass, alignment_a, types.a) ||
         loads_element_by_element(opclass, alignment_b, types.b);
}

const std::vector<Sm80Tile>& tile_table(DataType a, OpClass opclass, bool scalar) {
  if (opclass == OpClass::Simt) {
    if (a == DataType::f32) return kSm80SimtF32;
    if (a == DataType::f64) return kSm80SimtF64;
    return kSm80SimtGeneric;
  }
  if (is_half(a)) return scalar ? kSm80HalfScalar : kSm80Half;
  if (a == DataType::f32) return kSm80Tf32;
  if (a == DataType::f64) return kSm80F64;
  return kSm80Int8;
}

// Type-level rules: what a 2.x GemmUniversal can be instantiated with at all.
void check_types(const KernelSpec& spec) {
  if (spec.kernel_cc != 80) {
    fail("The Sm80Universal family builds SM80 kernels (kernel_cc 80), not kernel_cc " +
         std::to_string(spec.kernel_cc) + ".");
  }
  if (const std::string fp8 = fp8_rule_violation(spec.cc, spec.kernel_cc, spec.opclass, operand_types_of(spec));
      !fp8.empty()) {
    fail(fp8);
  }
  if (spec.element_c == DataType::void_t) fail("CUTLASS 2.x kernels need a C/D element type, not void.");
  if (spec.scale != ScaleMode::None) {
    fail("Scale vectors (" + std::string(to_string(spec.scale)) +
         ") are fused by SM90 kernels only; use cc=90 with kernel_cc 90, or scale D afterwards.");
  }
  if (spec.element_c != spec.element_d) {
    fail("CUTLASS 2.x kernels need element C (" + std::string(to_string(spec.element_c)) + ") equal to element D (" +
         std::string(to_string(spec.element_d)) + ").");
  }
  if (spec.opclass == OpClass::TensorOp && is_int8(spec.element_a) &&
      (spec.layout_a != Layout::RowMajor || spec.layout_b != Layout::ColumnMajor)) {
    fail("8-bit integer tensor-op GEMMs need A RowMajor and B ColumnMajor (TN); use OpClass Simt otherwise.");
  }
}

// CUTLASS 2.x's broadcast epilogue (GemmUniversalWithBroadcast) adds a vector along the output's contiguous
// dimension: per column of a row-major D, per row of a column-major D (it runs the transposed problem).
void check_bias(const KernelSpec& spec) {
  if (spec.opclass != OpClass::TensorOp || uses_stream_k(spec)) {
    fail(
        "A fused bias on CUTLASS 2.x kernels needs a TensorOp kernel without Stream-K; use an SM90 kernel or drop "
        "the bias.");
  }
  if ((spec.bias == BiasMode::PerColumn) != (spec.layout_c == Layout::RowMajor)) {
    fail(std::string("A per-") + std::string(to_string(spec.bias)) + " bias with " +
         std::string(to_string(spec.layout_c)) +
         " C is not available in CUTLASS 2.x kernels (their bias runs along "
         "D's contiguous dimension: per-column with RowMajor C, per-row with ColumnMajor C). Use the other C layout, "
         "or an SM90 kernel.");
  }
}

class Sm80Universal final : public Family {
 public:
  KernelFamily id() const override { return KernelFamily::Sm80Universal; }
  int kernel_cc() const override { return 80; }
  // A visitor tree has a template of its own (DefaultGemmWithVisitor).
  std::string_view template_name(const KernelSpec& spec) const override {
    return spec.visitor ? "sm80_gemm_visitor.cu.in" : "sm80_gemm.cu.in";
  }
  std::string_view glue_header(const KernelSpec&) const override { return "gemmkit/sm80_gemm.hpp"; }

  bool supports(OpClass opclass, const OperandTypes& types) const override {
    if (opclass == OpClass::Simt) return simt_types(types) && output_types_ok(80, types);
    return tensor_op_types(types) && layouts_ok_for_tensor_op(types) && output_types_ok(80, types);
  }

  std::vector<int> operand_alignments(OpClass opclass, DataType element, const OperandTypes& types) const override {
    // SIMT kernels read scalars; f64 tensor-op kernels are built for scalar loads only, as in the reference.
    if (opclass == OpClass::Simt || element == DataType::f64) return {1};
    std::vector<int> out = vector_widths(element);
    // int8 tensor-op mainloops need 16-byte rows of A and B.
    if (is_int8(types.a) && element == types.a) out.erase(out.begin() + 1, out.end());
    // 16-bit operands of any leading dimension: the two-stage mainloop loads them element by element.
    if (tensor_op_loads_element_by_element(types)) out.push_back(1);
    return out;
  }

  std::vector<TileDescription> tile_descriptions(OpClass opclass, const OperandTypes& types, const DeviceLimits& limits,
                                                 int alignment_a, int alignment_b) const override {
    std::vector<TileDescription> out;
    for (const auto& row : tile_table(types.a, opclass, scalar_rows(opclass, types, alignment_a, alignment_b))) {
      TileDescription td;
      td.threadblock_shape = row.tb;
      td.warp_count = row.warps;
      td.stages = row.stages;
      td.instruction_shape = instruction_shape(types.a, opclass);
      if (is_int8(types.a) && opclass == OpClass::TensorOp) td.math_operation = MathOperation::MultiplyAddSaturate;
      if (smem_bytes_per_stage(td, types.a, types.b) * td.stages > limits.max_smem_per_block) continue;
      out.push_back(td);
      // f32 on tensor cores rounds to tf32 by default; 3xTF32 ("fast f32") keeps f32 accuracy, and bf16 / f16
      // rounding trades accuracy for speed: each offered beside every tf32 configuration.
      if (types.a == DataType::f32 && opclass == OpClass::TensorOp) {
        for (MathOperation math : {MathOperation::MultiplyAddFastF32, MathOperation::MultiplyAddFastBF16,
                                   MathOperation::MultiplyAddFastF16}) {
          td.math_operation = math;
          out.push_back(td);
        }
      }
    }
    return out;
  }

  std::vector<Swizzle> swizzles(OpClass opclass) const override {
    std::vector<Swizzle> out = {Swizzle::Identity1, Swizzle::Identity2, Swizzle::Identity4, Swizzle::Identity8};
    if (opclass == OpClass::TensorOp) out.push_back(Swizzle::StreamK);
    return out;
  }

  bool computes_transposed(OpClass, const OperandTypes&) const override { return false; }
  bool has_persistent_scheduler() const override { return false; }

  // The 2.x visitor epilogue moves matrices and row vectors in C's vectors, counted in the tensor's elements (at
  // most 16 bytes).
  int visitor_access_bytes(const KernelSpec& spec, const epilogue::Node& node) const override {
    using epilogue::NodeKind;
    const bool vectors =
        node.kind == NodeKind::Matrix || node.kind == NodeKind::Store || node.kind == NodeKind::RowBroadcast;
    return vectors ? std::min(16, spec.alignment_c * bits_of(*node.element) / 8) : 0;
  }

  // The bias is loaded in C's vectors.
  int bias_alignment_bytes(const KernelSpec& spec) const override {
    return spec.alignment_c * bits_of(spec.element_c) / 8;
  }

  void validate(const KernelSpec& spec, const DeviceLimits& limits) const override {
    const TileDescription& td = spec.tile;
    const std::string arch = "SM" + std::to_string(spec.cc) + " " + std::string(to_string(spec.opclass));
    check_activation_compiled_in(spec);
    if (spec.visitor) {
      if (spec.activation != Activation::Identity || spec.bias != BiasMode::None ||
          spec.split_k_mode != SplitKMode::Serial) {
        fail("an epilogue visitor tree replaces the activation and bias; put them into the tree instead.");
      }
      check_visitor(*spec.visitor, spec, limits);
    }
    check_types(spec);
    if (td.cluster_shape != Shape3{1, 1, 1}) {
      fail("Cluster shape " + shape_text(td.cluster_shape) + " needs an SM90 tensor-op kernel; " + arch +
           " kernels (CUTLASS 2.x) take cluster shape 1x1x1.");
    }
    check_threadblock_shape(spec);
    if (td.kernel_schedule != KernelSchedule::Auto || td.epilogue_schedule != EpilogueSchedule::Auto ||
        td.tile_scheduler != TileScheduler::Default) {
      fail("Kernel schedules, epilogue schedules and tile schedulers are SM90 features; this is an " + arch +
           " (CUTLASS 2.x) kernel. Leave them at their defaults, or use swizzle = StreamK for Stream-K.");
    }
    if (uses_stream_k(spec) && spec.opclass != OpClass::TensorOp) {
      fail("Stream-K is only supported with opcode class TensorOp; this plan uses Simt.");
    }
    if (spec.swizzle == Swizzle::Horizontal) {
      fail(
          "HorizontalSwizzle does not compile with CUTLASS 4.2's 2.x GemmUniversal kernel (its tile-offset interface "
          "changed); use IdentitySwizzle1/2/4/8 or ThreadblockSwizzleStreamK.");
    }
    check_operand_alignments(spec);
    if (scalar_rows(spec.opclass, operand_types_of(spec), spec.alignment_a, spec.alignment_b) && td.stages != 2) {
      fail(
          "16-bit operands of alignment 1 (rows that fit no 4-byte vector) are loaded element by element by "
          "CUTLASS's two-stage tensor-op mainloop: use stages = 2 (got " +
          std::to_string(td.stages) + "), or pad the leading dimensions to a multiple of 16 bytes.");
    }
    for (int i = 0; i < 3; ++i) {
      if (td.warp_count[i] <= 0 || td.threadblock_shape[i] % td.warp_count[i] != 0) {
        fail("Warp count " + shape_text(td.warp_count) + " must divide the threadblock shape " +
             shape_text(td.threadblock_shape) + ".");
      }
    }
    if (td.stages < 2) {
      fail("Stage count " + std::to_string(td.stages) + " is invalid for SM" + std::to_string(spec.cc) +
           " (CUTLASS 2.x) kernels: use at least 2 (3 or more for multistage tensor-op kernels).");
    }
    check_shared_memory(spec, limits);
    if (spec.bias != BiasMode::None) check_bias(spec);
  }

  std::string kernel_name(const KernelSpec& spec) const override {
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
      core += instruction_type_in_name(spec);
    }
    core += "gemm";
    const std::string extended = extended_name(spec, core);
    const auto& tb = spec.tile.threadblock_shape;
    return "cutlass_" + std::string(row_of(spec.opclass).in_kernel_name) + "_" + extended + "_" +
           std::to_string(tb[0]) + "x" + std::to_string(tb[1]) + "_" + std::to_string(tb[2]) + "x" +
           std::to_string(spec.tile.stages) + "_" + layout_letter(kernel_a) + layout_letter(kernel_b) + "_align" +
           std::to_string(alignment) + std::string(row_of(spec.swizzle).in_kernel_name) + epilogue_suffix(spec);
  }

  Placeholders placeholders(const KernelSpec& spec) const override {
    const TileDescription& tile = spec.tile;
    const Shape3& tb = tile.threadblock_shape;
    const Shape3& inst = tile.instruction_shape;
    auto text = [](int value) { return std::to_string(value); };
    Placeholders out = common_placeholders(spec);
    out.insert(out.end(),
               {
                   {"threadblock_m", text(tb[0])},
                   {"threadblock_n", text(tb[1])},
                   {"threadblock_k", text(tb[2])},
                   {"warp_m", text(tb[0] / tile.warp_count[0])},
                   {"warp_n", text(tb[1] / tile.warp_count[1])},
                   {"warp_k", text(tb[2] / tile.warp_count[2])},
                   {"instruction_m", text(inst[0])},
                   {"instruction_n", text(inst[1])},
                   {"instruction_k", text(inst[2])},
                   {"stages", text(tile.stages)},
                   {"swizzle", std::string(row_of(spec.swizzle).cutlass)},
                   {"math_operation", std::string(row_of(tile.math_operation).cutlass)},
                   {"bias", std::string(row_of(spec.bias).cutlass)},
                   {"activation", activation_functor(spec)},
                   {"device_gemm", spec.bias == BiasMode::None ? "GemmUniversal" : "GemmUniversalWithBroadcast"},
                   {"opclass", std::string(row_of(spec.opclass).cutlass)},
                   {"arch", "cutlass::arch::Sm80"},
               });
    if (spec.visitor) {
      // The tree replaces the bias, activation and device-level GEMM placeholders; D's type is its own.
      std::erase_if(out, [](const auto& kv) {
        return kv.first == "bias" || kv.first == "activation" || kv.first == "device_gemm";
      });
      out.push_back({"element_d", std::string(row_of(spec.element_d).cutlass)});
      const Placeholders tree = visitor_placeholders(*spec.visitor, spec.family);
      out.insert(out.end(), tree.begin(), tree.end());
    }
    return out;
  }
};

}  // namespace

const Family& sm80_universal() {
  static const Sm80Universal family;
  return family;
}

}  // namespace gemmkit::families
