"""tests/python/test_tensors.py (unit): how arrays become TensorViews (numpy, torch-shaped DLPack objects,
__cuda_array_interface__), layout inference from strides, the C++ tensor checks, and stream handles."""
import numpy as np
import pytest

import gemmkit
from gemmkit import _convert
from gpu_specs import fp16_plan


@pytest.mark.parametrize("dtype, expected", [(np.float16, "f16"), (np.float32, "f32"), (np.float64, "f64"),
                                             (np.int8, "s8"), (np.uint8, "u8"), (np.int32, "s32")])
def test_numpy_dtypes(dtype, expected):
    assert gemmkit.tensor_view(np.zeros((4, 8), dtype)).dtype == gemmkit.DataType[expected]


def test_numpy_views_keep_their_strides():
    a = np.zeros((6, 4, 8), np.float16)
    view = gemmkit.tensor_view(a)
    assert (view.shape, view.strides, view.device) == ((6, 4, 8), (32, 8, 1), -1)
    assert view.data == a.ctypes.data
    t = gemmkit.tensor_view(a[0].T)
    assert (t.shape, t.strides) == ((8, 4), (1, 8))
    sliced = gemmkit.tensor_view(a[:, 1:3, :])
    assert sliced.data == a.ctypes.data + 8 * 2 and sliced.strides == (32, 8, 1)


def test_unsupported_arrays():
    with pytest.raises(gemmkit.TensorError, match="element type gemmkit does not take"):
        gemmkit.tensor_view(np.zeros((4, 4), np.complex64))
    with pytest.raises(gemmkit.TensorError, match="rank 0"):
        gemmkit.tensor_view(np.float16(1.0).reshape(()))
    with pytest.raises(gemmkit.TensorError, match="has rank 7"):
        gemmkit.tensor_view(np.zeros((1,) * 7, np.float16))
    with pytest.raises(TypeError, match="cannot read a tensor from an object of type list"):
        gemmkit.tensor_view([[1.0]])


class FakeTorchTensor:
    """A torch-shaped object: DLPack export of host memory, refusing export while it requires grad."""

    __module__ = "torch"

    def __init__(self, array, requires_grad=False):
        self._array, self.requires_grad = array, requires_grad

    def __dlpack__(self, **kwargs):
        if self.requires_grad:
            raise RuntimeError("Can't export tensors that require gradient, use tensor.detach()")
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()

    def detach(self):
        return FakeTorchTensor(self._array)

    def t(self):
        return FakeTorchTensor(self._array.T, self.requires_grad)


def test_dlpack_objects_and_layout_inference():
    a = FakeTorchTensor(np.zeros((128, 64), np.float16))
    b = FakeTorchTensor(np.zeros((32, 64), np.float16)).t()  # a transposed view: ColumnMajor
    c = FakeTorchTensor(np.zeros((128, 32), np.float16))
    plan = gemmkit.Gemm(A=a, B=b, C=c, D=c, element_accumulator=np.float32, cc=80)
    assert plan.layout_A == gemmkit.LayoutType.RowMajor
    assert plan.layout_B == gemmkit.LayoutType.ColumnMajor
    assert plan.kernel_name() == "cutlass_tensorop_f16_s16816gemm_f16_256x128_64x3_tn_align8"
    assert plan.spec_for(a, b, c, c).name() == plan.kernel_name()


def test_requires_grad_tensors_are_read_through_detach():
    a = FakeTorchTensor(np.zeros((16, 8), np.float16), requires_grad=True)
    assert gemmkit.tensor_view(a).shape == (16, 8)


class DLPackOnly:
    """Hides a tensor's type: only its DLPack export is visible."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __dlpack__(self, *args, **kwargs):
        return self.tensor.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()


def test_torch_tensors_are_read_through_their_attributes():
    """torch tensors take the cheap path (attributes, no DLPack export); it must agree with what DLPack says."""
    torch = pytest.importorskip("torch")
    base = torch.zeros((6, 4, 8), dtype=torch.float16)
    for t in (base, base[0].t(), base[:, 1:3, :], torch.nn.Parameter(base.float())):
        view = gemmkit.tensor_view(t)
        assert (view.data, view.shape, view.strides, view.device) == (t.data_ptr(), tuple(t.shape), t.stride(), -1)
        assert view.dtype == gemmkit.DataType.f16 or t.dtype == torch.float32
        via_dlpack = gemmkit.tensor_view(DLPackOnly(t.detach()))
        assert (via_dlpack.data, via_dlpack.shape, via_dlpack.strides, via_dlpack.dtype) == \
            (view.data, view.shape, view.strides, view.dtype)
    assert gemmkit.tensor_view(torch.zeros(2, 2, dtype=torch.bfloat16)).dtype == gemmkit.DataType.bf16
    with pytest.raises(gemmkit.TensorError, match="has element type torch.complex64, which gemmkit does not take"):
        gemmkit.tensor_view(torch.zeros(2, 2, dtype=torch.complex64))
    with pytest.raises(gemmkit.TensorError, match="lives on torch device 'meta'"):
        gemmkit.tensor_view(torch.zeros(2, 2, dtype=torch.float16, device="meta"))


def test_column_major_numpy_plan_and_alignment():
    A = np.zeros((128, 68), np.float16)  # K = 68: 8-element alignment impossible, 4 fits
    B = np.zeros((68, 64), np.float16, order="F")
    D = np.zeros((128, 64), np.float16)
    plan = gemmkit.Gemm(A=A, B=B, C=D, D=D, element_accumulator=np.float32, cc=80)
    assert plan.layout_B == gemmkit.LayoutType.ColumnMajor
    spec = plan.spec_for(A, B, None, D)
    assert (spec.alignment_A, spec.alignment_B, spec.alignment_C) == (4, 4, 8)


def test_cxx_tensor_checks_reach_python():
    plan = fp16_plan(80)
    A, B, D = (np.zeros((64, 64), np.float16) for _ in range(3))
    with pytest.raises(gemmkit.TensorError) as e:
        plan.spec_for(A, B, None, D[:, ::2])
    assert str(e.value).startswith("Tensor D: has shape (64, 32) and strides (64, 2), which no layout expresses")
    with pytest.raises(gemmkit.TensorError, match="has element type f32 but the plan expects f16"):
        plan.spec_for(A.astype(np.float32), B, None, D)
    with pytest.raises(gemmkit.TensorError, match="K extents must agree"):
        plan.spec_for(A, np.zeros((32, 64), np.float16), None, D)
    with pytest.raises(gemmkit.TensorError, match="but no C was given"):
        plan.spec_for(A, B, None, D, beta=1.0)
    read_only = np.zeros((64, 64), np.float16)
    read_only.flags.writeable = False
    with pytest.raises(gemmkit.TensorError, match="Tensor D is read-only"):
        plan.spec_for(A, B, None, read_only)
    with pytest.raises(gemmkit.TensorError, match="^Tensor A must be set.$"):
        plan.run(None, B, None, D)


class FakeCudaArray:
    """A numba/cupy-shaped object exposing only __cuda_array_interface__ (never dereferenced here)."""

    def __init__(self, shape, typestr, strides=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (0x7F0000000000, False),
                                         "strides": strides, "version": 3}


def test_cuda_array_interface():
    fake = FakeCudaArray((16, 8), "<f2", strides=(2, 32))  # column-major, strides in bytes
    if gemmkit.cuda_device_count() == 0:
        with pytest.raises(gemmkit.CudaError, match="No CUDA device is available"):
            gemmkit.tensor_view(fake)  # CUDA memory with no device to own it
        return
    view = gemmkit.tensor_view(fake)
    assert (view.dtype, view.shape, view.strides, view.data) == (gemmkit.DataType.f16, (16, 8), (1, 16),
                                                                 0x7F0000000000)
    assert view.device >= 0
    assert gemmkit.tensor_view(FakeCudaArray((4, 4), "<i1")).strides == (4, 1)


class TorchStream:
    cuda_stream = 0x1234


class CupyStream:
    ptr = 0x5678


class ProtocolStream:
    def __cuda_stream__(self):
        return (0, 0x9ABC)


def test_stream_handles():
    assert _convert.stream_handle(7) == 7
    assert _convert.stream_handle(TorchStream()) == 0x1234
    assert _convert.stream_handle(CupyStream()) == 0x5678
    assert _convert.stream_handle(ProtocolStream()) == 0x9ABC
    with pytest.raises(TypeError, match="Cannot take a CUDA stream from str"):
        _convert.stream_handle("default")
    assert gemmkit._gemmkit.default_stream(np.zeros(4)) == 0
