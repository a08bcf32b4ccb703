"""python/gemmkit/tensor.py: gemmkit.Tensor, an example tensor without data (element type, shape and strides), as
gemmkit.epilogue.trace takes it in place of a real one (the reference's cutlass.Tensor, its "FakeTensor").

    F = gemmkit.Tensor(element=torch.float16, shape=(6, 512, 256), layout_tag=gemmkit.LayoutType.RowMajor)
    bias = gemmkit.Tensor(element=np.float16, shape=(512, 1), stride=(1, 0))
"""
from __future__ import annotations

from typing import Optional, Sequence

from . import _convert
from ._convert import DataTypeLike, LayoutLike
from ._gemmkit import ConfigError, DataType, LayoutType

__all__ = ["Tensor"]


def __dir__() -> list[str]:
    """dir() shows the API; the typing helpers and enums the class uses stay attributes, unlisted."""
    return sorted({*__all__, *(name for name in globals() if name.startswith("__"))})


def _packed_strides(shape: Sequence[int], layout: LayoutType) -> tuple[int, ...]:
    """Element strides of a packed tensor: the last two extents in `layout`, any leading (batch) extents outermost."""
    if len(shape) < 2 or layout == LayoutType.RowMajor:
        order = list(range(len(shape)))
    else:  # column-major: the row index moves fastest, then the column, then the batches
        order = list(range(len(shape) - 2)) + [len(shape) - 1, len(shape) - 2]
    strides = [0] * len(shape)
    step = 1
    for axis in reversed(order):
        strides[axis] = step
        step *= shape[axis]
    return tuple(strides)


class Tensor:
    """An example tensor for gemmkit.epilogue.trace: `element` (a DataType, its name, or a numpy / torch dtype), a
    shape, and either a layout of the last two extents (`layout_tag`, row-major by default) or element strides."""

    __slots__ = ("element", "shape", "stride")

    def __init__(self, *, element: DataTypeLike, shape: Sequence[int], layout_tag: LayoutLike = None,
                 stride: Optional[Sequence[int]] = None) -> None:
        element_type = _convert.data_type(element)
        if element_type is None:
            raise ConfigError("gemmkit.Tensor needs an element type (element=...).")
        self.element: DataType = element_type
        self.shape: tuple[int, ...] = tuple(int(extent) for extent in shape)
        if stride is not None and layout_tag is not None:
            raise ConfigError("gemmkit.Tensor takes layout_tag or stride, not both.")
        if stride is None:
            self.stride: tuple[int, ...] = _packed_strides(self.shape, _convert.layout(layout_tag) or LayoutType.RowMajor)
        elif len(stride) != len(self.shape):
            raise ConfigError(f"gemmkit.Tensor: stride {tuple(stride)} does not match shape {self.shape}.")
        else:
            self.stride = tuple(int(step) for step in stride)

    def __repr__(self) -> str:
        return f"gemmkit.Tensor(element={self.element.name}, shape={self.shape}, stride={self.stride})"
