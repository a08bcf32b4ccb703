"""python/bench/torch_export.py: gemmkit's PyTorch export, measured on the GPU machine. Writes JSON (--out):
- the JIT build of an exported Gemm (gemmkit.emit.pytorch(..., jit=True)): with the kernel and gemmkit's torch glue
  cached (the usual case), and cold (a fresh kernel cache: nvcc builds the kernel while the glue builds);
- throughput of the exported extension's run against gemmkit's own run of the same kernel (and cuBLAS through
  torch.matmul) on 2400x3232x4096, 4096^3, 8192^3, 16384^3, f16 in and out, f32 accumulation: CUDA events around
  back-to-back calls, after a warm-up, median of interleaved repeats;
- host time per call at 128^3: gemmkit.torch.gemm (the custom op), the exported run, gemmkit's run, torch.matmul;
- the exported GroupedGemm (the reference's grouped walk-through: 50 f16 groups, M, N, K from {128, 256, 512, 1024},
  random.seed(2023)): its JIT build (cached and cold, as above), time per call with a sync after each (target
  <= 100 us) and back-to-back on CUDA events, against per-pair torch.matmul ([a @ b ...]), gemmkit's own
  GroupedGemm.run and gemmkit.torch.grouped_gemm (the custom op), whose overhead over the direct call is reported."""
import argparse
import datetime
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time

import torch

import gemmkit
import gemmkit.torch as gt
from grouped import host_us_per_call
from overhead import per_call_us
from timing import event_ms  # python/bench/timing.py

SHAPES = [(2400, 3232, 4096), (4096, 4096, 4096), (8192, 8192, 8192), (16384, 16384, 16384)]


def f16_plan() -> gemmkit.Gemm:
    return gemmkit.Gemm(element=torch.float16, layout="row", element_accumulator=torch.float32)


def f16_grouped_plan() -> gemmkit.GroupedGemm:
    return gemmkit.GroupedGemm(element=torch.float16, layout="row", element_accumulator=torch.float32)


PLANS = {"gemm": f16_plan, "grouped": f16_grouped_plan}


def jit_child(kind: str, sourcedir: str) -> None:
    """One cold export in this process (run with a fresh GEMMKIT_CACHE_DIR): prints its JitBuild."""
    plan = PLANS[kind]()
    start = time.perf_counter()
    module = gemmkit.emit.pytorch(plan.construct(), f"gk_bench_cold_{kind}", plan.cc, sourcedir, jit=True)
    build = module.gemmkit_build
    print(json.dumps({"total_s": time.perf_counter() - start, "kernel_cache_hit": build.kernel.cache_hit,
                      "kernel_build_s": build.kernel.build_seconds, "glue_build_s": build.glue_seconds,
                      "binding_build_s": build.binding_seconds, "kernel": module.kernel_name}))


def cold_jit_time(workdir: str, kind: str) -> dict:
    """An export in a fresh process and kernel cache: nvcc builds the kernel while the glue builds."""
    cold = subprocess.run([sys.executable, __file__, "--jit-child", kind, os.path.join(workdir, f"cold-{kind}")],
                          env=dict(os.environ, GEMMKIT_CACHE_DIR=os.path.join(workdir, f"cache-{kind}")),
                          capture_output=True, text=True, timeout=1800)
    if cold.returncode != 0:
        raise RuntimeError(f"the cold JIT build failed:\n{cold.stdout[-3000:]}\n{cold.stderr[-3000:]}")
    return json.loads(cold.stdout.splitlines()[-1])


def jit_times(workdir: str, kind: str = "gemm", cold: bool = True) -> dict:
    plan = PLANS[kind]()
    op = plan.construct()
    # Warm both caches of this process's cache folder, then time a fresh export: only its binding is compiled. The
    # warm-up is reported too: on a machine whose cache holds the kernel but not yet this kind's torch glue (once per
    # torch installation), it is the first export's time.
    start = time.perf_counter()
    warm = gemmkit.emit.pytorch(op, f"gk_bench_warm_{kind}", plan.cc, os.path.join(workdir, f"warm-{kind}"), jit=True)
    first = {"total_s": time.perf_counter() - start, "kernel_cache_hit": warm.gemmkit_build.kernel.cache_hit,
             "glue_build_s": warm.gemmkit_build.glue_seconds,
             "binding_build_s": warm.gemmkit_build.binding_seconds}
    start = time.perf_counter()
    module = gemmkit.emit.pytorch(op, f"gk_bench_cached_{kind}", plan.cc, os.path.join(workdir, f"cached-{kind}"),
                                  jit=True)
    cached = {"total_s": time.perf_counter() - start, "kernel_cache_hit": module.gemmkit_build.kernel.cache_hit,
              "glue_build_s": module.gemmkit_build.glue_seconds,
              "binding_build_s": module.gemmkit_build.binding_seconds}
    return {"first": first, "cached": cached, "cold": cold_jit_time(workdir, kind) if cold else None, "module": module,
            "op": op}


def throughput(module, op, warmup: int, repeats: int) -> list[dict]:
    plan = f16_plan()
    plan.tile_description = op.tile_description  # gemmkit's own run of exactly the exported kernel
    rows = []
    for m, n, k in SHAPES:
        A = torch.randn(m, k, device="cuda").half()
        B = torch.randn(k, n, device="cuda").half()
        D = torch.empty(m, n, device="cuda", dtype=torch.float16)
        variants = {
            "exported_run": lambda: module.run(A, B),
            "gemmkit_run": lambda: plan.run(A, B, None, D, sync=False),
            "torch_matmul": lambda: torch.matmul(A, B),
        }
        flop = 2.0 * m * n * k
        iterations = max(3, int(0.05 / (flop / 600e12)))  # ~50 ms of work per timed repeat
        for fn in variants.values():
            event_ms(fn, warmup)
        samples = {name: [] for name in variants}
        for _ in range(repeats):  # interleaved, so that clock and thermal drift hit every variant alike
            for name, fn in variants.items():
                samples[name].append(event_ms(fn, iterations))
        exported = module.run(A, B)
        plan.run(A, B, None, D)
        row = {"m": m, "n": n, "k": k, "iterations": iterations,
               "exported_equals_gemmkit": bool(torch.equal(exported, D))}
        for name, values in samples.items():
            ms = statistics.median(values)
            row[name] = {"ms": ms, "tflops": flop / ms / 1e9}
        row["exported_over_gemmkit"] = row["exported_run"]["tflops"] / row["gemmkit_run"]["tflops"]
        row["gemmkit_over_cublas"] = row["gemmkit_run"]["tflops"] / row["torch_matmul"]["tflops"]
        rows.append(row)
        print(json.dumps(row), flush=True)
        del A, B, D, exported
        torch.cuda.empty_cache()
    return rows


def overhead(module, iterations: int, repeats: int) -> dict:
    n = 128
    A, B = (torch.randn(n, n, device="cuda").half() for _ in range(2))
    D = torch.empty(n, n, device="cuda", dtype=torch.float16)
    plan = f16_plan()
    gt.gemm(A, B)
    plan.run(A, B, None, D)
    sync = torch.cuda.synchronize
    calls = {
        "gemmkit_torch_gemm": lambda: gt.gemm(A, B),
        "exported_run": lambda: module.run(A, B),
        "gemmkit_run": lambda: plan.run(A, B, None, D, sync=False),
        "torch_matmul": lambda: torch.matmul(A, B),
    }
    results = {f"{name}_launch_us": per_call_us(fn, iterations, repeats, sync) for name, fn in calls.items()}
    results["custom_op_minus_gemmkit_run_us"] = (results["gemmkit_torch_gemm_launch_us"] -
                                                 results["gemmkit_run_launch_us"])
    return results


def walkthrough_groups() -> tuple[list, list]:
    random.seed(2023)
    sizes = [128, 256, 512, 1024]
    shapes = [tuple(random.choice(sizes) for _ in range(3)) for _ in range(50)]
    As = [torch.randint(-3, 4, (m, k), device="cuda").half() for m, _, k in shapes]
    Bs = [torch.randint(-3, 4, (k, n), device="cuda").half() for _, n, k in shapes]
    return As, Bs


def grouped_walkthrough(module, iterations: int, repeats: int) -> dict:
    """The walk-through through the exported extension, against per-pair matmul, gemmkit's run and the custom op."""
    As, Bs = walkthrough_groups()
    plan = f16_grouped_plan()
    Ds = [torch.empty(a.shape[0], b.shape[1], device="cuda", dtype=torch.float16) for a, b in zip(As, Bs)]
    exported = module.run(As, Bs)
    plan.run(As, Bs, None, Ds)
    custom = gt.grouped_gemm(As, Bs)
    expected = [(a.float() @ b.float()).half() for a, b in zip(As, Bs)]
    exact = all(torch.equal(x, e) and torch.equal(y, e) and torch.equal(z, e)
                for x, y, z, e in zip(exported, Ds, custom, expected))
    calls = {
        "exported_run": lambda: module.run(As, Bs),
        "gemmkit_run": lambda: plan.run(As, Bs, None, Ds, sync=False),
        "gemmkit_torch_grouped_gemm": lambda: gt.grouped_gemm(As, Bs),
        "per_pair_torch_matmul": lambda: [a @ b for a, b in zip(As, Bs)],
    }
    results = {"groups": len(As), "gflop": sum(2 * a.shape[0] * a.shape[1] * b.shape[1] for a, b in zip(As, Bs)) / 1e9,
               "kernel": module.kernel_name, "exact": exact}
    for name, fn in calls.items():
        results[f"{name}_synced_us"] = host_us_per_call(fn, 100, repeats)
        results[f"{name}_gpu_us"] = event_ms(fn, 100) * 1e3  # back to back: the host may hide behind the GPU
        results[f"{name}_launch_us"] = per_call_us(fn, iterations, repeats, torch.cuda.synchronize)
    results["custom_op_minus_gemmkit_run_us"] = (results["gemmkit_torch_grouped_gemm_launch_us"] -
                                                 results["gemmkit_run_launch_us"])
    # Where the exported run's host time goes: allocating its outputs alone (what torch.empty costs per group).
    shapes = [(a.shape[0], b.shape[1]) for a, b in zip(As, Bs)]
    allocate = lambda: [torch.empty(m, n, device="cuda", dtype=torch.float16) for m, n in shapes]  # noqa: E731
    results["allocate_outputs_launch_us"] = per_call_us(allocate, iterations, repeats, torch.cuda.synchronize)
    results["exported_meets_100us"] = results["exported_run_synced_us"] <= 100.0
    print(json.dumps({"grouped": results}), flush=True)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="torch-export.json")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--iterations", type=int, default=2000, help="calls per repeat of the 128^3 host timing")
    parser.add_argument("--only", choices=["gemm", "grouped"], help="one of the two exports (default: both)")
    parser.add_argument("--skip-cold", action="store_true", help="no cold JIT build (it compiles the kernel afresh)")
    parser.add_argument("--jit-child", nargs=2, metavar=("KIND", "SOURCEDIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.jit_child:
        jit_child(*args.jit_child)
        return 0
    jit, rows, host, grouped_results, op = {}, [], {}, {}, None
    with tempfile.TemporaryDirectory(prefix="gk-torch-bench-") as workdir:
        if args.only in (None, "gemm"):
            jit = jit_times(workdir, cold=not args.skip_cold)
            module, op = jit.pop("module"), jit.pop("op")
            print(json.dumps({"jit": jit}), flush=True)
            rows = throughput(module, op, args.warmup, args.repeats)
            host = overhead(module, args.iterations, 7)
        if args.only in (None, "grouped"):
            grouped_jit = jit_times(workdir, "grouped", cold=not args.skip_cold)
            grouped_module, grouped_op = grouped_jit.pop("module"), grouped_jit.pop("op")
            print(json.dumps({"grouped_jit": grouped_jit}), flush=True)
            grouped_results = {"kernel": grouped_op.name(), "jit_build_s": grouped_jit,
                               "walkthrough": grouped_walkthrough(grouped_module, 200, 7)}
    report = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(),
        "versions": {"gemmkit": gemmkit.__version__, "torch": torch.__version__, "cuda": torch.version.cuda,
                     "python": platform.python_version()},
        "kernel": op.name() if op is not None else None,
        "jit_build_s": jit,
        "throughput": rows,
        "host_us_128": host,
        "grouped": grouped_results,
        "method": "throughput: CUDA events around back-to-back calls (~50 ms per repeat), median of interleaved "
                  f"repeats after {args.warmup} warm-up calls; the exported run allocates D each call (as torch "
                  "ops do), gemmkit's run writes a preallocated D. Host time: mean per call over "
                  f"{args.iterations} calls without sync (one sync after the loop), median of 7 repeats. Grouped: "
                  "synced = wall time per call with a synchronize after each (100 calls, median of 7), gpu = CUDA "
                  "events around 100 back-to-back calls, launch = host time per call without sync (200 calls, "
                  "median of 7); per-pair matmul allocates its outputs as the exported run does.",
    }
    with open(args.out, "w") as f:
        json.dump(report, f, indent=2)
    print(json.dumps({k: report[k] for k in ("kernel", "jit_build_s", "host_us_128", "grouped")}, indent=2))
    exact = all(row["exported_equals_gemmkit"] for row in rows) and grouped_results.get("walkthrough", {}).get(
        "exact", True)
    return 0 if exact else 1  # speed is reported, not judged


if __name__ == "__main__":
    sys.exit(main())
