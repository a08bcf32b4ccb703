"""tests/python/test_torch_distributed.py (gpu tier, 2 GPUs): examples/python/tensor_parallel.py under
`torchrun --nproc-per-node 2`: sharded results equal the single-GPU computation bit for bit, and the two ranks,
sharing a fresh kernel cache, compile each kernel once between them. Skips itself with fewer than 2 GPUs."""
import json
import os
import subprocess
import sys

import pytest

import gemmkit

pytestmark = pytest.mark.gpu


def test_tensor_parallel_example_under_torchrun(root, tmp_path):
    pytest.importorskip("torch")
    if gemmkit.cuda_device_count() < 2:
        pytest.skip(f"needs 2 CUDA devices; {gemmkit.cuda_device_count()} visible")
    # A cache of its own: both ranks start without the kernels, so "built once" is what the counters show.
    env = dict(os.environ, GEMMKIT_CACHE_DIR=str(tmp_path / "cache"), NCCL_NVLS_ENABLE="0",
               TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
               str(root / "examples" / "python" / "tensor_parallel.py")]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    report = json.loads([line for line in result.stdout.splitlines() if line.startswith("{")][-1])
    print(report)
    assert report["ranks"] == 2 and report["y_equal"] and report["z_equal"]
    kernels = report["kernels_per_rank"]
    assert kernels == 2  # the ReLU-fused and the plain f32 GEMM
    assert sum(report["builds_per_rank"]) == kernels
    assert [b + h for b, h in zip(report["builds_per_rank"], report["disk_hits_per_rank"])] == [kernels, kernels]
