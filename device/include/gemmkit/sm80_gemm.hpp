// device/include/gemmkit/sm80_gemm.hpp: glue for the Sm80Universal family (CUTLASS 2.x device::GemmUniversal).
// A generated source includes this, declares its GemmUniversal with the helpers below, names
// gemmkit::sm80::Module<Gemm> as gemmkit_kernel::Module and includes gemmkit/module_entry.hpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cutlass/cutlass.h"
#include "cutlass/epilogue/thread/activation.h"
#include "cutlass/epilogue/thread/linear_combination.h"
#include "cutlass/epilogue/thread/linear_combination_generic.h"
#include "cutlass/gemm/device/gemm_universal.h"
#include "cutlass/gemm/threadblock/threadblock_swizzle.h"
#include "cutlass/gemm/threadblock/threadblock_swizzle_streamk.h"
#include "gemmkit/module_common.hpp"

namespace gemmkit::sm80 {

// The epilogue: D = Act(alpha * acc + beta * C), Count elements per access.
template <template <class> class Act, class ElementD, int Count, class ElementAccumulator, class ElementCompute>
struct EpilogueSelector {
  using type = cutlass::epilogue::thread::LinearCombinationGeneric<
      Act, ElementD, Count, ElementAccumulator, ElementCompute, cutlass::epilogue::thread::ScaleType::Default,
      cutlass::FloatRoundStyle::round_to_nearest,
      cutlass::epilogue::thread::kIsHeavy_member_or_false<Act<ElementCompute>>::value>;
};
template <class ElementD, int Count, class ElementAccumulator, class ElementCompute>
struct EpilogueSelector<cutlass::epilogue::thread::Identity, ElementD, Count, ElementAccumulator, ElementCompute> {
  using type = cutlass::epilogue::thread::LinearCombination<ElementD, Count, ElementAccumulator, ElementCompute>;
};
template <template <class> class Act, class ElementD, int Count, class ElementAccumulator, class ElementCompute>
using Epilogue = typename EpilogueSelector<Act, ElementD, Count, ElementAccumulator, ElementCompute>::type;

// The module glue for one device::GemmUniversal: ABI arguments -> CUTLASS arguments, and a cached launch.
template <class Gemm>
class Module {
  using Arguments = typename Gemm::Arguments;
  using EpilogueParams = typename Gemm::EpilogueOutputOp::Params;
  using ElementCompute = typename Gemm::EpilogueOutputOp::ElementCompute;
  static constexpr bool kStreamK =
      std::is_same_v<typename Gemm::ThreadblockSwizzle, cutlass::gemm::threadblock::ThreadblockSwizzleStreamK>;

 public:
  struct Prepared {
    Arguments arguments{};
    Gemm op{};
    bool reset_workspace = false;  // the workspace must be initialized before every launch
  };
  using Cache = module::LaunchCache<Prepared>;

  // One batch: kGemm, where batch_count is the split-K factor (serial split-K; Stream-K's splitting factor).
  // Several: kBatched with the given batch strides.
  static Arguments to_arguments(const gk_gemm_args& args) {
    const bool batched = args.batch > 1;
    const module::Source source = module::source_of(args);
    EpilogueParams epilogue(ElementCompute(args.alpha), ElementCompute(args.beta));
    module::set_activation_params(epilogue, args);
    const auto mode = batched ? cutlass::gemm::GemmUniversalMode::kBatched : cutlass::gemm::GemmUniversalMode::kGemm;
    const int batch_count = batched ? args.batch : std::max(1, args.splits);
    const cutlass::gemm::GemmCoord problem(args.m, args.n, args.k);
    if constexpr (kStreamK) {
      return Arguments(mode, problem, batch_count, epilogue, args.A, args.B, source.ptr, args.D, args.batch_stride_A,
                       args.batch_stride_B, source.batch_stride, args.batch_stride_D, args.lda, args.ldb, source.ld,
                       args.ldd, args.sm_count > 0 ? args.sm_count : -1);
    } else {
      return Arguments(mode, problem, batch_count, epilogue, args.A, args.B, source.ptr, args.D, args.batch_stride_A,
                       args.batch_stride_B, source.batch_stride, args.batch_stride_D, args.lda, args.ldb, source.ld,
                       args.ldd);
    }
  }

  static int can_implement(const gk_gemm_args& args) {
    return Gemm::can_implement(to_arguments(args)) == cutlass::Status::kSuccess ? GK_OK : GK_ERR_CANNOT_IMPLEMENT;
  }

  static size_t workspace_size(const gk_gemm_args& args) { return Gemm::get_workspace_size(to_arguments(args)); }

  // A hit relaunches the cached operator. A workspace (serial split-K semaphores, Stream-K barriers) must be
  // zeroed before every launch; in CUTLASS 2.x only initialize() does that (cheap: no TMA descriptors).
  static int run(Cache& cache, const gk_gemm_args& args, void* workspace, cudaStream_t stream) {
    const int device = module::current_device();
    if (device < 0) return GK_ERR_LAUNCH;
    Prepared& prepared = cache.prepared;
    if (!cache.hit(args, workspace, device)) {
      cache.valid = false;
      prepared.arguments = to_arguments(args);
      if (Gemm::can_implement(prepared.arguments) != cutlass::Status::kSuccess) return GK_ERR_CANNOT_IMPLEMENT;
      prepared.reset_workspace = Gemm::get_workspace_size(prepared.arguments) > 0;
      if (prepared.reset_workspace && workspace == nullptr) return GK_ERR_WORKSPACE;
      if (int status = initialize(prepared, workspace, stream); status != GK_OK) return status;
      cache.store(args, workspace, device);
    } else if (prepared.reset_workspace) {
      if (int status = initialize(prepared, workspace, stream); status != GK_OK) return status;
    }
    return module::launch_status(prepared.op.run(stream));
  }

 private:
  // Without a workspace to reset, no workspace is passed: CUTLASS would issue an empty memset for it.
  static int initialize(Prepared& prepared, void* workspace, cudaStream_t stream) {
    void* used = prepared.reset_workspace ? workspace : nullptr;
    if (prepared.op.initialize(prepared.arguments, used, stream) == cutlass::Status::kSuccess) return GK_OK;
    module::record_cuda_error(cudaGetLastError());
    return GK_ERR_INITIALIZE;
  }
};

}  // namespace gemmkit::sm80
