"""Activations fused into the GEMM epilogue, D = act(alpha * A @ B + beta * C).

    plan.activation = gemmkit.epilogue.relu          # or "relu"
    plan.activation = ("leaky_relu", 0.1)            # the slope is honoured (a run-time argument)

Every member of Activation (named by the C++ enum table) is an attribute here: identity, relu, leaky_relu, gelu,
gelu_tanh, hardswish, sigmoid, silu, tanh.
"""
from ._gemmkit import Activation

globals().update(Activation.__members__)


def __getattr__(name: str) -> Activation:
    """What type checkers see of the members set above (PEP 562); at run time only unknown names reach here."""
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}; the activations are {', '.join(Activation.__members__)}")


def get_activations() -> list[Activation]:
    """Every activation gemmkit fuses (the same list as Gemm.activations())."""
    return list(Activation)


__all__ = ["Activation", "get_activations", *Activation.__members__]
