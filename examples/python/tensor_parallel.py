"""examples/python/tensor_parallel.py: a tensor-parallel MLP with gemmkit.torch.gemm on every rank, NCCL through
torch.distributed, checked against the single-GPU computation.

    torchrun --nproc-per-node 2 examples/python/tensor_parallel.py [--tokens 256 --model 1024 --hidden 4096]

Column-parallel, then row-parallel (Megatron's pair): rank r holds the rows W1_r of W1 (hidden/ranks output
features) and the matching columns W2_r of W2. It computes y_r = relu(x W1_r^T) with the activation fused into the
GEMM (it is local to the rank's features), all-gathers the y_r into y, computes its partial z_r = y_r W2_r^T and
all-reduces the partials into z = relu(x W1^T) W2^T. Data are small integers in float32 (TF32 tensor cores hold
them exactly and every sum is exact), so sharded and single-GPU results must be equal bit for bit.

All ranks share gemmkit's kernel cache (GEMMKIT_CACHE_DIR, or the per-user default), so each kernel is compiled
once per node: one rank builds it under the cache's per-kernel lock and the others load it, which the example
checks with gemmkit.cache_counters(). Rank 0 prints one JSON line with the results.
"""
import argparse
import json
import os

# NVLink multicast stays off on shared machines (set before NCCL starts; an explicit setting wins).
for variable, value in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
                        ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(variable, value)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import gemmkit  # noqa: E402
import gemmkit.torch as gt  # noqa: E402


def integers(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    """The same values on every rank (a CPU generator), in {-1, 0, 1}."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(-1, 2, shape, generator=generator).float()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--model", type=int, default=1024)
    parser.add_argument("--hidden", type=int, default=4096)
    args = parser.parse_args()

    dist.init_process_group("nccl")
    rank, ranks = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
    torch.cuda.set_device(device)
    if args.hidden % (8 * ranks):
        raise SystemExit(f"--hidden {args.hidden} must split into {ranks} shards of a multiple of 8 features")
    shard = slice(rank * args.hidden // ranks, (rank + 1) * args.hidden // ranks)

    x = integers((args.tokens, args.model), 0).to(device)
    w1 = integers((args.hidden, args.model), 1).to(device)
    w2 = integers((args.model, args.hidden), 2).to(device)
    w1_r, w2_r = w1[shard].contiguous(), w2[:, shard].contiguous()  # what a rank would own

    # Column-parallel: this rank's features of y, the ReLU fused; the all-gather assembles y for the check.
    y_r = gt.gemm(x, w1_r.mT, activation="relu")
    gathered = [torch.empty_like(y_r) for _ in range(ranks)]
    dist.all_gather(gathered, y_r)
    y = torch.cat(gathered, dim=1)
    # Row-parallel: a partial product over this rank's features, summed across ranks.
    z = gt.gemm(y_r, w2_r.mT)
    dist.all_reduce(z)

    # The single-GPU computation, with the same kernels (same plans: the shapes differ, the layouts do not).
    y_single = gt.gemm(x, w1.mT, activation="relu")
    z_single = gt.gemm(y_single, w2.mT)
    kernels = len(gt.plans())
    counters = gemmkit.cache_counters()
    mine = torch.tensor([int(torch.equal(y, y_single)), int(torch.equal(z, z_single)), counters.builds,
                         counters.disk_hits], device=device)
    every = [torch.empty_like(mine) for _ in range(ranks)]
    dist.all_gather(every, mine)
    every = torch.stack(every).tolist()
    builds = sum(r[2] for r in every)
    result = {
        "ranks": ranks, "kernels_per_rank": kernels, "y_equal": all(r[0] for r in every),
        "z_equal": all(r[1] for r in every), "builds_per_rank": [r[2] for r in every],
        "disk_hits_per_rank": [r[3] for r in every],
        # Each rank loads each kernel once (a build or a disk hit), and no kernel is built twice on this node.
        "compiled_once_per_node": builds <= kernels and all(r[2] + r[3] == kernels for r in every),
        "cache_dir": gemmkit.cache_dir(),
    }
    if rank == 0:
        print(json.dumps(result), flush=True)
    dist.destroy_process_group()
    if not (result["y_equal"] and result["z_equal"] and result["compiled_once_per_node"]):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
