// device/include/gemmkit/sm90_gemm.hpp: glue for the Sm90Collective family (CUTLASS 3.x collective builders).
// A generated source includes this, declares its GemmUniversalAdapter with the helpers below, names
// gemmkit::sm90::Module<Gemm, Bias> as gemmkit_kernel::Module and includes gemmkit/module_entry.hpp.
#pragma once

#include <cstdint>
#include <type_traits>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/fusion/sm90_visitor_compute_tma_warpspecialized.hpp"
#include "cutlass/epilogue/fusion/sm90_visitor_load_tma_warpspecialized.hpp"
#include "cutlass/epilogue/fusion/sm90_visitor_store_tma_warpspecialized.hpp"
#include "cutlass/epilogue/fusion/sm90_visitor_tma_warpspecialized.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"
#include "gemmkit/cute_stride.hpp"
#include "gemmkit/sm90_common.hpp"

namespace gemmkit::sm90 {

// With scale vectors (FP8 dequantization scales, f32): D = Act(beta * C + (alpha * (acc * row_scale[m] *
// column_scale[n]) + bias)), an epilogue visitor tree of CUTLASS's nodes; the scales load element by element (a null
// one reads as ones), the bias is a column vector (PerRow), a row vector (PerColumn) or the scalar 0 (None).
namespace evt = cutlass::epilogue::fusion;
template <template <class> class Fn, class ElementOutput, class ElementCompute>
using Node = evt::Sm90Compute<Fn, ElementOutput, ElementCompute, cutlass::FloatRoundStyle::round_to_nearest>;
template <class CtaTile, class ElementCompute>
using RowScale = evt::Sm90ColBroadcast<0, CtaTile, float, ElementCompute, cute::Stride<cute::_1, cute::_0, int64_t>, 1>;
template <class CtaTile, class ElementCompute>
using ColumnScale =
    evt::Sm90RowBroadcast<0, CtaTile, float, ElementCompute, cute::Stride<cute::_0, cute::_1, int64_t>, 1>;

template <module::Bias BiasMode, class CtaTile, class ElementCompute, class ElementBias>
struct BiasLeafSelector {
  using type = evt::Sm90ScalarBroadcast<ElementCompute>;  // zero
};
template <class CtaTile, class ElementCompute, class ElementBias>
struct BiasLeafSelector<module::Bias::PerRow, CtaTile, ElementCompute, ElementBias> {
  using type =
      evt::Sm90ColBroadcast<0, CtaTile, ElementBias, ElementCompute, cute::Stride<cute::_1, cute::_0, int64_t>, 1>;
};
template <class CtaTile, class ElementCompute, class ElementBias>
struct BiasLeafSelector<module::Bias::PerColumn, CtaTile, ElementCompute, ElementBias> {
  using type =
      evt::Sm90RowBroadcast<0, CtaTile, ElementBias, ElementCompute, cute::Stride<cute::_0, cute::_1, int64_t>, 1>;
};

template <module::Bias BiasMode, template <class> class Act, class ElementD, class ElementCompute, class ElementC,
          class ElementBias, class CtaTile>
using ScaledFusion = evt::Sm90EVT<
    Node<Act, ElementD, ElementCompute>,
    evt::Sm90EVT<Node<cutlass::homogeneous_multiply_add, ElementCompute, ElementCompute>,
                 evt::Sm90ScalarBroadcast<ElementCompute>,  // beta
                 evt::Sm90SrcFetch<ElementC>,               // C
                 evt::Sm90EVT<Node<cutlass::homogeneous_multiply_add, ElementCompute, ElementCompute>,
                              evt::Sm90ScalarBroadcast<ElementCompute>,  // alpha
                              evt::Sm90EVT<Node<cutlass::multiplies, ElementCompute, ElementCompute>,
                                           evt::Sm90EVT<Node<cutlass::multiplies, ElementCompute, ElementCompute>,
                                                        evt::Sm90AccFetch, RowScale<CtaTile, ElementCompute>>,
                                           ColumnScale<CtaTile, ElementCompute>>,
                              typename BiasLeafSelector<BiasMode, CtaTile, ElementCompute, ElementBias>::type>>>;

// A dense kernel's fusion: CUTLASS's fusion operation without scale vectors, the scaled visitor tree with them.
template <module::Bias BiasMode, module::Scale ScaleMode, template <class> class Act, class ElementD,
          class ElementCompute, class ElementC, class ElementBias, class CtaTile>
using ScalableFusion =
    std::conditional_t<ScaleMode == module::Scale::None,
                       Fusion<BiasMode, Act, ElementD, ElementCompute, ElementC, ElementBias>,
                       ScaledFusion<BiasMode, Act, ElementD, ElementCompute, ElementC, ElementBias, CtaTile>>;

// Whether a fusion needs the TMA epilogue: every FusionOperation but the plain linear combination (IsEltActSupported)
// and every visitor tree (the scaled fusion).
template <class FusionOp, class = void>
inline constexpr bool needs_tma_epilogue = true;
template <class FusionOp>
inline constexpr bool needs_tma_epilogue<FusionOp, std::void_t<decltype(FusionOp::IsEltActSupported)>> =
    FusionOp::IsEltActSupported;

// The epilogue schedule: as asked, except that Auto with a fused activation, bias or scale vectors (every fusion but
// the plain linear combination; the Auto builder refuses them and the NoSmem epilogue would silently drop them)
// becomes the TMA warp-specialized epilogue matching the mainloop.
// Auto without a fusion becomes the TMA epilogue too when every operand moves 16-byte rows: CUTLASS's own Auto choice,
// the no-smem epilogue, stores D straight from registers and is the slower of the two on large tiles.
template <class EpilogueSchedule, class FusionOp, bool Cooperative, bool TmaEverywhere>
using ResolvedEpilogueSchedule =
    std::conditional_t<std::is_same_v<EpilogueSchedule, cutlass::epilogue::collective::EpilogueScheduleAuto> &&
                           (needs_tma_epilogue<FusionOp> || TmaEverywhere),
                       std::conditional_t<Cooperative, cutlass::epilogue::TmaWarpSpecializedCooperative,
                                          cutlass::epilogue::TmaWarpSpecialized>,
                       EpilogueSchedule>;

// Whether A, B, C and D all have 16-byte aligned rows (what TMA loads and stores need).
template <class ElementA, int AlignmentA, class ElementB, int AlignmentB, class ElementC, int AlignmentC,
          class ElementD, int AlignmentD>
constexpr bool tma_everywhere() {
  return (cutlass::sizeof_bits<ElementA>::value * AlignmentA) % 128 == 0 &&
         (cutlass::sizeof_bits<ElementB>::value * AlignmentB) % 128 == 0 &&
         (cutlass::sizeof_bits<ElementC>::value * AlignmentC) % 128 == 0 &&
         (cutlass::sizeof_bits<ElementD>::value * AlignmentD) % 128 == 0;
}

// The bias vector, when the fusion has one; its stride (dBias) stays the default: unit along m (PerRow) or n
// (PerColumn), 0 along the batch, so every batch adds the same vector.
template <class Thread>
auto set_fusion_bias(Thread& thread, const gk_gemm_args& args, int) -> decltype(thread.bias_ptr, void()) {
  thread.bias_ptr = static_cast<decltype(thread.bias_ptr)>(args.bias);
}
template <class Thread>
void set_fusion_bias(Thread&, const gk_gemm_args&, long) {}

// The bias leaf of the scaled fusion: a broadcast node's vector (ptr_col: PerRow, ptr_row: PerColumn), or nothing
// (the scalar 0).
template <class Leaf>
auto set_bias_leaf(Leaf& leaf, const gk_gemm_args& args, int) -> decltype(leaf.ptr_col, void()) {
  leaf.ptr_col = static_cast<decltype(leaf.ptr_col)>(args.bias);
}
template <class Leaf>
auto set_bias_leaf(Leaf& leaf, const gk_gemm_args& args, long) -> decltype(leaf.ptr_row, void()) {
  leaf.ptr_row = static_cast<decltype(leaf.ptr_row)>(args.bias);
}
template <class Leaf>
void set_bias_leaf(Leaf&, const gk_gemm_args&, ...) {}

// The scaled fusion's arguments, node by node as ScaledFusion nests them (each node's children first, then its
// own): act(beta * C + (alpha * ((acc * row_scale) * column_scale) + bias)).
template <class FusionArguments>
void set_scaled_fusion(FusionArguments& fusion, const gk_gemm_args& args) {
  auto& linear = fusion.op_0;  // beta * C + inner
  auto& inner = linear.op_2;   // alpha * scaled + bias
  auto& scaled = inner.op_1;   // (acc * row_scale) * column_scale
  auto& row_scale = scaled.op_0.op_1;
  auto& column_scale = scaled.op_1;
  using Scalar = std::remove_reference_t<decltype(inner.op_0.scalars[0])>;
  inner.op_0.scalars[0] = Scalar(args.alpha);
  linear.op_0.scalars[0] = Scalar(args.beta);
  row_scale.ptr_col = static_cast<const float*>(args.row_scale);
  row_scale.null_default = 1.0f;
  column_scale.ptr_row = static_cast<const float*>(args.column_scale);
  column_scale.null_default = 1.0f;
  set_bias_leaf(inner.op_2, args, 0);
  set_activation_arguments(fusion.op_1, args);
}

// The module glue for one GemmUniversalAdapter: ABI arguments -> CUTLASS arguments, and how a launch is prepared
// (gemmkit::module::run caches it).
template <class DeviceGemm, module::Bias BiasMode, module::Scale ScaleMode = module::Scale::None>
class Module : public ParamsLaunch<DeviceGemm, typename DeviceGemm::GemmKernel, gk_gemm_args> {
 public:
  using Gemm = DeviceGemm;

 private:
  using Arguments = typename Gemm::Arguments;

 public:
  static constexpr module::Bias kBias = BiasMode;
  static constexpr module::Scale kScale = ScaleMode;

  static Arguments to_arguments(const gk_gemm_args& args) {
    return make_arguments<Gemm>(args, [](auto& thread, const gk_gemm_args& a) { set_fusion(thread, a); });
  }

  template <class Thread>
  static void set_fusion(Thread& thread, const gk_gemm_args& args) {
    if constexpr (ScaleMode == module::Scale::None) {
      using Scalar = decltype(thread.alpha);
      thread.alpha = Scalar(args.alpha);
      thread.beta = Scalar(args.beta);
      set_fusion_activation(thread, args, 0);
      set_fusion_bias(thread, args, 0);
    } else {
      set_scaled_fusion(thread, args);
    }
  }
};

// The module glue for a kernel whose epilogue is a visitor tree of `Count` nodes: SetVisitor::set(fusion_args, args)
// fills the tree's arguments from args.visitor.
template <class DeviceGemm, class SetVisitor, int Count>
class VisitorModule : public ParamsLaunch<DeviceGemm, typename DeviceGemm::GemmKernel, gk_gemm_args> {
  using Base = ParamsLaunch<DeviceGemm, typename DeviceGemm::GemmKernel, gk_gemm_args>;

 public:
  using Gemm = DeviceGemm;
  static constexpr module::Bias kBias = module::Bias::None;
  static constexpr int kVisitorCount = Count;

  using Cache = module::VisitorCache<typename Base::Cache, Count>;

  static typename Gemm::Arguments to_arguments(const gk_gemm_args& args) {
    return make_arguments<Gemm>(args, [](auto& thread, const gk_gemm_args& a) { SetVisitor::set(thread, a); });
  }
};

}  // namespace gemmkit::sm90
