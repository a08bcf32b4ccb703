"""python/bench/math_operation.py: f32 GEMMs by math operation, accuracy and speed, against cuBLAS in the same process.

For each square size, on uniform(-1, 1) f32 data: gemmkit's default f32 plan (tf32 tensor cores; CUTLASS 3.x on
SM90), its math_operation = multiply_add_fast_f32 (3xTF32, CUTLASS 2.x kernels), multiply_add_fast_bf16, the SIMT
f32 kernel, and torch.matmul with TF32 off (cuBLAS f32) and on (cuBLAS tf32). Error: max |D - ref| / max |ref| against
a float64 product on the GPU. Time: CUDA events after a warm-up, median of rounds. Every gemmkit kernel is compiled
first, in parallel. Writes JSON to --out.
Usage: python python/bench/math_operation.py [--out FILE] [--sizes 1024,4096] [--rounds N]
"""
import argparse
import json
import os
import platform

os.environ.setdefault("GEMMKIT_WAIT_FOR_BEST", "1")  # time the kernel the shape asks for, not a stand-in

import torch  # noqa: E402

import gemmkit  # noqa: E402
from timing import median_ms  # noqa: E402  (python/bench/timing.py)

VARIANTS = {
    "tf32 (default)": dict(),
    "3xTF32 (fast_f32)": dict(math_operation="multiply_add_fast_f32"),
    "fast_bf16": dict(math_operation="multiply_add_fast_bf16"),
    "SIMT f32": dict(opclass="simt"),
}


def plan(variant):
    p = gemmkit.Gemm(element=torch.float32, layout=gemmkit.LayoutType.RowMajor)
    for name, value in VARIANTS[variant].items():
        setattr(p, name, value)
    return p


def error(d, ref):
    return ((d.double() - ref).abs().max() / ref.abs().max()).item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="math_operation.json")
    parser.add_argument("--sizes", default="1024,4096,8192")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    torch.manual_seed(0)
    plans = {variant: plan(variant) for variant in VARIANTS}
    specs = []
    for n in sizes:
        a = torch.empty(n, n, device="cuda").uniform_(-1, 1)
        specs += [p.spec_for(a, a, None, a, 0.0) for p in plans.values()]
    gemmkit.compile_many(specs)
    rows = []
    for n in sizes:
        a = torch.empty(n, n, device="cuda").uniform_(-1, 1)
        b = torch.empty(n, n, device="cuda").uniform_(-1, 1)
        ref = a.double() @ b.double()
        d = torch.empty(n, n, device="cuda")
        flops = 2.0 * n ** 3
        for variant, p in plans.items():
            p.run(a, b, None, d, 1.0, 0.0)
            torch.cuda.synchronize()
            ms = median_ms(lambda: p.run(a, b, None, d, 1.0, 0.0, sync=False), args.rounds)
            rows.append(dict(size=n, library="gemmkit", variant=variant, kernel=p.spec_for(a, b, None, d, 0.0).name(),
                             error=error(d, ref), ms=ms, tflops=flops / ms / 1e9))
        for variant, tf32 in (("cuBLAS f32", False), ("cuBLAS tf32", True)):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            out = a @ b
            ms = median_ms(lambda: torch.matmul(a, b, out=out), args.rounds)
            rows.append(dict(size=n, library="torch", variant=variant, kernel="", error=error(out, ref), ms=ms,
                             tflops=flops / ms / 1e9))
        torch.backends.cuda.matmul.allow_tf32 = False
    for r in rows:
        print(f"{r['size']:>6} {r['variant']:<18} {r['tflops']:8.1f} TFLOP/s  error {r['error']:.2e}  {r['kernel']}")
    meta = dict(device=torch.cuda.get_device_name(), torch=torch.__version__, gemmkit=gemmkit.__version__,
                python=platform.python_version())
    with open(args.out, "w") as f:
        json.dump(dict(meta=meta, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
