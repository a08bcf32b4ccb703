"""python/bench/grouped.py: grouped GEMM on the GPU against torch in the same process.

1. The walk-through's workload (50 fp16 problems, M, N, K from {128, 256, 512, 1024}, random.seed(2023)): host time
   of one gemmkit run() with its launch (sync=False, then one synchronize per call), the same captured in a CUDA graph,
   per-pair torch.matmul, and the per-pair loop captured in a CUDA graph.
2. The MoE suite, bf16, transposed expert weights [G, N, K]: 8 to 256 experts (MOE_CASES: routed rows, K, N), each
   with the rows split evenly, skewed (Pareto), and with a quarter of the experts empty: gemmkit's run_contiguous
   against torch._grouped_mm, CUDA events, median of interleaved rounds, each result checked against the other.
3. With --fp8, the FP8 MoE suite on the same cases and splits: e4m3 tokens and weights into bf16, gemmkit's
   run_contiguous per tensor (scales in alpha) and with DeepSeek-V3 block scales (1 x 128 per token, 128 x 128 per
   expert weight), against torch._scaled_grouped_mm with row-wise scales where this torch has it, and against
   gemmkit's bf16 run on the same case; blockwise is checked against a float32 GEMM of the dequantized operands.
4. With --moe-tiles, every configuration of the bf16 MoE plan on the chosen cases (even split; --tiles-split names
   others, comma-separated: skewed, empty, sorted, mixed; --tiles-match REGEX only the configurations whose kernel
   name matches), each against torch._grouped_mm: where the per-expert cost of many small experts goes (the kernels
   built first, in parallel).
5. With --once SPLIT, nothing is timed: each chosen MoE case with that split of the rows runs once on each side
   between cudaProfilerStart and Stop, after a warm-up, for `ncu --profile-from-start off` (then the script stops).
6. With --prebuild-only --cc N, nothing runs: item 4's configurations (--tiles-match) are compiled for that GPU, on
   a machine without one, and each kernel's cache key and name printed.
Writes JSON to --out (and with --plot FILE, a bar chart of the MoE ratios). Usage:
python python/bench/grouped.py [--out FILE] [--rounds N] [--skip-moe] [--experts 8,64] [--plot FILE] [--fp8]
                               [--moe-tiles [--tiles-split SPLIT,...] [--tiles-match REGEX]]
                               [--once uniform|skewed|empty] [--prebuild-only --cc N [--tiles-match REGEX]]
"""
import argparse
import json
import os
import platform
import random
import re
import statistics
import time

import numpy as np

os.environ.setdefault("GEMMKIT_WAIT_FOR_BEST", "1")  # each case on the kernel chosen for it, never a stand-in
import gemmkit  # noqa: E402
from fp8 import compile_specs  # noqa: E402  (python/bench/fp8.py: compiles specs, lists them for carry-cache)

try:
    import torch
    from timing import median_ms, profile_once  # python/bench/timing.py
except ImportError:  # --prebuild-only needs neither torch nor a GPU
    torch = None


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


# (experts, routed rows, K, N): dense-expert and fine-grained MoE layers, from 8 large experts to 256 small ones.
MOE_CASES = [(8, 16384, 4096, 14336), (8, 8192, 4096, 1408), (16, 2048, 5120, 8192), (64, 32768, 2048, 1408),
             (64, 8192, 4096, 14336), (128, 32768, 2048, 768), (256, 65536, 7168, 2048)]
SPLITS = ("uniform", "skewed", "empty")


def splits(total, groups, kind):
    """Rows per expert: even; skewed (Pareto weights, the first expert takes the remainder); or a quarter of the
    experts (every fourth) empty and the rest even. For --moe-tiles also the skewed rows reordered: sorted (the
    largest expert first) and mixed (largest, smallest, second largest, second smallest, ...)."""
    if kind in ("sorted", "mixed"):
        rows = sorted(splits(total, groups, "skewed"), reverse=True)
        if kind == "sorted":
            return rows
        return [rows[i // 2] if i % 2 == 0 else rows[-1 - i // 2] for i in range(groups)]
    if kind == "uniform":
        return [total // groups + (1 if g < total % groups else 0) for g in range(groups)]
    if kind == "empty":
        busy = [g for g in range(groups) if g % 4 != 3]
        rows = [0] * groups
        for i, g in enumerate(busy):
            rows[g] = total // len(busy) + (1 if i < total % len(busy) else 0)
        return rows
    weights = np.random.default_rng(groups).pareto(1.2, groups) + 0.05
    rows = np.floor(weights / weights.sum() * total).astype(int)
    rows[0] += total - rows.sum()
    return rows.tolist()


def bf16_moe_plan(cc=None):
    """The MoE suite's plan: bf16 tokens, transposed expert weights ([G, N, K], column-major B), f32 accumulation."""
    return gemmkit.GroupedGemm(element="bf16", layout="row", layout_B="col", element_accumulator="f32", cc=cc)


def tile_specs(plan, match):
    """The plan's configurations whose kernel name the regex finds, with their kernel specs."""
    return [(td, spec) for td in plan.tile_descriptions() if re.search(match, (spec := plan.construct(td)).name())]


def prebuild_tiles(cc, match):
    """--prebuild-only: compiles --moe-tiles' configurations for a GPU of this compute capability and prints each
    kernel's cache key and name (for tools/dev/carry-cache --keys)."""
    compile_specs([spec for _, spec in tile_specs(bf16_moe_plan(cc), match)])


def moe_cases(experts):
    """The MoE cases of these expert counts (all when empty), each with random bf16 tensors: tokens A [M, K], the
    experts' transposed weights B (a [G, K, N] view of [G, N, K]) and D [M, N]."""
    for groups, total, k, n in MOE_CASES:
        if experts and groups not in experts:
            continue
        A = torch.randn(total, k, device="cuda", dtype=torch.bfloat16)
        B = torch.randn(groups, n, k, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
        D = torch.empty(total, n, device="cuda", dtype=torch.bfloat16)
        yield groups, total, k, n, A, B, D


def tile_of(kernel_name):
    """The configuration part of a grouped kernel's name (what follows the element types)."""
    return kernel_name.split("_bf16_bf16_f32_bf16_bf16_")[-1]


def moe(results, rounds, experts):
    plan = bf16_moe_plan()
    out = []
    print("MoE (run_contiguous vs torch._grouped_mm), bf16; the kernel each case runs is its tile after the ratio")
    for groups, total, k, n, A, B, D in moe_cases(experts):
        flops = 2.0 * total * n * k
        for kind in SPLITS:
            rows = splits(total, groups, kind)
            offsets = torch.tensor(np.cumsum(rows), device="cuda", dtype=torch.int32)

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
            kernel = plan.spec_for_contiguous(A, B, D, offsets).name()
            rival = plan.rival_for_contiguous(A, B, D, offsets)
            row = {"groups": groups, "n": n, "k": k, "total_m": total, "split": kind, "kernel": kernel,
                   "rival": rival.name() if rival else None,
                   "gemmkit_tflops": flops / statistics.median(ms_ours) / 1e9,
                   "torch_grouped_mm_tflops": flops / statistics.median(ms_theirs) / 1e9,
                   "max_relative_difference": err}
            row["ratio"] = row["gemmkit_tflops"] / row["torch_grouped_mm_tflops"]
            out.append(row)
            print(f"  G={groups:3d} M={total:6d} K={k:5d} N={n:5d} {kind:7s}: gemmkit "
                  f"{row['gemmkit_tflops']:6.1f} TFLOP/s, torch._grouped_mm {row['torch_grouped_mm_tflops']:6.1f}"
                  f" ({row['ratio']:.2f}x), max rel. difference {err:.1e}, {tile_of(kernel)}"
                  + (f" or {tile_of(rival.name())} (the GPU's pick)" if rival else ""), flush=True)
        del A, B, D
    if out:
        geomean = float(np.exp(np.mean(np.log([r["ratio"] for r in out]))))
        print(f"  geometric mean {geomean:.3f}x torch._grouped_mm over {len(out)} cases; lowest "
              f"{min(r['ratio'] for r in out):.3f}x")
    results["moe"] = out


def fp8_moe(results, rounds, experts):
    """The FP8 MoE suite (item 3 of the module's docstring)."""
    from gemmkit.torch import quantize_blockwise

    def fp8_plan(block_scaling):
        plan = gemmkit.GroupedGemm(element_A="e4m3", element_B="e4m3", element_C="bf16", element_D="bf16",
                                   layout_A="row", layout_B="col", layout_C="row")
        plan.block_scaling = block_scaling
        return plan

    per_tensor, blockwise = fp8_plan("none"), fp8_plan("blockwise")
    bf16 = bf16_moe_plan()
    scaled_grouped_mm = getattr(torch, "_scaled_grouped_mm", None)
    print(f"FP8 MoE (run_contiguous), e4m3 -> bf16, kernels {per_tensor.kernel_name()} and {blockwise.kernel_name()}")
    out = []
    for groups, total, k, n in MOE_CASES:
        if experts and groups not in experts:
            continue
        x = torch.randn(total, k, device="cuda")
        w = torch.randn(groups, n, k, device="cuda")
        a, a_scales = quantize_blockwise(x)  # 1 x 128 per token
        a_scales = a_scales.contiguous()  # [total, KB] row-major: the grouped form's layout
        quantized = [quantize_blockwise(w[e], rows=128) for e in range(groups)]
        wq = torch.stack([q for q, _ in quantized])  # [G, N, K]
        w_scales = torch.stack([sc for _, sc in quantized])  # [G, NB, KB]
        B = wq.transpose(1, 2)
        a_bf16, B_bf16 = x.bfloat16(), w.bfloat16().transpose(1, 2)
        row_a = torch.ones(total, device="cuda")
        row_b = torch.ones(groups, n, device="cuda")
        D = torch.empty(total, n, device="cuda", dtype=torch.bfloat16)
        flops = 2.0 * total * n * k
        for kind in SPLITS:
            rows = splits(total, groups, kind)
            offsets = torch.tensor(np.cumsum(rows), device="cuda", dtype=torch.int32)
            timed = {
                "gemmkit_fp8_per_tensor": lambda: per_tensor.run_contiguous(a, B, D, offsets, sync=False),
                "gemmkit_fp8_blockwise": lambda: blockwise.run_contiguous(a, B, D, offsets, sync=False,
                                                                         scale_a=a_scales, scale_b=w_scales),
                "gemmkit_bf16": lambda: bf16.run_contiguous(a_bf16, B_bf16, D, offsets, sync=False),
            }
            if scaled_grouped_mm is not None:
                timed["torch_scaled_grouped_mm_rowwise"] = lambda: scaled_grouped_mm(
                    a, B, row_a, row_b, offs=offsets, out_dtype=torch.bfloat16)
            if "torch_scaled_grouped_mm_rowwise" in timed:
                try:
                    timed["torch_scaled_grouped_mm_rowwise"]()
                except RuntimeError as e:  # a torch without an SM90 row-wise grouped kernel for this case
                    print(f"  torch._scaled_grouped_mm: {str(e).splitlines()[0]}")
                    del timed["torch_scaled_grouped_mm_rowwise"]
            timed["gemmkit_fp8_blockwise"]()
            torch.cuda.synchronize()
            err = float("nan")
            if groups * n * k <= 1 << 31:  # the float reference of the largest cases would not fit beside them
                per_a = a_scales.repeat_interleave(128, dim=1)[:, :k]
                per_w = w_scales.repeat_interleave(128, dim=1).repeat_interleave(128, dim=2)[:, :n, :k]
                reference = torch._grouped_mm((a.float() * per_a).bfloat16(),
                                              (wq.float() * per_w).bfloat16().transpose(1, 2), offs=offsets)
                err = ((D.float() - reference.float()).abs().max() / reference.float().abs().max()).item()
                del per_a, per_w, reference
            samples = {name: [] for name in timed}
            for _ in range(rounds):
                for name, fn in timed.items():
                    samples[name].append(median_ms(fn, 5))
            row = {"groups": groups, "n": n, "k": k, "total_m": total, "split": kind,
                   "max_relative_difference_blockwise": err}
            for name, ms in samples.items():
                row[name + "_tflops"] = flops / statistics.median(ms) / 1e9
            row["blockwise_vs_per_tensor"] = row["gemmkit_fp8_blockwise_tflops"] / row["gemmkit_fp8_per_tensor_tflops"]
            row["fp8_vs_bf16"] = row["gemmkit_fp8_per_tensor_tflops"] / row["gemmkit_bf16_tflops"]
            if "torch_scaled_grouped_mm_rowwise" in timed:
                row["ratio"] = row["gemmkit_fp8_per_tensor_tflops"] / row["torch_scaled_grouped_mm_rowwise_tflops"]
            out.append(row)
            print(f"  G={groups:3d} M={total:6d} K={k:5d} N={n:5d} {kind:7s}: per tensor "
                  f"{row['gemmkit_fp8_per_tensor_tflops']:6.1f}, blockwise {row['gemmkit_fp8_blockwise_tflops']:6.1f} "
                  f"({row['blockwise_vs_per_tensor']:.2f}x), bf16 {row['gemmkit_bf16_tflops']:6.1f} TFLOP/s"
                  + (f", torch row-wise {row['torch_scaled_grouped_mm_rowwise_tflops']:6.1f} ({row['ratio']:.2f}x)"
                     if "ratio" in row else "") + "; blockwise "
                  + ("not checked (no room for the reference)" if np.isnan(err) else f"max rel. difference {err:.1e}"),
                  flush=True)
        del x, w, a, wq, B, a_bf16, B_bf16, D
    if out:
        ratios = [r["blockwise_vs_per_tensor"] for r in out]
        print(f"  blockwise / per tensor: geometric mean {float(np.exp(np.mean(np.log(ratios)))):.3f}, lowest "
              f"{min(ratios):.3f}")
    results["moe_fp8"] = out


def moe_tiles(results, rounds, experts, split="uniform", match=""):
    """Item 4 of the module's docstring."""
    plan = bf16_moe_plan()
    heuristic = bf16_moe_plan()
    default_kernel = plan.kernel_name()
    matching = tile_specs(plan, match)
    tiles = [td for td, _ in matching]
    print(f"MoE tiles: {len(tiles)} configurations of {default_kernel}'s plan")
    compile_specs([spec for _, spec in matching], listing=False)
    out = []
    for groups, total, k, n, A, B, D in moe_cases(experts):
        offsets = torch.tensor(np.cumsum(splits(total, groups, split)), device="cuda", dtype=torch.int32)
        flops = 2.0 * total * n * k

        def theirs():
            return torch._grouped_mm(A, B, offs=offsets)

        rival = heuristic.rival_for_contiguous(A, B, D, offsets)
        chosen = {heuristic.spec_for_contiguous(A, B, D, offsets).name(), rival.name() if rival else None}
        rows, all_theirs = [], []
        for td in tiles:
            plan.tile_description = td

            def ours():
                plan.run_contiguous(A, B, D, offsets, sync=False)

            ms_ours, ms_theirs = [], []
            for _ in range(rounds):  # interleaved with torch's, so each ratio sees the same clocks and temperature
                ms_ours.append(median_ms(ours, 5))
                ms_theirs.append(median_ms(theirs, 5))
            all_theirs += ms_theirs
            ms = statistics.median(ms_ours)
            rows.append({"groups": groups, "n": n, "k": k, "total_m": total, "split": split, "tile": plan.kernel_name(),
                         "gemmkit_tflops": flops / ms / 1e9, "ratio": statistics.median(ms_theirs) / ms,
                         "chosen": plan.kernel_name() in chosen})
        rows.sort(key=lambda r: -r["ratio"])
        print(f"  G={groups:3d} M={total:6d} K={k:5d} N={n:5d} {split}: torch._grouped_mm "
              f"{flops / statistics.median(all_theirs) / 1e9:6.1f} TFLOP/s; fastest gemmkit configurations:")
        for rank, r in enumerate(rows):
            if rank < 5 or r["chosen"]:
                print(f"    {rank + 1:2d}. {r['ratio']:.3f}x  {r['gemmkit_tflops']:6.1f} TFLOP/s  {tile_of(r['tile'])}"
                      + ("  <- run_contiguous's choice" + (" pair (the GPU picks)" if rival else "")
                         if r["chosen"] else ""))
        out += rows
        del A, B, D
    results.setdefault("moe_tiles", []).extend(out)


def run_once(experts, split):
    """Item 5 of the module's docstring."""
    plan = bf16_moe_plan()
    for groups, total, k, n, A, B, D in moe_cases(experts):
        offsets = torch.tensor(np.cumsum(splits(total, groups, split)), device="cuda", dtype=torch.int32)
        profile_once([lambda: plan.run_contiguous(A, B, D, offsets, sync=False),
                      lambda: torch._grouped_mm(A, B, offs=offsets)])
        print(f"G={groups} M={total} K={k} N={n} {split}: {plan.spec_for_contiguous(A, B, D, offsets).name()} and "
              "torch._grouped_mm ran once each under the profiler")
        del A, B, D


def plot(rows, path):
    """One bar per case: gemmkit / torch._grouped_mm, a line at 1."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels = [f"G{r['groups']} {r['total_m']}x{r['k']}->{r['n']} {r['split']}" for r in rows]
    fig, ax = plt.subplots(figsize=(max(8, 0.45 * len(rows)), 4.5))
    ax.bar(range(len(rows)), [r["ratio"] for r in rows], color="#4c72b0")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(rows)), labels, rotation=75, ha="right", fontsize=7)
    ax.set_ylabel("gemmkit / torch._grouped_mm (higher is faster)")
    ax.set_title("MoE run_contiguous, bf16, against torch._grouped_mm")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="grouped-bench.json")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--skip-moe", action="store_true")
    parser.add_argument("--experts", default="", help="only the MoE cases of these expert counts, e.g. 8,64")
    parser.add_argument("--plot", default="", help="a PNG of the MoE ratios")
    parser.add_argument("--fp8", action="store_true", help="also the FP8 MoE suite (per tensor and blockwise)")
    parser.add_argument("--moe-tiles", action="store_true", help="also every bf16 MoE configuration on each case")
    parser.add_argument("--tiles-split", default="uniform",
                        help="--moe-tiles' splits of the rows, comma-separated: uniform, skewed, empty, sorted, mixed")
    parser.add_argument("--tiles-match", default="", help="--moe-tiles: only kernel names this regex finds")
    parser.add_argument("--once", choices=SPLITS, help="run each chosen case once per side for ncu, time nothing")
    parser.add_argument("--prebuild-only", action="store_true",
                        help="compile --moe-tiles' configurations (--tiles-match) for --cc and stop; no GPU needed")
    parser.add_argument("--cc", type=int, help="the GPU's compute capability, for --prebuild-only")
    args = parser.parse_args()
    if args.prebuild_only:
        if args.cc is None:
            raise SystemExit("--prebuild-only needs --cc (e.g. 90)")
        prebuild_tiles(args.cc, args.tiles_match)
        return
    experts = {int(e) for e in args.experts.split(",") if e}
    if args.once:
        run_once(experts, args.once)
        return
    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "gemmkit": gemmkit.__version__,
               "python": platform.python_version(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    walkthrough(results)
    if not args.skip_moe:
        moe(results, args.rounds, experts)
        if args.plot and results["moe"]:
            plot(results["moe"], args.plot)
        if args.fp8:
            fp8_moe(results, args.rounds, experts)
        if args.moe_tiles:
            for split in args.tiles_split.split(","):
                moe_tiles(results, args.rounds, experts, split, args.tiles_match)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
