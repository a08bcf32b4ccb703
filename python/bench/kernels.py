"""python/bench/kernels.py: which GPU kernels one call runs, and how long each takes, for gemmkit's default plan and
for torch.matmul (cuBLASLt) on the same f16 problem: torch.profiler's CUDA activity (CUPTI) over repeated calls,
after a warm-up. Answers what a ratio in the suite is made of: a split-K GEMM and its reduction kernel, the gap
between them, or cuBLAS's own split. --fp8: e4m3 operands with a per-tensor scale and bf16 D, against
torch._scaled_mm (fp8.py's plan and operands).
Usage: python python/bench/kernels.py [--shapes 512x512x16384,1024x1024x1024] [--calls 50] [--fp8]
"""
import argparse
import os
import statistics

os.environ.setdefault("GEMMKIT_WAIT_FOR_BEST", "1")  # profile the kernel the shape asks for, not a stand-in

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import fp8  # noqa: E402  (python/bench/fp8.py)
import gemmkit  # noqa: E402
from timing import event_ms  # noqa: E402  (python/bench/timing.py)


def kernel_table(fn, calls):
    """Per kernel name: launches per call and mean GPU microseconds per launch, in first-launch order; and the mean
    span per call from the first kernel's start to the last one's end."""
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    kernels.sort(key=lambda e: e.time_range.start)
    table = {}
    for e in kernels:
        table.setdefault(e.name, []).append(e.time_range.end - e.time_range.start)
    per_call = len(kernels) // calls
    spans = [kernels[i + per_call - 1].time_range.end - kernels[i].time_range.start
             for i in range(0, per_call * calls, per_call)] if per_call else []
    rows = [(name, len(times) / calls, statistics.mean(times)) for name, times in table.items()]
    return rows, statistics.median(spans) if spans else float("nan")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", default="512x512x16384,128x4096x4096,1024x1024x32768,1024x1024x1024,3000x3000x3000")
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--fp8", action="store_true", help="e4m3 -> bf16 with a per-tensor scale vs torch._scaled_mm")
    args = parser.parse_args()
    if args.fp8:
        plan = fp8.plan_for("none")
    else:
        plan = gemmkit.Gemm(element=torch.float16, layout="row", element_accumulator=torch.float32)
    for text in args.shapes.split(","):
        m, n, k = (int(x) for x in text.split("x"))
        if args.fp8:
            a, b, sa, sb, _, _ = fp8.operands(m, n, k)
            d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            alpha = float(sa * sb)
            ours = lambda: plan.run(a, b, None, d, alpha, 0.0, sync=False)  # noqa: E731
            theirs = lambda: torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)  # noqa: E731
        else:
            a = torch.randn(m, k, device="cuda", dtype=torch.float16)
            b = torch.randn(k, n, device="cuda", dtype=torch.float16)
            d = torch.empty(m, n, device="cuda", dtype=torch.float16)
            ours = lambda: plan.run(a, b, None, d, sync=False)  # noqa: E731
            theirs = lambda: torch.matmul(a, b)  # noqa: E731
        print(f"{m}x{n}x{k}: gemmkit {plan.spec_for(a, b, None, d).name()}")
        for who, fn in (("gemmkit", ours), ("cuBLAS", theirs)):
            rows, span = kernel_table(fn, args.calls)
            wall = event_ms(fn, 200) * 1000
            print(f"  {who}: {wall:.1f} us per call (CUDA events over 200 back-to-back calls), first kernel start to "
                  f"last kernel end {span:.1f} us")
            for name, count, us in rows:
                print(f"    {count:.0f} x {us:7.1f} us  {name[:150]}")


if __name__ == "__main__":
    main()
