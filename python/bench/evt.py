"""python/bench/evt.py: epilogue visitor trees against the plain GEMM and torch, in one process.
For each f16 shape: the default plan with the identity epilogue; the same plan with the reference notebook's
epilogue (two outputs: D = relu(F + 1) + bias + F and F = alpha * accum + (beta * C + aux)); the same plan with a
row reduction (the sum of each column of D into an f32 row vector, D itself stored); torch eager (matmul, then the
elementwise ops); and torch.compile of the eager function (default mode). Times are medians of CUDA-event rounds
after a warm-up; every gemmkit result is checked against torch's. Writes JSON to --out.
With --tiles, each tree also runs on each named configuration (SCHEDULE:CTAxTILE:CLUSTER, SCHEDULE one of
coop, pingpong; e.g. pingpong:128x128:1x1), so the heuristic's choice can be compared with the table's.
Usage: python python/bench/evt.py [--shapes MxNxK,...] [--rounds N] [--out FILE] [--no-compile] [--tiles T,...]
       python python/bench/evt.py --prebuild-only --cc 90 [--tiles T,...]   (compile the kernels; no GPU or torch)
"""
import argparse
import json
import os

os.environ.setdefault("GEMMKIT_WAIT_FOR_BEST", "1")  # time the kernel the shape asks for, not a stand-in

import fp8  # noqa: E402  (python/bench/fp8.py: its prebuild compiles the picks and lists them)
import gemmkit  # noqa: E402
from gemmkit import _gemmkit as core  # noqa: E402

SHAPES = "4096x4096x4096,8192x8192x8192"


def notebook_tree():
    """F = alpha * accum + (beta * C + aux); D = relu(F + 1) + bias + F, with F stored (the 04 notebook's)."""
    F = core._evt_store(core._evt_scalar("alpha") * core._evt_accumulator()
                        + (core._evt_scalar("beta") * core._evt_source() + core._evt_aux("aux")), "F")
    return core.Epilogue(core._evt_activation(gemmkit.Activation.relu, F + 1.0)
                         + core._evt_column_broadcast("bias") + F)


def row_sum_tree():
    """D = accum, and the f32 sum of each of D's columns (a row vector of n)."""
    return core.Epilogue(core._evt_reduction("row", core._evt_accumulator(), "column_sums", "sum"))


SCHEDULES = {"coop": (gemmkit.KernelScheduleType.TmaWarpSpecializedCooperative,
                      gemmkit.EpilogueScheduleType.TmaWarpSpecializedCooperative),
             "pingpong": (gemmkit.KernelScheduleType.TmaWarpSpecializedPingpong,
                          gemmkit.EpilogueScheduleType.TmaWarpSpecialized)}


def make_plan(cc=None, tree=None, tile=None):
    plan = gemmkit.Gemm(element="f16", element_accumulator="f32", layout="row", cc=cc)
    if tree is not None:
        plan.epilogue_visitor = tree
    if tile is not None:
        plan.tile_description = find_tile(plan, tile)
    return plan


def find_tile(plan, name):
    """The plan's configuration named SCHEDULE:MxN:CMxCN (the default tile scheduler, K tile 64)."""
    schedule, cta, cluster = name.split(":")
    kernel, epilogue = SCHEDULES[schedule]
    cta = [int(x) for x in cta.split("x")] + [64]
    cluster = [int(x) for x in cluster.split("x")] + [1]
    for td in plan.tile_descriptions():
        if (td.kernel_schedule == kernel and td.epilogue_schedule == epilogue and list(td.cta_tile()) == cta
                and list(td.cluster_shape) == cluster and td.tile_scheduler == gemmkit.TileSchedulerType.Default):
            return td
    raise SystemExit(f"no configuration {name} among the plan's tile_descriptions()")


def trees():
    return {"identity": None, "notebook": notebook_tree(), "row_sum": row_sum_tree()}


def make_tensors(m, n, k):
    """A, B, C, aux, bias (one per row), D, F (the notebook tree's second output) and the row sum's output."""
    import torch

    torch.manual_seed(0)
    A = torch.randn(m, k, dtype=torch.float16, device="cuda") * 0.1
    B = torch.randn(k, n, dtype=torch.float16, device="cuda") * 0.1
    C = torch.randn(m, n, dtype=torch.float16, device="cuda")
    aux = torch.randn(m, n, dtype=torch.float16, device="cuda")
    bias = torch.randn(m, 1, dtype=torch.float16, device="cuda")
    D = torch.empty(m, n, dtype=torch.float16, device="cuda")
    return A, B, C, aux, bias, D, torch.empty_like(D), torch.zeros(n, dtype=torch.float32, device="cuda")


def prebuild(cc, shapes, tiles):
    """Compiles and lists (for tools/dev/carry-cache --keys) every tree's kernel for each shape and tile."""
    plans = {(name, tile): make_plan(cc, tree, tile) for name, tree in trees().items() for tile in [None] + tiles}
    fp8.prebuild(plans, [("evt", m, n, k) for m, n, k in shapes], listing=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", default=SHAPES)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--out", default="evt.json")
    parser.add_argument("--prebuild-only", action="store_true")
    parser.add_argument("--cc", type=int, default=None)
    parser.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    parser.add_argument("--tiles", default="", help="configurations to time each tree on as well")
    args = parser.parse_args()
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    tiles = [t for t in args.tiles.split(",") if t]
    if args.prebuild_only:
        prebuild(args.cc or 90, shapes, tiles)
        return

    import torch

    from timing import median_ms

    def eager(A, B, C, aux, bias, alpha, beta):
        F = alpha * (A @ B).float() + (beta * C.float() + aux.float())
        D = torch.relu(F + 1) + bias.float() + F
        return D.half(), F.half()

    compiled = None if args.no_compile else torch.compile(eager)
    results = []
    for m, n, k in shapes:
        A, B, C, aux, bias, D, F, sums = make_tensors(m, n, k)
        alpha, beta = 0.5, 0.5

        plain, visitor, reduced = make_plan(), make_plan(tree=notebook_tree()), make_plan(tree=row_sum_tree())
        visitor_args = {"alpha": alpha, "beta": beta, "aux": aux, "bias": bias, "F": F}
        row = {"m": m, "n": n, "k": k}
        row["identity_ms"] = median_ms(lambda: plain.run(A, B, C, D, 1.0, 0.0, sync=False), args.rounds)
        row["notebook_ms"] = median_ms(lambda: visitor.run(A, B, C, D, visitor_args=visitor_args, sync=False),
                                       args.rounds)
        D_ref, F_ref = eager(A, B, C, aux, bias, alpha, beta)
        row["notebook_max_error"] = max(float((D - D_ref).abs().max()), float((F - F_ref).abs().max()))
        row["row_sum_ms"] = median_ms(lambda: reduced.run(A, B, None, D, visitor_args={"column_sums": sums},
                                                          sync=False), args.rounds)
        row["row_sum_rel_error"] = float(((sums - (A @ B).float().sum(0)).abs().max()
                                          / (A @ B).float().sum(0).abs().max()))
        row["torch_eager_ms"] = median_ms(lambda: eager(A, B, C, aux, bias, alpha, beta), args.rounds)
        if compiled is not None:
            compiled(A, B, C, aux, bias, alpha, beta)
            row["torch_compile_ms"] = median_ms(lambda: compiled(A, B, C, aux, bias, alpha, beta), args.rounds)
        row["notebook_vs_identity"] = row["notebook_ms"] / row["identity_ms"]
        row["speedup_vs_eager"] = row["torch_eager_ms"] / row["notebook_ms"]
        if "torch_compile_ms" in row:
            row["speedup_vs_compile"] = row["torch_compile_ms"] / row["notebook_ms"]
        row["row_sum_vs_identity"] = row["row_sum_ms"] / row["identity_ms"]
        row["kernel"] = visitor.spec_for(A, B, C, D).name()
        for tile in tiles:
            pinned = {name: make_plan(tree=tree, tile=tile) for name, tree in trees().items()}
            row[tile] = {
                "identity_ms": median_ms(lambda: pinned["identity"].run(A, B, C, D, 1.0, 0.0, sync=False),
                                         args.rounds),
                "notebook_ms": median_ms(lambda: pinned["notebook"].run(A, B, C, D, visitor_args=visitor_args,
                                                                        sync=False), args.rounds),
                "row_sum_ms": median_ms(lambda: pinned["row_sum"].run(A, B, None, D,
                                                                      visitor_args={"column_sums": sums},
                                                                      sync=False), args.rounds)}
        print(json.dumps(row))
        results.append(row)
    with open(args.out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "results": results}, f,
                  indent=1)


if __name__ == "__main__":
    main()
