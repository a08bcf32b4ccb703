// device/include/gemmkit/sm90_launch.hpp: what every CUTLASS 3.x SM90 kernel's glue shares, whatever its epilogue:
// mainloop stage counts, which kernel schedule is cooperative, CUTLASS's arguments from the ABI's and how a 3.x device
// adapter is prepared and launched. It includes no epilogue collective (a kernel with gemmkit's lean epilogue parses
// none of CUTLASS's) and no device adapter (the GEMM one brings CUTLASS 2.x GemmUniversal, whose partial
// specialization also matches a conv problem shape).
#pragma once

#include <cstdint>
#include <type_traits>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/gemm.h"
#include "cutlass/kernel_hardware_info.hpp"
#include "gemmkit/cute_stride.hpp"
#include "gemmkit/module_common.hpp"

namespace gemmkit::sm90 {

// Mainloop stages: 0 = as many as fit next to the epilogue's shared storage. The conv builders take the same two
// tags from their own namespace.
template <int Stages, class CollectiveEpilogue,
          template <int> class AutoCarveout = cutlass::gemm::collective::StageCountAutoCarveout,
          template <int> class Fixed = cutlass::gemm::collective::StageCount>
using StageCount =
    std::conditional_t<Stages == 0, AutoCarveout<static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>,
                       Fixed<(Stages > 0 ? Stages : 1)>>;

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

using module::make_stride;

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

// CUTLASS's arguments for one launch; set_fusion(thread, args) fills the epilogue's fusion arguments.
template <class Gemm, class SetFusion>
typename Gemm::Arguments make_arguments(const gk_gemm_args& args, SetFusion set_fusion) {
  using Kernel = typename Gemm::GemmKernel;
  using Arguments = typename Gemm::Arguments;
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

  using PtrC = decltype(out.epilogue.ptr_C);
  using PtrD = decltype(out.epilogue.ptr_D);
  set_fusion(out.epilogue.thread, args);
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

// How a 3.x device adapter (GemmUniversalAdapter, ConvUniversalAdapter) over `Kernel` is prepared and launched
// (gemmkit::module::run's contract): a miss builds the Params (TMA descriptors included), which a hit relaunches;
// only a workspace that must be reset per launch (Stream-K's barriers) is initialized again.
template <class Adapter, class Kernel, class Args>
struct ParamsLaunch {
  using DeviceKernel = Kernel;  // what the split path's cubin holds (split_entry.hpp)
  using Prepared = module::Prepared<typename Adapter::Arguments, typename Adapter::Params>;
  using Cache = module::LaunchCache<Prepared, Args>;

  static cutlass::Status prepare(Prepared& prepared, void* workspace, cudaStream_t stream) {
    Adapter op;
    const cutlass::Status status = op.initialize(prepared.arguments, workspace, stream);
    if (status == cutlass::Status::kSuccess) prepared.state = op.params();
    return status;
  }
  static cutlass::Status reset_workspace(Prepared& prepared, void* workspace, cudaStream_t stream) {
    return Kernel::initialize_workspace(prepared.arguments, workspace, stream, nullptr);
  }
  static cutlass::Status launch(Prepared& prepared, cudaStream_t stream) {
    return Adapter::run(prepared.state, stream);
  }
};

}  // namespace gemmkit::sm90
