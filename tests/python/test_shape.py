"""tests/python/test_shape.py (unit): gemmkit.shape.Conv2DProblemSize, the reference's constructor and attributes,
with P and Q as gemmkit.Conv2d.output_size (torch's formula) computes them."""
import enum

import pytest

import gemmkit
from gemmkit.shape import Conv2DProblemSize, GemmCoord


class ConvMode(enum.Enum):
    """Stands in for the reference's cutlass_library.ConvMode, which the reference's tests pass positionally."""

    CrossCorrelation = 1
    Convolution = 2


def test_the_references_positional_constructor_and_attributes():
    ps = Conv2DProblemSize(1, 4, 4, 16, 8, 3, 3, 16, 0, 0, 3, 3, 1, 1)
    assert (ps.N, ps.H, ps.W, ps.C, ps.K, ps.R, ps.S) == (1, 4, 4, 16, 8, 3, 3)
    assert (ps.pad_h, ps.pad_w, ps.stride_h, ps.stride_w, ps.dilation_h, ps.dilation_w) == (0, 0, 3, 3, 1, 1)
    assert (ps.P, ps.Q) == (1, 1)
    assert (ps.mode, ps.split_k_slices, ps.groups) == ("cross_correlation", 1, 1)
    full = Conv2DProblemSize(1, 4, 4, 16, 8, 3, 3, 16, 0, 0, 3, 3, 1, 1, ConvMode.CrossCorrelation, 1, 1)
    assert full == ps
    assert Conv2DProblemSize(2, 9, 9, 16, 8, 3, 3, 16, 1, 1, 1, 1, 1, 1, split_k_slices=4).split_k_slices == 4


@pytest.mark.parametrize("h, w, r, s, pad, stride, dilation", [
    (13, 11, 3, 3, (1, 2), (2, 1), (1, 1)),
    (13, 11, 3, 2, (0, 0), (1, 2), (2, 3)),  # dilated: here the reference's (H + 2 pad - R dilation) // stride differs
    (7, 7, 1, 1, (0, 0), (3, 3), (1, 1)),
    (8, 8, 5, 5, (2, 2), (1, 1), (1, 1)),
])
def test_p_and_q_are_gemmkits_output_size(h, w, r, s, pad, stride, dilation):
    ps = Conv2DProblemSize(2, h, w, 16, 24, r, s, 16, *pad, *stride, *dilation)
    assert (2, ps.P, ps.Q, 24) == gemmkit.Conv2d.output_size((2, h, w, 16), (24, r, s, 16), pad, stride, dilation)
    # torch's formula, written out
    assert ps.P == (h + 2 * pad[0] - dilation[0] * (r - 1) - 1) // stride[0] + 1
    assert ps.Q == (w + 2 * pad[1] - dilation[1] * (s - 1) - 1) // stride[1] + 1


def test_p_and_q_follow_the_attributes():
    ps = Conv2DProblemSize(1, 8, 8, 16, 8, 3, 3, 16, 0, 0, 1, 1, 1, 1)
    assert (ps.P, ps.Q) == (6, 6)
    ps.pad_h = 1
    ps.stride_w = 2
    assert (ps.P, ps.Q) == (8, 3)


def test_implicit_gemm_sizes():
    ps = Conv2DProblemSize(2, 9, 7, 16, 24, 3, 3, 16, 1, 1, 2, 2, 1, 1)
    assert (ps.P, ps.Q) == (5, 4)
    assert ps.implicit_gemm_size("fprop") == GemmCoord(2 * 5 * 4, 24, 3 * 3 * 16)
    assert ps.implicit_gemm_size(gemmkit.ConvKind.dgrad) == GemmCoord(2 * 9 * 7, 16, 3 * 3 * 24)
    wgrad = ps.implicit_gemm_size("wgrad")
    assert (wgrad.m, wgrad.n, wgrad.k) == (24, 3 * 3 * 16, 2 * 5 * 4)
    grouped = Conv2DProblemSize(1, 4, 4, 16, 8, 3, 3, 4, 1, 1, 1, 1, 1, 1, groups=4)
    assert grouped.implicit_gemm_size("fprop").k == 3 * 3 * 4


def test_from_sizes_pads_to_keep_odd_filters_in_place():
    ps = Conv2DProblemSize.from_sizes((2, 10, 12, 16), (8, 5, 3, 16))  # NHWC input, KRSC filter, as the reference's
    assert (ps.N, ps.H, ps.W, ps.C, ps.K, ps.R, ps.S) == (2, 10, 12, 16, 8, 5, 3)
    assert (ps.pad_h, ps.pad_w, ps.stride_h, ps.dilation_w) == (2, 1, 1, 1)
    assert (ps.P, ps.Q) == (10, 12)


def test_repr_names_every_size():
    text = repr(Conv2DProblemSize(1, 4, 4, 16, 8, 3, 3, 16, 0, 0, 3, 3, 1, 1))
    assert text == ("Conv2DProblemSize(N=1, H=4, W=4, C=16, K=8, R=3, S=3, P=1, Q=1, pad=(0, 0), stride=(3, 3), "
                    "dilation=(1, 1), mode='cross_correlation', split_k_slices=1, groups=1)")


@pytest.mark.parametrize("args, kwargs, message", [
    ((1, 4, 4, 16, 8, 5, 5, 16, 0, 0, 1, 1, 1, 1), {}, "larger than the padded input"),
    ((1, 4, 4, 16, 8, 3, 3, 8, 0, 0, 1, 1, 1, 1), {}, r"c_ = 8 channels but the input c = 16 in 1 group"),
    ((1, 4, 4, 16, 8, 3, 3, 16, 0, 0, 0, 1, 1, 1), {}, "stride_h is 0; it must be at least 1"),
    ((1, 4, 4, 16, 8, 3, 3, 16, -1, 0, 1, 1, 1, 1), {}, "pad_h is -1; it must be at least 0"),
    ((1, 4, 4, 16, 8, 3, 3, 16, 0, 0, 1, 1, 1, 1), {"split_k_slices": 0}, "split_k_slices is 0"),
    ((1, 4.5, 4, 16, 8, 3, 3, 16, 0, 0, 1, 1, 1, 1), {}, "h must be an int; got 4.5"),
    ((1, 4, 4, 16, 8, 3, 3, 16, 0, 0, 1, 1, 1, 1, ConvMode.Convolution), {}, "cross-correlation only"),
])
def test_refusals_say_what_is_wrong(args, kwargs, message):
    with pytest.raises(gemmkit.ConfigError, match=message):
        Conv2DProblemSize(*args, **kwargs)


def test_is_in_the_package():
    assert gemmkit.shape.Conv2DProblemSize is Conv2DProblemSize and "shape" in gemmkit.__all__
