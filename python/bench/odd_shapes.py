"""python/bench/odd_shapes.py: f16 and bf16 GEMMs whose leading dimensions are odd (torch tensors as they come), which a
default gemmkit plan runs on CUTLASS 2.x tensor-op kernels of a two-stage mainloop (element-by-element loads), against
torch.matmul in the same process.

For each shape: the kernel gemmkit picks, its time and torch's (CUDA events after a warm-up, median of rounds), and
whether D equals torch's product exactly on small-integer data (f32 accumulation of integers is exact). --tiles times
the two-stage kernel of each listed threadblock tile too (plans pinned to it); --stream-k each of those plans again
as CUTLASS 2.x's Stream-K kernel (the same mainloop; the output tiles' K iterations shared out over every SM, for
shapes of about one wave of tiles). Every kernel is compiled first, in parallel. Writes JSON to --out. With --once,
nothing is timed: each shape (--shapes MxNxK,... picks some) runs once per plan and once through torch.matmul between
cudaProfilerStart and Stop, for `ncu --profile-from-start off`.
Usage: python python/bench/odd_shapes.py [--out FILE] [--rounds N] [--dtypes f16,bf16] [--tiles 64x128,128x64,...]
                                         [--stream-k] [--shapes MxNxK,...] [--once]
       python python/bench/odd_shapes.py --prebuild-only --cc 90 [--tiles ...] [--stream-k]   (no GPU or torch)
"""
import argparse
import json
import os
import platform

os.environ.setdefault("GEMMKIT_WAIT_FOR_BEST", "1")  # time the kernel the shape asks for, not a stand-in

import gemmkit  # noqa: E402
from fp8 import compile_specs  # noqa: E402  (python/bench/fp8.py: compiles specs, lists them for carry-cache)

SHAPES = [(777, 1999, 3001), (1001, 1003, 1005), (4095, 4097, 4099), (8191, 8193, 1023)]
# Warps per threadblock tile of the two-stage table (src/families/sm80_universal.cpp, kSm80HalfScalar).
WARPS = {(128, 128): [2, 2, 1], (256, 128): [4, 2, 1], (128, 256): [2, 4, 1], (64, 128): [2, 2, 1],
         (128, 64): [2, 2, 1], (64, 64): [2, 2, 1]}


def plans_for(dtype_name, tiles, cc=90, stream_k=False):
    """{label: plan}: the default plan, and one pinned to each two-stage tile (2.x tensor-op kernels); with stream_k,
    each pinned plan and a default one on the 2.x kernels again with the Stream-K swizzle ("+streamk")."""
    plans = {"default": gemmkit.Gemm(element=dtype_name, element_accumulator="f32", layout="row", cc=cc)}
    for tile in tiles:
        m, n = (int(x) for x in tile.split("x"))
        plan = gemmkit.Gemm(element=dtype_name, element_accumulator="f32", layout="row", cc=cc, kernel_cc=80)
        td = plan.tile_descriptions()[0]
        td.threadblock_shape = [m, n, 32]
        td.warp_count = WARPS[(m, n)]
        td.stages = 2
        plan.tile_description = td
        plans[tile] = plan
    if stream_k:
        for label in ["default"] + tiles:
            plan = gemmkit.Gemm(element=dtype_name, element_accumulator="f32", layout="row", cc=cc, kernel_cc=80)
            if label != "default":
                plan.tile_description = plans[label].tile_description
            plan.swizzling_functor = gemmkit.swizzle.ThreadblockSwizzleStreamK
            plans[label + "+streamk"] = plan
    return plans


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="odd_shapes.json")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--dtypes", default="f16,bf16")
    parser.add_argument("--tiles", default="")
    parser.add_argument("--stream-k", action="store_true", help="also each plan on CUTLASS 2.x's Stream-K kernel")
    parser.add_argument("--shapes", default="", help="only these of the shapes, MxNxK comma-separated")
    parser.add_argument("--once", action="store_true", help="run each shape once per side for ncu, time nothing")
    parser.add_argument("--prebuild-only", action="store_true")
    parser.add_argument("--cc", type=int, default=90, help="the GPU's compute capability, for --prebuild-only")
    args = parser.parse_args()
    tiles = [t for t in args.tiles.split(",") if t]
    shapes = [s for s in SHAPES if not args.shapes or "x".join(map(str, s)) in args.shapes.split(",")]
    dtypes = args.dtypes.split(",")
    if args.prebuild_only:
        compile_specs([plan.spec_for_problem(m, n, k) for d in dtypes
                       for plan in plans_for(d, tiles, args.cc, args.stream_k).values() for m, n, k in shapes])
        return

    import torch

    from timing import median_ms, profile_once  # python/bench/timing.py

    rows = []
    for dtype_name in dtypes:
        dtype = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype_name]
        operands = []
        for m, n, k in shapes:
            a = torch.randint(-2, 3, (m, k), device="cuda").to(dtype)
            b = torch.randint(-2, 3, (k, n), device="cuda").to(dtype)
            operands.append((a, b, torch.empty(m, n, device="cuda", dtype=dtype)))
        plans = plans_for(dtype_name, tiles, torch.cuda.get_device_capability()[0] * 10, args.stream_k)
        gemmkit.compile_many([plan.spec_for(a, b, None, d, 0.0) for plan in plans.values() for a, b, d in operands])
        if args.once:
            for (m, n, k), (a, b, d) in zip(shapes, operands):
                print(f"{dtype_name} {m}x{n}x{k}: " + ", ".join(f"{label} {plan.spec_for(a, b, None, d, 0.0).name()}"
                                                                for label, plan in plans.items()) + ", then torch")
                profile_once([lambda plan=plan: plan.run(a, b, None, d, sync=False) for plan in plans.values()]
                             + [lambda: torch.matmul(a, b)])
            continue
        for (m, n, k), (a, b, d) in zip(shapes, operands):
            out = a @ b
            theirs = median_ms(lambda: torch.matmul(a, b, out=out), args.rounds)
            for label, plan in plans.items():
                plan.run(a, b, None, d)
                exact = torch.equal(d, (a.double() @ b.double()).to(dtype))
                ours = median_ms(lambda: plan.run(a, b, None, d, sync=False), args.rounds)
                rows.append(dict(dtype=dtype_name, plan=label, m=m, n=n, k=k,
                                 kernel=plan.spec_for(a, b, None, d, 0.0).name(), exact=exact, gemmkit_ms=ours,
                                 torch_ms=theirs, ratio=theirs / ours, gemmkit_tflops=2.0 * m * n * k / ours / 1e9))
                r = rows[-1]
                print(f"{dtype_name} {label} {m}x{n}x{k}: gemmkit {ours:.3f} ms ({r['gemmkit_tflops']:.1f} TFLOP/s), "
                      f"torch {theirs:.3f} ms, ratio {r['ratio']:.3f}, exact {exact}, {r['kernel']}")
    if args.once:
        return
    meta = dict(device=torch.cuda.get_device_name(), torch=torch.__version__, gemmkit=gemmkit.__version__,
                python=platform.python_version())
    with open(args.out, "w") as f:
        json.dump(dict(meta=meta, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
