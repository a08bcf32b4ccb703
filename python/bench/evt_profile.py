"""python/bench/evt_profile.py: one launch each of the identity GEMM and of the row-sum and notebook trees' kernels at
one shape, for a profiler to compare (e.g. `ncu -k regex:gk_device_kernel python3 evt_profile.py`): evt.py's plans,
run once to load, then once more under NVTX ranges named after the tree.
Usage: python python/bench/evt_profile.py [--shape MxNxK]"""
import argparse

import torch

import evt


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", default="8192x8192x8192")
    m, n, k = (int(x) for x in parser.parse_args().shape.split("x"))
    A, B, C, aux, bias, D, F, sums = evt.make_tensors(m, n, k)
    # The calls evt.py times.
    plain, visitor, reduced = evt.make_plan(), evt.make_plan(tree=evt.notebook_tree()), evt.make_plan(
        tree=evt.row_sum_tree())
    notebook_args = {"alpha": 0.5, "beta": 0.5, "aux": aux, "bias": bias, "F": F}
    runs = {
        "identity": lambda: plain.run(A, B, C, D, 1.0, 0.0),
        "row_sum": lambda: reduced.run(A, B, None, D, visitor_args={"column_sums": sums}),
        "notebook": lambda: visitor.run(A, B, C, D, visitor_args=notebook_args),
    }
    for name, run in runs.items():
        run()  # loads the kernel
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push(name)
        run()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        print(name, flush=True)


if __name__ == "__main__":
    main()
