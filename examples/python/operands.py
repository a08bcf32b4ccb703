"""examples/python/operands.py: what the walk-throughs share. Their command line: --torch hands gemmkit torch CUDA
tensors (run in place) instead of numpy arrays (staged through the GPU by run); --cc N plans and compiles for SM N,
which needs no GPU. And the point where a walk-through needs a GPU to go on."""
import argparse
import sys
from typing import Any, Optional

import numpy as np
import numpy.typing as npt

import gemmkit


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(sys.modules["__main__"].__doc__ or "").splitlines()[0])
    parser.add_argument("--torch", action="store_true", help="run on torch CUDA tensors instead of numpy arrays")
    parser.add_argument("--cc", type=int, help="plan and compile for this compute capability (e.g. 90; no GPU "
                                               "needed); by default the current GPU's")
    parser.add_argument("--export", action="store_true", help="with --torch: also export the plan's kernel as a torch "
                                                              "extension and run it (grouped_gemm.py)")
    return parser.parse_args()


ARGUMENTS = _arguments()
#: The compute capability the walk-through plans for (None: the current GPU's).
CC: Optional[int] = ARGUMENTS.cc
torch: Any = __import__("torch") if ARGUMENTS.torch else None


def on_device(array: npt.NDArray[Any]) -> Any:
    """The operand as the walk-through passes it: the numpy array itself, or a torch CUDA tensor copy."""
    return array if torch is None else torch.from_numpy(array).cuda()


def to_numpy(tensor: Any) -> npt.NDArray[Any]:
    result: npt.NDArray[Any] = tensor if torch is None else tensor.cpu().numpy()
    return result


def plan_cc() -> Optional[int]:
    """The cc to plan for: --cc, else None (the current GPU's). Without either, says what to do and exits (2)."""
    if CC is None and gemmkit.cuda_device_count() == 0:
        sys.exit("No CUDA device is visible; pass --cc 90 (or 80) to plan and compile without one.")
    return CC


def gpu_present(cc: int) -> bool:
    """True when a CUDA device is visible; otherwise says that running needs one, after planning and compiling
    for SM{cc} (which the caller has shown)."""
    if gemmkit.cuda_device_count() > 0:
        return True
    print(f"Run: skipped. Running needs a CUDA device and none is visible on this machine; planning and compiling "
          f"for SM{cc} worked.")
    return False
