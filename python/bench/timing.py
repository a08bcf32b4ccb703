"""python/bench/timing.py: GPU timing shared by the Python benchmarks (run as scripts, so importable by name)."""
import statistics

import torch


def median_ms(fn, rounds):
    """CUDA-event time of fn, median over rounds (after a warm-up)."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def event_ms(fn, iterations):
    """Mean GPU time (ms) of one call over `iterations` back-to-back calls: CUDA events on the current stream."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iterations):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / iterations
