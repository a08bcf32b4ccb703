"""python/bench/fp8_overlap.py: gemmkit's FP8 mainloops with the promotion overlapped against CUTLASS's FP8 mainloop on
the same tile, and all against torch._scaled_mm, in one process on an SM90 GPU.

For each tile (a kernel-name fragment: CTA tile times cluster, e.g. 256x192x128_2x1x1 is a 128x192 CTA in a 2x1
cluster) the plans are pinned to: the first listed configuration with that tile (CUTLASS's mainloop, the builders'
schedule: cooperative for 128-row CTAs, ping-pong for 64), and the same tile on each of gemmkit's loops that has it:
"halves" (TmaWarpSpecialized{Cooperative,Pingpong}FP8Overlap: column halves, every tile of the table) and
"alternating" (...FP8AlternatingPromotion: alternating K tiles, 64 x 128 per warp group only). The shapes and operands
are fp8.py's (e4m3, B as the transposed weight, D bf16; per-tensor scales in alpha, or row-wise scale vectors). All
are timed interleaved (CUDA events after a warm-up, median of rounds), and each gemmkit loop's result is compared bit
for bit with CUTLASS's: the promotion happens at the same K steps, so they should be identical.
--prebuild-only --cc 90 compiles the kernels and prints their cache keys: no torch and no GPU needed.
Usage: python python/bench/fp8_overlap.py [--out FILE] [--rounds N] [--quick] [--tiles 256x192x128_2x1x1,...]
                                          [--variants per_tensor,rowwise]
       python python/bench/fp8_overlap.py --prebuild-only --cc 90 [--tiles ...] [--variants ...]
"""
import statistics

from fp8 import arguments, geomean, operands, plan_for, prebuild, run_record, save, shapes, torch  # python/bench/fp8.py

LOOPS = {"halves": "fp8overlap", "alternating": "fp8alternating"}  # gemmkit's loops, by kernel-name suffix


def loop_plan(variant, tile, suffix, cc):
    """The tile on one of gemmkit's loops (the cooperative kernel for 128-row CTAs, ping-pong for 64), or None."""
    for kernel in ("cooperative", "pingpong"):
        try:
            return plan_for(variant, f"{tile}_0_tnt_align16_warpspecialized_{kernel}_{suffix}_", cc=cc)
        except SystemExit:
            continue
    return None


def plans_for(tiles, variants, cc=None):
    """{(variant, tile): {"cutlass": plan, "halves": plan, "alternating": plan}}, the loops the tile has."""
    out = {}
    for variant in variants:
        for tile in tiles:
            row = {"cutlass": plan_for(variant, tile + "_0_tnt_align16", cc=cc)}
            for loop, suffix in LOOPS.items():
                if (plan := loop_plan(variant, tile, suffix, cc)) is not None:
                    row[loop] = plan
            if len(row) == 1:
                raise SystemExit(f"--tiles {tile}: none of gemmkit's FP8 loops has it")
            out[(variant, tile)] = row
    return out


def every_plan(plans):
    """Every plan, as fp8.prebuild takes them."""
    return {f"{variant} {tile} {name}": plan for (variant, tile), row in plans.items() for name, plan in row.items()}


def measure(plans, group, m, n, k, rounds):
    from timing import median_ms  # python/bench/timing.py
    a, b, sa, sb, row_scale, column_scale = operands(m, n, k)
    rs, cs = row_scale * sa, column_scale * sb
    alpha = float(sa * sb)
    flops = 2.0 * m * n * k
    rows = []
    for (variant, tile), row_plans in plans.items():
        outputs = {name: torch.empty(m, n, device="cuda", dtype=torch.bfloat16) for name in row_plans}
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
        calls = {name: run(plan, outputs[name]) for name, plan in row_plans.items()}
        for call in calls.values():
            call()
        reference = theirs()
        torch.cuda.synchronize()
        calls["scaled_mm"] = theirs
        ms = {name: [] for name in calls}
        for _ in range(rounds):  # interleaved, so clocks and temperature treat all alike
            for name, call in calls.items():
                ms[name].append(median_ms(call, 5))
        tflops = {name: flops / statistics.median(values) / 1e9 for name, values in ms.items()}
        row = {"group": group, "m": m, "n": n, "k": k, "variant": variant, "tile": tile,
               "tflops": tflops, "cutlass_vs_scaled_mm": tflops["cutlass"] / tflops["scaled_mm"],
               "kernels": {name: plan.spec_for(a, b, None, outputs[name]).name() for name, plan in row_plans.items()}}
        text = []
        for loop in LOOPS:
            if loop not in row_plans:
                continue
            row[f"{loop}_vs_cutlass"] = tflops[loop] / tflops["cutlass"]
            row[f"{loop}_vs_scaled_mm"] = tflops[loop] / tflops["scaled_mm"]
            row[f"{loop}_bit_identical"] = bool(torch.equal(outputs[loop], outputs["cutlass"]))
            text.append(f"{loop} {tflops[loop]:7.1f} ({row[f'{loop}_vs_cutlass']:.3f}x, identical "
                        f"{row[f'{loop}_bit_identical']})")
        err = ((outputs["cutlass"].float() - reference.float()).abs().max() / reference.float().abs().max()).item()
        row["cutlass_max_relative_difference_vs_scaled_mm"] = err
        rows.append(row)
        print(f"  {m:5d}x{n:5d}x{k:5d} {variant:10s} {tile:18s}: CUTLASS {tflops['cutlass']:7.1f}, {', '.join(text)}, "
              f"_scaled_mm {tflops['scaled_mm']:7.1f} TFLOP/s")
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
    if prebuild(every_plan(plans), cases, args.prebuild_only):
        return
    results = {**run_record(args.rounds), "rows": []}
    for group, m, n, k in cases:
        results["rows"].extend(measure(plans, group, m, n, k, args.rounds))
    for (variant, tile), row_plans in plans.items():
        rows = [r for r in results["rows"] if r["variant"] == variant and r["tile"] == tile]
        summary = {"cutlass_vs_scaled_mm": geomean([r["cutlass_vs_scaled_mm"] for r in rows])}
        text = []
        for loop in LOOPS:
            if loop in row_plans:
                summary[f"{loop}_vs_cutlass"] = geomean([r[f"{loop}_vs_cutlass"] for r in rows])
                summary[f"{loop}_vs_scaled_mm"] = geomean([r[f"{loop}_vs_scaled_mm"] for r in rows])
                identical = sum(r[f"{loop}_bit_identical"] for r in rows)
                text.append(f"{loop} / CUTLASS {summary[f'{loop}_vs_cutlass']:.3f}x, / _scaled_mm "
                            f"{summary[f'{loop}_vs_scaled_mm']:.3f}x, bit-identical in {identical} of {len(rows)}")
        results.setdefault("geomean", {})[f"{variant} {tile}"] = summary
        print(f"{variant} {tile}: geomean CUTLASS / _scaled_mm {summary['cutlass_vs_scaled_mm']:.3f}x; "
              + "; ".join(text))
    save(results, args.out)


if __name__ == "__main__":
    main()
