"""python/bench/conv.py: gemmkit.Conv2d against cuDNN in the same process (torch.backends.cudnn.benchmark on), on
the ResNet-50 conv layers (torchvision's v1.5: the stride on the 3x3) at batch 32 and 128, f16, channels_last.

What is timed for cuDNN: fprop is torch.nn.functional.conv2d; dgrad and wgrad are
torch.ops.aten.convolution_backward(dy, x, w, ...) on the same channels_last tensors gemmkit reads, with output_mask
(True, False, False) for dgrad and (False, True, False) for wgrad: the call autograd makes, computing only the
asked-for gradient, into channels_last results. (torch.nn.grad.conv2d_input / conv2d_weight make the same call but
pass a stride-0 expanded placeholder for the tensor they do not need; calling it directly keeps both operands in the
memory format being measured.) gemmkit's time is plan.run(..., sync=False) on a cached kernel: its host checks, the
launch, and for a split wgrad the reduction kernel and the workspace allocation from gemmkit's stream-ordered pool.
Each pair is timed twice: as a loop of launches (what a Python caller sees; for small layers this is host-bound, on
both sides) and as the replay of a CUDA graph of the same calls (the GPU's time alone).

Each layer runs fprop (the issue's target: >= 0.9x cuDNN, geometric mean), dgrad and wgrad; results are checked
against cuDNN's (small integers: exact) before timing; times are CUDA-event medians of interleaved rounds. Every
kernel the layers will run is compiled first, in parallel (--no-prebuild: at each layer's first run). Each row
names gemmkit's kernel and the split-K it ran with (split_k_mode, split_k_slices: by default run() splits wgrad
problems whose output is under a wave of CTAs, in parallel; --split-k MODE:SLICES forces one for every layer). conv1
(3 input channels) is left out: gemmkit's f16 tensor-op kernels need channel counts that are multiples of 2 (the
reference's few-channels kernels are not built). --kernel-cc picks the gemmkit family (default: the plan's, 90 on an
SM90 GPU): 80 (CUTLASS 2.x implicit GEMM, every layer) or 90 (CUTLASS 3.x with TMA im2col; the layers it refuses,
strided dgrad, are reported as refused and left out of its geometric means). --sweep times every configuration the plan lists
(tile_descriptions()) on each layer instead of the default choice, and reports the best one per layer next to the
default's: what a better tile choice could gain. Writes JSON to --out.
Usage: python python/bench/conv.py [--out FILE] [--batches 32,128] [--kinds fprop,dgrad,wgrad] [--rounds N]
       [--kernel-cc 80|90] [--layers REGEX] [--split-k MODE:SLICES] [--no-prebuild]
       [--sweep [--stages 2,3] [--tiles REGEX]]
       python python/bench/conv.py --prebuild-only --cc 90 [...]   (fills the kernel cache; no GPU needed)
"""
import argparse
import json
import math
import os
import platform
import re
import statistics
import time

import numpy as np

os.environ.setdefault("GEMMKIT_WAIT_FOR_BEST", "1")  # time the kernel the layer asks for, not a stand-in
import gemmkit  # noqa: E402

try:
    import torch
    from timing import compare_graphs, event_ms  # python/bench/timing.py
except ImportError:  # --prebuild-only needs neither torch nor a GPU
    torch = None

# (name, H = W of the input, C, K, R = S, stride, padding)
RESNET50 = [
    ("res2_1x1_64_64", 56, 64, 64, 1, 1, 0),
    ("res2_3x3_64_64", 56, 64, 64, 3, 1, 1),
    ("res2_1x1_64_256", 56, 64, 256, 1, 1, 0),
    ("res2_1x1_256_64", 56, 256, 64, 1, 1, 0),
    ("res3_1x1_256_128", 56, 256, 128, 1, 1, 0),
    ("res3_3x3_128_128_s2", 56, 128, 128, 3, 2, 1),
    ("res3_1x1_128_512", 28, 128, 512, 1, 1, 0),
    ("res3_down_256_512_s2", 56, 256, 512, 1, 2, 0),
    ("res3_1x1_512_128", 28, 512, 128, 1, 1, 0),
    ("res3_3x3_128_128", 28, 128, 128, 3, 1, 1),
    ("res4_1x1_512_256", 28, 512, 256, 1, 1, 0),
    ("res4_3x3_256_256_s2", 28, 256, 256, 3, 2, 1),
    ("res4_1x1_256_1024", 14, 256, 1024, 1, 1, 0),
    ("res4_down_512_1024_s2", 28, 512, 1024, 1, 2, 0),
    ("res4_1x1_1024_256", 14, 1024, 256, 1, 1, 0),
    ("res4_3x3_256_256", 14, 256, 256, 3, 1, 1),
    ("res5_1x1_1024_512", 14, 1024, 512, 1, 1, 0),
    ("res5_3x3_512_512_s2", 14, 512, 512, 3, 2, 1),
    ("res5_1x1_512_2048", 7, 512, 2048, 1, 1, 0),
    ("res5_down_1024_2048_s2", 14, 1024, 2048, 1, 2, 0),
    ("res5_1x1_2048_512", 7, 2048, 512, 1, 1, 0),
    ("res5_3x3_512_512", 7, 512, 512, 3, 1, 1),
]


def compare(ours, theirs, rounds, iterations):
    """Median ms of each, measured in interleaved rounds after a warm-up."""
    for fn in (ours, theirs):
        for _ in range(5):
            fn()
    torch.cuda.synchronize()
    a, b = [], []
    for _ in range(rounds):
        a.append(event_ms(ours, iterations))
        b.append(event_ms(theirs, iterations))
    return statistics.median(a), statistics.median(b)


def channels_last(t):
    return t.contiguous(memory_format=torch.channels_last)


def cudnn_backward(dy, x, w, stride, padding, mask):
    """cuDNN's dgrad (mask (True, False, False)) or wgrad ((False, True, False)) on these very tensors."""
    grads = torch.ops.aten.convolution_backward(dy, x, w, None, [stride, stride], [padding, padding], [1, 1], False,
                                                [0, 0], 1, mask)
    return grads[0] if mask[0] else grads[1]


def make_plan(kind, split_k, kernel_cc, tile=None, cc=None):
    plan = gemmkit.Conv2d(kind=kind, element="f16", element_accumulator="f32", kernel_cc=kernel_cc, cc=cc)
    if split_k is not None:
        plan.set_split_k(*split_k)
    if tile is not None:
        plan.tile_description = tile
    return plan


def with_stages(td, stages):
    return gemmkit.TileDescription(threadblock_shape=td.threadblock_shape, warp_count=td.warp_count, stages=stages,
                                   cluster_shape=td.cluster_shape, kernel_schedule=td.kernel_schedule,
                                   epilogue_schedule=td.epilogue_schedule, tile_scheduler=td.tile_scheduler)


def tile_text(td):
    """A configuration as --tiles matches it: CTA tile, cluster and stages, e.g. 128x64x64_1x1x1_2 (0: automatic)."""
    return f"{'x'.join(map(str, td.threadblock_shape))}_{'x'.join(map(str, td.cluster_shape))}_{td.stages}"


def tiles_of(kind, kernel_cc, sweep, stages=(), cc=None, tile_filter="."):
    """The configurations a layer is timed with: None (the plan's own choice), or with --sweep every one it lists,
    each also with the pipeline depths of --stages (fewer stages leave shared memory for more CTAs per SM, which a
    layer with a short K may need more than a deep pipeline)."""
    if not sweep:
        return [None]
    listed = make_plan(kind, None, kernel_cc, cc=cc).tile_descriptions()
    every = listed + [with_stages(td, n) for td in listed for n in stages if n != td.stages]
    return [td for td in every if re.search(tile_filter, tile_text(td))]


def prebuild(kinds, batches, layers, split_k, kernel_cc, sweep=False, stages=(), cc=None, tile_filter="."):
    """Compiles every kernel the timed layers will run, in parallel (gemmkit.compile_many), before any is timed:
    the split-K choice picks tiles per layer, and one nvcc after another would take minutes. The plans pick kernels
    from NHWC numpy stand-ins of the layers' shapes (a 1-element array strided to the full extents), so this part
    needs no GPU: --prebuild-only --cc 90 fills a cache on a build machine."""
    specs = []
    for kind in kinds:
        for batch in batches:
            for _, hw, c, k, r, stride, pad in layers:
                _, p, q, _ = gemmkit.Conv2d.output_size((batch, hw, hw, c), (k, r, r, c), pad, stride)
                x, w, y = nhwc(batch, hw, hw, c), nhwc(k, r, r, c), nhwc(batch, p, q, k)
                a, b, d = {"fprop": (x, w, y), "dgrad": (y, w, x), "wgrad": (y, x, w)}[kind]
                for tile in tiles_of(kind, kernel_cc, sweep, stages, cc, tile_filter):
                    try:
                        plan = make_plan(kind, split_k, kernel_cc, tile, cc)
                        specs.append(plan.spec_for(a, b, None, d, stride=stride, padding=pad))
                    except gemmkit.ConfigError:  # refused by the chosen family: run_layer reports it
                        pass
    start = time.perf_counter()
    built = gemmkit.compile_many(specs)
    misses = sum(not kernel.cache_hit for kernel in built)
    print(f"prebuild: {len(built)} kernels ({misses} built) in {time.perf_counter() - start:.1f} s", flush=True)


def nhwc(*shape):
    """A packed f16 NHWC array of `shape` with no memory behind it (spec_for reads only shapes, strides, addresses)."""
    strides = [int(np.prod(shape[i + 1:])) * 2 for i in range(4)]
    return np.lib.stride_tricks.as_strided(np.zeros(shape[-1:] or 1, np.float16), shape, strides)


def run_layer(kind, batch, layer, rounds, iterations, split_k=None, kernel_cc=None, tile=None):
    name, hw, c, k, r, stride, pad = layer
    gen = torch.Generator().manual_seed(1)
    ints = lambda *shape: channels_last(torch.randint(-1, 2, shape, generator=gen).half().cuda())  # noqa: E731
    x, w = ints(batch, c, hw, hw), ints(k, c, r, r)
    args = dict(stride=stride, padding=pad)
    y_shape = torch.nn.functional.conv2d(x[:1], w, **args).shape
    dy = ints(batch, k, y_shape[2], y_shape[3])
    plan = make_plan(kind, split_k, kernel_cc, tile)
    if kind == "fprop":
        out = channels_last(torch.empty(batch, k, y_shape[2], y_shape[3], dtype=torch.half, device="cuda"))
        ours = lambda: plan.run(x, w, None, out, sync=False, **args)  # noqa: E731
        theirs = lambda: torch.nn.functional.conv2d(x, w, **args)  # noqa: E731
    elif kind == "dgrad":
        out = torch.empty_like(x)
        ours = lambda: plan.run(dy, w, None, out, sync=False, **args)  # noqa: E731
        theirs = lambda: cudnn_backward(dy, x, w, stride, pad, [True, False, False])  # noqa: E731
    else:
        out = torch.empty_like(w)
        ours = lambda: plan.run(dy, x, None, out, sync=False, **args)  # noqa: E731
        theirs = lambda: cudnn_backward(dy, x, w, stride, pad, [False, True, False])  # noqa: E731
    operands = (x, w) if kind == "fprop" else (dy, w) if kind == "dgrad" else (dy, x)
    try:
        spec = plan.spec_for(*operands, None, out, **args)
    except gemmkit.ConfigError as e:  # what the chosen family does not run (e.g. strided dgrad on kernel_cc 90)
        return {"layer": name, "kind": kind, "batch": batch, "kernel_cc": kernel_cc, "refused": str(e)}
    start = time.perf_counter()
    ours()
    torch.cuda.synchronize()
    first_s = time.perf_counter() - start
    reference = theirs()
    # f16 outputs of integer sums: exact up to 2048, rounded alike above (both accumulate in f32).
    exact = torch.equal(out, reference)
    split_mode, split_slices = plan.split_k_for(*operands, None, out, **args)
    ms_ours, ms_theirs = compare(ours, theirs, rounds, iterations)
    graph_ours, graph_theirs = compare_graphs(ours, theirs, rounds, iterations)
    flops = 2.0 * batch * y_shape[2] * y_shape[3] * k * c * r * r
    return {"layer": name, "kind": kind, "batch": batch, "kernel_cc": kernel_cc, "kernel": spec.name(),
            "split_k_mode": split_mode.name, "split_k_slices": split_slices, "first_run_s": first_s,
            "matches_cudnn": bool(exact), "gemmkit_ms": ms_ours, "cudnn_ms": ms_theirs,
            "gemmkit_tflops": flops / ms_ours / 1e9, "cudnn_tflops": flops / ms_theirs / 1e9,
            "speedup": ms_theirs / ms_ours, "gemmkit_graph_ms": graph_ours, "cudnn_graph_ms": graph_theirs,
            "graph_speedup": graph_theirs / graph_ours}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="conv_bench.json")
    parser.add_argument("--batches", default="32,128")
    parser.add_argument("--kinds", default="fprop,dgrad,wgrad")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--kernel-cc", type=int, choices=(80, 90), default=None,
                        help="gemmkit's conv family: 80 = CUTLASS 2.x, 90 = CUTLASS 3.x (TMA im2col, SM90 GPUs); "
                        "default: the plan's (90 on an SM90 GPU)")
    parser.add_argument("--layers", default=".", help="only layers whose name this regular expression finds")
    parser.add_argument("--no-prebuild", action="store_true", help="compile each kernel at its layer's first run")
    parser.add_argument("--sweep", action="store_true", help="time every configuration of the plan on each layer")
    parser.add_argument("--stages", default="", help="with --sweep, also each configuration at these pipeline "
                        "depths, e.g. 2,3")
    parser.add_argument("--tiles", default=".", help="with --sweep, only configurations whose CTAxCLUSTER_STAGES "
                        "text (e.g. 128x64x64_1x1x1_2) this regular expression finds")
    parser.add_argument("--split-k", default=None, help="MODE:SLICES for every layer, e.g. parallel:16 or "
                        "serial:0 (0: run() counts); default: run() chooses")
    parser.add_argument("--prebuild-only", action="store_true", help="compile the kernels and stop (no GPU or torch "
                        "needed; with --cc on a machine without a GPU)")
    parser.add_argument("--cc", type=int, default=None, help="the GPU to pick kernels for (default: this one's)")
    args = parser.parse_args()
    split_k = None
    if args.split_k:
        mode, slices = args.split_k.split(":")
        split_k = (mode, int(slices))
    stages = [int(n) for n in args.stages.split(",")] if args.stages else []
    layers = [layer for layer in RESNET50 if re.search(args.layers, layer[0])]
    kinds, batches = args.kinds.split(","), [int(b) for b in args.batches.split(",")]
    if not args.no_prebuild:
        prebuild(kinds, batches, layers, split_k, args.kernel_cc, args.sweep, stages, args.cc, args.tiles)
    if args.prebuild_only:
        return
    torch.backends.cudnn.benchmark = True
    results = []
    for kind in kinds:
        for batch in batches:
            for layer in layers:
                rows = [run_layer(kind, batch, layer, args.rounds, args.iterations, split_k, args.kernel_cc, tile)
                        for tile in tiles_of(kind, args.kernel_cc, args.sweep, stages, tile_filter=args.tiles)]
                timed = [r for r in rows if "refused" not in r]
                if not timed:
                    results.append(rows[0])
                    print(f"{kind:5} b{batch:<4} {layer[0]:24} refused: {rows[0]['refused']}", flush=True)
                    continue
                row = max(timed, key=lambda r: r["speedup"])
                if args.sweep:  # the best configuration stands for the layer; every one is kept in the JSON
                    row = dict(row, swept=timed)
                results.append(row)
                split = f"{row['split_k_mode']} x{row['split_k_slices']}" if row["split_k_slices"] > 1 else "no split"
                print(f"{kind:5} b{batch:<4} {row['layer']:24} gemmkit {row['gemmkit_ms']:.3f} ms  cudnn "
                      f"{row['cudnn_ms']:.3f} ms  x{row['speedup']:.2f}  graphs {row['gemmkit_graph_ms']:.3f} / "
                      f"{row['cudnn_graph_ms']:.3f} ms x{row['graph_speedup']:.2f}  "
                      f"{'ok' if row['matches_cudnn'] else 'DIFF'}"
                      f"  {split:14} {row['kernel']}", flush=True)
    summary = {}
    for kind in kinds:
        for batch in batches:
            rows = [r for r in results if r["kind"] == kind and r["batch"] == batch and "refused" not in r]
            what = "best configuration per layer" if args.sweep else "gemmkit's choice"
            for key, timing in (("speedup", "launch loop"), ("graph_speedup", "graph replay")):
                gmean = math.exp(sum(math.log(r[key]) for r in rows) / len(rows))
                summary[f"{kind}_b{batch}" + ("_graph" if key == "graph_speedup" else "")] = gmean
                print(f"geometric mean speedup vs cuDNN, {kind} batch {batch} ({what}, {timing}): {gmean:.3f}")
    with open(args.out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "cudnn": torch.backends.cudnn.version(), "python": platform.python_version(),
                   "kernel_cc": args.kernel_cc, "sweep": args.sweep,
                   "summary": summary, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
