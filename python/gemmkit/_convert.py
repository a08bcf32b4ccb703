"""What Python callers write -> the C++ plan's types: dtypes (numpy, torch, cupy, jax, strings), layouts,
opcode classes, activations, swizzles, tile descriptions and CUDA streams. Conversions only; the *Like aliases
name what each conversion takes."""
from __future__ import annotations

import enum
from typing import Any, Optional, Protocol, Sequence, SupportsInt, TypeVar, Union

from ._gemmkit import (
    Activation,
    ConfigError,
    DataType,
    LayoutType,
    OpcodeClass,
    SwizzlingFunctor,
    TileDescription,
    parse_data_type,
    parse_layout,
    parse_opclass,
)

E = TypeVar("E", bound=enum.Enum)

#: A DataType, its name ("f16", "float16", "half", ...), a numpy / torch / cupy / jax dtype, or None (not given).
DataTypeLike = Union[DataType, str, object, None]
#: A LayoutType, a name ("row", "RowMajor", "col", "ColumnMajor", "t", "n"), or None (not given).
LayoutLike = Union[LayoutType, str, None]
#: An OpcodeClass or its name ("tensor_op", "simt").
OpcodeClassLike = Union[OpcodeClass, str]
#: A member of an enum, or its name.
EnumLike = Union[E, str]


class NamesActivation(Protocol):
    """What names an Activation: gemmkit.epilogue.relu and the other activation functions."""

    @property
    def activation(self) -> Activation: ...


#: An Activation, its name, a gemmkit.epilogue function (relu, ...), or (activation, slope) for leaky_relu.
ActivationLike = Union[Activation, str, NamesActivation, tuple[Union[Activation, str, NamesActivation], float]]
#: A SwizzlingFunctor or its name.
SwizzleLike = Union[SwizzlingFunctor, str]
#: A TileDescription, a dict of some of its fields, or None (the default).
TileLike = Union[TileDescription, dict[str, Any], None]
#: A torch / cupy stream, an object with __cuda_stream__, an int handle, or None (the tensors' framework's stream).
StreamLike = object


def _dtype_name(value: object) -> Optional[str]:
    if isinstance(value, str):
        return value
    if type(value).__module__ == "torch":  # torch.float16 prints as "torch.float16"
        return str(value)[len("torch."):]
    try:
        import numpy

        name: str = numpy.dtype(value).name  # type: ignore[call-overload]
        return name  # numpy and cupy dtypes and scalar types, jax / ml_dtypes bfloat16
    except (ImportError, TypeError, ValueError):
        return None


def data_type(value: DataTypeLike) -> Optional[DataType]:
    """DataType, a name ("f16", "float16", "half", ...), or a numpy / torch / cupy / jax dtype; None stays None."""
    if value is None or isinstance(value, DataType):
        return value
    name = _dtype_name(value)
    parsed = parse_data_type(name) if name is not None else None
    if parsed is None:
        raise ConfigError(f"No available conversion from type {value!r} to a gemmkit DataType; use one of "
                          f"{', '.join(t.name for t in DataType)} or the matching numpy / torch dtype.")
    return parsed


def layout(value: LayoutLike) -> Optional[LayoutType]:
    """LayoutType or a name ("row", "RowMajor", "col", "ColumnMajor", "t", "n"); None stays None."""
    if value is None or isinstance(value, LayoutType):
        return value
    parsed = parse_layout(value) if isinstance(value, str) else None
    if parsed is None:
        raise ConfigError(f"Invalid layout {value!r}; use gemmkit.LayoutType.RowMajor or ColumnMajor (or \"row\" / "
                          "\"col\").")
    return parsed


def opcode_class(value: OpcodeClassLike) -> OpcodeClass:
    """OpcodeClass or a name ("tensor_op", "simt")."""
    if isinstance(value, OpcodeClass):
        return value
    parsed = parse_opclass(value) if isinstance(value, str) else None
    if parsed is None:
        raise ConfigError(f"Invalid opcode class {value!r}; use gemmkit.OpcodeClass.TensorOp or Simt (or "
                          "\"tensor_op\" / \"simt\").")
    return parsed


def _member(enum: type[E], value: object, what: str, choices: Sequence[E]) -> E:
    if isinstance(value, enum):
        return value
    if isinstance(value, str) and value in enum.__members__:
        return enum[value]
    raise ConfigError(f"Invalid {what} {value!r}; available: {', '.join(m.name for m in choices)}.")


def enum_member(enum: type[E], value: EnumLike[E], what: str) -> E:
    """A member of `enum`, given as itself or by name."""
    return _member(enum, value, what, list(enum))


def _activation_member(value: object, choices: Sequence[Activation]) -> Activation:
    named = getattr(value, "activation", None)  # gemmkit.epilogue.relu names its Activation
    return _member(Activation, named if isinstance(named, Activation) else value, "activation", choices)


def activation(value: ActivationLike, choices: Sequence[Activation]) -> tuple[Activation, Optional[float]]:
    """(Activation, slope or None) from an Activation, its name, a gemmkit.epilogue function, or an
    (activation, slope) pair."""
    if isinstance(value, tuple):
        if len(value) != 2:
            raise ConfigError(f"An activation with a parameter is a pair (activation, slope); got {value!r}.")
        return _activation_member(value[0], choices), float(value[1])
    return _activation_member(value, choices), None


def swizzle(value: SwizzleLike, choices: Sequence[SwizzlingFunctor]) -> SwizzlingFunctor:
    """SwizzlingFunctor or its name, one of `choices`."""
    return _member(SwizzlingFunctor, value, "swizzling functor", choices)


_TILE_FIELDS = ("threadblock_shape", "warp_count", "stages", "instruction_shape", "cluster_shape", "kernel_schedule",
                "epilogue_schedule", "tile_scheduler", "math_operation")


def tile_description(value: TileLike, base: TileDescription) -> Optional[TileDescription]:
    """A TileDescription, or a dict of its fields laid over `base` (as the reference's dict setter does)."""
    if value is None or isinstance(value, TileDescription):
        return value
    if not isinstance(value, dict):
        raise ConfigError(f"Expected a TileDescription or a dict of its fields; got {type(value).__name__}.")
    unknown = sorted(set(value) - set(_TILE_FIELDS))
    if unknown:
        raise ConfigError(f"Unknown TileDescription field(s) {', '.join(unknown)}; fields: {', '.join(_TILE_FIELDS)}.")
    fields = {name: getattr(base, name) for name in _TILE_FIELDS}
    fields.update(value)
    return TileDescription(**fields)


def stream_handle(stream: StreamLike) -> int:
    """A raw cudaStream_t from a torch stream (.cuda_stream), a cupy stream (.ptr), an object with
    __cuda_stream__ (CUDA stream protocol), or an int."""
    if isinstance(stream, int):
        return stream
    for attribute in ("cuda_stream", "ptr"):
        handle = getattr(stream, attribute, None)
        if isinstance(handle, int):
            return handle
    protocol = getattr(stream, "__cuda_stream__", None)
    if protocol is not None:
        return int(protocol()[1])
    if isinstance(stream, SupportsInt):
        return int(stream)
    raise TypeError(f"Cannot take a CUDA stream from {type(stream).__name__}; pass a torch.cuda.Stream, a "
                    "cupy.cuda.Stream, an object with __cuda_stream__, or an int handle.")
