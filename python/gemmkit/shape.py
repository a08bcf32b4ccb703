"""python/gemmkit/shape.py: gemmkit.shape, problem sizes as the reference's cutlass.shape spells them.

    ps = gemmkit.shape.Conv2DProblemSize(1, 4, 4, 16, 8, 3, 3, 16, 0, 0, 3, 3, 1, 1)
    x = torch.empty(ps.N, ps.C, ps.H, ps.W)   # the output is (ps.N, ps.K, ps.P, ps.Q)

P and Q are gemmkit.Conv2d.output_size's, torch's formula: (H + 2 pad - dilation (R - 1) - 1) // stride + 1.
"""
from __future__ import annotations

import operator
from typing import Any, NamedTuple, Sequence

from ._convert import enum_member
from ._gemmkit import ConfigError, ConvKind
from .op import Conv2d

__all__ = ["Conv2DProblemSize", "GemmCoord"]


def __dir__() -> list[str]:
    """dir() shows the API; the errors, enums and typing helpers the classes use stay attributes, unlisted."""
    return sorted({*__all__, *(name for name in globals() if name.startswith("__"))})


class GemmCoord(NamedTuple):
    """An implicit GEMM's extents: D is m x n, the reduction k long."""

    m: int
    n: int
    k: int


# The convolution mode, as the reference's ConvMode member (or its name) or ours; gemmkit's kernels compute
# cross-correlation only, as torch's conv2d does.
_CROSS_CORRELATION = ("CrossCorrelation", "cross_correlation")


def _mode_name(mode: Any) -> str:
    name = mode if isinstance(mode, str) else getattr(mode, "name", None)
    if name not in _CROSS_CORRELATION:
        raise ConfigError(f"Conv2DProblemSize mode {mode!r}: gemmkit's conv kernels compute cross-correlation only "
                          "(as torch's conv2d); pass mode='cross_correlation' (or the reference's "
                          "ConvMode.CrossCorrelation).")
    return "cross_correlation"


def _extent(value: Any, name: str, least: int) -> int:
    try:
        extent = operator.index(value)
    except TypeError:
        raise ConfigError(f"Conv2DProblemSize {name} must be an int; got {value!r}.") from None
    if extent < least:
        raise ConfigError(f"Conv2DProblemSize {name} is {extent}; it must be at least {least}.")
    return extent


class Conv2DProblemSize:
    """A 2-D convolution's sizes, positionally as the reference's: the input (n, h, w, c), the filter (k, r, s, c_),
    zero padding, strides and dilations, the mode, split_k_slices and groups. Attributes N, H, W, C, K, R, S,
    pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w, mode, split_k_slices, groups; P and Q (the output's
    height and width) follow from them. c_ is the filter's channel count, c / groups; it is checked, not kept."""

    __slots__ = ("N", "H", "W", "C", "K", "R", "S", "pad_h", "pad_w", "stride_h", "stride_w", "dilation_h",
                 "dilation_w", "mode", "split_k_slices", "groups")

    def __init__(self, n: int, h: int, w: int, c: int, k: int, r: int, s: int, c_: int, pad_h: int, pad_w: int,
                 stride_h: int, stride_w: int, dilation_h: int, dilation_w: int, mode: Any = "cross_correlation",
                 split_k_slices: int = 1, groups: int = 1) -> None:
        self.N = _extent(n, "n", 0)  # an empty batch is a problem too (its output is empty)
        self.H, self.W, self.C = _extent(h, "h", 1), _extent(w, "w", 1), _extent(c, "c", 1)
        self.K, self.R, self.S = _extent(k, "k", 1), _extent(r, "r", 1), _extent(s, "s", 1)
        self.pad_h, self.pad_w = _extent(pad_h, "pad_h", 0), _extent(pad_w, "pad_w", 0)
        self.stride_h, self.stride_w = _extent(stride_h, "stride_h", 1), _extent(stride_w, "stride_w", 1)
        self.dilation_h, self.dilation_w = _extent(dilation_h, "dilation_h", 1), _extent(dilation_w, "dilation_w", 1)
        self.mode = _mode_name(mode)
        self.split_k_slices = _extent(split_k_slices, "split_k_slices", 1)
        self.groups = _extent(groups, "groups", 1)
        filter_channels = _extent(c_, "c_", 1)
        if self.C % self.groups != 0 or filter_channels * self.groups != self.C:
            raise ConfigError(f"Conv2DProblemSize: the filter has c_ = {filter_channels} channels but the input "
                              f"c = {self.C} in {self.groups} group(s); c_ must be c / groups.")
        self._output()  # an empty output is refused now, not when P is first read

    @property
    def P(self) -> int:
        """The output's height."""
        return self._output()[1]

    @property
    def Q(self) -> int:
        """The output's width."""
        return self._output()[2]

    def _output(self) -> tuple[int, ...]:
        """(N, P, Q, K) from gemmkit.Conv2d.output_size (channels do not enter it: the input's stand for the filter's,
        which differ with groups)."""
        return Conv2d.output_size((self.N, self.H, self.W, self.C), (self.K, self.R, self.S, self.C),
                                  (self.pad_h, self.pad_w), (self.stride_h, self.stride_w),
                                  (self.dilation_h, self.dilation_w))

    def implicit_gemm_size(self, kind: Any) -> GemmCoord:
        """The implicit GEMM a conv kind computes (kind: a ConvKind or its name): fprop (N P Q) x K over R S C /
        groups, dgrad (N H W) x C over R S K, wgrad K x (R S C) over N P Q."""
        member = enum_member(ConvKind, kind, "conv kind")
        if member == ConvKind.fprop:
            return GemmCoord(self.N * self.P * self.Q, self.K, self.R * self.S * self.C // self.groups)
        if member == ConvKind.dgrad:
            return GemmCoord(self.N * self.H * self.W, self.C, self.R * self.S * self.K)
        return GemmCoord(self.K, self.R * self.S * self.C, self.N * self.P * self.Q)

    @staticmethod
    def from_sizes(input_size: Sequence[int], weight_size: Sequence[int]) -> Conv2DProblemSize:
        """The reference's shorthand: an input (n, h, w, c) and a filter (k, r, s, c), unit strides and dilations,
        padding r // 2 and s // 2 (the output as large as the input for odd filters)."""
        n, h, w, c = input_size
        k, r, s, c_ = weight_size
        return Conv2DProblemSize(n, h, w, c, k, r, s, c_, r // 2, s // 2, 1, 1, 1, 1)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Conv2DProblemSize):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self.__slots__)

    def __repr__(self) -> str:
        return (f"Conv2DProblemSize(N={self.N}, H={self.H}, W={self.W}, C={self.C}, K={self.K}, R={self.R}, "
                f"S={self.S}, P={self.P}, Q={self.Q}, pad=({self.pad_h}, {self.pad_w}), "
                f"stride=({self.stride_h}, {self.stride_w}), dilation=({self.dilation_h}, {self.dilation_w}), "
                f"mode={self.mode!r}, split_k_slices={self.split_k_slices}, groups={self.groups})")
