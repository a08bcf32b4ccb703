"""tools/dev/python-probe.py: one small GEMM through the Python package, announcing each step before taking it, so
that a crash on the GPU machine names the step (run by `tools/dev/python-gpu-check` step `debug`)."""
import os
import sys


def step(text):
    print(f"-> {text}", flush=True)


step("import numpy, gemmkit")
import numpy as np  # noqa: E402

import gemmkit  # noqa: E402

step(f"gemmkit {gemmkit.__version__} from {gemmkit.__file__}; GEMMKIT_ROOT={os.environ.get('GEMMKIT_ROOT')}")
step(f"cuda_device_count() = {gemmkit.cuda_device_count()}")
step("plan")
plan = gemmkit.Gemm(element=np.float16, layout="row", element_accumulator=np.float32)
step(f"cc = {plan.cc}, kernel {plan.kernel_name()}")
compiled = plan.compile()
step(f"compiled: {compiled} at {compiled.module_path}")
A = np.ones((128, 64), np.float16)
B = np.ones((64, 128), np.float16)
D = np.zeros((128, 128), np.float16)
step("spec_for(numpy)")
step(f"  {plan.spec_for(A, B, None, D).name()}")
step("run on numpy arrays (host staging)")
plan.run(A, B, None, D)
step(f"D[0,0] = {D[0, 0]} (expected 64)")
sys.exit(0 if D[0, 0] == 64 else 1)
