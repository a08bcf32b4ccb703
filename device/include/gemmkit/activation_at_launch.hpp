// device/include/gemmkit/activation_at_launch.hpp: every activation behind one switch on gk_activation, for epilogues
// that take the activation at launch (gemmkit's lean epilogue, and CUTLASS's fusions through AtLaunch): one kernel
// then serves every activation, each computed as the kernel that compiles it in computes it.
#pragma once

#include <cstdint>

#include "cutlass/array.h"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/thread/activation.h"
#include "gemmkit/abi.h"
#include "gemmkit/activations.hpp"

namespace gemmkit::activation {

// The activations as the kernels that compile one in apply it: gemmkit's approximations (activations.hpp) where D
// is 16-bit, CUTLASS's functors elsewhere.
template <bool Approximate>
struct Functors {
  template <class T>
  using GELU = cutlass::epilogue::thread::GELU<T>;
  template <class T>
  using Sigmoid = cutlass::epilogue::thread::Sigmoid<T>;
  template <class T>
  using SiLu = cutlass::epilogue::thread::SiLu<T>;
};
template <>
struct Functors<true> {
  template <class T>
  using GELU = gemmkit::activation::GELU<T>;
  template <class T>
  using Sigmoid = gemmkit::activation::Sigmoid<T>;
  template <class T>
  using SiLu = gemmkit::activation::SiLu<T>;
};

// The activation `kind` (gk_activation) on a float or an Array of floats; `parameter` is the leaky_relu slope.
template <bool Approximate, class T>
CUTLASS_HOST_DEVICE T apply(T const& x, int32_t kind, float parameter) {
  namespace th = cutlass::epilogue::thread;
  using F = Functors<Approximate>;
  switch (kind) {
    case GK_ACTIVATION_GELU: return typename F::template GELU<T>{}(x);
    case GK_ACTIVATION_HARDSWISH: return th::HardSwish<T>{}(x);
    case GK_ACTIVATION_LEAKY_RELU: {
      // The slope in the compute type, which is f16 where the plan accumulates in f16.
      using Slope = typename th::LeakyReLU<T>::Arguments;
      return th::LeakyReLU<T>{}(x, Slope{static_cast<decltype(Slope::leaky_alpha)>(parameter)});
    }
    case GK_ACTIVATION_RELU: return th::ReLu<T>{}(x);
    case GK_ACTIVATION_SIGMOID: return typename F::template Sigmoid<T>{}(x);
    case GK_ACTIVATION_SILU: return typename F::template SiLu<T>{}(x);
    case GK_ACTIVATION_TANH: return th::Tanh<T>{}(x);
    case GK_ACTIVATION_GELU_TANH: return th::GELU_taylor<T>{}(x);
    default: return x;  // identity
  }
}

// apply() out of line: CUTLASS's epilogue applies its activation to every fragment of its unrolled store loop, and an
// inlined switch would put every activation's code at each of those sites (gelu's the longest); one call keeps one
// copy of each in the kernel, as the compiled-in kernels have one activation's.
template <bool Approximate, class T>
__noinline__ __device__ T apply_out_of_line(T x, int32_t kind, float parameter) {
  return apply<Approximate>(x, kind, parameter);
}

// What an activation taken at launch reads: the kind (gk_gemm_args.activation) and the leaky_relu slope, under the
// name CUTLASS's LeakyReLU gives it, so that module::set_activation_params fills the slope as it does LeakyReLU's.
struct AtLaunchArguments {
  int32_t kind = GK_ACTIVATION_IDENTITY;
  float leaky_alpha = 0.0f;
};

// An epilogue activation chosen at launch, for CUTLASS's fusion operations (LinCombEltAct and the bias fusions pass
// a functor's Arguments to it): one kernel serves every activation. The switch is uniform across the CTA.
template <class T, bool Approximate>
struct AtLaunchFunctor {
  static const bool kIsHeavy = true;
  using Arguments = AtLaunchArguments;
  CUTLASS_HOST_DEVICE T operator()(T const& x, Arguments const& arguments) const {
#if defined(__CUDA_ARCH__)
    return apply_out_of_line<Approximate>(x, arguments.kind, arguments.leaky_alpha);
#else
    return apply<Approximate>(x, arguments.kind, arguments.leaky_alpha);
#endif
  }
};
template <class T>
using AtLaunch = AtLaunchFunctor<T, false>;
template <class T>
using AtLaunchFor16BitD = AtLaunchFunctor<T, true>;

// The kind of an activation taken at launch, from arguments that carry one (gk_gemm_args.activation); CUTLASS's own
// activations' arguments have no kind.
template <class Target, class Args>
auto set_kind(Target& target, const Args& args, int) -> decltype(target.kind = args.activation, void()) {
  target.kind = args.activation;
}
template <class Target, class Args>
void set_kind(Target&, const Args&, long) {}

}  // namespace gemmkit::activation
