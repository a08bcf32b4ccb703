// device/include/gemmkit/sm80_visitor.hpp: glue for Sm80Universal kernels whose epilogue is a visitor tree (CUTLASS
// 2.x DefaultGemmWithVisitor under a GemmUniversalAdapter). A generated source (templates/sm80_gemm_visitor.cu.in)
// declares the tree's nodes and its kernel, names gemmkit::sm80::VisitorModule<Gemm, ...> as gemmkit_kernel::Module
// and includes gemmkit/module_entry.hpp. Kept apart from sm80_gemm.hpp: plain 2.x kernels need none of it.
#pragma once

#include <cstdint>

// cutlass/gemm/gemm.h first: the 2.x visitors name gemm::GemmCoord under `using namespace cute`, which only finds
// the namespace (not cute::gemm) once it is declared.
#include "cutlass/gemm/gemm.h"
// clang-format off
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/thread/activation.h"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/default_gemm_universal_with_visitor.h"
#include "cutlass/epilogue/threadblock/fusion/visitors.hpp"
#include "cutlass/functional.h"
// clang-format on
#include "cutlass/gemm/threadblock/threadblock_swizzle.h"
#include "cutlass/gemm/threadblock/threadblock_swizzle_streamk.h"
#include "gemmkit/cute_stride.hpp"
#include "gemmkit/module_common.hpp"

namespace gemmkit::sm80 {

// ABI arguments -> CUTLASS arguments for a 2.x kernel whose tree loads C and stores D itself (the GEMM arguments
// carry neither); launched as every 2.x operator is.
template <class DeviceGemm, class SetVisitor, int Count>
class VisitorModule : public module::OperatorLaunch<module::Prepared<typename DeviceGemm::Arguments, DeviceGemm>> {
 public:
  using Gemm = DeviceGemm;
  static constexpr module::Bias kBias = module::Bias::None;
  static constexpr int kVisitorCount = Count;
  using Arguments = typename Gemm::Arguments;
  using Prepared = module::Prepared<Arguments, Gemm>;
  using Cache = module::VisitorCache<module::LaunchCache<Prepared>, Count>;

  static Arguments to_arguments(const gk_gemm_args& args) {
    const bool batched = args.batch > 1;
    typename Gemm::GemmKernel::FusionCallbacks::Arguments fusion{};
    SetVisitor::set(fusion, args);
    const auto mode = batched ? cutlass::gemm::GemmUniversalMode::kBatched : cutlass::gemm::GemmUniversalMode::kGemm;
    return Arguments(mode, cutlass::gemm::GemmCoord(args.m, args.n, args.k), batched ? args.batch : 1, fusion, args.A,
                     args.B, nullptr, nullptr, args.batch_stride_A, args.batch_stride_B, 0, 0, args.lda, args.ldb, 0,
                     0);
  }
};

}  // namespace gemmkit::sm80
