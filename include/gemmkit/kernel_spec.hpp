// include/gemmkit/kernel_spec.hpp: KernelSpec, the plain value that fully determines one generated kernel.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gemmkit/epilogue.hpp"
#include "gemmkit/types.hpp"

namespace gemmkit {

using Shape3 = std::array<int, 3>;

// "AxBxC", as kernel names and messages write shapes.
std::string shape_text(const Shape3& shape);
// "[A, B, C]", as the reference prints them.
std::string shape_list(const Shape3& shape);

// How a Stream-K kernel shares out the K extent of its output tiles in one launch: its scheduler's decomposition
// (never Auto) and split count, run-time arguments chosen per problem (Gemm::k_split_for).
struct KSplit {
  Decomposition mode = Decomposition::Heuristic;
  int splits = 1;
  bool operator==(const KSplit&) const = default;
};

// The instruction a configuration issues, as the reference's MathInstruction describes it: its shape (0x0x0 for
// SM90 kernels, whose builders choose it), the element types it multiplies (tf32 for f32 operands on tensor cores),
// the opcode class and the math operation.
struct MathInstruction {
  Shape3 instruction_shape{0, 0, 0};
  DataType element_a = DataType::f16, element_b = DataType::f16, element_accumulator = DataType::f32;
  OpClass opcode_class = OpClass::TensorOp;
  MathOperation math_operation = MathOperation::MultiplyAdd;
  bool operator==(const MathInstruction&) const = default;
};

// The opcode class and instruction element types of the plan a configuration was listed for (catalog-stamped).
struct InstructionTypes {
  OpClass opcode_class = OpClass::TensorOp;
  DataType element_a = DataType::f16, element_b = DataType::f16, element_accumulator = DataType::f32;
  bool operator==(const InstructionTypes&) const = default;
};

// One configuration of a kernel family, printable like the reference's TileDescription.
// On SM90 threadblock_shape is the cluster's tile, as in the reference: each CTA computes
// threadblock_shape / cluster_shape (see cta_tile()).
struct TileDescription {
  Shape3 threadblock_shape{0, 0, 0};
  Shape3 warp_count{0, 0, 0};
  int stages = 0;  // 0 = as many as fit (SM90 only)
  Shape3 instruction_shape{0, 0, 0};
  Shape3 cluster_shape{1, 1, 1};
  KernelSchedule kernel_schedule = KernelSchedule::Auto;
  EpilogueSchedule epilogue_schedule = EpilogueSchedule::Auto;
  TileScheduler tile_scheduler = TileScheduler::Default;
  MathOperation math_operation = MathOperation::MultiplyAdd;
  // Set on the configurations a plan lists or stores (they describe, not configure: == ignores it).
  std::optional<InstructionTypes> instruction_types;

  Shape3 cta_tile() const;
  // The instruction this configuration issues; nullopt for one that no plan has described yet.
  std::optional<MathInstruction> math_instruction() const;
  // Every field in the reference's order, with the CTA tile after the cluster shape: its name, its label (the
  // reference's, ThreadblockShape marked as the cluster's tile) and its printed value (what both to_string() and
  // the Python repr show).
  struct Field {
    std::string_view name, label;
    std::string value;
  };
  std::vector<Field> fields() const;
  // The reference's multi-line block (ClusterShape / CTA tile / ThreadblockShape / WarpCount / Stages / ...).
  std::string to_string() const;
  bool operator==(const TileDescription& other) const;
};

// Some fields of a TileDescription (the reference's dict form): merged onto the plan's current or default one.
struct TileDescriptionUpdate {
  std::optional<Shape3> threadblock_shape, warp_count, instruction_shape, cluster_shape;
  std::optional<int> stages;
  std::optional<KernelSchedule> kernel_schedule;
  std::optional<EpilogueSchedule> epilogue_schedule;
  std::optional<TileScheduler> tile_scheduler;
  std::optional<MathOperation> math_operation;

  TileDescription applied_to(TileDescription base) const;
};

// JSON of every field, enums by name (nlohmann::json finds it: `nlohmann::ordered_json j = tile;`).
void to_json(nlohmann::ordered_json& json, const TileDescription& tile);

// The vector width (elements of D) at which a kernel stores D when it moves C in vectors of alignment_c elements:
// as many bytes, within one 128-bit access.
int output_alignment(DataType element_c, DataType element_d, int alignment_c);

// What a Conv2d kernel adds to a GEMM's description: the convolution, how its iterators walk the operands, and
// whether a dgrad kernel is for unit strides only.
struct ConvKernel {
  ConvKind kind = ConvKind::Fprop;
  IteratorAlgorithm iterator_algorithm = IteratorAlgorithm::Analytic;
  StrideSupport stride_support = StrideSupport::Strided;
  bool operator==(const ConvKernel&) const = default;
};

// One kernel: what every kind shares (types, layouts, alignments, tile, epilogue), plus a convolution's own
// description (`conv`) for the Conv2d families. A grouped GEMM is told apart by its family alone.
struct KernelSpec {
  int cc = 0;         // the GPU the module is built for (80 -> sm_80, 90 -> sm_90a, ...)
  int kernel_cc = 0;  // the kernel generation: 80 (2.x) or 90 (3.x)
  KernelFamily family = KernelFamily::Sm80Universal;
  OpClass opclass = OpClass::TensorOp;
  DataType element_a = DataType::f16, element_b = DataType::f16;
  DataType element_c = DataType::f16, element_d = DataType::f16;
  DataType element_accumulator = DataType::f32;
  Layout layout_a = Layout::RowMajor, layout_b = Layout::RowMajor, layout_c = Layout::RowMajor;
  int alignment_a = 1, alignment_b = 1, alignment_c = 1;
  TileDescription tile;
  Swizzle swizzle = Swizzle::Identity1;
  Activation activation = Activation::Identity;
  // The kernel takes its activation at launch (gk_gemm_args.activation) instead of compiling it in: one kernel serves
  // every activation of an otherwise equal spec (SM90 GEMM kernels on CUTLASS's epilogues).
  bool activation_at_launch = false;
  BiasMode bias = BiasMode::None;
  ScaleMode scale = ScaleMode::None;  // scale vectors (SM90 kernels)
  // FP8 block scales applied in the mainloop (SM90 kernels); the module takes them in gk_gemm_args' row_scale (A's)
  // and column_scale (B's) fields, device/include/gemmkit/sm90_blockwise.hpp.
  BlockScaling block_scaling = BlockScaling::None;
  std::optional<ConvKernel> conv;  // Conv2d kernels only
  // Conv2d kernels: Serial (the kernel writes D; split-K slices, if any, add into it in turn) or Parallel (partial
  // sums in a workspace, then a reduction kernel that applies the epilogue). The slice count is a run-time argument.
  SplitKMode split_k_mode = SplitKMode::Serial;
  // An epilogue visitor tree (its types resolved against the plan's): it replaces activation, bias and scale, which
  // stay at their defaults. Kernel names carry its digest (_evt<8 hex digits>).
  std::optional<epilogue::Epilogue> visitor;

  // Kernel name in the reference's format, e.g. cutlass_tensorop_f16_s16816gemm_f16_256x128_64x3_tt_align8.
  std::string name() const;
  // The compute type of the epilogue (alpha, beta, activation): f32 for integer and half accumulators.
  DataType element_compute() const;
  // nvcc's -arch value, e.g. "sm_90a" or "sm_80".
  std::string arch_flag() const;
  // A stable "key=value" record of every field, for the cache key and goldens.
  std::string canonical() const;
  bool operator==(const KernelSpec&) const = default;
};

// JSON of the kernel: its name, target, types, layouts, alignments, epilogue, arch flag and tile.
void to_json(nlohmann::ordered_json& json, const KernelSpec& spec);

}  // namespace gemmkit
