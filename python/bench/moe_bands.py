"""python/bench/moe_bands.py: the MoE form with and without bands, against torch._grouped_mm, in one process.

CUTLASS's SM90 group scheduler walks each group's tiles down M first (AlongM, no swizzle). An expert of many rows
then has every one of its rows' tiles in flight over one or two columns of N, so its A (rows x K) streams through L2
once per column instead of once. run_contiguous therefore cuts tall experts into bands of rows, metadata entries of
their own (device/include/gemmkit/grouped_common.hpp). This times, interleaved: run_contiguous with bands (the
default), run_contiguous with GEMMKIT_MOE_BANDS=0 (one group per expert, read at each launch), the list form with
one group per expert and with each expert cut into bands of at most --band rows by hand (the list form pays a host
packing pass per call), and torch._grouped_mm. --no-list leaves out the list forms; --splits picks the row splits
(grouped.py's, also sorted and mixed). Usage:
python python/bench/moe_bands.py [--band 1024] [--rounds 3] [--experts 8,256] [--splits skewed,...] [--no-list]
                                 [--out FILE]
"""
import argparse
import json
import os
import statistics

import numpy as np
import torch

from grouped import SPLITS, bf16_moe_plan, moe_cases, splits  # noqa: E402  # python/bench/grouped.py
from timing import median_ms  # noqa: E402


def list_form(A, B, D, rows, band):
    """Per-group views of the stacked tensors, each expert cut into bands of at most `band` rows (0: uncut)."""
    As, Bs, Ds = [], [], []
    start = 0
    for g, m in enumerate(rows):
        step = band if band > 0 else max(m, 1)
        for first in range(start, start + m, step):
            last = min(first + step, start + m)
            As.append(A[first:last])
            Bs.append(B[g])
            Ds.append(D[first:last])
        start += m
    return As, Bs, Ds


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--band", default="1024")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--experts", default="")
    parser.add_argument("--out", default="")
    parser.add_argument("--splits", default=",".join(SPLITS))
    parser.add_argument("--no-list", action="store_true")
    args = parser.parse_args()
    bands = [int(b) for b in args.band.split(",")]
    experts = {int(e) for e in args.experts.split(",") if e}
    plan = bf16_moe_plan()
    out = []
    for groups, total, k, n, A, B, D in moe_cases(experts):
        flops = 2.0 * total * n * k
        for kind in args.splits.split(","):
            rows = splits(total, groups, kind)
            offsets = torch.tensor(np.cumsum(rows), device="cuda", dtype=torch.int32)
            reference = torch._grouped_mm(A, B, offs=offsets)

            def unbanded():
                os.environ["GEMMKIT_MOE_BANDS"] = "0"
                try:
                    plan.run_contiguous(A, B, D, offsets, sync=False)
                finally:  # the other ways run with bands, as a user's process would
                    del os.environ["GEMMKIT_MOE_BANDS"]

            ways = {"contiguous": lambda: plan.run_contiguous(A, B, D, offsets, sync=False),
                    "contiguous/unbanded": unbanded,
                    "torch": lambda: torch._grouped_mm(A, B, offs=offsets)}
            for band in [] if args.no_list else [0] + bands:
                As, Bs, Ds = list_form(A, B, D, rows, band)
                ways[f"list/{band or 'expert'}"] = (lambda As=As, Bs=Bs, Ds=Ds: plan.run(As, Bs, None, Ds, sync=False))
            times = {name: [] for name in ways}
            for _ in range(args.rounds):
                for name, fn in ways.items():
                    times[name].append(median_ms(fn, 5))
            differs = []
            for name, fn in ways.items():  # every gemmkit way computes D as torch does
                if name != "torch":
                    D.zero_()
                    fn()
                    if not torch.equal(D, reference):
                        differs.append(name)
            tflops = {name: flops / statistics.median(t) / 1e9 for name, t in times.items()}
            row = {"groups": groups, "total_m": total, "k": k, "n": n, "split": kind, "tflops": tflops,
                   "largest_expert_rows": max(rows), "differ_from_torch": differs, "list_kernel": plan.kernel_name()}
            out.append(row)
            ratios = "  ".join(f"{name} {tflops[name] / tflops['torch']:.2f}x" for name in ways if name != "torch")
            print(f"G={groups:3d} M={total:6d} K={k:5d} N={n:5d} {kind:7s} (largest {max(rows):5d} rows): torch "
                  f"{tflops['torch']:6.1f} TFLOP/s; {ratios}; differ from torch: {differs or 'none'}", flush=True)
        del A, B, D
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "cases": out}, f, indent=1)


if __name__ == "__main__":
    main()
