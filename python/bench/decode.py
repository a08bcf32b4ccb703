"""python/bench/decode.py: decode-sized GEMMs (M of 1 to 16 rows against Llama-3 projection weights), where a call
moves the weights once and does little arithmetic, timed three ways against torch.matmul in the same process: a loop
of async launches under CUDA events (what the suite measures: the GPU's time or the host's, whichever is longer), a
CUDA-graph replay (the GPU's time alone) and the host time of one launch. Every result is checked against torch's.
The weights' bytes over the replay time give the memory bandwidth reached. Writes JSON to --out.
Usage: python python/bench/decode.py [--shapes MxNxK,...] [--rounds N] [--out FILE]
       python python/bench/decode.py --prebuild-only --cc 90   (compile the kernels; no GPU or torch needed)
"""
import argparse
import json
import os
import statistics
import time

os.environ.setdefault("GEMMKIT_WAIT_FOR_BEST", "1")  # time the kernel the shape asks for, not a stand-in

import gemmkit  # noqa: E402
from fp8 import prebuild  # noqa: E402  (python/bench/fp8.py: compiles the picks, lists them for carry-cache)

SHAPES = "1x4096x4096,8x4096x4096,16x4096x4096,16x14336x4096,16x4096x14336,16x8192x28672"
ITERATIONS = 100


def make_plan(cc=None):
    return gemmkit.Gemm(element="f16", element_accumulator="f32", layout="row", cc=cc)


def host_us(fn, iterations):
    """Mean host time (µs) of one call over `iterations` back-to-back calls, the queue drained first."""
    import torch

    torch.cuda.synchronize()
    start = time.perf_counter_ns()
    for _ in range(iterations):
        fn()
    elapsed = time.perf_counter_ns() - start
    torch.cuda.synchronize()
    return elapsed / iterations / 1e3


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", default=SHAPES)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", default="decode.json")
    parser.add_argument("--prebuild-only", action="store_true")
    parser.add_argument("--cc", type=int, default=None)
    args = parser.parse_args()
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    if args.prebuild_only:
        prebuild({"f16": make_plan(args.cc)}, [("decode", m, n, k) for m, n, k in shapes], listing=True)
        return

    import torch

    from timing import compare_graphs, event_ms

    plan = make_plan()
    results = []
    for m, n, k in shapes:
        torch.manual_seed(0)
        A = torch.randn(m, k, dtype=torch.float16, device="cuda")
        B = torch.randn(k, n, dtype=torch.float16, device="cuda") * 0.05
        D = torch.empty(m, n, dtype=torch.float16, device="cuda")
        ours = lambda: plan.run(A, B, None, D, 1.0, 0.0, sync=False)  # noqa: E731
        theirs = lambda: torch.matmul(A, B)  # noqa: E731
        ours()
        expected = torch.matmul(A, B).float()
        error = float((D.float() - expected).abs().max() / expected.abs().max())
        row = {"m": m, "n": n, "k": k, "kernel": plan.spec_for(A, B, None, D).name(), "max_rel_error": error}
        loops = [(event_ms(ours, ITERATIONS), event_ms(theirs, ITERATIONS)) for _ in range(args.rounds)]
        row["loop_us"] = statistics.median(a for a, _ in loops) * 1e3
        row["torch_loop_us"] = statistics.median(b for _, b in loops) * 1e3
        graph_ours, graph_theirs = compare_graphs(ours, theirs, args.rounds, ITERATIONS)
        row["graph_us"], row["torch_graph_us"] = graph_ours * 1e3, graph_theirs * 1e3
        row["host_us"] = statistics.median(host_us(ours, ITERATIONS) for _ in range(args.rounds))
        row["torch_host_us"] = statistics.median(host_us(theirs, ITERATIONS) for _ in range(args.rounds))
        weights = k * n * 2
        row["graph_tb_s"] = weights / (row["graph_us"] * 1e-6) / 1e12
        row["torch_graph_tb_s"] = weights / (row["torch_graph_us"] * 1e-6) / 1e12
        row["loop_ratio"] = row["torch_loop_us"] / row["loop_us"]
        row["graph_ratio"] = row["torch_graph_us"] / row["graph_us"]
        print(f"{m}x{n}x{k}: loop {row['loop_us']:.1f} us (torch {row['torch_loop_us']:.1f}, "
              f"{row['loop_ratio']:.2f}x), "
              f"graph {row['graph_us']:.1f} us (torch {row['torch_graph_us']:.1f}, {row['graph_ratio']:.2f}x; "
              f"{row['graph_tb_s']:.2f} against {row['torch_graph_tb_s']:.2f} TB/s of weights), host "
              f"{row['host_us']:.1f} us (torch {row['torch_host_us']:.1f}); max rel. error {error:.1e}; "
              f"{row['kernel'][-60:]}", flush=True)
        results.append(row)
    ratios = [r["graph_ratio"] for r in results]
    print(f"geometric mean, graph replay: {statistics.geometric_mean(ratios):.3f}x torch.matmul; launch loop: "
          f"{statistics.geometric_mean(r['loop_ratio'] for r in results):.3f}x")
    with open(args.out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
