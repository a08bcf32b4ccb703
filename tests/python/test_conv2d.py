"""tests/python/test_conv2d.py: gemmkit.Conv2d. Unit tests (no GPU): output sizes, reference-format names, the
family, kind names, spec_for on numpy NHWC arrays and torch channels_last tensors (read in place), the TensorError
for NCHW-contiguous torch tensors, the split-K options and the split run() would choose, the SM90 default and
kernel_cc. gpu tests: fprop, dgrad and wgrad on torch channels_last tensors against torch.nn.functional.conv2d and
its gradients, exact on small integers, on the CUTLASS 2.x kernels (kernel_cc=80; serial and parallel split-K:
several slice counts, beta, an activation after the reduction, the split chosen by default) and, on an SM90 GPU,
the 3.x ones (kernel_cc=90)."""
import numpy as np
import pytest

import gemmkit


def plan(kind="fprop", element=np.float16, accumulator=np.float32, **kwargs):
    return gemmkit.Conv2d(kind=kind, element=element, element_accumulator=accumulator, cc=80, **kwargs)


def test_output_size_follows_the_formula():
    assert gemmkit.Conv2d.output_size((2, 56, 56, 64), (128, 3, 3, 64), padding=(1, 1)) == (2, 56, 56, 128)
    assert gemmkit.Conv2d.output_size((1, 224, 224, 3), (64, 7, 7, 3), padding=3, stride=2) == (1, 112, 112, 64)
    assert gemmkit.Conv2d.output_size((1, 17, 9, 8), (8, 3, 3, 8), (1, 0), (2, 1), (2, 3)) == (1, 8, 3, 8)
    with pytest.raises(gemmkit.ConfigError, match="larger than the padded input"):
        gemmkit.Conv2d.output_size((1, 4, 4, 8), (8, 7, 7, 8))
    with pytest.raises(gemmkit.ConfigError, match="groups = 1"):
        gemmkit.Conv2d.output_size((1, 8, 8, 8), (8, 3, 3, 4))


def test_names_kinds_and_family():
    p = plan()
    assert p.kernel_name() == "cutlass_sm80_tensorop_f16_s16x8x16fprop_analytic_f16_256x128_64x3_nhwc_align8"
    assert p.construct().family == gemmkit.KernelFamily.sm80_conv2d
    assert p.construct().conv_kind == gemmkit.ConvKind.fprop
    assert p.kernel_cc == 80
    assert plan("wgrad", np.float32, np.float32).kernel_name() == (
        "cutlass_sm80_tensorop_s16x8x8tf32wgrad_analytic_256x128_32x3_nhwc_align4")
    assert gemmkit.Conv2dDgrad(element=np.float16, element_accumulator=np.float32, cc=80).kind == gemmkit.ConvKind.dgrad
    with pytest.raises(gemmkit.ConfigError, match="conv kind"):
        plan("backward")
    p.iterator_algorithm = "optimized"
    assert "fprop_optimized" in p.kernel_name()
    p.iterator_algorithm = None
    assert p.iterator_algorithm is None
    relu = plan()
    relu.activation = "relu"
    assert relu.kernel_name().endswith("_relu")
    relu.set_split_k("parallel", 2)
    assert (relu.split_k_mode, relu.split_k_slices) == (gemmkit.SplitKMode.parallel, 2)
    assert relu.kernel_name().endswith("_relu")  # construct() names the direct kernel
    # An SM90 plan takes the CUTLASS 3.x family by default; kernel_cc=80 pins the 2.x one; what SM90 lacks is refused
    # naming kernel_cc=80.
    sm90 = gemmkit.Conv2d(kind="fprop", element=np.float16, element_accumulator=np.float32, cc=90)
    assert sm90.kernel_cc == 90
    assert sm90.kernel_name().startswith("cutlass3x_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_f16_f16nhwc_")
    assert gemmkit.Conv2d(kind="fprop", element=np.float16, cc=90, kernel_cc=80).kernel_cc == 80
    with pytest.raises(gemmkit.ConfigError, match="kernel_cc=80"):
        gemmkit.Conv2d(kind="dgrad", element=np.float32, cc=90, kernel_cc=90)


def test_spec_for_numpy_nhwc_arrays():
    p = plan()
    x = np.zeros((2, 8, 8, 16), np.float16)
    w = np.zeros((32, 3, 3, 16), np.float16)
    y = np.zeros((2, 8, 8, 32), np.float16)
    spec = p.spec_for(x, w, None, y, padding=1)
    assert spec.iterator_algorithm == gemmkit.IteratorAlgorithm.optimized
    assert spec.alignment_A == 8
    with pytest.raises(gemmkit.TensorError, match=r"gives \(2, 6, 6, 32\)"):
        p.spec_for(x, w, None, y)  # no padding: the output is 6 x 6


def test_split_k_options_and_the_split_run_chooses():
    p = plan("wgrad")
    assert p.split_k_mode is None and p.split_k_slices == 0
    # wgrad's implicit GEMM here: a 32 x 32 output over N*P*Q = 16384, under a wave of the A100's 108 SMs.
    dy = np.zeros((16, 32, 32, 32), np.float16)
    x = np.zeros((16, 32, 32, 32), np.float16)
    dw = np.zeros((32, 1, 1, 32), np.float16)
    mode, slices = p.split_k_for(dy, x, None, dw)
    assert mode == gemmkit.SplitKMode.parallel and slices > 1
    spec = p.spec_for(dy, x, None, dw)
    assert spec.split_k_mode == gemmkit.SplitKMode.parallel and spec.name().endswith("_splitk_parallel")
    p.set_split_k("serial")  # the mode, the count still chosen
    assert p.split_k_for(dy, x, None, dw) == (gemmkit.SplitKMode.serial, slices)
    p.set_split_k("parallel", 5)
    assert p.split_k_for(dy, x, None, dw) == (gemmkit.SplitKMode.parallel, 5)
    p.set_split_k("parallel", 1)  # one slice: the direct kernel
    assert p.split_k_for(dy, x, None, dw) == (gemmkit.SplitKMode.serial, 1)
    p.set_split_k(None)
    assert p.split_k_mode is None
    with pytest.raises(gemmkit.ConfigError, match="needs a split_k_mode"):
        p.set_split_k(None, 3)
    with pytest.raises(gemmkit.ConfigError, match="between 1 and 65535"):
        p.set_split_k("serial", -2)
    with pytest.raises(gemmkit.ConfigError, match="split-K mode"):
        p.set_split_k("sideways", 2)
    # fprop splits only when asked.
    f = plan("fprop")
    assert f.split_k_for(np.zeros((1, 7, 7, 256), np.float16), np.zeros((64, 1, 1, 256), np.float16), None,
                         np.zeros((1, 7, 7, 64), np.float16)) == (gemmkit.SplitKMode.serial, 1)


def test_torch_channels_last_is_read_in_place_and_nchw_is_refused():
    torch = pytest.importorskip("torch")
    p = plan()
    x = torch.zeros(2, 16, 8, 8, dtype=torch.float16).to(memory_format=torch.channels_last)
    w = torch.zeros(32, 16, 3, 3, dtype=torch.float16).to(memory_format=torch.channels_last)
    y = torch.zeros(2, 32, 8, 8, dtype=torch.float16).to(memory_format=torch.channels_last)
    spec = p.spec_for(x, w, None, y, padding=(1, 1))
    assert spec.alignment_A == 8 and spec.alignment_C == 8
    nchw = torch.zeros(2, 16, 8, 8, dtype=torch.float16)
    with pytest.raises(gemmkit.TensorError, match=r"memory_format=torch.channels_last"):
        p.spec_for(nchw, w, None, y, padding=1)
    with pytest.raises(gemmkit.TensorError, match=r"Tensor A: a conv operand is 4-D \(N, C, H, W\)"):
        p.spec_for(x[0], w, None, y, padding=1)
    # A channels_last tensor with extents of 1 is packed whatever torch's strides for them say.
    def last(*shape):
        return torch.zeros(*shape, dtype=torch.float16).to(memory_format=torch.channels_last)
    assert p.spec_for(last(1, 16, 1, 8), last(32, 16, 1, 1), None, last(1, 32, 1, 8)).alignment_A == 8
    # From tensors: their dtypes declare the plan.
    from_tensors = gemmkit.Conv2d(kind="fprop", A=x, B=w, C=y, D=y, element_accumulator=torch.float32, cc=80)
    assert from_tensors.element_A == gemmkit.DataType.f16


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["fprop", "dgrad", "wgrad"])
@pytest.mark.parametrize("dtype_name,stride,padding,dilation", [("float16", 1, 1, 1), ("float16", 2, 1, 1),
                                                                 ("bfloat16", 1, 2, 2), ("float32", 2, 3, 1)])
def test_matches_torch_conv2d_and_its_gradients(kind, dtype_name, stride, padding, dilation):
    if kind == "dgrad" and stride > 1 and dilation > 1:
        pytest.skip("strided dgrad takes dilation 1 (a ConfigError, tested in C++)")
    check_against_torch(kind, dtype_name, stride, padding, dilation, kernel_cc=80)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["fprop", "dgrad", "wgrad"])
@pytest.mark.parametrize("dtype_name,stride,padding,dilation", [("float16", 1, 1, 1), ("float16", 2, 1, 1),
                                                                 ("bfloat16", 1, 2, 2)])
def test_sm90_kernels_match_torch(kind, dtype_name, stride, padding, dilation):
    torch = pytest.importorskip("torch")
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("SM90 conv kernels need an SM90 GPU")
    if kind == "dgrad" and stride > 1:
        with pytest.raises(gemmkit.ConfigError, match="kernel_cc=80"):
            check_against_torch(kind, dtype_name, stride, padding, dilation, kernel_cc=90)
        return
    check_against_torch(kind, dtype_name, stride, padding, dilation, kernel_cc=90)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["fprop", "dgrad", "wgrad"])
def test_sm90_pointwise_convs_run_as_gemms_and_match_torch(kind):
    torch = pytest.importorskip("torch")
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("SM90 plans need an SM90 GPU")
    # A 1x1 filter at unit stride without padding: the SM90 GEMM family's kernel runs it (gpu_specs.pointwise_specs).
    name = check_against_torch(kind, "float16", 1, 0, 1, kernel_cc=90, R=1)
    assert name.startswith("cutlass3x_sm90_tensorop_") and "gemm_f16" in name, name


def check_against_torch(kind, dtype_name, stride, padding, dilation, kernel_cc, R=3):
    """Runs the plan on small integers and compares with torch's float64 conv (or its gradient); returns the name of
    the kernel the plan ran."""
    torch = pytest.importorskip("torch")
    dtype = getattr(torch, dtype_name)
    gen = torch.Generator().manual_seed(7)
    ints = lambda *shape: torch.randint(-2, 3, shape, generator=gen).to(dtype)  # noqa: E731
    N, C, H, W, K = 2, 16, 13, 11, 24
    x = ints(N, C, H, W).cuda().to(memory_format=torch.channels_last)
    w = ints(K, C, R, R).cuda().to(memory_format=torch.channels_last)
    args = dict(stride=stride, padding=padding, dilation=dilation)
    y = torch.nn.functional.conv2d(x.double(), w.double(), **args)
    dy = ints(*y.shape).cuda().to(memory_format=torch.channels_last)
    p = gemmkit.Conv2d(kind=kind, element=dtype, element_accumulator=torch.float32, kernel_cc=kernel_cc)
    assert p.kernel_cc == kernel_cc
    if kind == "fprop":
        operands, out = (x, w), torch.empty_like(y, dtype=dtype).to(memory_format=torch.channels_last)
        expected = y
    elif kind == "dgrad":
        operands, out = (dy, w), torch.empty_like(x)
        expected = torch.nn.grad.conv2d_input(x.shape, w.double(), dy.double(), **args)
    else:
        operands, out = (dy, x), torch.empty_like(w)
        expected = torch.nn.grad.conv2d_weight(x.double(), w.shape, dy.double(), **args)
    p.run(*operands, None, out, **args)
    torch.cuda.synchronize()
    name = p.spec_for(*operands, None, out, **args).name()
    assert torch.equal(out.double(), expected.to(dtype).double()), name
    return name


@pytest.mark.gpu
def test_split_k_wgrad_and_an_activation():
    torch = pytest.importorskip("torch")
    gen = torch.Generator().manual_seed(3)
    x = torch.randint(-1, 2, (4, 16, 12, 12), generator=gen).half().cuda().to(memory_format=torch.channels_last)
    dy = torch.randint(-1, 2, (4, 32, 12, 12), generator=gen).half().cuda().to(memory_format=torch.channels_last)
    dw = torch.empty(32, 16, 3, 3, dtype=torch.half, device="cuda").to(memory_format=torch.channels_last)
    p = gemmkit.Conv2dWgrad(element=torch.float16, element_accumulator=torch.float32, kernel_cc=80)
    p.run(dy, x, None, dw, padding=1, split_k=("serial", 3))
    expected = torch.nn.grad.conv2d_weight(x.double(), dw.shape, dy.double(), padding=1)
    assert torch.equal(dw.double(), expected.half().double())
    relu = gemmkit.Conv2d(kind="fprop", element=torch.float16, element_accumulator=torch.float32)
    relu.activation = "relu"
    w = torch.randint(-1, 2, (32, 16, 3, 3), generator=gen).half().cuda().to(memory_format=torch.channels_last)
    y = torch.empty(4, 32, 12, 12, dtype=torch.half, device="cuda").to(memory_format=torch.channels_last)
    relu.run(x, w, None, y, padding=1)
    expected = torch.relu(torch.nn.functional.conv2d(x.double(), w.double(), padding=1))
    assert torch.equal(y.double(), expected.half().double())


@pytest.mark.gpu
def test_parallel_split_k_wgrad_with_beta_and_an_activation_after_the_reduction():
    torch = pytest.importorskip("torch")
    gen = torch.Generator().manual_seed(5)
    cl = torch.channels_last
    ints = lambda *shape: torch.randint(-2, 3, shape, generator=gen).half().cuda().to(memory_format=cl)  # noqa: E731
    x, dy, c = ints(4, 16, 16, 16), ints(4, 32, 16, 16), ints(32, 16, 3, 3)
    dw = torch.empty(32, 16, 3, 3, dtype=torch.half, device="cuda").to(memory_format=cl)
    p = gemmkit.Conv2dWgrad(element=torch.float16, element_accumulator=torch.float32, kernel_cc=80)
    p.activation = "relu"
    grad = torch.nn.grad.conv2d_weight(x.double(), dw.shape, dy.double(), padding=1)
    # relu(2 * sum - C): a relu per slice, or beta per slice, would not give this (N*P*Q = 1024 = 16 steps of 64).
    expected = torch.relu(2.0 * grad - c.double()).half()
    for slices in (2, 3, 5, 16, 40):
        dw.fill_(7)
        p.run(dy, x, c, dw, padding=1, alpha=2.0, beta=-1.0, split_k=("parallel", slices))
        assert p.split_k_for(dy, x, c, dw, padding=1, beta=-1.0) == (gemmkit.SplitKMode.parallel, slices)
        assert torch.equal(dw, expected), slices


@pytest.mark.gpu
def test_wgrad_splits_by_default_and_matches_torch():
    torch = pytest.importorskip("torch")
    gen = torch.Generator().manual_seed(6)
    cl = torch.channels_last
    ints = lambda *shape: torch.randint(-1, 2, shape, generator=gen).half().cuda().to(memory_format=cl)  # noqa: E731
    x, dy = ints(32, 64, 28, 28), ints(32, 64, 28, 28)
    dw = torch.empty(64, 64, 1, 1, dtype=torch.half, device="cuda").to(memory_format=cl)
    p = gemmkit.Conv2dWgrad(element=torch.float16, element_accumulator=torch.float32, kernel_cc=80)
    mode, slices = p.split_k_for(dy, x, None, dw)
    assert mode == gemmkit.SplitKMode.parallel and slices > 1
    p.run(dy, x, None, dw)
    expected = torch.nn.grad.conv2d_weight(x.double(), dw.shape, dy.double())
    assert torch.equal(dw.double(), expected.half().double())
