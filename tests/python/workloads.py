"""tests/python/workloads.py: the reference's walk-through workloads, shared by the torch tests."""
import random


def walkthrough_shapes(count=50, seed=2023):
    """The grouped walk-through's (M, N, K) per group, each drawn from {128, 256, 512, 1024} after random.seed(seed)."""
    random.seed(seed)
    sizes = [128, 256, 512, 1024]
    return [tuple(random.choice(sizes) for _ in range(3)) for _ in range(count)]


def doubled_on_a_side_stream(torch, run, As, Bs):
    """run([2 * A ...], Bs) on a side stream right after the doubling there (so the GEMM must be ordered after that
    stream's work, not the default stream's), once that stream is done."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        Ds = run([A * 2 for A in As], Bs)
    stream.synchronize()
    return Ds
