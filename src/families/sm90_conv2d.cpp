// src/families/sm90_conv2d.cpp: the Sm90Conv2d family: CUTLASS 3.x implicit-GEMM convolution
// (conv::device::ConvUniversalAdapter over conv::kernel::ConvUniversal, from the SM90 conv and epilogue collective
// builders; TMA im2col loads, TMA epilogue; NHWC activations, KRSC filters), rendered from
// templates/sm90_conv2d.cu.in with the glue of device/include/gemmkit/sm90_conv2d.hpp. Its problem-level rules (what
// TMA im2col can address) are check_sm90_conv_problem (families/sm90_conv2d.hpp).
#include "families/sm90_conv2d.hpp"

#include <algorithm>
#include <string>

#include "families/rules.hpp"

namespace gemmkit::families {
namespace {

struct Cta {
  int m, n;
};

// CTA tiles (M x N), the default first. CUTLASS 4.2's conv kernels run one consumer warp group
// (KernelImplicitTmaWarpSpecializedSm90; its cooperative and ping-pong schedules are not implemented for conv), so
// tiles stop at 128 x 128: a 128 x 256 tile would hold 256 f32 accumulators per thread.
const std::vector<Cta> kCtas = {{128, 128}, {128, 64}, {64, 128}, {64, 64}};
const std::vector<Shape3> kClusters = {{1, 1, 1}, {2, 1, 1}, {1, 2, 1}};

// K depth of a CTA tile: 128 bytes of the operand element, as the SM90 GEMM tiles.
int tile_k(DataType a) {
  return 128 * 8 / bits_of(a);
}

std::string kind_text(const KernelSpec& spec) {
  return std::string(to_string(spec.conv->kind));
}

// The operand vector TMA needs: 16 bytes of the element.
int tma_alignment(DataType element) {
  return 128 / bits_of(element);
}

void check_types(const KernelSpec& spec) {
  if (!spec.conv) fail("The Sm90Conv2d family builds convolutions; this spec has no conv kind.");
  if (spec.kernel_cc != 90) {
    fail("The Sm90Conv2d family builds SM90 kernels (kernel_cc 90), not kernel_cc " + std::to_string(spec.kernel_cc) +
         ".");
  }
  if (spec.opclass != OpClass::TensorOp) {
    fail("SM90 conv kernels are TensorOp only; pass kernel_cc=80 for the CUTLASS 2.x SIMT conv kernels.");
  }
  if (spec.element_a != spec.element_b) {
    fail("SM90 conv kernels take A and B of one element type; got " + std::string(to_string(spec.element_a)) + " and " +
         std::string(to_string(spec.element_b)) + ".");
  }
  // tf32 wgmma reads both operands K-major; dgrad reads the filter and wgrad both operands MN-major.
  if (spec.element_a == DataType::f32 && spec.conv->kind != ConvKind::Fprop) {
    fail("SM90 " + kind_text(spec) +
         " kernels for f32 operands do not exist (tf32 tensor cores read both operands K-major, which only fprop "
         "does); pass kernel_cc=80 for the CUTLASS 2.x tf32 " +
         kind_text(spec) + " kernels.");
  }
  if (spec.bias != BiasMode::None) {
    fail("Conv2d kernels have no bias epilogue; pass the bias as C (broadcast to the output) with beta = 1.");
  }
  if (spec.swizzle != Swizzle::Identity1) {
    fail("SM90 conv kernels take IdentitySwizzle1 (the CUTLASS 3.x tile scheduler); " +
         std::string(to_string(spec.swizzle)) + " is a CUTLASS 2.x swizzle: leave it unset or pass kernel_cc=80.");
  }
  if (spec.conv->iterator_algorithm != IteratorAlgorithm::Analytic ||
      spec.conv->stride_support != StrideSupport::Strided) {
    fail(
        "Iterator algorithms and stride support select CUTLASS 2.x conv kernels; SM90 conv kernels load with TMA "
        "im2col. Leave them unset, or pass kernel_cc=80.");
  }
}

void check_alignments(const KernelSpec& spec) {
  check_operand_alignments(spec);
  const struct {
    const char* name;
    int alignment;
    DataType element;
  } operands[] = {{"A", spec.alignment_a, spec.element_a},
                  {"B", spec.alignment_b, spec.element_b},
                  {"C", spec.alignment_c, spec.element_c}};
  for (const auto& o : operands) {
    if (o.alignment != tma_alignment(o.element)) {
      fail(std::string("SM90 conv kernels move ") + o.name + " with TMA, which needs 16-byte channel vectors (" +
           std::to_string(tma_alignment(o.element)) + " elements of " + std::string(to_string(o.element)) +
           "); got alignment " + std::to_string(o.alignment) +
           ". Pad the channels, or pass kernel_cc=80 for the CUTLASS 2.x kernels, which read narrower vectors.");
    }
  }
}

void check_tile(const KernelSpec& spec) {
  const TileDescription& td = spec.tile;
  if (td.cluster_shape[2] != 1 || td.cluster_shape[0] < 1 || td.cluster_shape[1] < 1 ||
      td.cluster_shape[0] * td.cluster_shape[1] > 2) {
    fail("SM90 conv kernels take the cluster shapes 1x1x1, 2x1x1 and 1x2x1; got " + shape_text(td.cluster_shape) + ".");
  }
  check_threadblock_shape(spec);
  const Shape3 cta = td.cta_tile();
  if ((cta[0] != 64 && cta[0] != 128) || cta[1] % 16 != 0 || cta[1] < 16 || cta[1] > 256) {
    fail(
        "SM90 conv kernels run one warp group per CTA: the CTA tile M must be 64 or 128 and N a multiple of 16 up "
        "to 256; the CTA tile is " +
        shape_text(cta) + ".");
  }
  if (cta[2] != tile_k(spec.element_a)) {
    fail("The CTA tile K of SM90 conv kernels is 128 bytes of the operand (" + std::to_string(tile_k(spec.element_a)) +
         " for " + std::string(to_string(spec.element_a)) + "); the CTA tile is " + shape_text(cta) + ".");
  }
  if (td.kernel_schedule != KernelSchedule::TmaWarpSpecialized ||
      td.epilogue_schedule != EpilogueSchedule::TmaWarpSpecialized || td.tile_scheduler != TileScheduler::Default) {
    fail(
        "SM90 conv kernels have one schedule: kernel TmaWarpSpecialized (CUTLASS's "
        "KernelImplicitTmaWarpSpecializedSm90),"
        " epilogue TmaWarpSpecialized, the default tile scheduler; got kernel " +
        std::string(to_string(td.kernel_schedule)) + ", epilogue " + std::string(to_string(td.epilogue_schedule)) +
        ", scheduler " + std::string(to_string(td.tile_scheduler)) + ".");
  }
  check_sm90_stages(td);
}

class Sm90Conv2d final : public Family {
 public:
  KernelFamily id() const override { return KernelFamily::Sm90Conv2d; }
  int kernel_cc() const override { return 90; }
  std::string_view template_name(const KernelSpec&) const override { return "sm90_conv2d.cu.in"; }
  std::string_view glue_header(const KernelSpec&) const override { return "gemmkit/sm90_conv2d.hpp"; }
  // A cubin and a host module built side by side (split_entry.hpp), as the SM90 GEMMs.
  bool splittable(const KernelSpec&) const override { return true; }

  // Tensor-core f16 and bf16 (f32 accumulation; f16 also f16) and f32 (tf32, fprop only: validate) convs.
  bool supports(OpClass opclass, const OperandTypes& types) const override {
    const bool floating = is_half(types.a) || types.a == DataType::f32;
    return opclass == OpClass::TensorOp && floating && types.a == types.b && tensor_op_types(types) &&
           output_types_ok(90, types);
  }
  std::vector<int> operand_alignments(OpClass, DataType element, const OperandTypes&) const override {
    return {tma_alignment(element)};
  }
  std::vector<TileDescription> tile_descriptions(OpClass, const OperandTypes& types, const DeviceLimits&, int,
                                                 int) const override {
    std::vector<TileDescription> out;
    for (const auto& cluster : kClusters) {
      for (const auto& cta : kCtas) {
        TileDescription td;
        td.cluster_shape = cluster;
        td.threadblock_shape = {cta.m * cluster[0], cta.n * cluster[1], tile_k(types.a)};
        td.warp_count = {4, 1, 1};
        td.stages = 0;
        td.kernel_schedule = KernelSchedule::TmaWarpSpecialized;
        td.epilogue_schedule = EpilogueSchedule::TmaWarpSpecialized;
        td.tile_scheduler = TileScheduler::Default;
        out.push_back(td);
      }
    }
    return out;
  }
  std::vector<Swizzle> swizzles(OpClass) const override { return {Swizzle::Identity1}; }
  bool computes_transposed(OpClass, const OperandTypes&) const override { return false; }
  bool has_persistent_scheduler() const override { return false; }
  int bias_alignment_bytes(const KernelSpec&) const override { return 1; }

  void validate(const KernelSpec& spec, const DeviceLimits& limits) const override {
    check_types(spec);
    check_alignments(spec);
    check_tile(spec);
    check_activation_compiled_in(spec);
    check_shared_memory(spec, limits);
  }

  // The reference's CUTLASS 3.x conv names (cutlass3x_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_f16_f16nhwc_...), plus
  // ours for the activation.
  std::string kernel_name(const KernelSpec& spec) const override {
    const bool wgrad = spec.conv->kind == ConvKind::Wgrad;
    const std::string output_layout = wgrad ? "kcsr" : "nhwc";
    const std::string core = std::string(uses_tf32(spec) ? "tf32" : "") + kind_text(spec);
    const TileDescription& td = spec.tile;
    return "cutlass3x_sm" + std::to_string(spec.kernel_cc) + "_tensorop_" + core + "_" +
           std::string(to_string(spec.element_a)) + "nhwc_" + std::string(to_string(spec.element_b)) + "nhwc_" +
           std::string(to_string(spec.element_accumulator)) + "_" + std::string(to_string(spec.element_c)) + "_" +
           std::string(to_string(spec.element_d)) + output_layout + "_" + shape_text(td.threadblock_shape) + "_" +
           shape_text(td.cluster_shape) + "_" + std::to_string(td.stages) + "_align" +
           std::to_string(std::max(spec.alignment_a, spec.alignment_b)) +
           std::string(row_of(td.tile_scheduler).in_kernel_name) +
           std::string(row_of(td.kernel_schedule).in_kernel_name) +
           std::string(row_of(td.epilogue_schedule).in_kernel_name) + epilogue_suffix(spec);
  }

  Placeholders placeholders(const KernelSpec& spec) const override {
    const TileDescription& tile = spec.tile;
    auto text = [](int value) { return std::to_string(value); };
    auto cutlass = [](auto value) { return std::string(row_of(value).cutlass); };
    Placeholders out = cta_and_cluster_placeholders(tile);
    out.insert(out.end(), {
                              {"kernel_name", spec.name()},
                              {"conv_operator", cutlass(spec.conv->kind)},
                              {"element_a", cutlass(spec.element_a)},
                              {"alignment_a", text(spec.alignment_a)},
                              {"element_b", cutlass(spec.element_b)},
                              {"alignment_b", text(spec.alignment_b)},
                              {"element_c", cutlass(spec.element_c)},
                              {"alignment_c", text(spec.alignment_c)},
                              {"element_d", cutlass(spec.element_d)},
                              {"alignment_d", text(output_alignment(spec.element_c, spec.element_d, spec.alignment_c))},
                              {"element_accumulator", cutlass(spec.element_accumulator)},
                              {"element_compute", cutlass(spec.element_compute())},
                              {"activation", activation_functor(spec)},
                              {"epilogue_schedule", cutlass(tile.epilogue_schedule)},
                              {"stages", text(tile.stages)},
                              {"kernel_schedule", "cutlass::conv::KernelImplicitTmaWarpSpecializedSm90"},
                          });
    return out;
  }
};

// TMA im2col addresses the filter window with 8-bit offsets and its corners with signed 8-bit values (two spatial
// dimensions share the 16 bits), CUTLASS 4.2's can_implement rules for a 2-D conv.
constexpr int kOffsetLimit = (1 << 8) - 1;
constexpr int kCornerLimit = 1 << 7;

void check_axis(const char* axis, int pad, int filter, int dilation, int input, int output, ConvKind kind) {
  const int reach = (filter - 1) * dilation;  // the dilated filter's extent minus one
  if (reach >= kOffsetLimit) {
    fail(std::string(
             "SM90 conv kernels (TMA im2col) take a dilated filter extent below 256 along each axis; along the ") +
         axis + " it is (" + std::to_string(filter) + " - 1) x " + std::to_string(dilation) +
         " + 1 = " + std::to_string(reach + 1) + ". Pass kernel_cc=80 for the CUTLASS 2.x kernels.");
  }
  // The lower and upper corners of the im2col box, as CUTLASS computes them for each kind.
  const int lower = kind == ConvKind::Dgrad ? pad - reach : -pad;
  const int upper = kind == ConvKind::Dgrad ? pad - reach + input - output : pad - reach;
  for (int corner : {lower, upper}) {
    if (corner < -kCornerLimit || corner > kCornerLimit - 1) {
      fail(std::string("SM90 conv kernels (TMA im2col) need the padding and dilated filter to put the im2col box "
                       "corners within [-128, 127]; along the ") +
           axis + " padding " + std::to_string(pad) + " and a dilated filter extent of " + std::to_string(reach + 1) +
           " give " + std::to_string(corner) + ". Pass kernel_cc=80 for the CUTLASS 2.x kernels.");
    }
  }
}

}  // namespace

void check_sm90_conv_problem(ConvKind kind, const ConvExtents& e) {
  if (kind == ConvKind::Dgrad && (e.stride[0] != 1 || e.stride[1] != 1)) {
    fail("SM90 conv kernels compute dgrad with unit strides only (CUTLASS 4.2's TMA im2col dgrad); the stride is " +
         std::to_string(e.stride[0]) + "x" + std::to_string(e.stride[1]) +
         ". Pass kernel_cc=80 for the CUTLASS 2.x strided dgrad kernels.");
  }
  if (e.split_k_slices > 1) {
    fail("SM90 conv kernels have no split-K; split_k_slices is " + std::to_string(e.split_k_slices) +
         ". Pass kernel_cc=80 for the CUTLASS 2.x serial split-K kernels, or set split_k_slices to 1.");
  }
  check_axis("height", e.padding[0], e.r, e.dilation[0], e.h, e.p, kind);
  check_axis("width", e.padding[1], e.s, e.dilation[1], e.w, e.q, kind);
}

const Family& sm90_conv2d() {
  static const Sm90Conv2d family;
  return family;
}

}  // namespace gemmkit::families
