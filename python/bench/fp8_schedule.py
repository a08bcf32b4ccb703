"""python/bench/fp8_schedule.py: the tile scheduler's run-time options (raster order, swizzle) on gemmkit's FP8 loops,
against torch._scaled_mm, in one process on an SM90 GPU.

For each shape and scaling, the plan's own pick and the same plan pinned to each tile of --tiles (on gemmkit's loop for
that tile: column halves on 128 x 192, alternating K tiles on 128 x 128) run with every raster order (heuristic, along
M, along N) and every max swizzle of --swizzles (0: the size run() chooses per problem). Raster and swizzle are launch
arguments, so one kernel per tile serves them all. Everything is timed interleaved (CUDA events after a warm-up,
median of rounds), and each output is compared bit for bit with the plan's own pick: every loop promotes at the same
K steps, so tile, raster and swizzle must not change a bit.
--prebuild-only --cc 90 compiles the kernels and prints their cache keys: no torch and no GPU needed.
Usage: python python/bench/fp8_schedule.py [--out FILE] [--rounds N] [--shapes MxNxK,...] [--tiles T,...]
                                           [--swizzles 0,4,8] [--variants per_tensor,rowwise] [--element-c bf16,void]
"""
import itertools
import statistics

from fp8 import arguments, geomean, operands, plan_for, prebuild, run_record, save, torch  # python/bench/fp8.py

# The shapes where the default plans ran under 0.95x _scaled_mm on an H100 (2026-12-06), and two squares.
SHAPES = "8192x14336x4096,8192x8192x4096,1024x28672x8192,4096x4096x4096,8192x8192x8192"
TILES = ("256x192x128_2x1x1_0_tnt_align16_warpspecialized_cooperative_fp8overlap_,"
         "256x128x128_2x1x1_0_tnt_align16_warpspecialized_cooperative_fp8alternating_,"
         "128x256x128_1x2x1_0_tnt_align16_warpspecialized_cooperative_fp8alternating_")
RASTERS = ("Heuristic", "AlongM", "AlongN")


def plans_for(variants, tiles, element_cs, swizzles, cc=None):
    """{(variant, tile, raster, swizzle): plan}, one plan per option, so that a timed call only runs; tile "pick" is
    the plan as declared (run() chooses the configuration); a tile of a plan declared without C (element_C void: no C
    in the epilogue, so its shared memory goes to the mainloop) is prefixed "void C ". Every option runs with C None
    and beta 0."""
    out = {}
    for variant in variants:
        for element_c in element_cs:
            prefix = "void C " if element_c == "void" else ""
            for tile in ["pick"] + tiles:
                for raster, swizzle in itertools.product(RASTERS, swizzles):
                    plan = plan_for(variant, None if tile == "pick" else tile, cc=cc, element_c=element_c)
                    plan.raster_order = raster
                    plan.max_swizzle_size = swizzle
                    out[(variant, prefix + tile, raster, swizzle)] = plan
    return out


def measure(plans, m, n, k, rounds):
    from timing import median_ms  # python/bench/timing.py
    a, b, sa, sb, row_scale, column_scale = operands(m, n, k)
    rs, cs = row_scale * sa, column_scale * sb
    flops = 2.0 * m * n * k
    rows = []
    for variant in dict.fromkeys(key[0] for key in plans):
        if variant == "per_tensor":
            alpha, scales = float(sa * sb), {}

            def theirs():
                return torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)
        else:
            alpha, scales = 1.0, {"row_scale": rs, "column_scale": cs}

            def theirs():
                return torch._scaled_mm(a, b, rs.view(m, 1), cs.view(1, n), out_dtype=torch.bfloat16)
        calls, outputs, kernels = {"scaled_mm": theirs}, {}, {}
        for (v, tile, raster, swizzle), plan in plans.items():
            if v != variant:
                continue
            name = (tile, raster, swizzle)
            d = outputs[name] = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            kernels[name] = plan.spec_for(a, b, None, d).name()
            calls[name] = (lambda p, d: lambda: p.run(a, b, None, d, alpha, 0.0, sync=False, **scales))(plan, d)
        for call in calls.values():
            call()
        torch.cuda.synchronize()
        ms = {name: [] for name in calls}
        for _ in range(rounds):  # interleaved, so clocks and temperature treat all alike
            for name, call in calls.items():
                ms[name].append(median_ms(call, 5))
        tflops = {name: flops / statistics.median(values) / 1e9 for name, values in ms.items()}
        # The reference: the pick of the first C type, as run() chooses (outputs keep plans_for's order).
        pick_name = next(iter(outputs))
        first = outputs[pick_name]
        for name in outputs:
            tile, raster, swizzle = name
            rows.append({"m": m, "n": n, "k": k, "variant": variant, "tile": tile, "raster": raster,
                         "max_swizzle_size": swizzle, "kernel": kernels[name], "tflops": tflops[name],
                         "vs_scaled_mm": tflops[name] / tflops["scaled_mm"], "scaled_mm_tflops": tflops["scaled_mm"],
                         "bit_identical_to_pick": bool(torch.equal(outputs[name], first))})
        best = max((r for r in rows if r["variant"] == variant and r["m"] == m and r["n"] == n and r["k"] == k),
                   key=lambda r: r["tflops"])
        pick = next(r for r in rows if r["variant"] == variant and (r["m"], r["n"], r["k"]) == (m, n, k)
                    and (r["tile"], r["raster"], r["max_swizzle_size"]) == pick_name)
        print(f"  {m:5d}x{n:5d}x{k:5d} {variant:10s}: _scaled_mm {tflops['scaled_mm']:7.1f}, "
              f"pick {pick['tflops']:7.1f} ({pick['vs_scaled_mm']:.3f}x, {pick['kernel']}), "
              f"best {best['tflops']:7.1f} ({best['vs_scaled_mm']:.3f}x: {best['kernel']} raster {best['raster']} "
              f"swizzle {best['max_swizzle_size']})")
    return rows


def main():
    parser = arguments(__doc__.splitlines()[0], "fp8-schedule.json", 3)
    parser.add_argument("--shapes", default=SHAPES)
    parser.add_argument("--tiles", default=TILES, help="kernel-name fragments, as fp8.py --tile takes")
    parser.add_argument("--swizzles", default="0,4,8")
    parser.add_argument("--variants", default="per_tensor,rowwise")
    parser.add_argument("--element-c", default="bf16", help="the plans' C types, e.g. bf16,void")
    args = parser.parse_args()
    cases = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    swizzles = [int(s) for s in args.swizzles.split(",")]
    plans = plans_for(args.variants.split(","), args.tiles.split(","), args.element_c.split(","), swizzles,
                      args.cc if args.prebuild_only else None)
    # One kernel per tile: raster order and swizzle are launch arguments.
    every_plan = {f"{key[0]} {key[1]}": plan for key, plan in plans.items() if key[2:] == ("Heuristic", swizzles[0])}
    if prebuild(every_plan, [("", m, n, k) for m, n, k in cases], args.prebuild_only):
        return
    results = {**run_record(args.rounds), "rows": []}
    for m, n, k in cases:
        results["rows"].extend(measure(plans, m, n, k, args.rounds))
    # Per scaling: the geomean over shapes of the pick and of each shape's best option, against _scaled_mm.
    for variant in args.variants.split(","):
        rows = [r for r in results["rows"] if r["variant"] == variant]
        per_shape = {}
        for r in rows:
            per_shape.setdefault((r["m"], r["n"], r["k"]), []).append(r)
        pick = geomean([rs[0]["vs_scaled_mm"] for rs in per_shape.values()])  # each shape's first row: the pick
        best = geomean([max(r["vs_scaled_mm"] for r in rs) for rs in per_shape.values()])
        identical = sum(r["bit_identical_to_pick"] for r in rows)
        results.setdefault("geomean", {})[variant] = {"pick": pick, "best_option": best}
        print(f"{variant}: geomean against _scaled_mm, the plan's pick {pick:.3f}x, each shape's best option "
              f"{best:.3f}x; bit-identical to the pick in {identical} of {len(rows)}")
    save(results, args.out)


if __name__ == "__main__":
    main()
