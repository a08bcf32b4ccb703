// src/families/sm80_conv2d.cpp: the Sm80Conv2d family: CUTLASS 2.x implicit-GEMM convolution
// (device::ImplicitGemmConvolution over DefaultConv2dFprop/Dgrad/Wgrad; NHWC activations, KRSC filters; with parallel
// split-K, partial sums and a reduction::device::ReduceSplitK kernel), rendered from templates/sm80_conv2d.cu.in with
// the glue of device/include/gemmkit/sm80_conv2d.hpp. Its tiles and mainloop rules are those of the Sm80Universal
// family: a conv is a GEMM whose operands the iterators gather.
#include <algorithm>
#include <string>

#include "families/rules.hpp"

namespace gemmkit::families {
namespace {

// CUTLASS's spelling of a conv kind in DefaultConv2d<Kind>.
std::string default_kernel(ConvKind kind) {
  switch (kind) {
    case ConvKind::Fprop: return "DefaultConv2dFprop";
    case ConvKind::Dgrad: return "DefaultConv2dDgrad";
    case ConvKind::Wgrad: return "DefaultConv2dWgrad";
  }
  return "";
}

class Sm80Conv2d final : public Family {
 public:
  KernelFamily id() const override { return KernelFamily::Sm80Conv2d; }
  int kernel_cc() const override { return 80; }
  std::string_view template_name(const KernelSpec&) const override { return "sm80_conv2d.cu.in"; }
  std::string_view glue_header(const KernelSpec&) const override { return "gemmkit/sm80_conv2d.hpp"; }

  // Tensor-core f16 (f16 or f32 accumulation), bf16 and f32 (tf32, or 3xTF32) convs, and SIMT f32 ones: the
  // reference's SM80 Conv2d kernels, without the integer ones.
  bool supports(OpClass opclass, const OperandTypes& types) const override {
    const bool floating =
        opclass == OpClass::Simt ? types.a == DataType::f32 : is_half(types.a) || types.a == DataType::f32;
    return floating && dense().supports(opclass, types);
  }
  std::vector<int> operand_alignments(OpClass opclass, DataType element, const OperandTypes& types) const override {
    return vector_loads_only(dense().operand_alignments(opclass, element, types), opclass, element);
  }
  std::vector<TileDescription> tile_descriptions(OpClass opclass, const OperandTypes& types, const DeviceLimits& limits,
                                                 int alignment_a, int alignment_b) const override {
    return dense().tile_descriptions(opclass, types, limits, alignment_a, alignment_b);
  }
  std::vector<Swizzle> swizzles(OpClass) const override {
    return {Swizzle::Identity1, Swizzle::Identity2, Swizzle::Identity4, Swizzle::Identity8};
  }
  bool computes_transposed(OpClass, const OperandTypes&) const override { return false; }
  bool has_persistent_scheduler() const override { return false; }
  int bias_alignment_bytes(const KernelSpec&) const override { return 1; }

  void validate(const KernelSpec& spec, const DeviceLimits& limits) const override {
    if (!spec.conv) fail("The Sm80Conv2d family builds convolutions; this spec has no conv kind.");
    check_activation_compiled_in(spec);
    if (spec.bias != BiasMode::None) {
      fail("Conv2d kernels have no bias epilogue; pass the bias as C (broadcast to the output) with beta = 1.");
    }
    const auto allowed = swizzles(spec.opclass);
    if (std::find(allowed.begin(), allowed.end(), spec.swizzle) == allowed.end()) {
      fail("Conv2d kernels take IdentitySwizzle1/2/4/8 (strided dgrad kernels their StridedDgrad variants); " +
           std::string(to_string(spec.swizzle)) + " is a GEMM swizzle.");
    }
    if (spec.split_k_mode == SplitKMode::Parallel && spec.conv->kind == ConvKind::Dgrad &&
        spec.conv->stride_support == StrideSupport::Strided) {
      fail(
          "Parallel split-K has no strided dgrad kernel (CUTLASS's strided dgrad splits no reduction); use stride "
          "support 'unity' (unit strides) or split_k_mode serial with 1 slice.");
    }
    if (spec.conv->stride_support == StrideSupport::Unity && spec.conv->kind != ConvKind::Dgrad) {
      fail("Stride support 'unity' selects the unit-stride dgrad kernels; " + std::string(to_string(spec.conv->kind)) +
           " kernels take any stride: leave it at 'strided'.");
    }
    dense().validate(as_dense(spec, KernelFamily::Sm80Universal), limits);
  }

  std::string kernel_name(const KernelSpec& spec) const override {
    std::string core(row_of(spec.element_accumulator).in_kernel_name);
    if (spec.opclass == OpClass::TensorOp) {
      core += shape_text(spec.tile.instruction_shape);
      if (uses_tf32(spec)) core += "tf32";
    }
    core += std::string(row_of(spec.conv->kind).in_kernel_name) + "_" +
            std::string(row_of(spec.conv->iterator_algorithm).in_kernel_name);
    const auto& tb = spec.tile.threadblock_shape;
    return "cutlass_sm" + std::to_string(spec.kernel_cc) + "_" + std::string(row_of(spec.opclass).in_kernel_name) +
           "_" + extended_name(spec, core) + "_" + std::to_string(tb[0]) + "x" + std::to_string(tb[1]) + "_" +
           std::to_string(tb[2]) + "x" + std::to_string(spec.tile.stages) + "_nhwc" +
           std::string(row_of(spec.conv->stride_support).in_kernel_name) + "_align" + std::to_string(spec.alignment_a) +
           std::string(row_of(spec.swizzle).in_kernel_name) + epilogue_suffix(spec) +
           std::string(row_of(spec.split_k_mode).in_kernel_name);
  }

  Placeholders placeholders(const KernelSpec& spec) const override {
    Placeholders out =
        placeholders_for_template(dense().placeholders(as_dense(spec, KernelFamily::Sm80Universal)),
                                  {"layout_a", "layout_b", "layout_c", "bias", "device_gemm"}, spec.name());
    const bool strided_dgrad =
        spec.conv->kind == ConvKind::Dgrad && spec.conv->stride_support == StrideSupport::Strided;
    for (auto& [key, value] : out) {
      // Strided dgrad kernels walk their output in as many passes as the stride has phases: their own swizzle.
      if (key == "swizzle" && strided_dgrad) {
        value = "cutlass::conv::threadblock::StridedDgradIdentityThreadblockSwizzle<" +
                std::to_string(swizzle_width(spec.swizzle)) + ">";
      }
    }
    out.insert(out.end(),
               {
                   {"default_kernel", default_kernel(spec.conv->kind)},
                   {"iterator_algorithm", std::string(row_of(spec.conv->iterator_algorithm).cutlass)},
                   {"stride_support", std::string(row_of(spec.conv->stride_support).cutlass)},
                   {"output", spec.split_k_mode == SplitKMode::Parallel ? "ParallelSplitKOutput" : "DirectOutput"},
               });
    return out;
  }

 private:
  static const Family& dense() { return sm80_universal(); }
  static int swizzle_width(Swizzle swizzle) {
    switch (swizzle) {
      case Swizzle::Identity2: return 2;
      case Swizzle::Identity4: return 4;
      case Swizzle::Identity8: return 8;
      default: return 1;
    }
  }
};

}  // namespace

const Family& sm80_conv2d() {
  static const Sm80Conv2d family;
  return family;
}

}  // namespace gemmkit::families
