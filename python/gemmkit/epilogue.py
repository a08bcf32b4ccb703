"""Activations fused into the GEMM epilogue, D = act(alpha * A @ B + beta * C).

    plan.activation = gemmkit.epilogue.relu          # or "relu"
    plan.activation = ("leaky_relu", 0.1)            # the slope is honoured (a run-time argument)

Every member of Activation (named by the C++ enum table) is an attribute here: identity, relu, leaky_relu, gelu,
gelu_tanh, hardswish, sigmoid, silu, tanh.
"""
from ._gemmkit import Activation

globals().update(Activation.__members__)


def get_activations():
    """Every activation gemmkit fuses (the same list as Gemm.activations())."""
    return list(Activation)


__all__ = ["Activation", "get_activations", *Activation.__members__]
