"""python/bench/odd_shapes.py: f16 and bf16 GEMMs whose leading dimensions are odd (torch tensors as they come), which a
default gemmkit plan runs on CUDA-core (SIMT) kernels, against torch.matmul in the same process.

For each shape: the kernel gemmkit picks, its time and torch's (CUDA events after a warm-up, median of rounds), and
whether D equals torch's product exactly on small-integer data (f32 accumulation of integers is exact). Every kernel
is compiled first, in parallel. Writes JSON to --out.
Usage: python python/bench/odd_shapes.py [--out FILE] [--rounds N]
"""
import argparse
import json
import os
import platform

os.environ.setdefault("GEMMKIT_WAIT_FOR_BEST", "1")  # time the kernel the shape asks for, not a stand-in

import torch  # noqa: E402

import gemmkit  # noqa: E402
from timing import median_ms  # noqa: E402  (python/bench/timing.py)

SHAPES = [(777, 1999, 3001), (1001, 1003, 1005), (4095, 4097, 4099), (8191, 8193, 1023)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="odd_shapes.json")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    rows = []
    for dtype in (torch.float16, torch.bfloat16):
        plan = gemmkit.Gemm(element=dtype, element_accumulator=torch.float32, layout=gemmkit.LayoutType.RowMajor)
        operands = []
        for m, n, k in SHAPES:
            a = torch.randint(-2, 3, (m, k), device="cuda").to(dtype)
            b = torch.randint(-2, 3, (k, n), device="cuda").to(dtype)
            operands.append((a, b, torch.empty(m, n, device="cuda", dtype=dtype)))
        gemmkit.compile_many([plan.spec_for(a, b, None, d, 0.0) for a, b, d in operands])
        for (m, n, k), (a, b, d) in zip(SHAPES, operands):
            plan.run(a, b, None, d)
            exact = torch.equal(d, (a.double() @ b.double()).to(dtype))
            ours = median_ms(lambda: plan.run(a, b, None, d, sync=False), args.rounds)
            out = a @ b
            theirs = median_ms(lambda: torch.matmul(a, b, out=out), args.rounds)
            rows.append(dict(dtype=str(dtype), m=m, n=n, k=k, kernel=plan.spec_for(a, b, None, d, 0.0).name(),
                             exact=exact, gemmkit_ms=ours, torch_ms=theirs, ratio=theirs / ours,
                             gemmkit_tflops=2.0 * m * n * k / ours / 1e9))
            r = rows[-1]
            print(f"{dtype} {m}x{n}x{k}: gemmkit {ours:.3f} ms ({r['gemmkit_tflops']:.1f} TFLOP/s), torch "
                  f"{theirs:.3f} ms, ratio {r['ratio']:.3f}, exact {exact}, {r['kernel']}")
    meta = dict(device=torch.cuda.get_device_name(), torch=torch.__version__, gemmkit=gemmkit.__version__,
                python=platform.python_version())
    with open(args.out, "w") as f:
        json.dump(dict(meta=meta, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
