"""tests/python/test_gpu.py (gpu tier): the walk-throughs as examples/python, and runs on numpy, torch and cupy
arrays — transposed views, batches, streams, sync=False. Skipped with a reason without a CUDA device, torch or
cupy. Kernels come from the cache (tools/dev/python-gpu-check prebuilds gpu_specs.specs() first)."""
import subprocess
import sys

import numpy as np
import pytest

import gemmkit
from gpu_specs import fp16_plan

pytestmark = pytest.mark.gpu


def integers(shape, seed, dtype=np.float16):
    return np.ceil(np.random.default_rng(seed).uniform(-4, 4, shape)).astype(dtype)


def expected(A, B, C, alpha=1.0, beta=0.0):
    a, b = np.asarray(A, np.float32), np.asarray(B, np.float32)
    c = 0.0 if C is None else np.asarray(C, np.float32)
    return (alpha * (a @ b) + beta * c).astype(np.float16)


@pytest.mark.parametrize("example", ["basic_gemm.py", "epilogue.py"])
@pytest.mark.parametrize("tensors", ["numpy", "torch"])
def test_walkthrough_examples(root, example, tensors):
    if tensors == "torch":
        pytest.importorskip("torch")
    flags = ["--torch"] if tensors == "torch" else []
    result = subprocess.run([sys.executable, str(root / "examples" / "python" / example)] + flags,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]


def test_numpy_host_arrays_and_transposed_views():
    A, C = integers((128, 96), 1), integers((128, 64), 3)
    B = integers((64, 96), 2).T  # a transposed view: ColumnMajor, no copy
    D = np.zeros((128, 64), np.float16)
    plan = gemmkit.Gemm(A=A, B=B, C=C, D=D, element_accumulator=np.float32)
    assert plan.layout_B == gemmkit.LayoutType.ColumnMajor
    plan.run(A, B, C, D, 1.0, 1.0, sync=False)  # host D lands before run returns, even when async is asked
    np.testing.assert_array_equal(D, expected(A, B, C, 1.0, 1.0))


def test_constructor_tensors_are_run_defaults():
    A, B, C = integers((64, 64), 4), integers((64, 64), 5), integers((64, 64), 6)
    D = np.zeros((64, 64), np.float16)
    plan = fp16_plan(A=A, B=B, C=C, D=D, beta=1.0)
    plan.run()
    np.testing.assert_array_equal(D, expected(A, B, C, 1.0, 1.0))


@pytest.fixture
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    return torch


def torch_operands(torch, m, n, k, seed=0, batch=()):
    def make(shape, s):
        return torch.from_numpy(integers(batch + shape, seed + s)).cuda()
    return make((m, k), 0), make((k, n), 1), make((m, n), 2), torch.zeros(batch + (m, n), dtype=torch.float16,
                                                                            device="cuda")


def torch_expected(torch, A, B, C, alpha=1.0, beta=0.0):
    return (alpha * (A.float() @ B.float()) + beta * C.float()).half()


def test_torch_device_tensors(torch):
    A, B, C, D = torch_operands(torch, 128, 128, 128)
    plan = gemmkit.Gemm(element=torch.float16, layout=gemmkit.LayoutType.RowMajor, element_accumulator=torch.float32)
    plan.run(A, B, C, D, 1.0, 1.0)
    assert torch.equal(D, torch_expected(torch, A, B, C, 1.0, 1.0))


def test_torch_transposed_and_batched(torch):
    A, _, C, D = torch_operands(torch, 128, 64, 96)
    Bt = torch.from_numpy(integers((64, 96), 9)).cuda().t()  # (96, 64) with strides (1, 96): ColumnMajor
    plan = gemmkit.Gemm(A=A, B=Bt, C=C, D=D, element_accumulator=torch.float32)
    assert plan.layout_B == gemmkit.LayoutType.ColumnMajor
    plan.run(A, Bt, C, D, 1.0, 1.0)
    assert torch.equal(D, torch_expected(torch, A, Bt, C, 1.0, 1.0))
    A3, B3, C3, D3 = torch_operands(torch, 64, 64, 64, batch=(3,))
    batched = fp16_plan()
    batched.run(A3, B3, C3, D3, 1.0, 1.0)
    assert torch.equal(D3, torch_expected(torch, A3, B3, C3, 1.0, 1.0))


def test_torch_rejections_leave_d_untouched(torch):
    A, B, C, D = torch_operands(torch, 64, 64, 64)
    plan = fp16_plan()
    with pytest.raises(gemmkit.TensorError, match="which no layout expresses"):
        plan.run(A, B, None, torch.zeros(64, 128, dtype=torch.float16, device="cuda")[:, ::2])
    D.fill_(7)
    with pytest.raises(gemmkit.TensorError, match="has element type f32"):
        plan.run(A.float(), B, C, D)
    assert bool((D == 7).all())


def test_torch_cpu_and_requires_grad(torch):
    A, B, C, D = (t.cpu() for t in torch_operands(torch, 64, 64, 64))
    A.requires_grad_(True)
    fp16_plan().run(A, B, C, D, 1.0, 1.0)
    assert torch.equal(D, torch_expected(torch, A.detach(), B, C, 1.0, 1.0))


def test_torch_streams_and_async(torch):
    A, B, C, D = torch_operands(torch, 128, 128, 128)
    plan = fp16_plan()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)  # keep the stream busy: an async launch returns while it is
        plan.run(A, B, C, D, 1.0, 1.0, sync=False)  # default: torch's current stream (side)
        assert not side.query(), "run(sync=False) waited for the stream"
    side.synchronize()
    assert torch.equal(D, torch_expected(torch, A, B, C, 1.0, 1.0))
    D.zero_()
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)
    plan.run(A, B, C, D, 1.0, 1.0, stream=side)  # explicit stream; sync=True waits for that stream
    assert side.query()
    assert torch.equal(D, torch_expected(torch, A, B, C, 1.0, 1.0))
    D.zero_()
    plan.run(A, B, C, D, 1.0, 1.0, stream=side.cuda_stream, sync=False)
    side.synchronize()
    assert torch.equal(D, torch_expected(torch, A, B, C, 1.0, 1.0))


@pytest.fixture
def cupy():
    cupy = pytest.importorskip("cupy")
    try:
        cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError as e:
        pytest.skip(f"cupy has no CUDA device: {e}")
    return cupy


def test_cupy_arrays_and_streams(cupy):
    A, B, C = (cupy.asarray(integers((128, 128), s)) for s in (11, 12, 13))
    D = cupy.zeros((128, 128), cupy.float16)
    plan = gemmkit.Gemm(element=cupy.float16, layout="row", element_accumulator=cupy.float32)
    want = expected(cupy.asnumpy(A), cupy.asnumpy(B), cupy.asnumpy(C), 1.0, 1.0)
    plan.run(A, B, C, D, 1.0, 1.0)
    np.testing.assert_array_equal(cupy.asnumpy(D), want)
    D.fill(0)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        plan.run(A, B, C, D, 1.0, 1.0, sync=False)  # default: cupy's current stream
    stream.synchronize()
    np.testing.assert_array_equal(cupy.asnumpy(D), want)
    D.fill(0)
    plan.run(A, B, C, D, 1.0, 1.0, stream=stream)  # explicit cupy stream; sync=True waits for it
    np.testing.assert_array_equal(cupy.asnumpy(D), want)
