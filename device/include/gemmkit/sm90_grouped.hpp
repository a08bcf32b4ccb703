// device/include/gemmkit/sm90_grouped.hpp: glue for the Sm90Grouped family (CUTLASS 3.x ptr-array grouped GEMM:
// GroupProblemShape, a TMA warp-specialized cooperative or pingpong ptr-array kernel and its persistent group
// scheduler). A generated source includes this, declares its GemmUniversalAdapter with the helpers below, names
// gemmkit::sm90_grouped::Module<Gemm, Operands> as gemmkit_kernel::Module and includes gemmkit/grouped_entry.hpp.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/detail/blockwise_scale_layout.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/dispatch_policy.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "gemmkit/grouped_common.hpp"
#include "gemmkit/sm90_gemm.hpp"  // the dense family's Fusion, StageCount and make_stride serve grouped kernels too

namespace gemmkit::sm90_grouped {

// Per group (M, N, K); the batch mode of a ptr-array kernel is the group index.
using ProblemShape = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;

// KernelScheduleAuto becomes the cooperative kernel (two consumer warp groups share a 128+ row tile) when the CTA
// tile has 128 rows or more, else the pingpong kernel (each consumer warp group its own tile), as for dense GEMMs.
template <class KernelSchedule, class CtaTile>
using ResolvedKernelSchedule = std::conditional_t<
    std::is_same_v<KernelSchedule, cutlass::gemm::collective::KernelScheduleAuto>,
    std::conditional_t<(cute::size<0>(CtaTile{}) >= 128), cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                       cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong>,
    KernelSchedule>;

// The ptr-array kernels accept only the TMA ptr-array epilogue with as many warp groups as they have consumers.
template <class KernelSchedule>
using MatchingEpilogueSchedule =
    std::conditional_t<std::is_base_of_v<cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative, KernelSchedule>,
                       cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative,
                       cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong>;

// EpilogueScheduleAuto becomes the matching epilogue; an explicit one must be it.
template <class EpilogueSchedule, class KernelSchedule>
struct ResolveEpilogueSchedule {
  static_assert(std::is_same_v<EpilogueSchedule, MatchingEpilogueSchedule<KernelSchedule>>,
                "a ptr-array kernel needs the PtrArrayTmaWarpSpecialized epilogue of its own schedule (cooperative "
                "or pingpong)");
  using type = EpilogueSchedule;
};
template <class KernelSchedule>
struct ResolveEpilogueSchedule<cutlass::epilogue::collective::EpilogueScheduleAuto, KernelSchedule> {
  using type = MatchingEpilogueSchedule<KernelSchedule>;
};
template <class EpilogueSchedule, class KernelSchedule>
using ResolvedEpilogueSchedule = typename ResolveEpilogueSchedule<EpilogueSchedule, KernelSchedule>::type;

// Block-scaled FP8 kernels (KernelPtrArrayTmaWarpSpecialized*FP8Blockwise): one scale per row of A and 128-deep K
// block, one per 128 x 128 block of B^T, both K-major. CUTLASS derives each group's scale layout from the group's own
// extents, so A's scales of the contiguous form must be row-major: then a group's scales are the rows of its tokens.
using BlockScales = cutlass::detail::Sm90BlockwiseScaleConfig<1, 128, 128, cute::GMMA::Major::K, cute::GMMA::Major::K>;
using LayoutSFA = decltype(BlockScales::deduce_layoutSFA());
using LayoutSFB = decltype(BlockScales::deduce_layoutSFB());

// Whether a mainloop's arguments take block scales (ptr_SFA / ptr_SFB).
template <class Mainloop, class = void>
struct TakesBlockScales : std::false_type {};
template <class Mainloop>
struct TakesBlockScales<Mainloop, std::void_t<decltype(std::declval<typename Mainloop::Arguments&>().ptr_SFA)>>
    : std::true_type {};

// What the metadata arrays hold for a GemmUniversal ptr-array kernel: CuTe (M, N, K) shapes, the pointer types of
// its mainloop and epilogue arguments, and its per-group (internal) CuTe strides.
template <class Kernel, class CompiledOperands>
struct Traits : CompiledOperands {
  using Shape = ProblemShape::UnderlyingProblemShape;
  using PtrA = typename Kernel::ElementA const*;
  using PtrB = typename Kernel::ElementB const*;
  using PtrC = typename Kernel::ElementC const*;
  using PtrD = typename Kernel::ElementD*;
  using StrideA = typename Kernel::InternalStrideA;
  using StrideB = typename Kernel::InternalStrideB;
  using StrideC = typename Kernel::InternalStrideC;
  using StrideD = typename Kernel::InternalStrideD;
  static constexpr bool kAlignedExtents = false;  // TMA clips at any extent
  static constexpr bool kBlockScaled = TakesBlockScales<typename Kernel::CollectiveMainloop>::value;
  static constexpr int32_t kTileM = cute::size<0>(typename Kernel::TileShape{});
  static constexpr int32_t kTileN = cute::size<1>(typename Kernel::TileShape{});
  static_assert(std::is_same_v<typename Kernel::ElementA, typename CompiledOperands::ElementA> &&
                    std::is_same_v<typename Kernel::ElementB, typename CompiledOperands::ElementB> &&
                    std::is_same_v<typename Kernel::ElementC, typename CompiledOperands::ElementC> &&
                    std::is_same_v<typename Kernel::ElementD, typename CompiledOperands::ElementD>,
                "the Operands do not describe the kernel");

  CUTLASS_HOST_DEVICE static Shape shape(int m, int n, int k) { return Shape{m, n, k}; }
  // The group scheduler walks a group's tiles down M (grouped_common.hpp's bands say why that wants bands).
  static int32_t band_rows(int32_t n, int32_t sm_count) {
    return grouped::band_rows_for(kTileM, kTileN, cute::size<0>(typename Kernel::ClusterShape{}), n, sm_count);
  }
  // One group has no batch: the L stride is a static 0 in a grouped kernel's strides.
  static StrideA stride_a(int64_t ld) { return sm90::make_stride<StrideA>(ld, 0); }
  static StrideB stride_b(int64_t ld) { return sm90::make_stride<StrideB>(ld, 0); }
  static StrideC stride_c(int64_t ld) { return sm90::make_stride<StrideC>(ld, 0); }
  static StrideD stride_d(int64_t ld) { return sm90::make_stride<StrideD>(ld, 0); }
};

// The fused activation's hyperparameters, when the fusion has any (LinCombEltAct has `activation`).
template <class Thread>
auto set_activation(Thread& thread, double slope, int) -> decltype(thread.activation, void()) {
  module::set_leaky_alpha(thread.activation, slope, 0);
}
template <class Thread>
void set_activation(Thread&, double, long) {}

// The module glue for one GemmUniversalAdapter over a ptr-array kernel: ABI arguments -> CUTLASS arguments over
// the metadata arrays, and a cached launch.
template <class Gemm, class CompiledOperands>
class Module {
  using Kernel = typename Gemm::GemmKernel;
  using Arguments = typename Gemm::Arguments;
  using Params = typename Gemm::Params;
  static_assert(Kernel::IsGroupedGemmKernel, "not a grouped (pointer-stride) kernel");

 public:
  using Traits = sm90_grouped::Traits<Kernel, CompiledOperands>;
  using DeviceKernel = Kernel;  // what the split path's cubin holds (split_entry.hpp)
  struct Prepared {
    Params params{};
  };
  using Cache = grouped::LaunchCache<Prepared>;

  // The arguments over the metadata at `metadata` (not read here). No host problem shapes: the group scheduler then
  // walks the shapes on the GPU and the grid is sm_count CTAs, so what is prepared depends on the metadata's
  // address only and a call with new shapes costs the host nothing beyond the copy of the metadata.
  static Arguments to_arguments(const gk_grouped_args& args, const void* metadata) {
    const auto arrays = grouped::Metadata<Traits>::at(metadata, args.groups);
    Arguments out{};
    out.mode = cutlass::gemm::GemmUniversalMode::kGrouped;
    out.problem_shape = {args.groups, arrays.shapes, nullptr};
    out.mainloop.ptr_A = arrays.A;
    out.mainloop.dA = arrays.dA;
    out.mainloop.ptr_B = arrays.B;
    out.mainloop.dB = arrays.dB;
    if constexpr (Traits::kBlockScaled) {
      out.mainloop.ptr_SFA = arrays.SFA;
      out.mainloop.ptr_SFB = arrays.SFB;
      // No per-group layouts: the kernel derives each group's from its extents (load_init).
      out.mainloop.layout_SFA = nullptr;
      out.mainloop.layout_SFB = nullptr;
    }

    using Scalar = decltype(out.epilogue.thread.alpha);
    out.epilogue.thread.alpha = Scalar(args.alpha);
    out.epilogue.thread.beta = Scalar(args.beta);
    set_activation(out.epilogue.thread, args.activation_params[0], 0);
    out.epilogue.ptr_C = arrays.C;
    out.epilogue.dC = arrays.dC;
    out.epilogue.ptr_D = arrays.D;
    out.epilogue.dD = arrays.dD;

    out.hw_info.device_id = args.device_id;
    out.hw_info.sm_count = args.sm_count;  // <= 0: CUTLASS queries the device
    using RasterOrder = decltype(out.scheduler.raster_order);
    if (args.raster_order == 1 || args.raster_order == 2) {
      out.scheduler.raster_order = static_cast<RasterOrder>(args.raster_order);  // AlongM, AlongN
    }
    if (args.max_swizzle_size > 0) out.scheduler.max_swizzle_size = args.max_swizzle_size;
    return out;
  }

  static int can_implement(const gk_grouped_args& args) {
    return Gemm::can_implement(to_arguments(args, nullptr)) == cutlass::Status::kSuccess ? GK_OK
                                                                                         : GK_ERR_CANNOT_IMPLEMENT;
  }

  // Per-SM copies of the TMA descriptors, which the kernel rewrites for each group it visits.
  static size_t workspace_size(const gk_grouped_args& args) {
    return Gemm::get_workspace_size(to_arguments(args, nullptr));
  }

  // The adapter's initialize and run; the split path's glue (split::GroupedGlue) replaces both.
  static cutlass::Status prepare(const Arguments& arguments, void* workspace, cudaStream_t stream, Params& params) {
    Gemm op;
    const cutlass::Status status = op.initialize(arguments, workspace, stream);
    if (status == cutlass::Status::kSuccess) params = op.params();
    return status;
  }
  static cutlass::Status launch(Params& params, cudaStream_t stream) { return Gemm::run(params, stream); }

  static int run(Cache& cache, const gk_grouped_args& args, const void* metadata, void* workspace,
                 cudaStream_t stream) {
    return run_with<Module>(cache, args, metadata, workspace, stream);
  }

  // A hit relaunches the cached Params. The grouped kernels' workspace needs no reset between launches: each CTA
  // initializes its descriptors from Params before use.
  template <class Glue>
  static int run_with(Cache& cache, const gk_grouped_args& args, const void* metadata, void* workspace,
                      cudaStream_t stream) {
    auto prepare = [&](Prepared& prepared, int) -> int {
      const Arguments arguments = to_arguments(args, metadata);
      if (int status = grouped::check_cutlass_arguments<Gemm>(arguments, workspace); status != GK_OK) return status;
      if (Glue::prepare(arguments, workspace, stream, prepared.params) != cutlass::Status::kSuccess) {
        module::record_cuda_error(cudaGetLastError());
        return GK_ERR_INITIALIZE;
      }
      return GK_OK;
    };
    auto launch = [&](Prepared& prepared) -> int {
      return module::launch_status(Glue::launch(prepared.params, stream));
    };
    return grouped::cached_launch(cache, args, metadata, workspace, prepare, launch);
  }
};

}  // namespace gemmkit::sm90_grouped
