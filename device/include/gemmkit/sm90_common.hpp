// device/include/gemmkit/sm90_common.hpp: glue shared by the CUTLASS 3.x SM90 families (Sm90Collective GEMMs,
// Sm90Conv2d): the epilogue fusions, mainloop stage counts, fused-activation arguments and how a 3.x device adapter
// is prepared and launched. It includes no device adapter: the GEMM one brings CUTLASS 2.x GemmUniversal, whose
// partial specialization also matches a conv problem shape.
#pragma once

#include <type_traits>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/epilogue/thread/activation.h"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/kernel_hardware_info.hpp"
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

// Mainloop stages: 0 = as many as fit next to the epilogue's shared storage. The conv builders take the same two
// tags from their own namespace.
template <int Stages, class CollectiveEpilogue,
          template <int> class AutoCarveout = cutlass::gemm::collective::StageCountAutoCarveout,
          template <int> class Fixed = cutlass::gemm::collective::StageCount>
using StageCount =
    std::conditional_t<Stages == 0, AutoCarveout<static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>,
                       Fixed<(Stages > 0 ? Stages : 1)>>;

// The fused activation's arguments, when the fusion has any (LinCombEltAct has `activation`).
template <class Thread, class Args>
auto set_fusion_activation(Thread& thread, const Args& args, int) -> decltype(thread.activation, void()) {
  module::set_activation_params(thread.activation, args);
}
template <class Thread, class Args>
void set_fusion_activation(Thread&, const Args&, long) {}

// How a 3.x device adapter (GemmUniversalAdapter, ConvUniversalAdapter) over `Kernel` is prepared and launched
// (gemmkit::module::run's contract): a miss builds the Params (TMA descriptors included), which a hit relaunches;
// only a workspace that must be reset per launch (Stream-K's barriers) is initialized again.
template <class Adapter, class Kernel, class Args>
struct ParamsLaunch {
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
