"""python/gemmkit/epilogue.py: gemmkit.epilogue, what the GEMM's epilogue computes. Either one fused activation,
D = act(alpha * A @ B + beta * C):

    plan.activation = gemmkit.epilogue.relu          # or "relu"
    plan.activation = ("leaky_relu", 0.1)            # the slope is honoured (a run-time argument)

or an epilogue visitor tree traced from a Python function, as the reference's epilogue.trace:

    def epilogue(accum, alpha, C, beta, aux, bias):
        F = alpha * accum + (beta * C + aux)
        E = relu(F + 1) + bias
        D = E + F
        return D, F

    visitor = gemmkit.epilogue.trace(epilogue, {"accum": gemmkit.Tensor(element="f32", shape=(m, n)), "alpha": 0.5,
                                                "C": C, "beta": 0.5, "aux": aux, "bias": bias, "D": D, "F": F})
    plan.epilogue_visitor = visitor
    plan.run(A, B, C, D, visitor_args={"alpha": 0.5, "beta": 0.5, "aux": aux, "bias": bias, "F": F})

The activations (identity, relu, leaky_relu, gelu, gelu_tanh, hardswish, sigmoid, silu, tanh: every member of the C++
enum table) and maximum, minimum, multiply_add, sum and max are also plain functions over torch tensors and numpy
arrays, so that the traced function runs eagerly as its own reference (`visitor(**tensors)`).
"""
from __future__ import annotations

import inspect
import math
import numbers
from typing import Any, Callable, Optional, Sequence, Union

from . import _convert
from ._gemmkit import Activation, ConfigError, DataType, Epilogue, LayoutType
from ._trace import _ACTIVATIONS, Transform, _function_definition, _is_torch, _returned_names, _Tracer
from .tensor import Tensor

__all__ = ["Activation", "ActivationFunction", "TracedEpilogue", "get_activations", "trace", "identity", "relu",
           "leaky_relu", "gelu", "gelu_tanh", "hardswish", "sigmoid", "silu", "tanh", "maximum", "minimum",
           "multiply_add", "sum", "max", "permute", "reshape"]


def __dir__() -> list[str]:
    """dir() shows the API; the typing helpers and the imported types stay attributes, unlisted."""
    return sorted({*__all__, *(name for name in globals() if name.startswith("__"))})


# ---- eager evaluation: the same functions over torch tensors, numpy arrays and numbers ------------------------------


def _over_numpy(x: Any, formula: Callable[[Any], Any]) -> Any:
    """`formula` over float64 values, returned in x's float type (a number stays a number)."""
    import numpy

    array = numpy.asarray(x)
    result = formula(array.astype(numpy.float64))
    if isinstance(x, numbers.Real):
        return float(result)
    return result.astype(array.dtype) if array.dtype.kind == "f" else result


def _numpy_erf(x: Any) -> Any:
    import numpy

    return numpy.vectorize(math.erf, otypes=[numpy.float64])(x)


def _numpy_formula(name: str, parameter: float) -> Callable[[Any], Any]:
    import numpy as np

    formulas: dict[str, Callable[[Any], Any]] = {
        "identity": lambda x: x,
        "relu": lambda x: np.maximum(x, 0.0),
        "leaky_relu": lambda x: np.where(x > 0, x, parameter * x),
        "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
        "tanh": np.tanh,
        "gelu": lambda x: 0.5 * x * (1.0 + _numpy_erf(x / math.sqrt(2.0))),
        "gelu_tanh": lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3))),
        "silu": lambda x: x / (1.0 + np.exp(-x)),
        "hardswish": lambda x: x * np.clip(x + 3.0, 0.0, 6.0) / 6.0,
    }
    return formulas[name]


def _torch_activation(name: str, x: Any, parameter: float) -> Any:
    import torch

    functional = torch.nn.functional
    if name == "identity":
        return x
    if name == "leaky_relu":
        return functional.leaky_relu(x, parameter)
    if name == "gelu_tanh":
        return functional.gelu(x, approximate="tanh")
    return getattr(functional, name)(x)  # relu, sigmoid, tanh, gelu, silu, hardswish


class ActivationFunction:
    """An activation the epilogue fuses: set it as plan.activation, call it in a traced epilogue, or call it on a
    torch tensor, a numpy array or a number, elementwise (leaky_relu takes its slope second, by default 0.01).
    Compares equal to its Activation member."""

    __slots__ = ("activation",)

    def __init__(self, activation: Activation) -> None:
        self.activation = activation

    @property
    def name(self) -> str:
        return self.activation.name

    def __call__(self, x: Any, slope: Optional[float] = None) -> Any:
        if slope is not None and self.activation != Activation.leaky_relu:
            raise TypeError(f"{self.name}() takes one argument; only leaky_relu takes a slope.")
        parameter = 0.01 if slope is None else float(slope)
        if _is_torch(x):
            return _torch_activation(self.name, x, parameter)
        return _over_numpy(x, _numpy_formula(self.name, parameter))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ActivationFunction):
            return self.activation == other.activation
        return self.activation == other

    def __hash__(self) -> int:
        return hash(self.activation)

    def __repr__(self) -> str:
        return f"gemmkit.epilogue.{self.name}"


identity = ActivationFunction(Activation.identity)
relu = ActivationFunction(Activation.relu)
leaky_relu = ActivationFunction(Activation.leaky_relu)
gelu = ActivationFunction(Activation.gelu)
gelu_tanh = ActivationFunction(Activation.gelu_tanh)
hardswish = ActivationFunction(Activation.hardswish)
sigmoid = ActivationFunction(Activation.sigmoid)
silu = ActivationFunction(Activation.silu)
tanh = ActivationFunction(Activation.tanh)
assert all(isinstance(globals().get(name), ActivationFunction)
           for name in _ACTIVATIONS), "a new Activation needs its function here"


def get_activations() -> list[Activation]:
    """Every activation gemmkit fuses (the same list as Gemm.activations())."""
    return list(Activation)


def _elementwise(name: str, *values: Any) -> Any:
    tensor = next((v for v in values if _is_torch(v)), None)
    if tensor is None:
        import numpy

        return getattr(numpy, name)(*values)
    import torch

    operands = [v if _is_torch(v) else torch.as_tensor(v, dtype=tensor.dtype, device=tensor.device) for v in values]
    return getattr(torch, name)(*operands)


def maximum(x: Any, y: Any) -> Any:
    """The elementwise maximum (torch.maximum / numpy.maximum; a number on either side)."""
    return _elementwise("maximum", x, y)


def minimum(x: Any, y: Any) -> Any:
    """The elementwise minimum."""
    return _elementwise("minimum", x, y)


def multiply_add(a: Any, b: Any, c: Any) -> Any:
    """a * b + c."""
    return a * b + c


Dims = Union[int, Sequence[int], None]


def _reduce(torch_name: str, numpy_name: str, x: Any, dim: Dims) -> Any:
    axes = dim if dim is None or isinstance(dim, int) else tuple(dim)
    if _is_torch(x):
        import torch

        return getattr(torch, torch_name)(x) if axes is None else getattr(torch, torch_name)(x, dim=axes)
    import numpy

    return getattr(numpy, numpy_name)(x, axis=axes)


def sum(x: Any, dim: Dims = None) -> Any:  # noqa: A001 (the reference's name)
    """The sum over `dim` (all dimensions when None), without keeping them. In a traced epilogue, a reduction whose
    kind comes from its output's example shape."""
    return _reduce("sum", "sum", x, dim)


def max(x: Any, dim: Dims = None) -> Any:  # noqa: A001 (the reference's name)
    """The maximum over `dim` (all dimensions when None), without keeping them (torch.amax). In a traced epilogue, a
    reduction whose kind comes from its output's example shape."""
    return _reduce("amax", "amax", x, dim)


def permute(x: Any, indices: Sequence[int]) -> Any:
    """torch.permute's meaning, eagerly. In a traced epilogue: a swap of the last two axes (see trace)."""
    return x.permute(*indices) if _is_torch(x) else x.transpose(tuple(indices))


def reshape(x: Any, new_shape: Sequence[int]) -> Any:
    """A reshaped view, eagerly. In a traced epilogue: an input in another shape, or a computed value's batch split
    (see trace)."""
    return x.reshape(tuple(new_shape))


# ---- trace: the tree a function describes (gemmkit._trace reads it), and the function itself ------------------------


class TracedEpilogue:
    """What trace() returns: the epilogue visitor tree (`epilogue`, a gemmkit._gemmkit.Epilogue) and the function it
    was traced from, which calling this runs eagerly (`visitor(**tensors)` on torch tensors or numpy arrays, the
    reference's host check). Set it as plan.epilogue_visitor; run() then takes the tensors and scalars it names in
    visitor_args."""

    __slots__ = ("function", "epilogue", "return_names", "arguments", "operands", "transforms")

    def __init__(self, function: Callable[..., Any], epilogue: Epilogue, return_names: tuple[str, ...],
                 arguments: tuple[str, ...], operands: dict[str, tuple[DataType, LayoutType]],
                 transforms: Optional[dict[str, Transform]] = None) -> None:
        self.function = function
        self.epilogue = epilogue
        #: The returned names: a str when there is one, else a tuple (as the reference's).
        self.return_names: Union[str, tuple[str, ...]] = return_names[0] if len(return_names) == 1 else return_names
        #: The function's parameters, in order (a parameter the tree does not read is no input of it).
        self.arguments = arguments
        #: The element type and layout of C and D (when the function takes C) as the kernel reads and writes them.
        self.operands = operands
        #: The tensors the function's permute() and reshape() give in another shape or axis order than the kernel's:
        #: name -> (the shape run() views the tensor as, or None; whether it then swaps the last two axes).
        self.transforms: dict[str, Transform] = dict(transforms or {})

    def kernel_view(self, name: str, tensor: Any) -> Any:
        """`tensor` (given for `name`, in the function's shape and axis order) as the kernel reads or writes it: a
        view of the same memory, reshaped and transposed as the function's permute() and reshape() say."""
        reshape_to, transposed = self.transforms.get(name, (None, False))
        if tensor is None or (reshape_to is None and not transposed) or isinstance(tensor, Tensor):
            return tensor
        if reshape_to is not None:
            if _is_torch(tensor):
                tensor = tensor.view(reshape_to)  # raises where no view of that shape exists
            else:
                try:
                    tensor = tensor.reshape(reshape_to, copy=False)  # numpy >= 2.1: raises instead of copying
                except TypeError:  # older numpy, cupy: a view whose shape is set raises instead of copying
                    tensor = tensor.view()
                    tensor.shape = reshape_to
        if transposed:
            tensor = tensor.transpose(-1, -2) if _is_torch(tensor) else tensor.swapaxes(-1, -2)
        return tensor

    @property
    def inputs(self) -> list[str]:
        """The tensors and scalars the tree reads by name (C, which run() takes, aside)."""
        return self.epilogue.inputs

    @property
    def outputs(self) -> list[str]:
        """The tensors the tree writes besides D (stores and reductions)."""
        return self.epilogue.outputs

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    def __str__(self) -> str:
        return str(self.epilogue)

    def __repr__(self) -> str:
        return f"<gemmkit.epilogue.trace({self.function.__qualname__}) {self.epilogue.digest}:\n{self.epilogue}>"


def trace(fn: Callable[..., Any], example_tensors: dict[str, object], **kwargs: Any) -> TracedEpilogue:
    """The epilogue visitor tree `fn` describes, read from its source (fn is not run). `fn` takes `accum` (A @ B),
    optionally `C` (the GEMM's C) and named inputs; its body is single assignments `name = expression` over + - * /,
    numbers and the functions of this module (called by bare name: relu(x), leaky_relu(x, 0.1), maximum(x, 0.0),
    multiply_add(a, b, c), ...), each name assigned once; it ends with `return D, ...`: D is the GEMM's D, the other
    names are outputs. `example_tensors` gives, for every argument and returned name, a number (a scalar, given at
    run time) or a tensor (gemmkit.Tensor, torch, numpy, cupy) whose shape against accum's (L, M, N) or (M, N) says
    what it is: (M, N) / (L, M, N) a matrix (its layout from the strides), (N,) / (1, N) / (L, 1, N) a row vector,
    (M, 1) / (L, M, 1) a column vector. A returned name with a matrix example is stored; one with a vector or scalar
    example ((1,) / (L, 1, 1)) must be assigned sum(x, dim=...) or max(x, dim=...), and is that reduction: over the
    rows into a row vector, over the columns into a column vector, or to a scalar; without the batch extent L it
    reduces over the batches too. A stored name read later in the body stands for the stored value; a reduction's
    cannot be read; D cannot be read.
    permute(x, indices=...) may swap the last two axes of a value (rows and columns): an input read in that order is
    given transposed (a column-major matrix, a row vector along M), and a store or D written in it is column-major.
    reshape(x, new_shape=...) views an input in another shape of as many elements (e.g. (16, 32) as an (M, 1) column
    vector), or splits a computed value's batch extent (inputs and outputs then carry those leading extents); run()
    takes the tensors in the function's shapes and views them as the kernel reads them (TracedEpilogue.kernel_view).
    Not supported yet: a permute that moves a batch axis, and tensor scalars (a (1,) or (L, 1, 1) input; pass a
    number).
    kwargs: cc (the reference's; the tree is the same for CUTLASS 3.x and 2.x kernels, the plan it is set on
    decides) and element_compute (f32, the only compute type). Raises SyntaxError for what the function may not do, RuntimeError for a missing
    example, ConfigError for shapes and calls the tree cannot take."""
    kwargs.pop("cc", None)
    element_compute = _convert.data_type(kwargs.pop("element_compute", None))
    if kwargs:
        raise TypeError(f"trace() got unexpected keyword argument(s) {', '.join(kwargs)}; it takes cc and "
                        "element_compute.")
    if element_compute not in (None, DataType.f32):
        raise ConfigError(f"An epilogue visitor tree computes in f32; element_compute={element_compute.name} is not "
                          "offered.")
    definition = _function_definition(fn)
    parameters = definition.args
    if parameters.vararg or parameters.kwarg:
        raise SyntaxError("An epilogue takes named arguments only (no *args or **kwargs).")
    arguments = tuple(a.arg for a in [*parameters.posonlyargs, *parameters.args, *parameters.kwonlyargs])
    if "accum" not in arguments:
        raise SyntaxError("Cannot find 'accum' in the argument list.")
    returned, body = _returned_names(definition)
    closure = inspect.getclosurevars(fn)
    tracer = _Tracer(example_tensors, returned, {**closure.globals, **closure.nonlocals})
    tracer.take_arguments(arguments)
    tracer.check_returned(arguments)
    for statement in body:
        tracer.statement(statement)
    epilogue = tracer.finish()
    return TracedEpilogue(fn, epilogue, returned, arguments, tracer.operands, tracer.transforms)
