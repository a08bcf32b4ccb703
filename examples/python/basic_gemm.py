"""examples/python/basic_gemm.py: the reference's basic GEMM walk-through with gemmkit's Python package.

Plan an fp16 GEMM, run it on numpy arrays and check it exactly, show the kernel, switch to SIMT, reuse the
kernel on a large problem (no compile), pick a configuration, try Stream-K, and see a bad one rejected before
compiling. Needs nvcc; running needs a CUDA GPU (SM80 or SM90). With --cc 90 it plans and compiles without a GPU,
and stops where running needs one; with --torch the operands are torch CUDA tensors (no staging). Exits 0 when every
result is exact (or, without a GPU, when planning and compiling worked).
"""
import copy
import sys
from typing import Any

import numpy as np
import numpy.typing as npt

import gemmkit
from operands import gpu_present, on_device, plan_cc, to_numpy


def integers(shape: tuple[int, int], seed: int) -> npt.NDArray[Any]:
    """ceil(uniform(-4, 4)): integers in [-3, 4], exact in fp16 products and fp32 sums."""
    return np.ceil(np.random.default_rng(seed).uniform(-4, 4, shape)).astype(np.float16)


def run_and_check(plan: gemmkit.Gemm, m: int, n: int, k: int, alpha: float = 1.0, beta: float = 0.0, label: str = "",
                  print_module: bool = False) -> bool:
    A, B, C = integers((m, k), 1234), integers((k, n), 1235), integers((m, n), 1236)
    D = np.zeros((m, n), np.float16)
    builds = gemmkit.cache_counters().builds
    a, b, c, d = (on_device(t) for t in (A, B, C, D))
    plan.run(a, b, c, d, alpha, beta, print_module=print_module)
    D = to_numpy(d)
    compiled = gemmkit.cache_counters().builds > builds
    expected = (alpha * (A.astype(np.float32) @ B.astype(np.float32)) + beta * C.astype(np.float32)).astype(np.float16)
    exact = np.array_equal(D, expected)
    print(f"  {label}: {m}x{n}x{k} beta={beta} -> {'D equals alpha*A@B + beta*C exactly' if exact else 'MISMATCH'}"
          f" ({'compiled' if compiled else 'no compile'})")
    return exact


def main() -> bool:
    cc = plan_cc()
    plan = gemmkit.Gemm(element=np.float16, layout=gemmkit.LayoutType.RowMajor, element_accumulator=np.float32, cc=cc)
    print(f"1. Plan for SM{plan.cc}: opclass {plan.opclass}, kernel {plan.kernel_name()}")
    compiled = plan.compile()
    print(f"   compiled: {'cache hit' if compiled.cache_hit else f'built in {compiled.build_seconds:.1f} s'}, "
          f"{compiled.module_path}")
    if not gpu_present(plan.cc):
        return True
    ok = run_and_check(plan, 128, 128, 128, label="tensorop_128", print_module=True)

    print("2. Reuse the compiled kernel on a larger problem with beta = 2:")
    ok &= run_and_check(plan, 2400, 3232, 4096, beta=2.0, label="tensorop_2400x3232x4096")

    simt = gemmkit.Gemm(element=np.float16, layout=gemmkit.LayoutType.RowMajor, element_accumulator=np.float32, cc=cc)
    simt.opclass = gemmkit.OpcodeClass.Simt
    print(f"3. opclass = Simt -> {simt.kernel_name()}")
    ok &= run_and_check(simt, 128, 128, 128, label="simt_128")

    tiles = plan.tile_descriptions()
    print(f"4. {len(tiles)} tile descriptions returned; the first 3:")
    for td in tiles[:3]:
        print(td)
    print("   compiling and running entry 1")
    plan.compile(tiles[1])
    ok &= run_and_check(plan, 128, 128, 128, beta=1.0, label="tile_1")

    print("5. swizzle = Stream-K:")
    plan.swizzling_functor = gemmkit.swizzle.ThreadblockSwizzleStreamK
    print(f"   kernel: {plan.kernel_name()}")
    ok &= run_and_check(plan, 1024, 1024, 8192, beta=1.0, label="stream_k")

    print("6. A configuration with 8 stages of a 256x128x64 tile is rejected before compiling:")
    too_deep = copy.copy(tiles[0])
    too_deep.threadblock_shape = [256 * too_deep.cluster_shape[0], 128 * too_deep.cluster_shape[1], 64]
    too_deep.stages = 8
    too_deep.kernel_schedule = gemmkit.KernelScheduleType.TmaWarpSpecializedCooperative
    too_deep.epilogue_schedule = gemmkit.EpilogueScheduleType.TmaWarpSpecializedCooperative
    try:
        plan.compile(too_deep)
        print("   NOT rejected (unexpected)")
        ok = False
    except gemmkit.ConfigError as e:
        print(f"   ConfigError: {e}")
    print("all exact" if ok else "FAILED")
    return ok


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
