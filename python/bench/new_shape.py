"""python/bench/new_shape.py: what a long-running process sees when a new shape class arrives. A default f16 plan
whose default kernel is built (and nothing else) runs each shape in a loop from the moment it first sees it; every
sample is the median of a few CUDA-event-timed calls, with the seconds since that first call. Where the shape wants a
configuration that is not built, run() launches a stand-in at once and compiles the wanted kernel in the background
(and, for a stand-in expected to be more than twice as slow, the wanted kernel's quick twin beside it): the samples
show when each arrives and how fast each runs. torch.matmul's time on the same shape is the yardstick. JSON to --out.
Usage: python python/bench/new_shape.py [--shapes MxNxK,...] [--seconds S] [--out FILE]
Run it against an empty or private cache (GEMMKIT_CACHE_DIR) so that nothing but the default kernel is built.
"""
import argparse
import json
import statistics
import time

import torch

import gemmkit
from timing import median_ms

SHAPES = "16x4096x4096,128x4096x14336"


def phases(samples, torch_ms):
    """Consecutive samples within 10 % of each other's time, as (from second, median ms, x torch)."""
    out = []
    for t, ms in samples:
        if out and abs(ms - out[-1]["ms"]) <= 0.1 * out[-1]["ms"]:
            out[-1]["times"].append(ms)
            out[-1]["ms"] = statistics.median(out[-1]["times"])
        else:
            out.append({"from_s": round(t, 1), "ms": ms, "times": [ms]})
    return [{"from_s": p["from_s"], "ms": round(p["ms"], 4), "samples": len(p["times"]),
             "vs_torch": round(torch_ms / p["ms"], 3)} for p in out]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=SHAPES)
    parser.add_argument("--seconds", type=float, default=60.0, help="how long each shape is watched")
    parser.add_argument("--out", default="new-shape.json")
    args = parser.parse_args()

    plan = gemmkit.Gemm(element="f16", element_accumulator="f32", layout="row")
    start = time.perf_counter()
    compiled = plan.compile()  # the default kernel, as a process that has run other shapes has it
    print(f"default kernel {compiled.kernel_name}: {'cache hit' if compiled.cache_hit else 'compiled'} in "
          f"{time.perf_counter() - start:.1f} s", flush=True)
    results = []
    for shape in args.shapes.split(","):
        m, n, k = (int(x) for x in shape.split("x"))
        A = torch.randint(-2, 3, (m, k), device="cuda", dtype=torch.float16)
        B = torch.randint(-2, 3, (k, n), device="cuda", dtype=torch.float16)
        D = torch.empty((m, n), device="cuda", dtype=torch.float16)
        torch_ms = median_ms(lambda: torch.matmul(A, B), 20)
        samples = []
        first = time.perf_counter()
        while time.perf_counter() - first < args.seconds:
            t = time.perf_counter() - first
            samples.append((t, median_ms(lambda: plan.run(A, B, None, D, 1.0, 0.0, sync=False), 5)))
            time.sleep(0.25)
        exact = torch.equal(D, torch.matmul(A, B))
        shape_phases = phases(samples, torch_ms)
        results.append({"shape": shape, "torch_ms": round(torch_ms, 4), "exact": exact, "phases": shape_phases})
        print(f"{shape}: torch {torch_ms:.4f} ms; D exact: {exact}", flush=True)
        for p in shape_phases:
            print(f"  from {p['from_s']:5.1f} s: {p['ms']:.4f} ms ({p['vs_torch']:.3f}x torch, {p['samples']} samples)",
                  flush=True)
        gemmkit.wait_for_background_compiles()
    with open(args.out, "w") as f:
        json.dump({"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
