"""python/bench/overhead.py: host time of one plan.run on a cached kernel with torch device tensors (default
128^3 fp16), launch only (sync=False) and launch + sync, next to torch.matmul (+ torch.cuda.synchronize) in the
same process; --tiles adds other configurations of the plan. Writes JSON (--out). Run by tools/dev/python-gpu-check
on the GPU machine."""
import argparse
import datetime
import json
import platform
import statistics
import sys
import time

import gemmkit


def per_call_us(fn, iterations, repeats, after=None):
    """Median over `repeats` of the mean host time of one call (µs); `after` (a sync) runs outside the clock."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        for _ in range(iterations):
            fn()
        samples.append((time.perf_counter_ns() - start) / iterations / 1e3)
        if after is not None:
            after()
    return statistics.median(samples)


def interleaved_us(cases, iterations, repeats):
    """per_call_us for several cases {name: (fn, after)}, timed round-robin (each repeat times every case once), so
    that no case is favoured by coming first (clocks ramping, caches warming) or last."""
    samples = {name: [] for name in cases}
    for _ in range(repeats):
        for name, (fn, after) in cases.items():
            samples[name].append(per_call_us(fn, iterations, 1, after))
    return {name: statistics.median(values) for name, values in samples.items()}


def conv_plan(cc=None):
    return gemmkit.Conv2d(kind="fprop", element="f16", element_accumulator="f32", cc=cc)


CONV_CASES = {"conv1x1": (1, 0), "conv3x3": (3, 1)}  # (filter size, padding) on 1 x 64 x 8 x 8, 64 filters


def conv_operands(size, as_torch):
    """x (NHWC), w (KRSC) and y of a tiny fprop: channels_last torch tensors, or numpy stand-ins (prebuilding)."""
    if not as_torch:
        import numpy as np
        return np.empty((1, 8, 8, 64), np.float16), np.empty((64, size, size, 64), np.float16), np.empty(
            (1, 8, 8, 64), np.float16)
    import torch
    last = dict(memory_format=torch.channels_last)
    x = torch.randint(-1, 2, (1, 64, 8, 8), device="cuda").half().contiguous(**last)
    w = torch.randint(-1, 2, (64, 64, size, size), device="cuda").half().contiguous(**last)
    return x, w, torch.empty(1, 64, 8, 8, device="cuda").half().contiguous(**last)


def conv_overheads(it, rep, sync):
    """Host time of Conv2d.run on tiny layers next to torch.nn.functional.conv2d: a 1x1 conv runs a GEMM kernel
    through the pointwise path, a 3x3 the conv kernel; both with the Python wrapper's geometry arguments."""
    import torch
    out = {}
    for name, (size, padding) in CONV_CASES.items():
        plan = conv_plan()
        x, w, y = conv_operands(size, True)
        plan.run(x, w, None, y, padding=padding)
        out[f"{name}_gemmkit_run_launch_us"] = per_call_us(
            lambda: plan.run(x, w, None, y, padding=padding, sync=False), it, rep, sync)
        out[f"{name}_torch_conv2d_launch_us"] = per_call_us(
            lambda: torch.nn.functional.conv2d(x, w, padding=padding), it, rep, sync)
    return out


def prebuild_conv(cc):
    """Compiles the conv cases' kernels for GPUs of compute capability cc (numpy stand-ins: no GPU needed)."""
    specs = []
    for size, padding in CONV_CASES.values():
        x, w, y = conv_operands(size, False)
        specs.append(conv_plan(cc).spec_for(x, w, None, y, padding=padding))
    gemmkit.compile_many(specs)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", default="python-overhead.json")
    parser.add_argument("--tiles", default="",
                        help="comma-separated indices into plan.tile_descriptions(): also time run() with those "
                             "configurations (smaller tiles finish a small problem sooner)")
    parser.add_argument("--prebuild-only", action="store_true",
                        help="compile the conv cases' kernels for --cc and stop (no GPU or torch needed)")
    parser.add_argument("--cc", type=int, default=90)
    args = parser.parse_args()
    if args.prebuild_only:
        prebuild_conv(args.cc)
        return 0
    import torch
    n = args.size
    torch.manual_seed(0)
    A, B, C = (torch.randn(n, n, device="cuda").half() for _ in range(3))
    D = torch.empty(n, n, dtype=torch.float16, device="cuda")
    plan = gemmkit.Gemm(element=torch.float16, layout=gemmkit.LayoutType.RowMajor, element_accumulator=torch.float32)
    tiled_plans = {}
    for index in (int(i) for i in args.tiles.split(",") if i):
        tiled = gemmkit.Gemm(element=torch.float16, layout=gemmkit.LayoutType.RowMajor,
                             element_accumulator=torch.float32)
        tiled.tile_description = tiled.tile_descriptions()[index]
        tiled_plans[index] = tiled
    gemmkit.compile_many([p.spec() for p in [plan, *tiled_plans.values()]])  # in parallel, before any timing
    plan.run(A, B, C, D, 1.0, 0.0)  # load once; everything below is the cached path
    torch.cuda.synchronize()
    reference = (A.float() @ B.float()).half()
    max_error = float((D.float() - reference.float()).abs().max())
    stream = gemmkit._gemmkit.default_stream(D)
    sync = torch.cuda.synchronize
    it, rep = args.iterations, args.repeats
    # (fn, after): `after` (a sync) runs outside the clock.
    cases = {
        "gemmkit_run_launch_us": (lambda: plan.run(A, B, C, D, 1.0, 0.0, sync=False), sync),
        "gemmkit_run_sync_us": (lambda: plan.run(A, B, C, D, 1.0, 0.0), None),
        "torch_matmul_launch_us": (lambda: torch.matmul(A, B), sync),
        "torch_matmul_sync_us": (lambda: (torch.matmul(A, B), sync()), None),
        # Where gemmkit's time goes: the extension's run without the Python wrapper (stream given, then found in C++:
        # torch's current stream), the wrapper with the stream given, the four tensor imports, the stream lookup
        # alone, and the choice of kernel alone (tensor checks and run()'s tile choice, no launch).
        "gemmkit_extension_run_launch_us": (
            lambda: gemmkit._gemmkit.Gemm.run(plan, A, B, C, D, 1.0, 0.0, stream, False), sync),
        "gemmkit_extension_run_default_stream_launch_us": (
            lambda: gemmkit._gemmkit.Gemm.run(plan, A, B, C, D, 1.0, 0.0, None, False), sync),
        "gemmkit_run_given_stream_launch_us": (
            lambda: plan.run(A, B, C, D, 1.0, 0.0, sync=False, stream=stream), sync),
        "tensor_view_x4_us": (lambda: [gemmkit.tensor_view(t) for t in (A, B, C, D)], None),
        "default_stream_us": (lambda: gemmkit._gemmkit.default_stream(D), None),
        "spec_for_us": (lambda: gemmkit._gemmkit.Gemm.spec_for(plan, A, B, C, D, 0.0), None),
    }
    results = interleaved_us(cases, it, rep)
    results.update(conv_overheads(it, rep, sync))
    tiles = {}
    for index, tiled in tiled_plans.items():
        tiled.run(A, B, C, D, 1.0, 0.0)
        torch.cuda.synchronize()
        tiles[tiled.kernel_name()] = {
            "tile_index": index,
            "max_abs_error_vs_torch": float((D.float() - reference.float()).abs().max()),
            "run_launch_us": per_call_us(lambda: tiled.run(A, B, C, D, 1.0, 0.0, sync=False), it, rep, sync),
            "run_sync_us": per_call_us(lambda: tiled.run(A, B, C, D, 1.0, 0.0), it, rep),
        }
        max_error = max(max_error, tiles[tiled.kernel_name()]["max_abs_error_vs_torch"])
    report = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(),
        "versions": {"gemmkit": gemmkit.__version__, "torch": torch.__version__, "cuda": torch.version.cuda,
                     "python": platform.python_version()},
        "problem": {"m": n, "n": n, "k": n, "dtype": "f16", "accumulator": "f32", "tensors": "torch cuda"},
        "kernel": plan.kernel_name(),
        "max_abs_error_vs_torch": max_error,
        "method": f"host time per call, mean over {it} calls, median of {rep} repeats (the GEMM cases interleaved: "
                  "each repeat times every case once); *_launch: no sync in the loop (one sync after it, outside the "
                  "clock); *_sync: gemmkit syncs its stream, torch runs torch.cuda.synchronize()",
        "results_us": results,
        "other_configurations": tiles,
    }
    with open(args.out, "w") as f:
        json.dump(report, f, indent=2)
    print(json.dumps(report, indent=2))
    return 0 if max_error <= 0.25 else 1


if __name__ == "__main__":
    sys.exit(main())
