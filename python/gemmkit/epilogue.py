"""Activations fused into the GEMM epilogue, D = act(alpha * A @ B + beta * C).

    plan.activation = gemmkit.epilogue.relu          # or "relu"
    plan.activation = ("leaky_relu", 0.1)            # the slope is honoured (a run-time argument)
"""
from ._gemmkit import Activation

identity = Activation.identity
relu = Activation.relu
leaky_relu = Activation.leaky_relu
gelu = Activation.gelu
gelu_tanh = Activation.gelu_tanh
hardswish = Activation.hardswish
sigmoid = Activation.sigmoid
silu = Activation.silu
tanh = Activation.tanh


def get_activations():
    """Every activation gemmkit fuses (the same list as Gemm.activations())."""
    return list(Activation)


__all__ = ["Activation", "gelu", "gelu_tanh", "get_activations", "hardswish", "identity", "leaky_relu", "relu",
           "sigmoid", "silu", "tanh"]
