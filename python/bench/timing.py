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


def profile_once(calls):
    """Each call once between cudaProfilerStart and Stop, after one warm-up call of each (compiled, loaded, clocks
    up), each finished before the next: for `ncu --profile-from-start off`."""
    for call in calls:
        call()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for call in calls:
        call()
        torch.cuda.synchronize()
    torch.cuda.profiler.stop()


def event_ms(fn, iterations):
    """Mean GPU time (ms) of one call over `iterations` back-to-back calls: CUDA events on the current stream."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iterations):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / iterations


def graph_of(fn, iterations):
    """A CUDA graph of `iterations` calls of fn, captured after a warm-up on the capture stream (which allocates what
    the calls keep: cuDNN's workspace, gemmkit's pooled workspace)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(iterations):
            fn()
    return graph


def compare_graphs(ours, theirs, rounds, iterations):
    """Median ms per call of each, replaying a graph of `iterations` calls: the GPU's time alone, without the host's
    (a launch loop of small layers measures Python and dispatch, not the kernels)."""
    graphs = [graph_of(fn, iterations) for fn in (ours, theirs)]
    for graph in graphs:
        graph.replay()
    a, b = [], []
    for _ in range(rounds):
        a.append(event_ms(graphs[0].replay, 1) / iterations)
        b.append(event_ms(graphs[1].replay, 1) / iterations)
    return statistics.median(a), statistics.median(b)
