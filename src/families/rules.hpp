// src/families/rules.hpp: what the kernel families share: rules every kernel obeys, which types have tensor-core or
// SIMT math, and the parts of names and templates that every family spells the same way.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "families/family.hpp"

namespace gemmkit::families {

// Throws ConfigError(message): every rule's failure.
[[noreturn]] void fail(const std::string& message);

bool is_half(DataType type);
bool is_int8(DataType type);
// Vector widths (elements) of `element` a cp.async mainloop can load, widest (128 bits) first, down to 4 bytes.
std::vector<int> vector_widths(DataType element);
// Whether a tensor-op kernel loads rows of `alignment` elements element by element: under 4 bytes, no cp.async
// vector fits them (CUTLASS 2.x's two-stage mainloop takes them).
bool loads_element_by_element(OpClass opclass, int alignment, DataType element);
// Whether CUTLASS 2.x has a tensor-op mainloop that loads these operands element by element (the two-stage one): A
// and B of one 16-bit type.
bool tensor_op_loads_element_by_element(const OperandTypes& types);
// `alignments` without those loaded element by element: the two-stage mainloop that takes them is the dense 2.x
// GEMM's alone.
std::vector<int> vector_loads_only(std::vector<int> alignments, OpClass opclass, DataType element);
// Whether `alignment` elements of `element` make 16-byte rows, which TMA loads and stores need.
bool moves_16_byte_rows(int alignment, DataType element);

// Tensor-core math exists for these operand and accumulator types.
bool tensor_op_types(const OperandTypes& types);
// Integer tensor cores read A row-major and B column-major ("TN") only.
bool layouts_ok_for_tensor_op(const OperandTypes& types);
// FP8 tensor-core math (SM90 WGMMA): A and B e4m3 or e5m2 (mixed too), f32 accumulation, C and D f16, bf16 or f32
// (or C void: a plan without C), A row-major and B column-major (WGMMA reads 8-bit operands K-major only).
bool fp8_types(const OperandTypes& types);
// Why a plan with FP8 operands has no kernel (on SM `cc`, kernel generation `kernel_cc`, opcode class `opclass`),
// naming the fix; "" when it has FP8 operands that fit or none at all. The only copy of the FP8 rules.
std::string fp8_rule_violation(int cc, int kernel_cc, OpClass opclass, const OperandTypes& types);
// FP8 mainloops (without fast accumulation) add each few k-blocks' tensor-core sums into a second set of f32
// accumulators, so a consumer warp group holds its tile twice: up to 64 x 192 fits in registers. The 128 x 256
// cooperative tile (64 x 256 per warp group) spills its accumulators (ptxas -v), which costs far more than the wider
// tile saves; 128 x 192 and 128 x 128 compile without spills (bench/results/dev-machine/fp8-tile-spills.md).
bool fp8_accumulators_fit(int cta_m, int cta_n, bool cooperative);
// The suffix CUTLASS's kernel-schedule types give the spec's FP8 mainloop variant: "FP8Blockwise" (block scales),
// "FP8FastAccum" (fast accumulation), or "" (the default promotion every 128 deep).
std::string_view fp8_schedule_variant(const KernelSpec& spec);
// FP8 lists every configuration twice: as given (promoted), then each again with fast accumulation
// (MultiplyAddFastAccum), which run() takes only for a plan that sets it.
void add_fast_accumulation_twins(std::vector<TileDescription>& tiles);
// A spec's operand types and layouts (C's element D's when C is void).
OperandTypes operand_types_of(const KernelSpec& spec);
// C's element, or D's for a plan without C (void): the type its bias vector has.
DataType c_or_d(const OperandTypes& types);
// CUDA-core math exists for these operand and accumulator types.
bool simt_types(const OperandTypes& types);
// C and D of 2.x kernels share one type; 3.x kernels may differ (e.g. f32 C, f16 D).
bool output_types_ok(int kernel_cc, const OperandTypes& types);

// Every operand's alignment is a power of two of at most one 128-bit vector.
void check_operand_alignments(const KernelSpec& spec);
// The threadblock shape is a positive multiple of the cluster shape in every dimension.
void check_threadblock_shape(const KernelSpec& spec);
// Mainloop shared memory of one pipeline stage, in bytes (the reference's estimate).
int smem_bytes_per_stage(const TileDescription& tile, DataType a, DataType b);
// The mainloop's stages fit the block's shared memory (an automatic stage count counts as one).
void check_shared_memory(const KernelSpec& spec, const DeviceLimits& limits);
// SM90 (CUTLASS 3.x collective builder) stage counts: 0 (the builder fits as many as shared memory allows) or at
// least 2. The GEMM and conv families share it.
void check_sm90_stages(const TileDescription& tile);

// Stream-K comes from the swizzle or the tile scheduler.
bool uses_stream_k(const KernelSpec& spec);
// Tensor-core f32 GEMMs run on tf32 instructions unless 3xTF32 (fast f32) is asked for.
bool uses_tf32(const KernelSpec& spec);
// The element type the instructions multiply for an operand of type `element` under `math`: tf32, bf16 or f16 for
// f32 operands on tensor cores (MultiplyAdd, FastBF16, FastF16), else the operand's own (3xTF32 keeps f32).
DataType instruction_element(DataType element, OpClass opclass, MathOperation math);
// The instruction type a kernel name carries after its instruction shape ("tf32", "bf16", "f16"): A's instruction
// element where it is neither A's type nor the accumulator's, as the reference names them; else "".
std::string instruction_type_in_name(const KernelSpec& spec);
// The reference's "extended" name part around a kernel's core (math and operation) name: the element of C and of
// A beside it when they differ from the accumulator's, e.g. f16_s16816gemm_f16.
std::string extended_name(const KernelSpec& spec, const std::string& core);
// Our additions to the reference's names (activation, bias, scale vectors), so that different kernels never share a
// name.
std::string epilogue_suffix(const KernelSpec& spec);

// Families that compile the activation in (all but Sm90Collective) refuse a spec that asks to take it at launch.
void check_activation_compiled_in(const KernelSpec& spec);

// The elementwise functor, e.g. cutlass::epilogue::thread::ReLu; sigmoid, SiLU and GELU of a 16-bit D use
// gemmkit/activations.hpp (hardware exp / reciprocal approximations), as does an activation taken at launch.
std::string activation_functor(const KernelSpec& spec);
// The placeholders every template has: kernel name, A/B/C element, layout and alignment, accumulator and compute
// types.
Placeholders common_placeholders(const KernelSpec& spec);
// An SM90 tile's CTA shape and cluster shape (cta_m, cta_n, cta_k, cluster_m, cluster_n, cluster_k).
Placeholders cta_and_cluster_placeholders(const TileDescription& tile);

// Grouped families build on a dense family's tiles and rules: the spec as that family would see it.
KernelSpec as_dense(const KernelSpec& spec, KernelFamily dense);
// A dense kernel name made the grouped kernel's, as the reference spells it (..._s16816gemm_grouped_f16_...).
std::string grouped_name(const std::string& dense_name);
// What no grouped kernel has: a bias, scale vectors, a swizzle other than IdentitySwizzle1, Stream-K.
void check_grouped_rules(const KernelSpec& spec);
// Values for a template's placeholders, without those it does not use; `kernel_name` replaced.
Placeholders placeholders_for_template(Placeholders values, const std::vector<std::string>& unused,
                                       const std::string& kernel_name);

}  // namespace gemmkit::families
