"""examples/python/grouped_gemm.py: the reference's grouped GEMM walk-through with gemmkit's Python package.

50 fp16 problems with M, N and K drawn from {128, 256, 512, 1024} (random.seed(2023)) run in one launch by
GroupedGemm, compared with [a @ b for a, b in zip(As, Bs)], then timed against per-pair matmuls (20 warm-up rounds,
100 timed, as the reference does). With --torch the operands are torch CUDA tensors; otherwise numpy arrays are
staged through the GPU. With --torch --export the plan's kernel also becomes a torch extension, as in the
reference's third walk-through (gemmkit.emit.pytorch(..., jit=True) into a temporary folder), whose run(As, Bs) is
checked and timed the same way. Needs nvcc; running needs a CUDA GPU. With --cc 90 it plans and compiles without a
GPU, and stops where running needs one. Exits 0 when every group is exact (or, without a GPU, when planning and
compiling worked).
"""
import random
import sys
import tempfile
import time
from typing import Any, Callable

import numpy as np
import numpy.typing as npt

import gemmkit
from operands import ARGUMENTS, gpu_present, on_device, plan_cc, to_numpy, torch

Matrix = npt.NDArray[np.float16]


def problems(count: int = 50, seed: int = 2023) -> list[tuple[Matrix, Matrix]]:
    random.seed(seed)
    sizes = [128, 256, 512, 1024]
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        m, n, k = (random.choice(sizes) for _ in range(3))
        a = np.ceil(rng.uniform(-4, 4, (m, k))).astype(np.float16)
        b = np.ceil(rng.uniform(-4, 4, (k, n))).astype(np.float16)
        out.append((a, b))
    return out


def main() -> int:
    plan = gemmkit.GroupedGemm(element=np.float16, layout="row", element_accumulator=np.float32, cc=plan_cc())
    print(f"1. GroupedGemm for SM{plan.cc}: kernel {plan.kernel_name()}")
    compiled = plan.compile()
    print(f"   compiled: {'cache hit' if compiled.cache_hit else f'built in {compiled.build_seconds:.1f} s'}")
    if not gpu_present(plan.cc):
        return 0
    pairs = problems()
    As = [on_device(a) for a, _ in pairs]
    Bs = [on_device(b) for _, b in pairs]
    Ds = [on_device(np.zeros((a.shape[0], b.shape[1]), np.float16)) for a, b in pairs]
    plan.run(As, Bs, None, Ds)
    wrong = [g for g, ((a, b), d) in enumerate(zip(pairs, Ds))
             if not np.array_equal(to_numpy(d), (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16))]
    print(f"2. 50 groups in one launch: {'every D equals a @ b exactly' if not wrong else f'groups {wrong} differ'}")
    if torch is not None:
        timings: list[tuple[str, Callable[[], object]]] = [
            ("Grouped", lambda: plan.run(As, Bs, None, Ds, sync=False)),
            ("Non-Grouped", lambda: [a @ b for a, b in zip(As, Bs)])]
        with tempfile.TemporaryDirectory(prefix="gk-grouped-export-") as sourcedir:
            if ARGUMENTS.export:
                module = gemmkit.emit.pytorch(plan.construct(), "gk_grouped_walkthrough", plan.cc, sourcedir, jit=True)
                assert module is not None  # jit=True returns the loaded module
                build = module.gemmkit_build
                differ = [g for g, (d, e) in enumerate(zip(module.run(As, Bs), Ds)) if not torch.equal(d, e)]
                print(f"   exported as a torch extension in {build.total_seconds:.1f} s (binding "
                      f"{build.binding_seconds:.1f} s, torch glue {build.glue_seconds:.1f} s (0 once built for this torch), kernel "
                      f"cached: {build.kernel.cache_hit}); its run(As, Bs): "
                      f"{'every D as above' if not differ else f'groups {differ} differ'}")
                wrong += differ
                timings.append(("Exported", lambda: module.run(As, Bs)))
            for name, fn in timings:
                for _ in range(20):
                    fn()
                torch.cuda.synchronize()
                start = time.perf_counter()
                for _ in range(100):
                    fn()
                    torch.cuda.synchronize()
                print(f"3. {name:12s} {(time.perf_counter() - start) / 100 * 1e6:9.1f} us per call (incl. sync)")
    return 0 if not wrong else 1


if __name__ == "__main__":
    sys.exit(main())
