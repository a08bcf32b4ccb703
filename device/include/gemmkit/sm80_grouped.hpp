// device/include/gemmkit/sm80_grouped.hpp: glue for the Sm80Grouped family (CUTLASS 2.x device::GemmGrouped with
// GroupScheduleMode::kDeviceOnly: the problem visitor reads the shapes on the GPU, so neither form needs them on
// the host). A generated source includes this, declares its GemmGrouped with the helpers below, names
// gemmkit::sm80_grouped::Module<Gemm> as gemmkit_kernel::Module and includes gemmkit/grouped_entry.hpp.
#pragma once

#include <cstdint>

#include "cutlass/cutlass.h"
#include "cutlass/gemm/device/gemm_grouped.h"
#include "cutlass/gemm/gemm.h"
#include "cutlass/gemm/kernel/default_gemm_grouped.h"
#include "cutlass/gemm/kernel/grouped_problem_visitor.h"
#include "cutlass/gemm/threadblock/threadblock_swizzle.h"
#include "gemmkit/grouped_common.hpp"
#include "gemmkit/sm80_gemm.hpp"  // the dense family's Epilogue (LinearCombinationGeneric activations) serves here too

namespace gemmkit::sm80_grouped {

// What the metadata arrays hold for a device::GemmGrouped: GemmCoord shapes, non-const element pointers and 64-bit
// leading dimensions, as its Arguments take them. Its ElementA..LayoutC are the caller's (a column-major C is run
// as the transposed problem inside CUTLASS, which maps the arguments itself); D shares C's element.
template <class Gemm>
struct Traits
    : grouped::Operands<typename Gemm::ElementA, typename Gemm::LayoutA, Gemm::kAlignmentA, typename Gemm::ElementB,
                        typename Gemm::LayoutB, Gemm::kAlignmentB, typename Gemm::ElementC, typename Gemm::LayoutC,
                        Gemm::kAlignmentC, typename Gemm::ElementC, Gemm::kAlignmentC> {
  using Shape = cutlass::gemm::GemmCoord;
  using PtrA = typename Gemm::ElementA*;
  using PtrB = typename Gemm::ElementB*;
  using PtrC = typename Gemm::ElementC*;
  using PtrD = typename Gemm::ElementC*;
  using StrideA = typename Gemm::LayoutA::Stride::LongIndex;
  using StrideB = typename Gemm::LayoutB::Stride::LongIndex;
  using StrideC = typename Gemm::LayoutC::Stride::LongIndex;
  using StrideD = typename Gemm::LayoutC::Stride::LongIndex;
  static constexpr bool kAlignedExtents = true;  // vector accesses: see grouped::check_operand
  static constexpr bool kBlockScaled = false;
  static constexpr int32_t kTileM = Gemm::ThreadblockShape::kM;
  static constexpr int32_t kTileN = Gemm::ThreadblockShape::kN;

  CUTLASS_HOST_DEVICE static Shape shape(int m, int n, int k) { return Shape(m, n, k); }
  // The 2.x problem visitor's tile order is not the 3.x scheduler's: no bands (none measured).
  static int32_t band_rows(int32_t, int32_t) { return 0; }
  static StrideA stride_a(int64_t ld) { return ld; }
  static StrideB stride_b(int64_t ld) { return ld; }
  static StrideC stride_c(int64_t ld) { return ld; }
  static StrideD stride_d(int64_t ld) { return ld; }
};

// The module glue for one device::GemmGrouped: ABI arguments -> CUTLASS arguments over the metadata arrays, and a
// cached launch.
template <class Gemm>
class Module {
  using Arguments = typename Gemm::Arguments;
  using EpilogueParams = typename Gemm::EpilogueOutputOp::Params;
  using ElementCompute = typename Gemm::EpilogueOutputOp::ElementCompute;
  static_assert(Gemm::GemmKernel::kGroupScheduleMode == cutlass::gemm::kernel::GroupScheduleMode::kDeviceOnly,
                "host-precomputed schedules would need the shapes on the host");

 public:
  using Traits = sm80_grouped::Traits<Gemm>;
  struct Prepared {
    Gemm op{};
  };
  using Cache = grouped::LaunchCache<Prepared>;

  // The arguments over the metadata at `metadata` (not read here), for `threadblock_count` persistent CTAs.
  static Arguments to_arguments(const gk_grouped_args& args, const void* metadata, int threadblock_count) {
    const auto arrays = grouped::Metadata<Traits>::at(metadata, args.groups);
    EpilogueParams epilogue(ElementCompute(args.alpha), ElementCompute(args.beta));
    module::set_leaky_alpha(epilogue, args.activation_params[0], 0);
    return Arguments(arrays.shapes, args.groups, threadblock_count, epilogue, arrays.A, arrays.B, arrays.C, arrays.D,
                     arrays.dA, arrays.dB, arrays.dC, arrays.dD);
  }

  static int can_implement(const gk_grouped_args& args) {
    return Gemm::can_implement(to_arguments(args, nullptr, 1)) == cutlass::Status::kSuccess ? GK_OK
                                                                                            : GK_ERR_CANNOT_IMPLEMENT;
  }

  // Nothing with device-side scheduling; asked anyway, so that a future schedule cannot go unnoticed.
  static size_t workspace_size(const gk_grouped_args& args) {
    return Gemm::get_workspace_size(to_arguments(args, nullptr, 1));
  }

  // A hit relaunches the prepared operator (the occupancy query and smem attribute are done once).
  static int run(Cache& cache, const gk_grouped_args& args, const void* metadata, void* workspace,
                 cudaStream_t stream) {
    auto prepare = [&](Prepared& prepared, int device) -> int {
      const int blocks = threadblock_count(args, device);
      if (blocks <= 0) return GK_ERR_INITIALIZE;
      const Arguments arguments = to_arguments(args, metadata, blocks);
      if (int status = grouped::check_cutlass_arguments<Gemm>(arguments, workspace); status != GK_OK) return status;
      if (prepared.op.initialize(arguments, workspace, stream) != cutlass::Status::kSuccess) {
        module::record_cuda_error(cudaGetLastError());
        return GK_ERR_INITIALIZE;
      }
      return GK_OK;
    };
    auto launch = [&](Prepared& prepared) -> int { return module::launch_status(prepared.op.run(stream)); };
    return grouped::cached_launch(cache, args, metadata, workspace, prepare, launch);
  }

 private:
  // Persistent CTAs: as many as are resident at once (multiprocessors x occupancy); -1 on error.
  static int threadblock_count(const gk_grouped_args& args, int device) {
    int sm_count = args.sm_count;
    if (sm_count <= 0 &&
        module::record_cuda_error(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device))) {
      return -1;
    }
    const int per_sm = Gemm::maximum_active_blocks();
    if (per_sm <= 0) {
      module::record_cuda_error(cudaGetLastError());
      return -1;
    }
    return sm_count * per_sm;
  }
};

}  // namespace gemmkit::sm80_grouped
