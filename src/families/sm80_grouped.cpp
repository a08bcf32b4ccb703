// src/families/sm80_grouped.cpp: the Sm80Grouped family: CUTLASS 2.x GemmGrouped (many GEMMs of different extents in
// one launch, device-side scheduling), rendered from templates/sm80_grouped.cu.in with the glue of
// device/include/gemmkit/sm80_grouped.hpp. Its tiles and rules are those of the Sm80Universal family.
#include <string>

#include "families/rules.hpp"

namespace gemmkit::families {
namespace {

class Sm80Grouped final : public Family {
 public:
  KernelFamily id() const override { return KernelFamily::Sm80Grouped; }
  int kernel_cc() const override { return 80; }
  std::string_view template_name(const KernelSpec&) const override { return "sm80_grouped.cu.in"; }
  std::string_view glue_header(const KernelSpec&) const override { return "gemmkit/sm80_grouped.hpp"; }

  // Tensor-core f16, bf16 and f32 (tf32) GEMMs: the grouped kernels gemmkit checks.
  bool supports(OpClass opclass, const OperandTypes& types) const override {
    const bool floating = is_half(types.a) || types.a == DataType::f32;
    return opclass == OpClass::TensorOp && floating && dense().supports(opclass, types);
  }
  std::vector<int> operand_alignments(OpClass opclass, DataType element, const OperandTypes& types) const override {
    return vector_loads_only(dense().operand_alignments(opclass, element, types), opclass, element);
  }
  std::vector<TileDescription> tile_descriptions(OpClass opclass, const OperandTypes& types, const DeviceLimits& limits,
                                                 int alignment_a, int alignment_b) const override {
    return dense().tile_descriptions(opclass, types, limits, alignment_a, alignment_b);
  }
  std::vector<Swizzle> swizzles(OpClass) const override { return {Swizzle::Identity1}; }
  // GemmGrouped transposes a column-major C problem itself.
  bool computes_transposed(OpClass, const OperandTypes&) const override { return false; }
  bool has_persistent_scheduler() const override { return false; }
  int bias_alignment_bytes(const KernelSpec&) const override { return 1; }

  void validate(const KernelSpec& spec, const DeviceLimits& limits) const override {
    check_grouped_rules(spec);
    dense().validate(as_dense(spec, KernelFamily::Sm80Universal), limits);
  }
  std::string kernel_name(const KernelSpec& spec) const override {
    return grouped_name(dense().kernel_name(as_dense(spec, KernelFamily::Sm80Universal)));
  }
  Placeholders placeholders(const KernelSpec& spec) const override {
    Placeholders out = placeholders_for_template(dense().placeholders(as_dense(spec, KernelFamily::Sm80Universal)),
                                                 {"swizzle", "bias", "device_gemm"}, spec.name());
    out.push_back({"activation_name", std::string(to_string(spec.activation))});
    return out;
  }

 private:
  static const Family& dense() { return sm80_universal(); }
};

}  // namespace

const Family& sm80_grouped() {
  static const Sm80Grouped family;
  return family;
}

}  // namespace gemmkit::families
