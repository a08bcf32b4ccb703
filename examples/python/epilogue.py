"""examples/python/epilogue.py: the reference's epilogue walk-through with gemmkit's Python package.

fp16 256^3 GEMMs with a fused activation, D = act(alpha * A @ B + beta * C): identity by default, then every
activation the plan lists, each checked against a float64 host reference; leaky_relu's slope is honoured.
Needs nvcc; running needs a CUDA GPU (SM80 or SM90). With --cc 90 it plans and compiles without a GPU, and stops
where running needs one; with --torch the operands are torch CUDA tensors (no staging). Exits 0 when every result
matches (or, without a GPU, when planning and compiling worked).
"""
import math
import sys
from typing import Any, Callable

import numpy as np
import numpy.typing as npt

import gemmkit
from operands import gpu_present, on_device, plan_cc, to_numpy

Array = npt.NDArray[np.float64]

_erfc = np.vectorize(math.erfc)


def sigmoid(x: Array) -> Array:
    return 1.0 / (1.0 + np.exp(-x))


# float64 references, as CUTLASS defines them (include/cutlass/epilogue/thread/activation.h).
REFERENCES: dict[str, Callable[[Array, float], Any]] = {
    "identity": lambda x, slope: x,
    "relu": lambda x, slope: np.maximum(x, 0.0),
    "leaky_relu": lambda x, slope: np.where(x > 0, x, x * slope),
    "gelu": lambda x, slope: 0.5 * x * _erfc(-x / math.sqrt(2.0)),
    "gelu_tanh": lambda x, slope: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3))),
    "hardswish": lambda x, slope: x * np.minimum(np.maximum(x + 3.0, 0.0), 6.0) / 6.0,
    "sigmoid": lambda x, slope: sigmoid(x),
    "silu": lambda x, slope: x * sigmoid(x),
    "tanh": lambda x, slope: np.tanh(x),
}


def main(m: int = 256, n: int = 256, k: int = 256) -> bool:
    rng = np.random.default_rng(2023)
    A = np.ceil(rng.uniform(-4, 4, (m, k))).astype(np.float16)
    B = np.ceil(rng.uniform(-4, 4, (k, n))).astype(np.float16)
    C = np.ceil(rng.uniform(-4, 4, (m, n))).astype(np.float16)
    alpha, beta = 1.0 / 64, 0.5  # brings alpha*A@B + beta*C into the range where the activations bend
    x = alpha * (A.astype(np.float64) @ B.astype(np.float64)) + beta * C.astype(np.float64)

    plan = gemmkit.Gemm(element=np.float16, layout=gemmkit.LayoutType.RowMajor, element_accumulator=np.float32,
                        cc=plan_cc())
    print(f"Plan for SM{plan.cc}; activation {plan.activation}; activations: "
          f"{', '.join(a.name for a in plan.activations())}")
    compiled = plan.compile()
    print(f"  identity: {compiled.kernel_name} ({'cache hit' if compiled.cache_hit else 'compiled'})")
    if not gpu_present(plan.cc):
        return True
    ok = True
    cases: list[tuple[gemmkit.Activation | gemmkit.epilogue.ActivationFunction, float | None]] = [
        (a, None) for a in plan.activations()]
    cases.append((gemmkit.epilogue.leaky_relu, 0.5))
    for activation, slope in cases:
        plan.activation = activation if slope is None else (activation, slope)
        dA, dB, dC, D = on_device(A), on_device(B), on_device(C), on_device(np.zeros((m, n), np.float16))
        plan.run(dA, dB, dC, D, alpha, beta)
        ran = plan.running_kernel_name(dA, dB, dC, D, beta)  # the quick twin stands in while the kernel builds
        D = to_numpy(D)
        expected = REFERENCES[activation.name](x, plan.activation_parameter)
        error = float(np.max(np.abs(D.astype(np.float64) - expected)))
        tolerance = 1e-2 * max(1.0, float(np.max(np.abs(expected))))  # fp16 output and fast math intrinsics
        good = error <= tolerance
        ok &= good
        label = activation.name + (f"(slope={slope})" if slope is not None else "")
        print(f"  {label:18s} ran {ran}: max |D - reference| = {error:.2e} {'ok' if good else 'MISMATCH'}")
    print("all match" if ok else "FAILED")
    return ok


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
