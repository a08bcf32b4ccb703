"""python/bench/fp8_epilogue.py: FP8 GEMMs with a fused activation, the activation compiled into the kernel against
the same kernel taking it at launch (one kernel for every activation), in one process on an SM90 GPU.

FP8 plans compile their activation in by default: their mainloop is about twice as fast as a 16-bit one, so the
epilogue is a larger part of the time, and the at-launch switch (one out-of-line call per fragment) was timed on
16-bit kernels only. This measures it where it matters: e4m3 A and B (fp8.py's operands), row-wise scale vectors,
D bf16, each activation, and one row with a per-column bias; both kernels of a row and the identity kernel are timed
interleaved (CUDA events after a warm-up, median of rounds) and their results compared bit for bit.
--prebuild-only --cc 90 compiles the kernels and prints their cache keys: no torch and no GPU needed.
Usage: python python/bench/fp8_epilogue.py [--out FILE] [--rounds N] [--shapes 8192x8192x8192,4096x4096x4096]
       python python/bench/fp8_epilogue.py --prebuild-only --cc 90 [--shapes ...]
"""
import statistics

from fp8 import arguments, geomean, operands, plan_for, prebuild, run_record, save, torch  # python/bench/fp8.py


ACTIVATIONS = ["relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh", "hardswish", "leaky_relu"]


def rows():
    """(label, activation, bias): each activation, then a per-column bias with gelu."""
    return [(a, a, "none") for a in ACTIVATIONS] + [("bias(column)+gelu", "gelu", "column")]


def plan(activation, bias, at_launch, cc=None):
    p = plan_for("rowwise", cc=cc)
    p.activation = activation
    p.bias = bias
    p.activation_at_launch = at_launch
    return p


def plans_for(cc=None):
    """{label: (whether it adds a bias, the compiled-in plan, the at-launch plan)}."""
    return {label: (bias != "none", plan(a, bias, False, cc), plan(a, bias, True, cc)) for label, a, bias in rows()}


def measure(identity, plans, m, n, k, rounds):
    from timing import median_ms  # python/bench/timing.py
    a, b, sa, sb, row_scale, column_scale = operands(m, n, k)
    rs, cs = row_scale * sa, column_scale * sb
    bias = torch.randn(n, device="cuda").to(torch.bfloat16)
    d = {name: torch.empty(m, n, device="cuda", dtype=torch.bfloat16) for name in ("identity", "in", "launch")}

    def call(p, out, with_bias):
        return lambda: p.run(a, b, None, out, 1.0, 0.0, sync=False, row_scale=rs, column_scale=cs,
                             bias=bias if with_bias else None)

    base = call(identity, d["identity"], False)
    out = []
    for label, (with_bias, compiled_in, at_launch) in plans.items():
        ours_in, ours_launch = call(compiled_in, d["in"], with_bias), call(at_launch, d["launch"], with_bias)
        ours_in()
        ours_launch()
        torch.cuda.synchronize()
        identical = bool(torch.equal(d["in"], d["launch"]))
        ms = {"identity": [], "in": [], "launch": []}
        for _ in range(rounds):  # interleaved
            ms["identity"].append(median_ms(base, 5))
            ms["in"].append(median_ms(ours_in, 5))
            ms["launch"].append(median_ms(ours_launch, 5))
        launch_vs_in = statistics.median(i / la for i, la in zip(ms["in"], ms["launch"]))
        in_vs_identity = statistics.median(i / x for i, x in zip(ms["identity"], ms["in"]))
        flops = 2.0 * m * n * k
        row = {"m": m, "n": n, "k": k, "epilogue": label,
               "compiled_in_tflops": flops / statistics.median(ms["in"]) / 1e9,
               "at_launch_tflops": flops / statistics.median(ms["launch"]) / 1e9,
               "at_launch_vs_compiled_in": launch_vs_in, "compiled_in_vs_identity": in_vs_identity,
               "bit_identical": identical,
               "kernels": [compiled_in.spec_for(a, b, None, d["in"]).name(),
                           at_launch.spec_for(a, b, None, d["launch"]).name()]}
        out.append(row)
        print(f"  {m}x{n}x{k} {label:18s}: compiled in {row['compiled_in_tflops']:7.1f} TFLOP/s "
              f"({in_vs_identity:.3f}x identity), at launch / compiled in {launch_vs_in:.3f}; identical {identical}")
    return out


def main():
    parser = arguments(__doc__.splitlines()[0], "fp8-epilogue.json", 5)
    parser.add_argument("--shapes", default="8192x8192x8192,4096x4096x4096")
    args = parser.parse_args()
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    identity = plan_for("rowwise", cc=args.cc if args.prebuild_only else None)
    plans = plans_for(args.cc if args.prebuild_only else None)
    every_plan = {"identity": identity}
    every_plan.update({f"{label} {how}": p for label, (_, compiled_in, at_launch) in plans.items()
                       for how, p in (("compiled in", compiled_in), ("at launch", at_launch))})
    if prebuild(every_plan, [("", m, n, k) for m, n, k in shapes], args.prebuild_only):
        return
    results = {**run_record(args.rounds), "rows": []}
    for m, n, k in shapes:
        results["rows"].extend(measure(identity, plans, m, n, k, args.rounds))
    ratios = [r["at_launch_vs_compiled_in"] for r in results["rows"]]
    results["geomean_at_launch_vs_compiled_in"] = geomean(ratios)
    print(f"at launch / compiled in: geomean {geomean(ratios):.3f}, range {min(ratios):.3f}-{max(ratios):.3f}; "
          f"bit-identical in {sum(r['bit_identical'] for r in results['rows'])} of {len(results['rows'])}")
    save(results, args.out)


if __name__ == "__main__":
    main()
