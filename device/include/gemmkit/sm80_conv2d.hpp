// device/include/gemmkit/sm80_conv2d.hpp: glue for the Sm80Conv2d family (CUTLASS 2.x implicit-GEMM convolution,
// device::ImplicitGemmConvolution over DefaultConv2dFprop/Dgrad/Wgrad; with parallel split-K, a reduction kernel
// after it). A generated source includes this, declares its kernel through an output policy below (DirectOutput or
// ParallelSplitKOutput), names gemmkit::sm80_conv2d::Module<its operator> as gemmkit_kernel::Module and includes
// gemmkit/conv2d_entry.hpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cutlass/conv/conv2d_problem_size.h"
#include "cutlass/conv/convolution.h"
#include "cutlass/conv/device/implicit_gemm_convolution.h"
#include "cutlass/conv/kernel/default_conv2d_dgrad.h"
#include "cutlass/conv/kernel/default_conv2d_fprop.h"
#include "cutlass/conv/kernel/default_conv2d_wgrad.h"
#include "cutlass/conv/threadblock/threadblock_swizzle.h"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/thread/linear_combination.h"
#include "cutlass/layout/tensor.h"
#include "cutlass/reduction/device/reduce_split_k.h"
#include "cutlass/reduction/kernel/reduce_split_k.h"
#include "cutlass/reduction/thread/reduction_operators.h"
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

// Parallel split-K as one operator (CUTLASS's SplitKMode::kParallel): the conv kernel's CTAs of slice k write their
// partial sums, in the accumulator type, to partition k of the workspace (its epilogue a plain copy); then
// reduction::device::ReduceSplitK adds the partitions and applies the plan's epilogue, D = act(alpha * sum + beta * C),
// so the activation sees the whole sum. The workspace holds slices x (GEMM m x n) accumulators.
template <class Conv, class Reduction_>
class ParallelSplitK {
 public:
  using Reduction = Reduction_;
  using UnderlyingKernel = typename Conv::UnderlyingKernel;
  using ElementA = typename Conv::ElementA;
  using ElementB = typename Conv::ElementB;
  using ElementC = typename Reduction::ElementOutput;  // C and D
  using ElementAccumulator = typename Conv::ElementAccumulator;
  using EpilogueOutputOp = typename Reduction::OutputOp;
  static constexpr cutlass::conv::Operator kConvolutionalOperator = Conv::kConvolutionalOperator;

  struct Arguments {
    typename Conv::Arguments conv;            // C and D: the workspace, bound by initialize()
    typename Reduction::Arguments reduction;  // the workspace likewise
  };

  static Arguments make_arguments(const cutlass::conv::Conv2dProblemSize& problem,
                                  const typename UnderlyingKernel::TensorRefA& a,
                                  const typename UnderlyingKernel::TensorRefB& b,
                                  const cutlass::Tensor4DCoord& output_extent, const ElementC* source,
                                  ElementC* destination, const typename EpilogueOutputOp::Params& epilogue) {
    const cutlass::gemm::GemmCoord gemm = cutlass::conv::implicit_gemm_problem_size(kConvolutionalOperator, problem);
    const auto partials = cutlass::layout::TensorNHWC::packed(output_extent);
    const auto ld = static_cast<typename Reduction::StrideIndex>(gemm.n());  // packed: rows of the GEMM's n
    return {typename Conv::Arguments(problem, a, b, {nullptr, partials}, {nullptr, partials}, {},
                                     cutlass::conv::SplitKMode::kParallel),
            typename Reduction::Arguments(cutlass::MatrixCoord(gemm.m(), gemm.n()), problem.split_k_slices,
                                          static_cast<size_t>(gemm.m()) * static_cast<size_t>(gemm.n()), {nullptr, ld},
                                          {destination, ld}, {const_cast<ElementC*>(source), ld}, epilogue)};
  }

  static cutlass::Status can_implement(const Arguments& args) {
    if (const auto status = Conv::can_implement(args.conv); status != cutlass::Status::kSuccess) return status;
    // The reduction moves whole vectors of the output's rows.
    return args.reduction.problem_size.column() % EpilogueOutputOp::kCount == 0
               ? cutlass::Status::kSuccess
               : cutlass::Status::kErrorMisalignedOperand;
  }
  static size_t get_workspace_size(const Arguments& args) { return Conv::get_workspace_size(args.conv); }

  // Binds the workspace to both kernels. The conv kernel is launched here, not through
  // device::ImplicitGemmConvolution, whose initialize() clears the whole workspace for serial split-K's semaphores:
  // every partial sum is written, so parallel split-K needs no clearing.
  cutlass::Status initialize(const Arguments& args, void* workspace, cudaStream_t stream) {
    if (workspace == nullptr) return cutlass::Status::kErrorWorkspaceNull;
    auto* partials = static_cast<ElementAccumulator*>(workspace);
    typename Conv::Arguments conv = args.conv;
    conv.ref_C.reset(partials);
    conv.ref_D.reset(partials);
    conv_params_ = typename UnderlyingKernel::Params(conv, nullptr);
    if (kSharedBytes >= (48 << 10) &&
        cudaFuncSetAttribute(cutlass::Kernel<UnderlyingKernel>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             kSharedBytes) != cudaSuccess) {
      return cutlass::Status::kErrorInternal;
    }
    typename Reduction::Arguments reduction = args.reduction;
    reduction.workspace.reset(partials);
    return reduction_.initialize(reduction, nullptr, stream);
  }

  cutlass::Status run(cudaStream_t stream) {
    typename UnderlyingKernel::ThreadblockSwizzle swizzle;
    const dim3 grid = swizzle.get_grid_shape(conv_params_.grid_tiled_shape);
    cutlass::Kernel<UnderlyingKernel><<<grid, dim3(32 * Conv::kWarpCount, 1, 1), kSharedBytes, stream>>>(conv_params_);
    if (cudaPeekAtLastError() != cudaSuccess) return cutlass::Status::kErrorInternal;
    return reduction_.run(stream);
  }

 private:
  static constexpr int kSharedBytes = int(sizeof(typename UnderlyingKernel::SharedStorage));
  typename UnderlyingKernel::Params conv_params_{};
  Reduction reduction_{};
};

// How a conv kernel delivers D, as a generated source names it ({{output}}): the kernel's C/D element, the epilogue
// compiled into the conv kernel, and the operator the module launches.
// DirectOutput: the conv kernel's epilogue writes D = act(alpha * acc + beta * C) (serial split-K adds in turn).
template <class EpilogueOp>
struct DirectOutput {
  using ElementC = typename EpilogueOp::ElementOutput;
  using KernelEpilogue = EpilogueOp;
  template <class Conv>
  using Operator = Conv;
};

// ParallelSplitKOutput: the conv kernel writes partial sums (a copy in the accumulator type, vectors of at most 128
// bits) and ParallelSplitK's reduction applies EpilogueOp.
template <class EpilogueOp>
struct ParallelSplitKOutput {
  using ElementAccumulator = typename EpilogueOp::ElementAccumulator;
  using ElementC = ElementAccumulator;
  static constexpr int kPartialVector =
      std::min(EpilogueOp::kCount, 128 / cutlass::sizeof_bits<ElementAccumulator>::value);
  using KernelEpilogue =
      cutlass::epilogue::thread::LinearCombination<ElementAccumulator, kPartialVector, ElementAccumulator,
                                                   ElementAccumulator, cutlass::epilogue::thread::ScaleType::Nothing>;
  // One thread per vector of EpilogueOp::kCount outputs, 4 x 32 of them per CTA.
  using Reduction = cutlass::reduction::device::ReduceSplitK<cutlass::reduction::kernel::ReduceSplitK<
      cutlass::MatrixShape<4, 32 * EpilogueOp::kCount>, EpilogueOp,
      cutlass::reduction::thread::ReduceAdd<ElementAccumulator, ElementAccumulator, EpilogueOp::kCount>>>;
  template <class Conv>
  using Operator = ParallelSplitK<Conv, Reduction>;
};

// Whether an operator is ParallelSplitK (kernels compile as C++17: a trait rather than a requires-expression).
template <class Op, class = void>
struct has_reduction : std::false_type {};
template <class Op>
struct has_reduction<Op, std::void_t<typename Op::Reduction>> : std::true_type {};

// The module glue for one conv operator (a device::ImplicitGemmConvolution, or ParallelSplitK over one): ABI
// arguments -> CUTLASS arguments, and how a launch is prepared (gemmkit::module::run's contract, over gk_conv2d_args).
template <class Op>
class Module {
  using Arguments = typename Op::Arguments;
  using EpilogueParams = typename Op::EpilogueOutputOp::Params;
  using ElementCompute = typename Op::EpilogueOutputOp::ElementCompute;
  using Layout = cutlass::layout::TensorNHWC;
  static constexpr cutlass::conv::Operator kKind = Op::kConvolutionalOperator;
  static constexpr bool kParallelSplitK = has_reduction<Op>::value;

 public:
  using Gemm = Op;
  using Prepared = module::Prepared<Arguments, Op>;
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
    using ElementA = typename Op::ElementA;
    using ElementB = typename Op::ElementB;
    using ElementC = typename Op::ElementC;
    auto* source = static_cast<ElementC*>(const_cast<void*>(a.C != nullptr ? a.C : a.D));
    auto* destination = static_cast<ElementC*>(a.D);
    const typename Op::UnderlyingKernel::TensorRefA ref_a{static_cast<ElementA*>(const_cast<void*>(a.A)),
                                                          Layout::packed(extent_a(a))};
    const typename Op::UnderlyingKernel::TensorRefB ref_b{static_cast<ElementB*>(const_cast<void*>(a.B)),
                                                          Layout::packed(extent_b(a))};
    if constexpr (kParallelSplitK) {
      return Op::make_arguments(problem, ref_a, ref_b, extent_c(a), source, destination, epilogue);
    } else {
      return Arguments(problem, ref_a, ref_b, {source, Layout::packed(extent_c(a))},
                       {destination, Layout::packed(extent_c(a))}, epilogue, cutlass::conv::SplitKMode::kSerial);
    }
  }

  // Serial split-K's semaphores must be zeroed before every launch; initialize() does that. Parallel split-K binds
  // its partial sums' workspace there (nothing to clear).
  static cutlass::Status prepare(Prepared& prepared, void* workspace, cudaStream_t stream) {
    return prepared.state.initialize(prepared.arguments, prepared.reset_workspace ? workspace : nullptr, stream);
  }
  static cutlass::Status reset_workspace(Prepared& prepared, void* workspace, cudaStream_t stream) {
    if constexpr (kParallelSplitK) return cutlass::Status::kSuccess;
    return prepare(prepared, workspace, stream);
  }
  static cutlass::Status launch(Prepared& prepared, cudaStream_t stream) { return prepared.state.run(stream); }
};

}  // namespace gemmkit::sm80_conv2d
