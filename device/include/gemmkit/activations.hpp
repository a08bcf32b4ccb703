// device/include/gemmkit/activations.hpp: sigmoid, SiLU and GELU (erf form) for kernels whose output D is 16-bit
// (f16, bf16). CUTLASS's functors use the IEEE-exact expf, erff and division, whose cost shows in a large GEMM's
// time; these compute in float with the hardware's exp and reciprocal
// approximations (__expf, __fdividef): relative error below 2e-5 wherever a 16-bit result is not 0, far under a
// 16-bit output's rounding (2^-11 for f16, 2^-8 for bf16). Kernels with an f32 / f64 D keep CUTLASS's functors.
#pragma once

#include <cmath>

#include "cutlass/array.h"
#include "cutlass/cutlass.h"

namespace gemmkit::activation {

CUTLASS_HOST_DEVICE float exp_approx(float x) {
#if defined(__CUDA_ARCH__)
  return __expf(x);
#else
  return std::exp(x);
#endif
}

// 1 / (1 + x); 0 once x is beyond 2^126 (where the true value is below every 16-bit subnormal).
CUTLASS_HOST_DEVICE float reciprocal_of_one_plus(float x) {
#if defined(__CUDA_ARCH__)
  return __fdividef(1.0f, 1.0f + x);
#else
  return 1.0f / (1.0f + x);
#endif
}

CUTLASS_HOST_DEVICE float sigmoid(float x) {
  return reciprocal_of_one_plus(exp_approx(-x));
}

CUTLASS_HOST_DEVICE float silu(float x) {
  return x * sigmoid(x);
}

// x * Phi(x) = 0.5 x erfc(-x / sqrt 2), through erfc(a) = t exp(-a^2 + P(t)), t = 1 / (1 + a/2), a >= 0: the
// Chebyshev fit of Press et al. (Numerical Recipes, erfcc), fractional error < 1.2e-7 for every a. Using erfc
// of |x| / sqrt 2 keeps the relative accuracy where GELU tends to 0 (x -> -inf), which 1 + erf(x) would lose.
CUTLASS_HOST_DEVICE float gelu_erf(float x) {
  const float a = fabsf(x) * 0.70710678118654752f;
  const float t = reciprocal_of_one_plus(0.5f * a);
  float p = 0.17087277f;
  p = fmaf(p, t, -0.82215223f);
  p = fmaf(p, t, 1.48851587f);
  p = fmaf(p, t, -1.13520398f);
  p = fmaf(p, t, 0.27886807f);
  p = fmaf(p, t, -0.18628806f);
  p = fmaf(p, t, 0.09678418f);
  p = fmaf(p, t, 0.37409196f);
  p = fmaf(p, t, 1.00002368f);
  p = fmaf(p, t, -1.26551223f);
  const float erfc_a = t * exp_approx(fmaf(-a, a, p));
  const float half_x_erfc = 0.5f * x * erfc_a;  // = GELU(x) for x < 0
  return x < 0.0f ? half_x_erfc : x - half_x_erfc;
}

// A CUTLASS epilogue activation (what LinearCombinationGeneric, LinCombEltAct and the broadcast epilogue
// instantiate) from a float function object: scalars of any element type, and Arrays element by element.
template <class Fn, class T>
struct Functor {
  static const bool kIsHeavy = true;
  CUTLASS_HOST_DEVICE T operator()(T const& value) const { return T(Fn{}(float(value))); }
};
template <class Fn, class T, int N>
struct Functor<Fn, cutlass::Array<T, N>> {
  static const bool kIsHeavy = true;
  CUTLASS_HOST_DEVICE cutlass::Array<T, N> operator()(cutlass::Array<T, N> const& values) const {
    cutlass::Array<T, N> out;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) out[i] = T(Fn{}(float(values[i])));
    return out;
  }
};

struct SigmoidFn {
  CUTLASS_HOST_DEVICE float operator()(float x) const { return sigmoid(x); }
};
struct SiLuFn {
  CUTLASS_HOST_DEVICE float operator()(float x) const { return silu(x); }
};
struct GELUFn {
  CUTLASS_HOST_DEVICE float operator()(float x) const { return gelu_erf(x); }
};

template <class T>
using Sigmoid = Functor<SigmoidFn, T>;
template <class T>
using SiLu = Functor<SiLuFn, T>;
template <class T>
using GELU = Functor<GELUFn, T>;

}  // namespace gemmkit::activation
