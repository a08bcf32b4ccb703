"""python/bench/fp8.py: FP8 (e4m3) GEMMs on an SM90 GPU against torch._scaled_mm in the same process.

Shapes: squares 4096 and 8192, the public anchor 8192x8192x4096, and Llama-3 projections (N x K in 4096x4096,
14336x4096, 4096x14336, 28672x8192, 8192x28672) at M = 128, 1024 and 8192. A is M x K row-major, B is the weight
W (N x K, row-major) read as K x N column-major (TN, as FP8 tensor cores need), D is bf16. Three scalings:
- per-tensor: gemmkit folds scale_a * scale_b into alpha; torch._scaled_mm takes the two scalar tensors;
- row-wise: gemmkit's RowAndColumn scale vectors (m and n float32) against _scaled_mm's (M, 1) and (1, N) scales;
- blockwise (DeepSeek-V3: A per row and 128-wide K block, B per 128 x 128 block): gemmkit's block-scaled mainloop
  against _scaled_mm's blockwise mode where this torch has it (else gemmkit alone, checked against a dequantized
  float32 matmul), and against gemmkit's own per-tensor speed on the shape (vs_per_tensor).
Each pair is timed with CUDA events after a warm-up, median of interleaved rounds, and each result is checked
against the other. Every gemmkit kernel is compiled first, in parallel (compile_many). Writes JSON to --out.
--tile NAME pins every plan to the first listed configuration whose kernel name contains NAME (e.g.
256x192x128_2x1x1_0_tnt: a 128x192 CTA in a 2x1 cluster), to compare one tile across the shapes; --variants limits the
scalings timed; --max-swizzle N sets the plans' tile scheduler swizzle (1, 2, 4 or 8).
--prebuild-only --cc 90 compiles the kernels the plans pick for these shapes (Gemm.spec_for_problem) and prints
each one's cache key and name: no torch and no GPU needed (a build machine fills the cache the GPU machine runs from).
--builders-loop: where a plan's choice runs one of gemmkit's FP8 mainloops (the promotion overlapped), also time the
same tile on CUTLASS's mainloop, in the same rounds (builders_tflops, own_vs_builders, and whether the two agree bit
for bit: they promote at the same K steps).
--element-c void declares the plans without C (as gemmkit.torch.scaled_mm does): the epilogue then keeps no shared
memory for C, and the mainloop may get a stage more.
--plot FILE draws the ratios per shape (one bar per scaling) as a PNG; --plot-only JSON draws them from a saved run
(no torch, no GPU).
Usage: python python/bench/fp8.py [--out FILE] [--rounds N] [--quick] [--tile NAME]
                                  [--variants per_tensor,rowwise,blockwise]
                                  [--max-swizzle N] [--builders-loop] [--element-c bf16|void]
       python python/bench/fp8.py --prebuild-only --cc 90 [--quick] [--tile NAME] [--variants ...]
       python python/bench/fp8.py --plot-only fp8.json --plot fp8.png
"""
import argparse
import json
import math
import os
import platform
import re
import statistics
import time

os.environ.setdefault("GEMMKIT_WAIT_FOR_BEST", "1")  # time the kernel the shape asks for, not a stand-in

import gemmkit  # noqa: E402

try:
    import torch
    from timing import median_ms  # python/bench/timing.py
except ImportError:  # --prebuild-only needs neither torch nor a GPU
    torch = None

# The kernel-name part of gemmkit's own FP8 mainloops (column halves, alternating K tiles).
OWN_LOOP = re.compile(r"_warpspecialized_(cooperative|pingpong)_fp8(overlap|alternating)_epi_tma")

LLAMA = [(4096, 4096), (14336, 4096), (4096, 14336), (28672, 8192), (8192, 28672)]


def shapes(quick):
    out = [("square", 4096, 4096, 4096), ("square", 8192, 8192, 8192), ("anchor", 8192, 8192, 4096)]
    for m in ((1024,) if quick else (128, 1024, 8192)):
        out += [("llama", m, n, k) for n, k in LLAMA]
    if not quick:  # decoding: 16 tokens through the MLP's up and down projections
        out += [("decode", 16, n, k) for n, k in LLAMA[1:3]]
    return out


def quantize(x):
    """x scaled into e4m3's range (max 448) per tensor: the FP8 tensor and its dequantization scale."""
    scale = x.abs().max().float() / 448.0
    return (x / scale).to(torch.float8_e4m3fn), scale


SCALINGS = {"per_tensor": ("none", "none"), "rowwise": ("row_and_column", "none"), "blockwise": ("none", "blockwise")}


def plan_for(variant, tile=None, max_swizzle=None, cc=None, fast_accum=False, element_c="bf16"):
    plan = gemmkit.Gemm(element_A="e4m3", element_B="e4m3", element_C=element_c, element_D="bf16",
                        layout_A="row", layout_B="col", layout_C="row", element_accumulator="f32", cc=cc)
    scale, block_scaling = SCALINGS[variant]
    plan.scale = scale
    plan.block_scaling = block_scaling
    if fast_accum and block_scaling == "none":  # block scales are applied at each promotion: none to skip
        plan.math_operation = "multiply_add_fast_accum"
    if max_swizzle is not None:
        plan.max_swizzle_size = max_swizzle
    if tile is not None:
        own_loop_asked = "_fp8overlap" in tile or "_fp8alternating" in tile
        for td in plan.tile_descriptions():
            try:
                plan.tile_description = td
            except gemmkit.ConfigError:  # e.g. a no-smem epilogue with scale vectors
                continue
            name = plan.kernel_name()  # CUTLASS's loop unless the fragment names one of gemmkit's
            if tile in name and (own_loop_asked or not OWN_LOOP.search(name)):
                return plan
        raise SystemExit(f"--tile {tile}: no configuration of the {variant} plan has it in its kernel name")
    return plan


def arguments(description, out, rounds):
    """A parser with what every FP8 benchmark here takes: --out, --rounds, --prebuild-only and --cc."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", default=out)
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--prebuild-only", action="store_true", help="compile the kernels and stop (needs --cc)")
    parser.add_argument("--cc", type=int, help="the GPU's compute capability, for --prebuild-only")
    return parser


def run_record(rounds):
    """What a result file says of its run: when, where and how many rounds."""
    return {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "device": torch.cuda.get_device_name(),
            "torch": torch.__version__, "gemmkit": gemmkit.__version__, "python": platform.python_version(),
            "rounds": rounds}


def save(results, path):
    with open(path, "w") as f:
        json.dump(results, f, indent=1)
    print(f"wrote {path}")


def operands(m, n, k):
    torch.manual_seed(m * 31 + n * 7 + k)
    a, sa = quantize(torch.randn(m, k, device="cuda"))
    w, sb = quantize(torch.randn(n, k, device="cuda"))
    b = w.t()  # K x N, column-major: what _scaled_mm and the TN plan take
    row_scale = torch.rand(m, device="cuda") + 0.5
    column_scale = torch.rand(n, device="cuda") + 0.5
    return a, b, sa, sb, row_scale, column_scale


def block_scales(m, n, k, sa, sb):
    """DeepSeek-V3 scales with the per-tensor ones folded in: A's (M, KB) M-major, B's (NB, KB) row-major."""
    kb, nb = (k + 127) // 128, (n + 127) // 128
    scale_a = ((torch.rand(kb, m, device="cuda") + 0.5) * sa).t()
    scale_b = (torch.rand(nb, kb, device="cuda") + 0.5) * sb
    return scale_a, scale_b


def dequantized_matmul(a, b, scale_a, scale_b):
    """A @ B of the block-scaled operands, in float32 (the check where _scaled_mm has no blockwise mode)."""
    k, n = b.shape
    per_a = scale_a.repeat_interleave(128, dim=1)[:, :k]
    per_b = scale_b.repeat_interleave(128, dim=0)[:n].repeat_interleave(128, dim=1)[:, :k].t()
    return (a.float() * per_a) @ (b.float() * per_b)


def prebuild(plans, cases, listing=False):
    """Compiles the kernels run() picks for the cases (in parallel). With listing (--prebuild-only), prints each one's
    cache key and name, which tools/dev/carry-cache --keys takes, and returns True: the caller stops there."""
    compile_specs([plan.spec_for_problem(m, n, k) for plan in plans.values() for _, m, n, k in cases], listing)
    return listing


def compile_specs(specs, listing=True):
    """Compiles these kernel specs once each (in parallel); with listing, prints each kernel's cache key and name."""
    unique = list({s.canonical(): s for s in specs}.values())
    start = time.time()
    built = gemmkit.compile_many(unique)
    print(f"{len(unique)} gemmkit kernels ready in {time.time() - start:.0f} s")
    if listing:
        for kernel in built:
            print(f"  {kernel.cache_key} {kernel.kernel_name}")


def builders_twins(plans, cases, cc=None, element_c="bf16"):
    """{(variant, m, n, k): plan} pinned to CUTLASS's mainloop on the tile the variant's plan picks for the shape, where
    that pick runs one of gemmkit's loops."""
    twins = {}
    for variant, plan in plans.items():
        for _, m, n, k in cases:
            name = plan.spec_for_problem(m, n, k).name()
            # A plan pinned to a tile runs it data-parallel, so parallel split-K has no pinned twin to compare with.
            if OWN_LOOP.search(name) and "_splitk_parallel" not in name:
                tile = re.search(r"_\d+x\d+x\d+_\dx\dx\d_0_tnt_align16", OWN_LOOP.sub("", name)).group(0)[1:]
                twins[(variant, m, n, k)] = plan_for(variant, tile, cc=cc, element_c=element_c)
    return twins


def measure(plans, group, m, n, k, rounds, fast_accum, twins=None):
    a, b, sa, sb, row_scale, column_scale = operands(m, n, k)
    rs, cs = row_scale * sa, column_scale * sb  # the dequantization scales, folded per row and per column
    rs2, cs2 = rs.view(m, 1), cs.view(1, n)
    alpha = float(sa * sb)
    flops = 2.0 * m * n * k
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)

    def scaled_mm(scale_a, scale_b):
        return torch._scaled_mm(a, b, scale_a, scale_b, out_dtype=torch.bfloat16, use_fast_accum=fast_accum)

    bsa, bsb = block_scales(m, n, k, sa, sb) if "blockwise" in plans else (None, None)

    def blockwise_scaled_mm():
        # _scaled_mm reads B's 128 x 128 scales as those of b.t(): (NB, KB) row-major, handed over transposed; block
        # scales are promoted, never fast-accumulated, on either side.
        return torch._scaled_mm(a, b, bsa, bsb.t(), out_dtype=torch.bfloat16)

    variants = {
        "per_tensor": (lambda: plans["per_tensor"].run(a, b, None, d, alpha, 0.0, sync=False),
                       lambda: scaled_mm(sa, sb)),
        "rowwise": (lambda: plans["rowwise"].run(a, b, None, d, 1.0, 0.0, sync=False, row_scale=rs, column_scale=cs),
                    lambda: scaled_mm(rs2, cs2)),
        "blockwise": (lambda: plans["blockwise"].run(a, b, None, d, 1.0, 0.0, sync=False, scale_a=bsa, scale_b=bsb),
                      blockwise_scaled_mm),
    }
    variants = {name: pair for name, pair in variants.items() if name in plans}
    rows = {}
    for name, (ours, theirs) in variants.items():
        twin = (twins or {}).get((name, m, n, k))
        builders = None
        if twin is not None:
            d_twin = torch.empty_like(d)
            args = (a, b, None, d_twin, alpha, 0.0) if name == "per_tensor" else (a, b, None, d_twin, 1.0, 0.0)
            extra = {} if name == "per_tensor" else {"row_scale": rs, "column_scale": cs}

            def builders():
                return twin.run(*args, sync=False, **extra)
            builders()
        ours()
        try:
            reference = theirs()
        except RuntimeError as e:  # a torch without _scaled_mm's blockwise mode
            print(f"  {name}: torch._scaled_mm refused it ({str(e).splitlines()[0][:100]}); gemmkit alone")
            theirs, reference = None, dequantized_matmul(a, b, bsa, bsb)
        torch.cuda.synchronize()
        err = ((d.float() - reference.float()).abs().max() / reference.float().abs().max()).item()
        ms_ours, ms_theirs, ms_builders = [], [], []
        for _ in range(rounds):  # interleaved, so clocks and temperature treat both alike
            ms_ours.append(median_ms(ours, 5))
            if theirs is not None:
                ms_theirs.append(median_ms(theirs, 5))
            if builders is not None:
                ms_builders.append(median_ms(builders, 5))
        row = {"gemmkit_tflops": flops / statistics.median(ms_ours) / 1e9,
               "scaled_mm_tflops": flops / statistics.median(ms_theirs) / 1e9 if ms_theirs else None,
               "max_relative_difference": err,
               "kernel": plans[name].spec_for(a, b, None, d).name()}
        row["ratio"] = row["gemmkit_tflops"] / row["scaled_mm_tflops"] if ms_theirs else None
        if builders is not None:
            row["builders_tflops"] = flops / statistics.median(ms_builders) / 1e9
            row["own_vs_builders"] = row["gemmkit_tflops"] / row["builders_tflops"]
            row["builders_kernel"] = twin.kernel_name()
            row["bit_identical_to_builders"] = bool(torch.equal(d, d_twin))
        if name == "blockwise" and "per_tensor" in rows:
            row["vs_per_tensor"] = row["gemmkit_tflops"] / rows["per_tensor"]["gemmkit_tflops"]
        rows[name] = row
        against = (f"_scaled_mm {row['scaled_mm_tflops']:7.1f} ({row['ratio']:.2f}x)" if ms_theirs
                   else "_scaled_mm    n/a")
        own = (f", CUTLASS's loop {row['builders_tflops']:7.1f} ({row['own_vs_builders']:.3f}x, identical "
               f"{row['bit_identical_to_builders']})" if builders is not None else "")
        print(f"  {group:6s} {m:5d}x{n:5d}x{k:5d} {name:10s}: gemmkit {row['gemmkit_tflops']:7.1f} TFLOP/s, "
              f"{against}, max rel. difference {err:.1e}{own}")
    return {"group": group, "m": m, "n": n, "k": k, **rows}


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def plot(results, path):
    """Per shape, one bar per scaling: gemmkit / torch._scaled_mm, or for a blockwise run that torch could not time,
    gemmkit blockwise / gemmkit per-tensor (hatched); a line at 1."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = results["shapes"]
    variants = [v for v in SCALINGS if any(v in r for r in rows)]
    fig, ax = plt.subplots(figsize=(max(8, 0.6 * len(rows) * len(variants) / 2), 4.5))
    width = 0.8 / len(variants)
    for i, variant in enumerate(variants):
        values, hatches = [], []
        for r in rows:
            cell = r.get(variant, {})
            ratio = cell.get("ratio")
            values.append(ratio if ratio is not None else cell.get("vs_per_tensor") or 0.0)
            hatches.append("" if ratio is not None else "//")
        label = variant if "//" not in hatches else f"{variant} (hatched: / gemmkit per-tensor)"
        bars = ax.bar([x + i * width for x in range(len(rows))], values, width, label=label)
        for bar, hatch in zip(bars, hatches):
            bar.set_hatch(hatch)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(rows))], [f"{r['m']}x{r['n']}x{r['k']}" for r in rows],
                  rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("gemmkit / torch._scaled_mm")
    ax.set_title(f"FP8 e4m3 -> bf16 on {results.get('device', 'an SM90 GPU')} ({results.get('date', '')})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    parser = arguments(__doc__.splitlines()[0], "fp8-bench.json", 7)
    parser.add_argument("--quick", action="store_true", help="M = 1024 only for the Llama shapes")
    parser.add_argument("--fast-accum", action="store_true", help="both sides accumulate in the tensor cores: "
                        "torch._scaled_mm's use_fast_accum=True, gemmkit's multiply_add_fast_accum (not blockwise)")
    parser.add_argument("--tile", help="pin the configuration whose kernel name contains this (default: the plan's "
                        "choice per shape)")
    parser.add_argument("--variants", default="per_tensor,rowwise,blockwise", help="the scalings to time")
    parser.add_argument("--max-swizzle", type=int, choices=(1, 2, 4, 8), help="the plans' max_swizzle_size")
    parser.add_argument("--builders-loop", action="store_true", help="also time CUTLASS's mainloop on the tile of "
                        "each choice that runs one of gemmkit's")
    parser.add_argument("--element-c", default="bf16", choices=("bf16", "void"),
                        help="the plans' C type; void: declared without C, as gemmkit.torch.scaled_mm's (every run "
                        "passes no C and beta 0 either way)")
    parser.add_argument("--plot", default="", help="a PNG of the ratios per shape")
    parser.add_argument("--plot-only", default="", help="draw --plot from this saved JSON and stop")
    args = parser.parse_args()
    if args.plot_only:
        with open(args.plot_only) as f:
            plot(json.load(f), args.plot or os.path.splitext(args.plot_only)[0] + ".png")
        return
    if args.prebuild_only and args.cc is None:
        raise SystemExit("--prebuild-only needs --cc (e.g. 90)")
    if not args.prebuild_only:
        if torch is None:
            raise SystemExit("python/bench/fp8.py needs torch (or --prebuild-only --cc 90)")
        if torch.cuda.get_device_capability() < (9, 0):
            raise SystemExit("python/bench/fp8.py needs an SM90 GPU (H100 / H200)")
    cc = args.cc if args.prebuild_only else None  # else the current GPU's
    plans = {name: plan_for(name, args.tile, args.max_swizzle, cc=cc, fast_accum=args.fast_accum,
                            element_c=args.element_c) for name in args.variants.split(",")}
    cases = shapes(args.quick)
    twins = builders_twins(plans, cases, cc, args.element_c) if args.builders_loop else {}
    if prebuild({**plans, **{str(key): plan for key, plan in twins.items()}}, cases, args.prebuild_only):
        return
    results = {**run_record(args.rounds), "scaled_mm_use_fast_accum": args.fast_accum,
               "gemmkit_fast_accum": args.fast_accum, "element": "e4m3 x e4m3 -> bf16 (f32 accumulation)",
               "tile": args.tile, "element_c": args.element_c,
               "max_swizzle_size": plans[next(iter(plans))].max_swizzle_size}
    rows = [measure(plans, *case, args.rounds, args.fast_accum, twins) for case in cases]
    results["shapes"] = rows
    summary = {}
    for variant in plans:
        for key in ("ratio", "vs_per_tensor", "own_vs_builders"):
            measured = [r for r in rows if r[variant].get(key) is not None]
            if not measured:
                continue
            for group in ("square", "anchor", "llama", "decode"):
                ratios = [r[variant][key] for r in measured if r["group"] == group]
                if ratios:  # --quick has no decode group
                    summary[f"{variant}_{group}_geomean_{key}"] = geomean(ratios)
            summary[f"{variant}_all_geomean_{key}"] = geomean([r[variant][key] for r in measured])
    results["summary"] = summary
    for key, value in summary.items():
        print(f"{key:40s} {value:.3f}")
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)
    if args.plot:
        plot(results, args.plot)


if __name__ == "__main__":
    main()
