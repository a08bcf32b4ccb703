// device/include/gemmkit/sm80_gemm.hpp: glue for the Sm80Universal family (CUTLASS 2.x device::GemmUniversal).
// A generated source includes this, declares its GemmUniversal with the helpers below, names
// gemmkit::sm80::Module<Gemm, Bias> as gemmkit_kernel::Module and includes gemmkit/module_entry.hpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cutlass/cutlass.h"
#include "cutlass/epilogue/thread/activation.h"
#include "cutlass/epilogue/thread/linear_combination.h"
#include "cutlass/epilogue/thread/linear_combination_bias_elementwise.h"
#include "cutlass/epilogue/thread/linear_combination_generic.h"
#include "cutlass/functional.h"
#include "cutlass/gemm/device/gemm_universal.h"
#include "cutlass/gemm/device/gemm_universal_with_broadcast.h"
#include "cutlass/gemm/threadblock/threadblock_swizzle.h"
#include "cutlass/gemm/threadblock/threadblock_swizzle_streamk.h"
#include "gemmkit/activations.hpp"
#include "gemmkit/module_common.hpp"

namespace gemmkit::sm80 {

// The epilogue without a bias: D = Act(alpha * acc + beta * C), Count elements per access.
template <module::Bias BiasMode, template <class> class Act, class ElementD, int Count, class ElementAccumulator,
          class ElementCompute>
struct EpilogueSelector {
  using type = cutlass::epilogue::thread::LinearCombinationGeneric<
      Act, ElementD, Count, ElementAccumulator, ElementCompute, cutlass::epilogue::thread::ScaleType::Default,
      cutlass::FloatRoundStyle::round_to_nearest,
      cutlass::epilogue::thread::kIsHeavy_member_or_false<Act<ElementCompute>>::value>;
};
template <class ElementD, int Count, class ElementAccumulator, class ElementCompute>
struct EpilogueSelector<module::Bias::None, cutlass::epilogue::thread::Identity, ElementD, Count, ElementAccumulator,
                        ElementCompute> {
  using type = cutlass::epilogue::thread::LinearCombination<ElementD, Count, ElementAccumulator, ElementCompute>;
};
// With a bias: the broadcast epilogue of device::GemmUniversalWithBroadcast, D = Act(alpha * acc + beta * C + v),
// v of element D, one value per column of the row-major output it writes (no second output T is stored).
template <template <class> class Act, class ElementD, int Count, class ElementAccumulator, class ElementCompute>
struct BiasEpilogue {
  using type = cutlass::epilogue::thread::LinearCombinationBiasElementwise<
      ElementD, ElementAccumulator, ElementCompute, ElementD, ElementD, Count, Act<ElementCompute>,
      cutlass::plus<ElementCompute>, /*StoreT=*/false, ElementD>;
};
template <template <class> class Act, class ElementD, int Count, class ElementAccumulator, class ElementCompute>
struct EpilogueSelector<module::Bias::PerRow, Act, ElementD, Count, ElementAccumulator, ElementCompute>
    : BiasEpilogue<Act, ElementD, Count, ElementAccumulator, ElementCompute> {};
template <template <class> class Act, class ElementD, int Count, class ElementAccumulator, class ElementCompute>
struct EpilogueSelector<module::Bias::PerColumn, Act, ElementD, Count, ElementAccumulator, ElementCompute>
    : BiasEpilogue<Act, ElementD, Count, ElementAccumulator, ElementCompute> {};
template <module::Bias BiasMode, template <class> class Act, class ElementD, int Count, class ElementAccumulator,
          class ElementCompute>
using Epilogue = typename EpilogueSelector<BiasMode, Act, ElementD, Count, ElementAccumulator, ElementCompute>::type;

// The activation's hyperparameters: the broadcast epilogue keeps them in Params::elementwise.
template <class Params>
auto set_epilogue_activation(Params& params, const gk_gemm_args& args, int) -> decltype(params.elementwise, void()) {
  module::set_activation_params(params.elementwise, args);
}
template <class Params>
void set_epilogue_activation(Params& params, const gk_gemm_args& args, long) {
  module::set_activation_params(params, args);
}

// The module glue for one device::GemmUniversal, or device::GemmUniversalWithBroadcast when built with a bias:
// ABI arguments -> CUTLASS arguments, and how a launch is prepared (gemmkit::module::run caches it).
template <class DeviceGemm, module::Bias BiasMode>
class Module : public module::OperatorLaunch<module::Prepared<typename DeviceGemm::Arguments, DeviceGemm>> {
 public:
  using Gemm = DeviceGemm;

 private:
  using Arguments = typename Gemm::Arguments;
  using EpilogueParams = typename Gemm::EpilogueOutputOp::Params;
  using ElementCompute = typename Gemm::EpilogueOutputOp::ElementCompute;
  static constexpr bool kStreamK =
      std::is_same_v<typename Gemm::ThreadblockSwizzle, cutlass::gemm::threadblock::ThreadblockSwizzleStreamK>;

 public:
  static constexpr module::Bias kBias = BiasMode;

  using Prepared = module::Prepared<Arguments, Gemm>;  // the state: the operator, initialized
  using Cache = module::LaunchCache<Prepared>;

  // One batch: kGemm, where batch_count is the split-K factor (serial split-K; Stream-K's splitting factor).
  // Several: kBatched with the given batch strides.
  static Arguments to_arguments(const gk_gemm_args& args) {
    const bool batched = args.batch > 1;
    const module::Source source = module::source_of(args);
    EpilogueParams epilogue(ElementCompute(args.alpha), ElementCompute(args.beta));
    set_epilogue_activation(epilogue, args, 0);
    const auto mode = batched ? cutlass::gemm::GemmUniversalMode::kBatched : cutlass::gemm::GemmUniversalMode::kGemm;
    const int batch_count = batched ? args.batch : std::max(1, args.splits);
    const cutlass::gemm::GemmCoord problem(args.m, args.n, args.k);
    if constexpr (BiasMode != module::Bias::None) {
      // The vector (ptr_Vector) is the same for every batch; no T output (ptr_Tensor). With a column-major C,
      // GemmUniversalWithBroadcast runs the transposed problem, whose columns are the rows of D: the vector is
      // then per row, which is why the Sm80Universal family pairs PerRow with ColumnMajor C and PerColumn with RowMajor
      // C.
      return Arguments(mode, problem, batch_count, epilogue, args.A, args.B, source.ptr, args.D,
                       const_cast<void*>(args.bias), nullptr, args.batch_stride_A, args.batch_stride_B,
                       source.batch_stride, args.batch_stride_D, /*batch_stride_Vector=*/0,
                       /*batch_stride_Tensor=*/0, args.lda, args.ldb, source.ld, args.ldd, /*ldr=*/0, /*ldt=*/0);
    } else if constexpr (kStreamK) {
      return Arguments(mode, problem, batch_count, epilogue, args.A, args.B, source.ptr, args.D, args.batch_stride_A,
                       args.batch_stride_B, source.batch_stride, args.batch_stride_D, args.lda, args.ldb, source.ld,
                       args.ldd, args.sm_count > 0 ? args.sm_count : -1);
    } else {
      return Arguments(mode, problem, batch_count, epilogue, args.A, args.B, source.ptr, args.D, args.batch_stride_A,
                       args.batch_stride_B, source.batch_stride, args.batch_stride_D, args.lda, args.ldb, source.ld,
                       args.ldd);
    }
  }
};

}  // namespace gemmkit::sm80
