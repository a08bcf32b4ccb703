// device/include/gemmkit/sm80_conv2d.hpp: glue for the Sm80Conv2d family (CUTLASS 2.x implicit-GEMM convolution,
// device::ImplicitGemmConvolution over DefaultConv2dFprop/Dgrad/Wgrad). A generated source includes this, declares
// its kernel with the helpers below, names gemmkit::sm80_conv2d::Module<Conv> as gemmkit_kernel::Module and includes
// gemmkit/conv2d_entry.hpp.
#pragma once

#include <cstdint>

#include "cutlass/conv/conv2d_problem_size.h"
#include "cutlass/conv/convolution.h"
#include "cutlass/conv/device/implicit_gemm_convolution.h"
#include "cutlass/conv/kernel/default_conv2d_dgrad.h"
#include "cutlass/conv/kernel/default_conv2d_fprop.h"
#include "cutlass/conv/kernel/default_conv2d_wgrad.h"
#include "cutlass/conv/threadblock/threadblock_swizzle.h"
#include "cutlass/cutlass.h"
#include "cutlass/layout/tensor.h"
#include "gemmkit/module_common.hpp"
#include "gemmkit/sm80_gemm.hpp"  // the GEMM families' Epilogue (LinearCombinationGeneric activations) serves here too

namespace gemmkit::sm80_conv2d {

// The extents of the three tensors, NHWC (activations) and KRSC (filter), for a problem.
inline cutlass::Tensor4DCoord input_extent(const gk_conv2d_args& a) {
  return {a.n, a.h, a.w, a.c};
}
inline cutlass::Tensor4DCoord filter_extent(const gk_conv2d_args& a) {
  return {a.k, a.r, a.s, a.c};
}
inline cutlass::Tensor4DCoord output_extent(const gk_conv2d_args& a) {
  return {a.n, a.p, a.q, a.k};
}

// The module glue for one device::ImplicitGemmConvolution: ABI arguments -> CUTLASS arguments, and how a launch is
// prepared (gemmkit::module::run's contract, over gk_conv2d_args).
template <class Conv>
class Module {
  using Arguments = typename Conv::Arguments;
  using EpilogueParams = typename Conv::EpilogueOutputOp::Params;
  using ElementCompute = typename Conv::EpilogueOutputOp::ElementCompute;
  using Layout = cutlass::layout::TensorNHWC;
  static constexpr cutlass::conv::Operator kKind = Conv::kConvolutionalOperator;

 public:
  using Gemm = Conv;
  using Prepared = module::Prepared<Arguments, Conv>;
  using Cache = module::LaunchCache<Prepared, gk_conv2d_args>;

  // The operands' extents by conv kind: A, B and C/D (the ABI's header says which tensor each is).
  static cutlass::Tensor4DCoord extent_a(const gk_conv2d_args& a) {
    return kKind == cutlass::conv::Operator::kFprop ? input_extent(a) : output_extent(a);
  }
  static cutlass::Tensor4DCoord extent_b(const gk_conv2d_args& a) {
    return kKind == cutlass::conv::Operator::kWgrad ? input_extent(a) : filter_extent(a);
  }
  static cutlass::Tensor4DCoord extent_c(const gk_conv2d_args& a) {
    return kKind == cutlass::conv::Operator::kFprop   ? output_extent(a)
           : kKind == cutlass::conv::Operator::kDgrad ? input_extent(a)
                                                      : filter_extent(a);
  }

  static Arguments to_arguments(const gk_conv2d_args& a) {
    const cutlass::conv::Conv2dProblemSize problem(
        input_extent(a), filter_extent(a), cutlass::Tensor4DCoord(a.pad_h, a.pad_h, a.pad_w, a.pad_w),
        cutlass::MatrixCoord(a.stride_h, a.stride_w), cutlass::MatrixCoord(a.dilation_h, a.dilation_w),
        output_extent(a), cutlass::conv::Mode::kCrossCorrelation, a.split_k_slices);
    EpilogueParams epilogue(ElementCompute(a.alpha), ElementCompute(a.beta));
    module::set_leaky_alpha(epilogue, a.activation_params[0], 0);
    // With beta == 0 and no C, D stands in for the source (never read): no null pointer reaches CUTLASS.
    const void* source = a.C != nullptr ? a.C : a.D;
    using ElementA = typename Conv::ElementA;
    using ElementB = typename Conv::ElementB;
    using ElementC = typename Conv::ElementC;
    return Arguments(problem, {static_cast<ElementA*>(const_cast<void*>(a.A)), Layout::packed(extent_a(a))},
                     {static_cast<ElementB*>(const_cast<void*>(a.B)), Layout::packed(extent_b(a))},
                     {static_cast<ElementC*>(const_cast<void*>(source)), Layout::packed(extent_c(a))},
                     {static_cast<ElementC*>(a.D), Layout::packed(extent_c(a))}, epilogue,
                     cutlass::conv::SplitKMode::kSerial);
  }

  // Serial split-K's semaphores must be zeroed before every launch; initialize() does that.
  static cutlass::Status prepare(Prepared& prepared, void* workspace, cudaStream_t stream) {
    return prepared.state.initialize(prepared.arguments, prepared.reset_workspace ? workspace : nullptr, stream);
  }
  static cutlass::Status reset_workspace(Prepared& prepared, void* workspace, cudaStream_t stream) {
    return prepare(prepared, workspace, stream);
  }
  static cutlass::Status launch(Prepared& prepared, cudaStream_t stream) { return prepared.state.run(stream); }
};

}  // namespace gemmkit::sm80_conv2d
