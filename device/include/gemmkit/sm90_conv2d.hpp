// device/include/gemmkit/sm90_conv2d.hpp: glue for the Sm90Conv2d family (CUTLASS 3.x implicit-GEMM convolution:
// conv::device::ConvUniversalAdapter over conv::kernel::ConvUniversal from the SM90 collective builders, operands
// loaded with TMA im2col). A generated source includes this, declares its kernel with the helpers below, names
// gemmkit::sm90_conv2d::Module<Conv> as gemmkit_kernel::Module and includes gemmkit/conv2d_entry.hpp.
#pragma once

#include <cstdint>
#include <type_traits>

// First: the conv headers use CuTe and KernelHardwareInfo without including them.
#include "gemmkit/sm90_common.hpp"  // the SM90 GEMMs' epilogue fusions, stage counts and launch glue

#include "cutlass/conv/collective/collective_builder.hpp"
#include "cutlass/conv/convnd_problem_shape.hpp"
#include "cutlass/conv/convolution.h"
#include "cutlass/conv/device/conv_universal_adapter.hpp"
#include "cutlass/conv/dispatch_policy.hpp"
#include "cutlass/conv/kernel/conv_universal.hpp"
#include "cutlass/layout/tensor.h"

namespace gemmkit::sm90_conv2d {

using cutlass::conv::Operator;

// The builders' CTA tile: the reduction (K) is a nested mode for every kind, and so is N for wgrad (C x S x R).
template <Operator Kind, int M, int N, int K>
using CtaTile =
    cute::Shape<cute::Int<M>, std::conditional_t<Kind == Operator::kWgrad, cute::Shape<cute::Int<N>>, cute::Int<N>>,
                cute::Shape<cute::Int<K>>>;

// C and D: an activation (NHWC) for fprop and dgrad, the filter (KRSC in memory; CUTLASS's TensorKCSR tag names its
// modes) for wgrad. A and B are NHWC-tagged for every kind (the filter of fprop and dgrad is KRSC = NHWC-like).
template <Operator Kind>
using OutputLayout =
    std::conditional_t<Kind == Operator::kWgrad, cutlass::layout::TensorKCSR, cutlass::layout::TensorNHWC>;

// Mainloop stages (0: as many as fit next to the epilogue), with the conv builders' own tags.
template <int Stages, class CollectiveEpilogue>
using StageCount = sm90::StageCount<Stages, CollectiveEpilogue, cutlass::conv::collective::StageCountAutoCarveout,
                                    cutlass::conv::collective::StageCount>;

// The module glue for one ConvUniversalAdapter: ABI arguments -> CUTLASS arguments; launches as the SM90 GEMMs do.
template <class Conv>
class Module : public sm90::ParamsLaunch<Conv, typename Conv::ConvKernel, gk_conv2d_args> {
  using Kernel = typename Conv::ConvKernel;
  using Arguments = typename Conv::Arguments;
  using ProblemShape = typename Kernel::ProblemShape;
  static constexpr Operator kKind = ProblemShape::ConvOp;

  // C's and D's CuTe strides from the packed output extents: ((W,H,N), C) for activations, (K, (C,S,R)) for filters.
  template <class Stride>
  static Stride output_stride(const ProblemShape& problem) {
    const auto& packed = problem.stride_C;  // right-major strides of C: [N|K, H|R, W|S, C]
    Stride stride{};
    if constexpr (kKind == Operator::kWgrad) {
      cute::get<0>(stride) = packed[0];
      cute::get<1, 1>(stride) = packed[2];
      cute::get<1, 2>(stride) = packed[1];
    } else {
      cute::get<0, 0>(stride) = packed[2];
      cute::get<0, 1>(stride) = packed[1];
      cute::get<0, 2>(stride) = packed[0];
    }
    return stride;
  }

 public:
  using Gemm = Conv;

  static Arguments to_arguments(const gk_conv2d_args& a) {
    // The problem is declared by the input activation (N,H,W,C) and the filter (K,R,S,C) for every kind; CUTLASS
    // derives the output (N,P,Q,K) and which tensor is A, B and C.
    const ProblemShape problem(cutlass::conv::Mode::kCrossCorrelation, {a.n, a.h, a.w, a.c}, {a.k, a.r, a.s, a.c},
                               {a.pad_h, a.pad_w}, {a.pad_h, a.pad_w}, {a.stride_h, a.stride_w},
                               {a.dilation_h, a.dilation_w}, /*groups=*/1);
    Arguments out{};
    out.mode = cutlass::gemm::GemmUniversalMode::kGemm;
    out.problem_shape = problem;
    using PtrA = decltype(out.mainloop.ptr_A);
    using PtrB = decltype(out.mainloop.ptr_B);
    out.mainloop.ptr_A = static_cast<PtrA>(a.A);
    out.mainloop.ptr_B = static_cast<PtrB>(a.B);

    using Scalar = decltype(out.epilogue.thread.alpha);
    using PtrC = decltype(out.epilogue.ptr_C);
    using PtrD = decltype(out.epilogue.ptr_D);
    out.epilogue.thread.alpha = Scalar(a.alpha);
    out.epilogue.thread.beta = Scalar(a.beta);
    sm90::set_fusion_activation(out.epilogue.thread, a, 0);
    // With beta == 0 and no C, D stands in for the source (never read): no null pointer reaches CUTLASS.
    out.epilogue.ptr_C = static_cast<PtrC>(a.C != nullptr ? a.C : a.D);
    out.epilogue.dC = output_stride<typename Kernel::StrideC>(problem);
    out.epilogue.ptr_D = static_cast<PtrD>(a.D);
    out.epilogue.dD = output_stride<typename Kernel::StrideD>(problem);
    out.hw_info.device_id = a.device_id;
    return out;
  }
};

}  // namespace gemmkit::sm90_conv2d
