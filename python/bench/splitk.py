"""python/bench/splitk.py: how K should be split on SM90 Stream-K kernels, per shape (the long-K and small-M
shapes). For each shape: the plan's own choice, then every Stream-K configuration of the default f16 plan with each
decomposition (data-parallel; split-K at 2, 4, 8, 16 slices; Stream-K) and each reduction mode (Deterministic: each
slice waits for the one before it; Nondeterministic: slices add their partial sums in arrival order), against
torch.matmul (cuBLASLt's heuristic) in the same run. Also an emulation of deterministic parallel split-K (what cuBLAS
runs on long K): a batched GEMM writing each K slice's f32 partial sums, then torch.sum and a copy to f16. Times are
medians of CUDA-graph replays interleaved with torch's (the GPU's time alone); every configuration's result is
checked against torch's. Writes JSON to --out.
Usage: python python/bench/splitk.py [--shapes MxNxK,...] [--rounds N] [--out FILE]
       python python/bench/splitk.py --prebuild-only --cc 90   (compile the kernels; no GPU or torch needed)
       --partials-only leaves out the Stream-K sweep.
"""
import argparse
import json
import os

os.environ.setdefault("GEMMKIT_WAIT_FOR_BEST", "1")  # time the kernel the shape asks for, not a stand-in

import gemmkit  # noqa: E402

SHAPES = "512x512x16384,128x4096x4096,128x4096x14336,128x4096x16384,1024x1024x1024,3000x3000x3000,1024x1024x32768"
SLICES = (2, 4, 8, 16)


def make_plan(cc=None):
    return gemmkit.Gemm(element="f16", element_accumulator="f32", layout="row", cc=cc)


def stream_k_tiles(plan):
    return [td for td in plan.tile_descriptions() if td.tile_scheduler == gemmkit.TileSchedulerType.StreamK]


def variants(k, td):
    """(decomposition, slices, reduction) to time on one tile: slices leaving each at least 4 K steps."""
    k_steps = (k + td.threadblock_shape[2] - 1) // td.threadblock_shape[2]
    out = [(gemmkit.Decomposition.DataParallel, 1, gemmkit.ReductionMode.Deterministic)]
    for reduction in gemmkit.ReductionMode.__members__.values():
        out += [(gemmkit.Decomposition.SplitK, s, reduction) for s in SLICES if k_steps >= 4 * s]
        out.append((gemmkit.Decomposition.StreamK, 1, reduction))
    return out


def configure(plan, td, decomposition, slices, reduction):
    plan.tile_description = td
    plan.reduction_mode = reduction
    if decomposition == gemmkit.Decomposition.SplitK:
        plan.set_split_k_slices(slices)  # sets the SplitK decomposition with its count
    else:
        plan.decomposition = decomposition


def partials_plan(cc=None):
    """f16 operands, f32 output: each K slice's partial sums, as a batched GEMM writes them."""
    return gemmkit.Gemm(element_A="f16", element_B="f16", element_C="f32", element_D="f32",
                        element_accumulator="f32", layout="row", cc=cc)


def partials_views(xp, a, b, partials, slices):
    """A (m x k) and B (k x n) as batches of `slices` K slices (row-major: slice i starts i*k/s columns into A and
    i*k/s rows into B), and the f32 partial sums (slices x m x n)."""
    (m, k), n = a.shape, b.shape[1]
    step = k // slices
    size = a.itemsize if hasattr(a, "itemsize") else a.element_size()
    if xp is None:  # numpy stand-ins
        import numpy as np
        view = np.lib.stride_tricks.as_strided
        return (view(a, (slices, m, step), (step * size, k * size, size)),
                view(b, (slices, step, n), (step * n * size, n * size, size)), partials)
    return a.as_strided((slices, m, step), (step, k, 1)), b.as_strided((slices, step, n), (step * n, n, 1)), partials


def partials_tile(plan, text):
    """The first data-parallel configuration of `plan` with CTA tile and cluster "MxNxK/CMxCN" (e.g. 128x128x64/1x1)."""
    tile, cluster = text.split("/")
    shape = [int(x) for x in tile.split("x")]
    cl = [int(x) for x in cluster.split("x")]
    for td in plan.tile_descriptions():
        if (list(td.threadblock_shape) == shape and list(td.cluster_shape)[:2] == cl
                and td.tile_scheduler != gemmkit.TileSchedulerType.StreamK):
            return td
    raise SystemExit(f"no configuration {text} in the partials plan")


def parallel_slices(k):
    return [s for s in SLICES if k % s == 0 and (k // s) % 64 == 0]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", default=SHAPES)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--out", default="splitk.json")
    parser.add_argument("--prebuild-only", action="store_true")
    parser.add_argument("--partials-only", action="store_true",
                        help="time the plan's choice and the parallel-partials emulation, not the Stream-K sweep")
    parser.add_argument("--partials-tiles", default="",
                        help="comma-separated MxNxK/CMxCN configurations for the partial-sums GEMM besides run()'s "
                             "own choice (e.g. 128x128x64/1x1)")
    parser.add_argument("--cc", type=int, default=None, help="the GPU to pick kernels for (default: this one's)")
    args = parser.parse_args()
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]

    tiles = [] if args.partials_only else stream_k_tiles(make_plan(args.cc))
    # The plan's own choice per shape (numpy stand-ins: spec_for needs no GPU) and every Stream-K configuration.
    import numpy as np
    specs = [make_plan(args.cc).spec_for(np.empty((m, k), np.float16), np.empty((k, n), np.float16), None,
                                         np.empty((m, n), np.float16)) for m, n, k in shapes]
    extra_tiles = [partials_tile(partials_plan(args.cc), t) for t in args.partials_tiles.split(",") if t]
    specs += [partials_plan(args.cc).construct(td) for td in extra_tiles]
    for m, n, k in shapes:  # the batched partial-sums GEMM of each slice count (run()'s own tile choice)
        for slices in parallel_slices(k):
            a, b = np.empty((m, k), np.float16), np.empty((k, n), np.float16)
            views = partials_views(None, a, b, np.empty((slices, m, n), np.float32), slices)
            specs.append(partials_plan(args.cc).spec_for(*views[:2], None, views[2]))
    gemmkit.compile_many(specs + [make_plan(args.cc).construct(td) for td in tiles])
    if args.prebuild_only:
        return

    import torch
    from timing import compare_graphs, event_ms  # python/bench/timing.py (imports torch)
    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": []}
    for m, n, k in shapes:
        a = torch.randint(-2, 3, (m, k), device="cuda").half()
        b = torch.randint(-2, 3, (k, n), device="cuda").half()
        expected = a.float() @ b.float()
        d = torch.empty(m, n, device="cuda", dtype=torch.half)
        flops = 2.0 * m * n * k

        def timed(run):
            run()
            torch.cuda.synchronize()
            error = (d.float() - expected).abs().max().item() / max(1.0, expected.abs().max().item())
            # CUDA-graph replays: the GPU's time alone (several launches from Python per call would time the host).
            o, t = compare_graphs(run, lambda: torch.matmul(a, b), args.rounds, args.iterations)
            return {"ms": o, "cublas_ms": t, "ratio": t / o, "tflops": flops / o / 1e9, "max_rel_error": error}

        event_ms(lambda: torch.matmul(a, b), 200)  # clocks up before the first row
        default = make_plan()
        row = {"shape": [m, n, k], "default": timed(lambda: default.run(a, b, None, d, sync=False)),
               "default_kernel": default.spec_for(a, b, None, d).procedural_name(), "configs": []}
        print(f"{m}x{n}x{k} default {row['default']['ratio']:.3f}x ({row['default_kernel']})", flush=True)
        for td in tiles:
            for decomposition, slices, reduction in variants(k, td):
                sweep = make_plan()
                configure(sweep, td, decomposition, slices, reduction)
                entry = timed(lambda: sweep.run(a, b, None, d, sync=False))
                entry.update(tile=list(td.threadblock_shape), cluster=list(td.cluster_shape),
                             decomposition=decomposition.name, slices=slices, reduction=reduction.name)
                row["configs"].append(entry)
                print(f"  {entry['tile']} {entry['cluster']} {decomposition.name} {slices} {reduction.name}: "
                      f"{entry['ms']:.4f} ms, {entry['ratio']:.3f}x, err {entry['max_rel_error']:.1e}", flush=True)
        # Deterministic parallel split-K as cuBLAS does it, emulated: a batched GEMM writes each slice's f32 partial
        # sums, then torch.sum adds them in slice order and a copy converts to f16 (two kernels where one reduction
        # kernel with the epilogue would do: an upper bound on that design's time).
        for slices in parallel_slices(k):
            partials = torch.empty(slices, m, n, device="cuda", dtype=torch.float32)
            total = torch.empty(m, n, device="cuda", dtype=torch.float32)
            pa, pb, _ = partials_views(torch, a, b, partials, slices)
            for td in [None, *extra_tiles]:
                batched = partials_plan()
                if td is not None:
                    batched.tile_description = td

                def parallel():
                    batched.run(pa, pb, None, partials, sync=False)
                    torch.sum(partials, 0, out=total)
                    d.copy_(total)  # the conversion to f16 (a real reduction kernel fuses it)
                entry = timed(parallel)
                # The partial-sums GEMM alone: what a fused reduction kernel would add to.
                entry["gemm_only_ms"] = compare_graphs(lambda: batched.run(pa, pb, None, partials, sync=False),
                                                       lambda: torch.matmul(a, b), args.rounds, args.iterations)[0]
                entry.update(decomposition="ParallelPartials", slices=slices, reduction="InOrder",
                             kernel=batched.spec_for(pa, pb, None, partials).procedural_name())
                row["configs"].append(entry)
                print(f"  parallel partials x{slices} ({entry['kernel']}) + torch.sum: {entry['ms']:.4f} ms "
                      f"(GEMM alone {entry['gemm_only_ms']:.4f}), {entry['ratio']:.3f}x, "
                      f"err {entry['max_rel_error']:.1e}", flush=True)
        best = max(row["configs"], key=lambda c: c["ratio"])
        print(f"  best {best['ratio']:.3f}x: {best}", flush=True)
        results["rows"].append(row)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
