// device/include/gemmkit/sm90_blockwise.hpp: glue for Sm90Collective kernels whose FP8 mainloop applies block scales
// (KernelSpec::block_scaling Blockwise, the DeepSeek-V3 format): each 128-deep K block's tensor-core sums are
// multiplied by A's scale of the row and B's scale of the 128 x 128 block before they are added to the f32
// accumulator. The epilogue is sm90_gemm.hpp's (alpha, beta, bias, activation); the ABI's scale vector pointers carry
// the block scales, so a blockwise module's gk_gemm_args read:
//   row_scale:    A's scales, f32, M-major: scale_a[(l * KB + kb) * M + m] for row m, K block kb, batch l;
//   column_scale: B's scales, f32, K-major: scale_b[(l * NB + nb) * KB + kb] for the block of columns nb * 128...,
// with KB = ceil(K / 128) and NB = ceil(N / 128): the layouts torch._scaled_mm takes for 1x128 and 128x128 scales.
// A's scales load with TMA, so M is a multiple of 4 (CUTLASS's can_implement checks it).
#pragma once

#include "cutlass/detail/blockwise_scale_layout.hpp"
#include "gemmkit/sm90_gemm.hpp"

namespace gemmkit::sm90 {

using BlockScales = cutlass::detail::Sm90BlockwiseScaleConfig<1, 128, 128, cute::GMMA::Major::MN, cute::GMMA::Major::K>;
using LayoutSFA = decltype(BlockScales::deduce_layoutSFA());
using LayoutSFB = decltype(BlockScales::deduce_layoutSFB());

// The module glue of a block-scaled GEMM: Module's arguments, plus both scale tensors and their layouts for this
// problem.
template <class DeviceGemm, module::Bias BiasMode, module::Scale ScaleMode>
class BlockwiseModule : public ParamsLaunch<DeviceGemm, typename DeviceGemm::GemmKernel, gk_gemm_args> {
  static_assert(ScaleMode == module::Scale::None, "block scales replace the scale vectors");

 public:
  using Gemm = DeviceGemm;
  static constexpr module::Bias kBias = BiasMode;
  // Both pointers are required: check_args refuses a launch without them (GK_ERR_ARGS).
  static constexpr module::Scale kScale = module::Scale::RowAndColumn;

  static typename Gemm::Arguments to_arguments(const gk_gemm_args& args) {
    typename Gemm::Arguments out = Module<DeviceGemm, BiasMode>::to_arguments(args);
    const auto problem = cute::make_shape(args.m, args.n, args.k, args.batch);
    out.mainloop.ptr_SFA = static_cast<const float*>(args.row_scale);
    out.mainloop.layout_SFA = BlockScales::tile_atom_to_shape_SFA(problem);
    out.mainloop.ptr_SFB = static_cast<const float*>(args.column_scale);
    out.mainloop.layout_SFB = BlockScales::tile_atom_to_shape_SFB(problem);
    return out;
  }
};

}  // namespace gemmkit::sm90
