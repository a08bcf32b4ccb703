"""Threadblock swizzles, set with plan.swizzling_functor = gemmkit.swizzle.<name> (or the name as a string).

Every member of SwizzlingFunctor (named by the C++ enum table) is an attribute here: IdentitySwizzle1, 2, 4 and 8,
HorizontalSwizzle and ThreadblockSwizzleStreamK. ThreadblockSwizzleStreamK selects Stream-K on SM80 and on SM90
kernels; SM90 kernels take only IdentitySwizzle1 and ThreadblockSwizzleStreamK (plan.swizzling_functors() lists what
a plan accepts).
"""
from ._gemmkit import SwizzlingFunctor

globals().update(SwizzlingFunctor.__members__)


def __getattr__(name: str) -> SwizzlingFunctor:
    """What type checkers see of the members set above (PEP 562); at run time only unknown names reach here."""
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}; the swizzles are {', '.join(SwizzlingFunctor.__members__)}")


def get_swizzling_functors() -> list[SwizzlingFunctor]:
    """Every swizzle gemmkit knows (a plan may accept fewer: see Gemm.swizzling_functors())."""
    return list(SwizzlingFunctor)


__all__ = ["SwizzlingFunctor", "get_swizzling_functors", *SwizzlingFunctor.__members__]
