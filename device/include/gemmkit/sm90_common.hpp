// device/include/gemmkit/sm90_common.hpp: glue shared by the CUTLASS 3.x SM90 families whose epilogue is CUTLASS's
// (Sm90Collective GEMMs, Sm90Conv2d): the epilogue fusions and fused-activation arguments, beside sm90_launch.hpp.
// It includes no device adapter (sm90_launch.hpp says why).
#pragma once

#include <type_traits>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/epilogue/thread/activation.h"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/kernel_hardware_info.hpp"
#include "gemmkit/activation_at_launch.hpp"
#include "gemmkit/module_common.hpp"
#include "gemmkit/sm90_launch.hpp"

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

// An activation node's arguments: LeakyReLU's slope, and the kind of an activation taken at launch.
template <class Arguments, class Args>
void set_activation_arguments(Arguments& arguments, const Args& args) {
  module::set_activation_params(arguments, args);
  activation::set_kind(arguments, args, 0);
}

// The fused activation's arguments, when the fusion has any (LinCombEltAct has `activation`).
template <class Thread, class Args>
auto set_fusion_activation(Thread& thread, const Args& args, int) -> decltype(thread.activation, void()) {
  set_activation_arguments(thread.activation, args);
}
template <class Thread, class Args>
void set_fusion_activation(Thread&, const Args&, long) {}

}  // namespace gemmkit::sm90
