// device/include/gemmkit/sm90_gemm.hpp: glue for the Sm90Collective family (CUTLASS 3.x collective builders).
// A generated source includes this, declares its GemmUniversalAdapter with the helpers below, names
// gemmkit::sm90::Module<Gemm, Bias> as gemmkit_kernel::Module and includes gemmkit/module_entry.hpp.
#pragma once

#include <cstdint>
#include <type_traits>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/epilogue/thread/activation.h"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"
#include "gemmkit/activations.hpp"
#include "gemmkit/module_common.hpp"

namespace gemmkit::sm90 {

// The epilogue fusion: D = Act(alpha * acc + beta * C + bias); without a bias and activation it is the plain
// linear combination (the only fusion the Auto epilogue schedule accepts). The bias is a column vector (PerRow,
// length m) or a row vector (PerColumn, length n) of ElementBias, loaded element by element: AlignmentBias 1 puts
// no alignment requirement on it beyond its element's.
template <module::Bias BiasMode, template <class> class Act, class ElementD, class ElementCompute, class ElementC,
          class ElementBias>
struct FusionSelector {
  using type = cutlass::epilogue::fusion::LinCombEltAct<Act, ElementD, ElementCompute, ElementC, ElementCompute>;
};
template <class ElementD, class ElementCompute, class ElementC, class ElementBias>
struct FusionSelector<module::Bias::None, cutlass::epilogue::thread::Identity, ElementD, ElementCompute, ElementC,
                      ElementBias> {
  using type = cutlass::epilogue::fusion::LinearCombination<ElementD, ElementCompute, ElementC, ElementCompute>;
};
template <template <class> class Act, class ElementD, class ElementCompute, class ElementC, class ElementBias>
struct FusionSelector<module::Bias::PerRow, Act, ElementD, ElementCompute, ElementC, ElementBias> {
  using type = cutlass::epilogue::fusion::LinCombPerRowBiasEltAct<Act, ElementD, ElementCompute, ElementBias, ElementC,
                                                                  ElementCompute, /*AlignmentBias=*/1>;
};
template <template <class> class Act, class ElementD, class ElementCompute, class ElementC, class ElementBias>
struct FusionSelector<module::Bias::PerColumn, Act, ElementD, ElementCompute, ElementC, ElementBias> {
  using type = cutlass::epilogue::fusion::LinCombPerColBiasEltAct<Act, ElementD, ElementCompute, ElementBias, ElementC,
                                                                  ElementCompute, /*AlignmentBias=*/1>;
};
template <module::Bias BiasMode, template <class> class Act, class ElementD, class ElementCompute, class ElementC,
          class ElementBias>
using Fusion = typename FusionSelector<BiasMode, Act, ElementD, ElementCompute, ElementC, ElementBias>::type;

// Whether the mainloop runs one tile per two consumer warp groups (the cooperative kernels): decides which TMA
// epilogue matches it. KernelScheduleAuto is resolved the way the CUTLASS 4.2 builder resolves it.
template <class KernelSchedule, class CtaTile, class ElementA, int AlignmentA, class ElementB, int AlignmentB>
constexpr bool is_cooperative() {
  if constexpr (std::is_same_v<KernelSchedule, cutlass::gemm::collective::KernelScheduleAuto>) {
    constexpr bool tma = (cutlass::sizeof_bits<ElementA>::value * AlignmentA) % 128 == 0 &&
                         (cutlass::sizeof_bits<ElementB>::value * AlignmentB) % 128 == 0;
    return tma && cute::size<0>(CtaTile{}) != 64;
  } else {
    return std::is_same_v<KernelSchedule, cutlass::gemm::KernelTmaWarpSpecializedCooperative> ||
           std::is_same_v<KernelSchedule, cutlass::gemm::KernelCpAsyncWarpSpecializedCooperative>;
  }
}

// The epilogue schedule: as asked, except that Auto with a fused activation or bias (every fusion but the plain
// linear combination is an EltAct one; the Auto builder refuses them and the NoSmem epilogue would silently drop
// them) becomes the TMA warp-specialized epilogue matching the mainloop.
// Auto without a fusion becomes the TMA epilogue too when every operand moves 16-byte rows: measured on the H200
// (bench/results), CUTLASS's own Auto choice (the no-smem epilogue) is 10-25% slower on the benchmark shapes.
template <class EpilogueSchedule, class FusionOp, bool Cooperative, bool TmaEverywhere>
using ResolvedEpilogueSchedule =
    std::conditional_t<std::is_same_v<EpilogueSchedule, cutlass::epilogue::collective::EpilogueScheduleAuto> &&
                           (FusionOp::IsEltActSupported || TmaEverywhere),
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

// Mainloop stages: 0 = as many as fit next to the epilogue's shared storage.
template <int Stages, class CollectiveEpilogue>
using StageCount = std::conditional_t<Stages == 0,
                                      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
                                          sizeof(typename CollectiveEpilogue::SharedStorage))>,
                                      cutlass::gemm::collective::StageCount<(Stages > 0 ? Stages : 1)>>;

// A CuTe stride (M|N, K|N, L) of a layout tag with its one dynamic leading mode set to ld and L to batch_stride.
template <class Stride>
Stride make_stride(int64_t ld, int64_t batch_stride) {
  Stride stride{};
  if constexpr (cute::is_static<cute::remove_cvref_t<decltype(cute::get<0>(stride))>>::value) {
    cute::get<1>(stride) = ld;
  } else {
    cute::get<0>(stride) = ld;
  }
  if constexpr (!cute::is_static<cute::remove_cvref_t<decltype(cute::get<2>(stride))>>::value) {
    cute::get<2>(stride) = batch_stride;
  }
  return stride;
}

// Stream-K's scheduler takes a split count, a decomposition and a reduction mode (run-time arguments: one kernel
// runs data-parallel, split-K or Stream-K); the other schedulers have no such fields. The ABI numbers them in
// CUTLASS's order; a value out of range keeps CUTLASS's default.
template <class T>
auto set_decomposition(T& scheduler, const gk_gemm_args& args, int) -> decltype(scheduler.splits = 1, void()) {
  using Decomposition = decltype(scheduler.decomposition_mode);
  using Reduction = decltype(scheduler.reduction_mode);
  if (args.splits > 1) scheduler.splits = args.splits;
  if (args.decomposition >= 0 && args.decomposition <= 3) {
    scheduler.decomposition_mode = static_cast<Decomposition>(args.decomposition);
  }
  if (args.reduction == 0 || args.reduction == 1) scheduler.reduction_mode = static_cast<Reduction>(args.reduction);
}
template <class T>
void set_decomposition(T&, const gk_gemm_args&, long) {}

// The fused activation's arguments, when the fusion has any (LinCombEltAct has `activation`).
template <class Thread>
auto set_fusion_activation(Thread& thread, const gk_gemm_args& args, int) -> decltype(thread.activation, void()) {
  module::set_activation_params(thread.activation, args);
}
template <class Thread>
void set_fusion_activation(Thread&, const gk_gemm_args&, long) {}

// The bias vector, when the fusion has one; its stride (dBias) stays the default: unit along m (PerRow) or n
// (PerColumn), 0 along the batch, so every batch adds the same vector.
template <class Thread>
auto set_fusion_bias(Thread& thread, const gk_gemm_args& args, int) -> decltype(thread.bias_ptr, void()) {
  thread.bias_ptr = static_cast<decltype(thread.bias_ptr)>(args.bias);
}
template <class Thread>
void set_fusion_bias(Thread&, const gk_gemm_args&, long) {}

// The module glue for one GemmUniversalAdapter: ABI arguments -> CUTLASS arguments, and how a launch is prepared
// (gemmkit::module::run caches it).
template <class DeviceGemm, module::Bias BiasMode>
class Module {
 public:
  using Gemm = DeviceGemm;

 private:
  using Kernel = typename Gemm::GemmKernel;
  using Arguments = typename Gemm::Arguments;
  using Params = typename Gemm::Params;

 public:
  static constexpr module::Bias kBias = BiasMode;

  using Prepared = module::Prepared<Arguments, Params>;  // the state: the kernel's Params (TMA descriptors included)
  using Cache = module::LaunchCache<Prepared>;

  static Arguments to_arguments(const gk_gemm_args& args) {
    // With one batch, the batch strides are unused; zero keeps them valid TMA strides, as CUTLASS does.
    const bool batched = args.batch > 1;
    const module::Source source = module::source_of(args);
    Arguments out{};
    out.mode = batched ? cutlass::gemm::GemmUniversalMode::kBatched : cutlass::gemm::GemmUniversalMode::kGemm;
    out.problem_shape = {args.m, args.n, args.k, args.batch};

    using PtrA = decltype(out.mainloop.ptr_A);
    using PtrB = decltype(out.mainloop.ptr_B);
    out.mainloop.ptr_A = static_cast<PtrA>(args.A);
    out.mainloop.dA = make_stride<typename Kernel::StrideA>(args.lda, batched ? args.batch_stride_A : 0);
    out.mainloop.ptr_B = static_cast<PtrB>(args.B);
    out.mainloop.dB = make_stride<typename Kernel::StrideB>(args.ldb, batched ? args.batch_stride_B : 0);

    using Scalar = decltype(out.epilogue.thread.alpha);
    using PtrC = decltype(out.epilogue.ptr_C);
    using PtrD = decltype(out.epilogue.ptr_D);
    out.epilogue.thread.alpha = Scalar(args.alpha);
    out.epilogue.thread.beta = Scalar(args.beta);
    set_fusion_activation(out.epilogue.thread, args, 0);
    set_fusion_bias(out.epilogue.thread, args, 0);
    out.epilogue.ptr_C = static_cast<PtrC>(source.ptr);
    out.epilogue.dC = make_stride<typename Kernel::StrideC>(source.ld, batched ? source.batch_stride : 0);
    out.epilogue.ptr_D = static_cast<PtrD>(args.D);
    out.epilogue.dD = make_stride<typename Kernel::StrideD>(args.ldd, batched ? args.batch_stride_D : 0);

    out.hw_info.device_id = args.device_id;
    out.hw_info.sm_count = args.sm_count;  // <= 0: CUTLASS queries the device
    using RasterOrder = decltype(out.scheduler.raster_order);
    if (args.raster_order >= 0 && args.raster_order <= 2) {
      out.scheduler.raster_order = static_cast<RasterOrder>(args.raster_order);  // Heuristic, AlongM, AlongN
    }
    if (args.max_swizzle_size > 0) out.scheduler.max_swizzle_size = args.max_swizzle_size;
    set_decomposition(out.scheduler, args, 0);
    return out;
  }

  // A miss builds the Params (TMA descriptors included), which a hit relaunches; only a workspace that must be reset
  // per launch (Stream-K's barriers) is initialized again.
  static cutlass::Status prepare(Prepared& prepared, void* workspace, cudaStream_t stream) {
    Gemm op;
    const cutlass::Status status = op.initialize(prepared.arguments, workspace, stream);
    if (status == cutlass::Status::kSuccess) prepared.state = op.params();
    return status;
  }
  static cutlass::Status reset_workspace(Prepared& prepared, void* workspace, cudaStream_t stream) {
    return Kernel::initialize_workspace(prepared.arguments, workspace, stream, nullptr);
  }
  static cutlass::Status launch(Prepared& prepared, cudaStream_t stream) { return Gemm::run(prepared.state, stream); }
};

}  // namespace gemmkit::sm90
