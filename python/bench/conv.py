"""python/bench/conv.py: gemmkit.Conv2d against cuDNN (torch.nn.functional.conv2d and torch.nn.grad's
conv2d_input / conv2d_weight, torch.backends.cudnn.benchmark on) in the same process, on the ResNet-50 conv layers
(torchvision's v1.5: the stride on the 3x3) at batch 32 and 128, f16, channels_last.

Each layer runs fprop (the issue's target: >= 0.9x cuDNN, geometric mean), dgrad and wgrad; results are checked
against cuDNN's (small integers: exact) before timing; times are CUDA-event medians of interleaved rounds. conv1
(3 input channels) is left out: gemmkit's f16 tensor-op kernels need channel counts that are multiples of 2 (the
reference's few-channels kernels are not built). --kernel-cc picks the gemmkit family: 80 (CUTLASS 2.x implicit GEMM,
the default, every layer) or 90 (CUTLASS 3.x with TMA im2col; the layers it refuses, strided dgrad, are reported as
refused and left out of its geometric means). Writes JSON to --out.
Usage: python python/bench/conv.py [--out FILE] [--batches 32,128] [--kinds fprop,dgrad,wgrad] [--rounds N]
       [--kernel-cc 80|90]
"""
import argparse
import json
import math
import platform
import statistics
import time

import torch

import gemmkit

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


def event_ms(fn, iterations):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iterations):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / iterations


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


def run_layer(kind, batch, layer, rounds, iterations, kernel_cc):
    name, hw, c, k, r, stride, pad = layer
    gen = torch.Generator().manual_seed(1)
    ints = lambda *shape: channels_last(torch.randint(-1, 2, shape, generator=gen).half().cuda())  # noqa: E731
    x, w = ints(batch, c, hw, hw), ints(k, c, r, r)
    args = dict(stride=stride, padding=pad)
    y_shape = torch.nn.functional.conv2d(x[:1], w, **args).shape
    dy = ints(batch, k, y_shape[2], y_shape[3])
    plan = gemmkit.Conv2d(kind=kind, element=torch.float16, element_accumulator=torch.float32, kernel_cc=kernel_cc)
    if kind == "fprop":
        out = channels_last(torch.empty(batch, k, y_shape[2], y_shape[3], dtype=torch.half, device="cuda"))
        ours = lambda: plan.run(x, w, None, out, sync=False, **args)  # noqa: E731
        theirs = lambda: torch.nn.functional.conv2d(x, w, **args)  # noqa: E731
    elif kind == "dgrad":
        out = torch.empty_like(x)
        ours = lambda: plan.run(dy, w, None, out, sync=False, **args)  # noqa: E731
        theirs = lambda: torch.nn.grad.conv2d_input(x.shape, w, dy, **args)  # noqa: E731
    else:
        out = torch.empty_like(w)
        ours = lambda: plan.run(dy, x, None, out, sync=False, **args)  # noqa: E731
        theirs = lambda: torch.nn.grad.conv2d_weight(x, w.shape, dy, **args)  # noqa: E731
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
    ms_ours, ms_theirs = compare(ours, theirs, rounds, iterations)
    flops = 2.0 * batch * y_shape[2] * y_shape[3] * k * c * r * r
    return {"layer": name, "kind": kind, "batch": batch, "kernel_cc": kernel_cc, "kernel": spec.name(),
            "first_run_s": first_s,
            "matches_cudnn": bool(exact), "gemmkit_ms": ms_ours, "cudnn_ms": ms_theirs,
            "gemmkit_tflops": flops / ms_ours / 1e9, "cudnn_tflops": flops / ms_theirs / 1e9,
            "speedup": ms_theirs / ms_ours}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="conv_bench.json")
    parser.add_argument("--batches", default="32,128")
    parser.add_argument("--kinds", default="fprop,dgrad,wgrad")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--kernel-cc", type=int, choices=(80, 90), default=80,
                        help="gemmkit's conv family: 80 = CUTLASS 2.x, 90 = CUTLASS 3.x (TMA im2col, SM90 GPUs)")
    args = parser.parse_args()
    torch.backends.cudnn.benchmark = True
    results = []
    for kind in args.kinds.split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            for layer in RESNET50:
                row = run_layer(kind, batch, layer, args.rounds, args.iterations, args.kernel_cc)
                results.append(row)
                if "refused" in row:
                    print(f"{kind:5} b{batch:<4} {row['layer']:24} refused: {row['refused']}", flush=True)
                    continue
                print(f"{kind:5} b{batch:<4} {row['layer']:24} gemmkit {row['gemmkit_ms']:.3f} ms  cudnn "
                      f"{row['cudnn_ms']:.3f} ms  x{row['speedup']:.2f}  {'ok' if row['matches_cudnn'] else 'DIFF'}"
                      f"  {row['kernel']}", flush=True)
    summary = {}
    for kind in args.kinds.split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            rows = [r for r in results if r["kind"] == kind and r["batch"] == batch and "refused" not in r]
            gmean = math.exp(sum(math.log(r["speedup"]) for r in rows) / len(rows))
            summary[f"{kind}_b{batch}"] = gmean
            print(f"geometric mean speedup vs cuDNN, {kind} batch {batch}: {gmean:.3f}")
    with open(args.out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "cudnn": torch.backends.cudnn.version(), "python": platform.python_version(),
                   "kernel_cc": args.kernel_cc,
                   "summary": summary, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
