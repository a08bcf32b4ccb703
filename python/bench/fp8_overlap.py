"""python/bench/fp8_overlap.py: gemmkit's FP8 mainloop with the promotion overlapped against CUTLASS's FP8 mainloop on
the same tile, and both against torch._scaled_mm, in one process on an SM90 GPU.

For each tile (a kernel-name fragment: CTA tile times cluster, e.g. 256x192x128_2x1x1 is a 128x192 CTA in a 2x1
cluster) two plans are pinned: the first listed configuration with that tile (CUTLASS's mainloop, the builders'
schedule: cooperative for 128-row CTAs, ping-pong for 64) and the same tile on the overlapped mainloop
(TmaWarpSpecializedCooperativeFP8Overlap, or TmaWarpSpecializedPingpongFP8Overlap for 64-row CTAs). The shapes and operands are
fp8.py's (e4m3, B as the transposed weight, D bf16; per-tensor scales in alpha, or row-wise scale vectors). The
three are timed interleaved (CUDA events after a warm-up, median of rounds), and the two gemmkit results are compared
bit for bit: the promotion happens at the same K steps, so they should be identical.
--prebuild-only --cc 90 compiles the kernels and prints their cache keys: no torch and no GPU needed.
Usage: python python/bench/fp8_overlap.py [--out FILE] [--rounds N] [--quick] [--tiles 256x192x128_2x1x1,...]
                                          [--variants per_tensor,rowwise]
       python python/bench/fp8_overlap.py --prebuild-only --cc 90 [--tiles ...] [--variants ...]
"""
import statistics

from fp8 import arguments, geomean, operands, plan_for, prebuild, run_record, save, shapes, torch  # python/bench/fp8.py


def overlapped_plan(variant, tile, cc):
    """The tile on the overlapped mainloop: the cooperative kernel for 128-row CTAs, the ping-pong one for 64."""
    for kernel in ("cooperative", "pingpong"):
        try:
            return plan_for(variant, f"{tile}_0_tnt_align16_warpspecialized_{kernel}_fp8overlap", cc=cc)
        except SystemExit:
            continue
    raise SystemExit(f"--tiles {tile}: no overlapped configuration has it")


def plans_for(tiles, variants, cc=None):
    """{(variant, tile): (CUTLASS's plan, the overlapped plan)}."""
    out = {}
    for variant in variants:
        for tile in tiles:
            out[(variant, tile)] = (plan_for(variant, tile + "_0_tnt_align16", cc=cc),
                                    overlapped_plan(variant, tile, cc))
    return out


def every_plan(plans):
    """The pairs' plans, as fp8.prebuild takes them."""
    return {f"{variant} {tile} {i}": plan for (variant, tile), pair in plans.items() for i, plan in enumerate(pair)}


def measure(plans, group, m, n, k, rounds):
    from timing import median_ms  # python/bench/timing.py
    a, b, sa, sb, row_scale, column_scale = operands(m, n, k)
    rs, cs = row_scale * sa, column_scale * sb
    alpha = float(sa * sb)
    flops = 2.0 * m * n * k
    d_cutlass = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    d_overlap = torch.empty_like(d_cutlass)
    rows = []
    for (variant, tile), (cutlass_plan, overlap_plan) in plans.items():
        if variant == "per_tensor":
            def run(plan, d):
                return lambda: plan.run(a, b, None, d, alpha, 0.0, sync=False)

            def theirs():
                return torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)
        else:
            def run(plan, d):
                return lambda: plan.run(a, b, None, d, 1.0, 0.0, sync=False, row_scale=rs, column_scale=cs)

            def theirs():
                return torch._scaled_mm(a, b, rs.view(m, 1), cs.view(1, n), out_dtype=torch.bfloat16)
        ours_cutlass, ours_overlap = run(cutlass_plan, d_cutlass), run(overlap_plan, d_overlap)
        ours_cutlass()
        ours_overlap()
        reference = theirs()
        torch.cuda.synchronize()
        identical = bool(torch.equal(d_cutlass, d_overlap))
        err = ((d_overlap.float() - reference.float()).abs().max() / reference.float().abs().max()).item()
        ms = {"cutlass": [], "overlap": [], "scaled_mm": []}
        for _ in range(rounds):  # interleaved, so clocks and temperature treat all three alike
            ms["cutlass"].append(median_ms(ours_cutlass, 5))
            ms["overlap"].append(median_ms(ours_overlap, 5))
            ms["scaled_mm"].append(median_ms(theirs, 5))
        tflops = {name: flops / statistics.median(values) / 1e9 for name, values in ms.items()}
        row = {"group": group, "m": m, "n": n, "k": k, "variant": variant, "tile": tile,
               "cutlass_tflops": tflops["cutlass"], "overlap_tflops": tflops["overlap"],
               "scaled_mm_tflops": tflops["scaled_mm"],
               "overlap_vs_cutlass": tflops["overlap"] / tflops["cutlass"],
               "overlap_vs_scaled_mm": tflops["overlap"] / tflops["scaled_mm"],
               "cutlass_vs_scaled_mm": tflops["cutlass"] / tflops["scaled_mm"],
               "bit_identical": identical, "max_relative_difference_vs_scaled_mm": err,
               "kernels": [cutlass_plan.spec_for(a, b, None, d_cutlass).name(),
                           overlap_plan.spec_for(a, b, None, d_overlap).name()]}
        rows.append(row)
        print(f"  {m:5d}x{n:5d}x{k:5d} {variant:10s} {tile:18s}: CUTLASS {tflops['cutlass']:7.1f}, overlapped "
              f"{tflops['overlap']:7.1f} ({row['overlap_vs_cutlass']:.3f}x), _scaled_mm {tflops['scaled_mm']:7.1f} "
              f"TFLOP/s; identical {identical}, vs _scaled_mm {err:.1e}")
    return rows


def main():
    parser = arguments(__doc__.splitlines()[0], "fp8-overlap.json", 5)
    parser.add_argument("--quick", action="store_true", help="M = 1024 only for the Llama shapes")
    parser.add_argument("--tiles", default="256x192x128_2x1x1,256x128x128_2x1x1,128x256x128_1x2x1,128x128x128_2x1x1")
    parser.add_argument("--variants", default="per_tensor,rowwise")
    args = parser.parse_args()
    tiles, variants = args.tiles.split(","), args.variants.split(",")
    cases = shapes(args.quick)
    plans = plans_for(tiles, variants, args.cc if args.prebuild_only else None)
    built = prebuild(every_plan(plans), cases)
    if args.prebuild_only:
        for kernel in built:  # key and name: tools/dev/carry-cache --keys takes these
            print(f"  {kernel.cache_key} {kernel.kernel_name}")
        return
    results = {**run_record(args.rounds), "rows": []}
    for group, m, n, k in cases:
        results["rows"].extend(measure(plans, group, m, n, k, args.rounds))
    for variant in variants:
        for tile in tiles:
            rows = [r for r in results["rows"] if r["variant"] == variant and r["tile"] == tile]
            summary = {key: geomean([r[key] for r in rows])
                       for key in ("overlap_vs_cutlass", "overlap_vs_scaled_mm", "cutlass_vs_scaled_mm")}
            results.setdefault("geomean", {})[f"{variant} {tile}"] = summary
            print(f"{variant} {tile}: geomean overlapped / CUTLASS {summary['overlap_vs_cutlass']:.3f}x, "
                  f"overlapped / _scaled_mm {summary['overlap_vs_scaled_mm']:.3f}x, CUTLASS / _scaled_mm "
                  f"{summary['cutlass_vs_scaled_mm']:.3f}x; bit-identical in "
                  f"{sum(r['bit_identical'] for r in rows)} of {len(rows)}")
    save(results, args.out)


if __name__ == "__main__":
    main()
