"""examples/python/conv2d.py: the Conv2d walk-through with gemmkit's Python package and torch.

Declares an fp16 fprop plan, runs a ResNet-50 3x3 layer (batch 32, 56 x 56, 64 -> 64 channels, padding 1) on torch
channels_last tensors (read in place), compares with torch.nn.functional.conv2d, times both (CUDA events, 20 warm-up
runs, 100 timed), then does the same for dgrad and wgrad against torch.nn.grad. Needs a CUDA GPU, nvcc and torch.
Exits 0 when every result equals torch's (small integers: exact).
"""
import sys
from typing import Any, Callable

import torch

import gemmkit


def timed_ms(fn: Callable[[], object], warmup: int = 20, iterations: int = 100) -> float:
    for _ in range(warmup):
        fn()
    cuda: Any = torch.cuda  # its Event is untyped in torch's stubs
    start, stop = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iterations):
        fn()
    stop.record()
    stop.synchronize()
    return float(start.elapsed_time(stop)) / iterations


def main() -> int:
    torch.backends.cudnn.benchmark = True

    def ints(*shape: int) -> torch.Tensor:
        return torch.randint(-1, 2, shape).half().cuda().to(memory_format=torch.channels_last)

    x, w = ints(32, 64, 56, 56), ints(64, 64, 3, 3)
    dy = ints(32, 64, 56, 56)
    ok = True
    grad: Any = getattr(torch.nn, "grad")  # torch.nn.grad is not in torch's stubs
    cases: list[tuple[str, tuple[torch.Tensor, torch.Tensor], Callable[[], torch.Tensor]]] = [
        ("fprop", (x, w), lambda: torch.nn.functional.conv2d(x, w, padding=1)),
        ("dgrad", (dy, w), lambda: grad.conv2d_input(x.shape, w, dy, padding=1)),
        ("wgrad", (dy, x), lambda: grad.conv2d_weight(x, w.shape, dy, padding=1)),
    ]
    for kind, ours_args, theirs in cases:
        plan = gemmkit.Conv2d(kind=kind, element=torch.float16, element_accumulator=torch.float32)
        out = torch.empty_like(theirs(), memory_format=torch.channels_last)
        plan.run(*ours_args, None, out, padding=1)
        same = torch.equal(out, theirs())
        ok &= same
        ms = timed_ms(lambda: plan.run(*ours_args, None, out, padding=1, sync=False))
        ms_torch = timed_ms(theirs)
        print(f"{kind}: {plan.spec_for(*ours_args, None, out, padding=1).name()}\n"
              f"  {'equal to' if same else 'DIFFERS from'} torch; gemmkit {ms:.3f} ms, cuDNN {ms_torch:.3f} ms")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
