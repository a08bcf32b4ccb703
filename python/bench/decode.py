"""python/bench/decode.py: decode-sized GEMMs (M of 1 to 16 rows against Llama-3 projection weights), where a call
moves the weights once and does little arithmetic, timed three ways against torch.matmul in the same process: a loop
of async launches under CUDA events (what the suite measures: the GPU's time or the host's, whichever is longer), a
CUDA-graph replay (the GPU's time alone) and the host time of one launch. Every result is checked against torch's.
The weights' bytes over the replay time give the memory bandwidth reached. Writes JSON to --out.

--variants times other kernels beside the default plan's (each against the same torch.matmul):
  default              the row-major plan as declared, run() choosing its kernel
  row:MxN:splitS       the row-major plan pinned to a Stream-K CTA tile M x N with S K slices added in the kernel
  swap:MxN:splitS      the transposed problem D^T = B^T A^T (a column-major plan on transposed views, the tokens
                       becoming the narrow N) on a Stream-K CTA tile M x N, S K slices added in the kernel
  swap:MxN:streamk     the same with Stream-K's own decomposition
  swap:MxN:dp          the transposed problem, data-parallel on a ping-pong CTA tile M x N (M = 64: one warp group
                       a tile); :dp:cX puts X CTAs along M in a cluster
  a last field :nd     Stream-K's nondeterministic reduction (the slices add in any order, each waiting only for the
                       first) instead of the deterministic one (each slice waits for the one before)
  a field :sN          N pipeline stages instead of as many as shared memory holds (e.g. swap:64x16:dp:c4:s12)
--profile adds each kernel's mean GPU time per call (torch.profiler), to split a variant's time between its kernels
(a kernel launched as a programmatic dependent starts early and waits: its time includes the wait).
--once runs each variant and torch.matmul once per shape between cudaProfilerStart and Stop, after a warm-up, and
times nothing: for `ncu --profile-from-start off --cache-control none` (the weights stay in L2, as in the loops).
Usage: python python/bench/decode.py [--shapes MxNxK,...] [--variants V,...] [--rounds N] [--profile] [--out FILE]
       python python/bench/decode.py --prebuild-only --cc 90 [--variants ...]   (compile; no GPU or torch needed)
"""
import argparse
import json
import os
import statistics
import time

os.environ.setdefault("GEMMKIT_WAIT_FOR_BEST", "1")  # time the kernel the shape asks for, not a stand-in

import gemmkit  # noqa: E402
from fp8 import prebuild  # noqa: E402  (python/bench/fp8.py: compiles the picks, lists them for carry-cache)

SHAPES = "1x4096x4096,8x4096x4096,16x4096x4096,16x14336x4096,16x4096x14336,16x8192x28672"
ITERATIONS = 100


def make_plan(cc=None, layout="row"):
    return gemmkit.Gemm(element="f16", element_accumulator="f32", layout=layout, cc=cc)


class Variant:
    """A way to run D = A @ B: a plan, whether it runs the transposed problem, and its K decomposition."""

    def __init__(self, text, cc=None):
        self.text = text
        self.swapped = text.startswith("swap:")
        if text == "default":
            self.plan = make_plan(cc)
            return
        form, tile, decomposition, *rest = text.split(":")
        stages = [int(f[1:]) for f in rest if f.startswith("s") and f[1:].isdigit()]
        reduction = [f for f in rest if not (f.startswith("s") and f[1:].isdigit())]
        if form not in ("row", "swap"):
            raise SystemExit(f"variant {text!r}: the form is row or swap")
        self.plan = make_plan(cc, "col" if self.swapped else "row")
        cta = [int(x) for x in tile.split("x")]
        # The plan's cooperative Stream-K entry of one CTA, reshaped: split-K on it adds the slices inside the kernel;
        # for dp its ping-pong entry.
        kind = "TmaWarpSpecializedPingpong" if decomposition == "dp" else "StreamK"
        td = next(t for t in self.plan.tile_descriptions()
                  if kind in str(t) and "Lean" not in str(t) and "NoSmem" not in str(t) and "[1, 1, 1]" in str(t))
        cluster = int(reduction[0].removeprefix("c")) if decomposition == "dp" and reduction else 1
        td.cluster_shape = [cluster, 1, 1]
        td.threadblock_shape = [cta[0] * cluster, cta[1], td.threadblock_shape[2]]
        if stages:
            td.stages = stages[0]
        self.plan.tile_description = td
        if decomposition == "dp":
            pass
        elif decomposition == "streamk":
            self.plan.decomposition = "StreamK"
        else:
            self.plan.set_split_k_slices(int(decomposition.removeprefix("split")))
        if reduction == ["nd"]:
            self.plan.reduction_mode = "Nondeterministic"

    def operands(self, A, B, D):
        """The plan's A, B and D: the transposed views where it runs D^T = B^T A^T."""
        return (B.t(), A.t(), D.t()) if self.swapped else (A, B, D)

    def problem(self, m, n, k):
        return (n, m, k) if self.swapped else (m, n, k)


def host_us(fn, iterations):
    """Mean host time (µs) of one call over `iterations` back-to-back calls, the queue drained first."""
    import torch

    torch.cuda.synchronize()
    start = time.perf_counter_ns()
    for _ in range(iterations):
        fn()
    elapsed = time.perf_counter_ns() - start
    torch.cuda.synchronize()
    return elapsed / iterations / 1e3


def kernel_us(fn, iterations=50):
    """{kernel name: mean µs per call} from torch.profiler over `iterations` calls."""
    import torch

    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(iterations):
            fn()
        torch.cuda.synchronize()
    times = {}
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            times[event.name] = times.get(event.name, 0.0) + event.device_time / iterations
    return times


def measure(variant, m, n, k, rounds, profile):
    import torch

    from timing import compare_graphs, event_ms

    torch.manual_seed(0)
    A = torch.randn(m, k, dtype=torch.float16, device="cuda")
    B = torch.randn(k, n, dtype=torch.float16, device="cuda") * 0.05
    D = torch.empty(m, n, dtype=torch.float16, device="cuda")
    a, b, d = variant.operands(A, B, D)
    plan = variant.plan
    ours = lambda: plan.run(a, b, None, d, 1.0, 0.0, sync=False)  # noqa: E731
    theirs = lambda: torch.matmul(A, B)  # noqa: E731
    ours()
    expected = torch.matmul(A, B).float()
    error = float((D.float() - expected).abs().max() / expected.abs().max())
    row = {"variant": variant.text, "m": m, "n": n, "k": k, "kernel": plan.spec_for(a, b, None, d).name(),
           "max_rel_error": error}
    loops = [(event_ms(ours, ITERATIONS), event_ms(theirs, ITERATIONS)) for _ in range(rounds)]
    row["loop_us"] = statistics.median(a for a, _ in loops) * 1e3
    row["torch_loop_us"] = statistics.median(b for _, b in loops) * 1e3
    graph_ours, graph_theirs = compare_graphs(ours, theirs, rounds, ITERATIONS)
    row["graph_us"], row["torch_graph_us"] = graph_ours * 1e3, graph_theirs * 1e3
    row["host_us"] = statistics.median(host_us(ours, ITERATIONS) for _ in range(rounds))
    row["torch_host_us"] = statistics.median(host_us(theirs, ITERATIONS) for _ in range(rounds))
    weights = k * n * 2
    row["graph_tb_s"] = weights / (row["graph_us"] * 1e-6) / 1e12
    row["torch_graph_tb_s"] = weights / (row["torch_graph_us"] * 1e-6) / 1e12
    row["loop_ratio"] = row["torch_loop_us"] / row["loop_us"]
    row["graph_ratio"] = row["torch_graph_us"] / row["graph_us"]
    print(f"{variant.text} {m}x{n}x{k}: loop {row['loop_us']:.1f} us (torch {row['torch_loop_us']:.1f}, "
          f"{row['loop_ratio']:.2f}x), graph {row['graph_us']:.1f} us (torch {row['torch_graph_us']:.1f}, "
          f"{row['graph_ratio']:.2f}x; {row['graph_tb_s']:.2f} against {row['torch_graph_tb_s']:.2f} TB/s of "
          f"weights), host {row['host_us']:.1f} us (torch {row['torch_host_us']:.1f}); max rel. error "
          f"{error:.1e}; {row['kernel'][-60:]}", flush=True)
    if profile:
        row["kernels_us"], row["torch_kernels_us"] = kernel_us(ours), kernel_us(theirs)
        for who, times in (("  ours", row["kernels_us"]), ("  torch", row["torch_kernels_us"])):
            print(who + ": " + "; ".join(f"{us:.2f} us {name[:90]}" for name, us in times.items()), flush=True)
    return row


def run_once(variants, shapes):
    import torch
    from timing import profile_once  # python/bench/timing.py (imports torch, which --prebuild-only does without)

    calls = []
    for m, n, k in shapes:
        A = torch.randn(m, k, dtype=torch.float16, device="cuda")
        B = torch.randn(k, n, dtype=torch.float16, device="cuda") * 0.05
        D = torch.empty(m, n, dtype=torch.float16, device="cuda")
        for variant in variants:
            a, b, d = variant.operands(A, B, D)
            calls.append(lambda plan=variant.plan, a=a, b=b, d=d: plan.run(a, b, None, d, 1.0, 0.0, sync=False))
        calls.append(lambda A=A, B=B: torch.matmul(A, B))
    profile_once(calls)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", default=SHAPES)
    parser.add_argument("--variants", default="default")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--once", action="store_true")
    parser.add_argument("--out", default="decode.json")
    parser.add_argument("--prebuild-only", action="store_true")
    parser.add_argument("--cc", type=int, default=None)
    args = parser.parse_args()
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    variants = [Variant(text, args.cc) for text in args.variants.split(",")]
    if args.prebuild_only:
        for variant in variants:
            prebuild({"f16": variant.plan}, [("decode",) + variant.problem(*shape) for shape in shapes], listing=True)
        return

    import torch

    if args.once:
        run_once(variants, shapes)
        return
    results = [measure(variant, m, n, k, args.rounds, args.profile) for m, n, k in shapes for variant in variants]
    for variant in variants:
        rows = [r for r in results if r["variant"] == variant.text]
        print(f"{variant.text}: geometric mean, graph replay: "
              f"{statistics.geometric_mean(r['graph_ratio'] for r in rows):.3f}x torch.matmul; launch loop: "
              f"{statistics.geometric_mean(r['loop_ratio'] for r in rows):.3f}x")
    with open(args.out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
