// device/include/gemmkit/sm90_gemm.hpp: glue for the Sm90Collective family (CUTLASS 3.x collective builders).
// A generated source includes this, declares its GemmUniversalAdapter with the helpers below, names
// gemmkit::sm90::Module<Gemm, Bias> as gemmkit_kernel::Module and includes gemmkit/module_entry.hpp.
#pragma once

#include <cstdint>
#include <type_traits>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"
#include "gemmkit/sm90_common.hpp"

namespace gemmkit::sm90 {

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

// Stream-K's scheduler takes a split count; the other schedulers have no such field.
template <class T>
auto set_splits(T& scheduler, int splits, int) -> decltype(scheduler.splits = splits, void()) {
  if (splits > 1) scheduler.splits = splits;
}
template <class T>
void set_splits(T&, int, long) {}

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
class Module : public ParamsLaunch<DeviceGemm, typename DeviceGemm::GemmKernel, gk_gemm_args> {
 public:
  using Gemm = DeviceGemm;

 private:
  using Kernel = typename Gemm::GemmKernel;
  using Arguments = typename Gemm::Arguments;

 public:
  static constexpr module::Bias kBias = BiasMode;

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
    set_splits(out.scheduler, args.splits, 0);
    return out;
  }
};

}  // namespace gemmkit::sm90
