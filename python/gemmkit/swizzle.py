"""Threadblock swizzles, set with plan.swizzling_functor = gemmkit.swizzle.<name> (or the name as a string).

ThreadblockSwizzleStreamK selects Stream-K on SM80 and on SM90 kernels; SM90 kernels take only
IdentitySwizzle1 and ThreadblockSwizzleStreamK (plan.swizzling_functors() lists what a plan accepts).
"""
from ._gemmkit import SwizzlingFunctor

IdentitySwizzle1 = SwizzlingFunctor.IdentitySwizzle1
IdentitySwizzle2 = SwizzlingFunctor.IdentitySwizzle2
IdentitySwizzle4 = SwizzlingFunctor.IdentitySwizzle4
IdentitySwizzle8 = SwizzlingFunctor.IdentitySwizzle8
HorizontalSwizzle = SwizzlingFunctor.HorizontalSwizzle
ThreadblockSwizzleStreamK = SwizzlingFunctor.ThreadblockSwizzleStreamK


def get_swizzling_functors():
    """Every swizzle gemmkit knows (a plan may accept fewer: see Gemm.swizzling_functors())."""
    return list(SwizzlingFunctor)


__all__ = ["HorizontalSwizzle", "IdentitySwizzle1", "IdentitySwizzle2", "IdentitySwizzle4", "IdentitySwizzle8",
           "SwizzlingFunctor", "ThreadblockSwizzleStreamK", "get_swizzling_functors"]
