"""python/bench/grouped.py: grouped GEMM on the GPU against torch in the same process.

1. The walk-through's workload (50 fp16 problems, M, N, K from {128, 256, 512, 1024}, random.seed(2023)): host time
   of one gemmkit run() with its launch (sync=False, then one synchronize per call), the same captured in a CUDA graph,
   per-pair torch.matmul, and the per-pair loop captured in a CUDA graph.
2. MoE shapes, bf16 (total M 8192, K 4096, N 1408 / 14336, 8 / 64 experts, uniform and skewed splits, transposed
   weights [G, N, K]): gemmkit's run_contiguous against torch._grouped_mm, CUDA events, median of interleaved rounds,
   each result checked against the other.
Writes JSON to --out. Usage: python python/bench/grouped.py [--out FILE] [--rounds N]
"""
import argparse
import json
import platform
import random
import statistics
import time

import numpy as np
import torch

import gemmkit
from timing import median_ms  # python/bench/timing.py


def host_us_per_call(fn, calls=100, rounds=5):
    """Median over rounds of the wall time per call, each call followed by a synchronize (as a user waits)."""
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
            torch.cuda.synchronize()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(samples)


def captured(fn):
    """fn captured into a CUDA graph (after a warm-up outside it); returns a replay function."""
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        fn()
    return graph.replay


def walkthrough(results):
    random.seed(2023)
    sizes = [128, 256, 512, 1024]
    shapes = [tuple(random.choice(sizes) for _ in range(3)) for _ in range(50)]
    As = [torch.randint(-3, 4, (m, k), device="cuda").half() for m, _, k in shapes]
    Bs = [torch.randint(-3, 4, (k, n), device="cuda").half() for _, n, k in shapes]
    Ds = [torch.empty(m, n, device="cuda", dtype=torch.float16) for m, n, _ in shapes]
    plan = gemmkit.GroupedGemm(element=torch.float16, layout="row", element_accumulator=torch.float32)
    plan.run(As, Bs, None, Ds)
    assert all(torch.equal(d, (a.float() @ b.float()).half()) for a, b, d in zip(As, Bs, Ds)), "grouped D differs"
    flops = sum(2 * m * n * k for m, n, k in shapes)

    def grouped():
        plan.run(As, Bs, None, Ds, sync=False)

    def per_pair():
        for a, b, d in zip(As, Bs, Ds):
            torch.matmul(a, b, out=d)

    rows = {
        "gemmkit GroupedGemm.run": host_us_per_call(grouped),
        "gemmkit GroupedGemm.run in a CUDA graph": host_us_per_call(captured(grouped)),
        "per-pair torch.matmul": host_us_per_call(per_pair),
        "per-pair torch.matmul in a CUDA graph": host_us_per_call(captured(per_pair)),
    }
    results["walkthrough"] = {"groups": 50, "flops": flops, "us_per_call_with_sync": rows, "kernel": plan.kernel_name()}
    print(f"walk-through workload: 50 fp16 groups, {flops / 1e9:.1f} GFLOP per call, kernel {plan.kernel_name()}")
    for name, us in rows.items():
        print(f"  {name:42s} {us:8.1f} us per call (incl. sync)")


def splits(total, groups, skewed):
    if not skewed:
        return [total // groups] * groups
    weights = np.random.default_rng(groups).pareto(1.2, groups) + 0.05
    rows = np.floor(weights / weights.sum() * total).astype(int)
    rows[0] += total - rows.sum()
    return rows.tolist()


def moe(results, rounds):
    plan = gemmkit.GroupedGemm(element=torch.bfloat16, layout="row", layout_B="col", element_accumulator=torch.float32)
    out = []
    print(f"MoE (run_contiguous vs torch._grouped_mm), bf16, kernel {plan.kernel_name()}")
    for groups in (8, 64):
        for n in (1408, 14336):
            for skewed in (False, True):
                rows = splits(8192, groups, skewed)
                k = 4096
                A = torch.randn(8192, k, device="cuda", dtype=torch.bfloat16)
                weights = torch.randn(groups, n, k, device="cuda", dtype=torch.bfloat16)  # [G, N, K]
                B = weights.transpose(1, 2)  # [G, K, N], column-major per expert
                offsets = torch.tensor(np.cumsum(rows), device="cuda", dtype=torch.int32)
                D = torch.empty(8192, n, device="cuda", dtype=torch.bfloat16)
                flops = 2.0 * 8192 * n * k

                def ours():
                    plan.run_contiguous(A, B, D, offsets, sync=False)

                def theirs():
                    return torch._grouped_mm(A, B, offs=offsets)

                ours()
                reference = theirs()
                err = ((D.float() - reference.float()).abs().max() / reference.float().abs().max()).item()
                ms_ours, ms_theirs = [], []
                for _ in range(rounds):  # interleaved, so clocks and temperature treat both alike
                    ms_ours.append(median_ms(ours, 5))
                    ms_theirs.append(median_ms(theirs, 5))
                row = {"groups": groups, "n": n, "k": k, "total_m": 8192, "skewed": skewed,
                       "gemmkit_tflops": flops / statistics.median(ms_ours) / 1e9,
                       "torch_grouped_mm_tflops": flops / statistics.median(ms_theirs) / 1e9,
                       "max_relative_difference": err}
                row["ratio"] = row["gemmkit_tflops"] / row["torch_grouped_mm_tflops"]
                out.append(row)
                print(f"  G={groups:3d} N={n:5d} {'skewed ' if skewed else 'uniform'}: gemmkit "
                      f"{row['gemmkit_tflops']:6.1f} TFLOP/s, torch._grouped_mm {row['torch_grouped_mm_tflops']:6.1f}"
                      f" ({row['ratio']:.2f}x), max rel. difference {err:.1e}")
    results["moe"] = out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="grouped-bench.json")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--skip-moe", action="store_true")
    args = parser.parse_args()
    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "gemmkit": gemmkit.__version__,
               "python": platform.python_version(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    walkthrough(results)
    if not args.skip_moe:
        moe(results, args.rounds)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
