"""python/gemmkit/_trace.py: the tracer behind gemmkit.epilogue.trace. It reads an epilogue function's source (ast)
and interprets its arguments and statements, in order, over EpilogueExpr values: each argument's and returned name's
example (a number, or a tensor's shape, strides and type) says, against accum's shape, which node it is; permute()
and reshape() are undone into the views run() takes of the tensors (Transform); the result is the Epilogue tree.
gemmkit.epilogue holds the functions a traced body calls, trace() and TracedEpilogue.
"""
from __future__ import annotations

import ast
import inspect
import math
import numbers
import operator
import textwrap
from typing import Any, Callable, NamedTuple, Optional, Sequence, Union

from . import _convert, _gemmkit
from ._gemmkit import Activation, ConfigError, DataType, Epilogue, EpilogueExpr, LayoutType
from .tensor import Tensor

# The activations a traced body calls by name (gemmkit.epilogue has a function of each), in that module's order, in
# which the messages list them.
_ACTIVATIONS = ("identity", "relu", "leaky_relu", "gelu", "gelu_tanh", "hardswish", "sigmoid", "silu", "tanh")
assert set(_ACTIVATIONS) == set(Activation.__members__), "a new Activation needs its name here"


def _is_torch(value: object) -> bool:
    """A torch object (a tensor): asked of the tracer's examples and by gemmkit.epilogue's eager functions."""
    return type(value).__module__.partition(".")[0] == "torch"


class _Example(NamedTuple):
    """What an example value tells the tracer: a number (shape None), or a tensor's shape, strides and type."""

    shape: Optional[tuple[int, ...]]
    stride: tuple[int, ...]
    element: Optional[DataType]


def _example(name: str, value: object) -> _Example:
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return _Example(None, (), None)
    if isinstance(value, Tensor):
        return _Example(value.shape, value.stride, value.element)
    if _is_torch(value) and callable(getattr(value, "stride", None)):
        t: Any = value
        return _Example(tuple(t.shape), tuple(t.stride()), _convert.data_type(t.dtype))
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is None or dtype is None:
        raise ConfigError(f"Example for '{name}': expected a number, a gemmkit.Tensor, a torch tensor or a numpy / "
                          f"cupy array, not {type(value).__name__}.")
    strides = getattr(value, "strides", None)  # numpy and cupy: bytes
    itemsize = getattr(dtype, "itemsize", 1)
    shape = tuple(int(extent) for extent in shape)
    stride = (tuple(int(step) // itemsize for step in strides) if strides is not None
              else _packed(shape))
    return _Example(shape, stride, _convert.data_type(dtype))


def _layout(name: str, example: _Example) -> LayoutType:
    """The layout of a matrix example's last two extents."""
    assert example.shape is not None
    (m, n), (row_step, column_step) = example.shape[-2:], example.stride[-2:]
    if (n == 1 or column_step == 1) and (m == 1 or row_step >= n):
        return LayoutType.RowMajor
    if (m == 1 or row_step == 1) and (n == 1 or column_step >= m):
        return LayoutType.ColumnMajor
    raise ConfigError(f"Tensor {name}: strides {example.stride} of shape {example.shape} are neither row- nor "
                      "column-major in their last two extents; an epilogue matrix is one or the other.")


_REDUCTIONS = ("sum", "max")
_COMPUTES = {"maximum": 2, "minimum": 2, "multiply_add": 3}
_BINARY: dict[type, Callable[[Any, Any], Any]] = {ast.Add: operator.add, ast.Sub: operator.sub,
                                                   ast.Mult: operator.mul, ast.Div: operator.truediv}
_OFFERED = ", ".join([*_ACTIVATIONS, *_COMPUTES, *_REDUCTIONS, "permute", "reshape"])

Value = Union[EpilogueExpr, float]


def _expr(value: Value) -> EpilogueExpr:
    return value if isinstance(value, EpilogueExpr) else EpilogueExpr(value)


class _Reduced:
    """What a reduction's name stands for in the body: nothing that can be read."""


class _View(NamedTuple):
    """How a traced value's axes relate to accum's (L, M, N): its last two swapped (a permute of them), and its leading
    extents (a reshape splitting the batch; their product is L)."""

    transposed: bool
    batch: tuple[int, ...]


class _Traced(NamedTuple):
    """A value of the body: its node (or a number) and its view (None: a number or scalar, which fits any view)."""

    expr: Value
    view: Optional[_View]


class _Pending(NamedTuple):
    """An input tensor not read yet: it becomes a node in the view of the first value it meets (a permuted C is a
    column-major one); `shape` is what a reshape() of it made of its example."""

    name: str
    shape: Optional[tuple[int, ...]] = None


# How run() makes a named tensor the one the kernel reads or writes: reshaped (a view), then its last two axes swapped.
Transform = tuple[Optional[tuple[int, ...]], bool]


class _Tracer:
    """One trace: the function's arguments and statements, in order, over EpilogueExpr values."""

    def __init__(self, examples: dict[str, object], returned: tuple[str, ...],
                 namespace: Optional[dict[str, Any]] = None) -> None:
        self.examples = examples
        self.namespace = namespace or {}  # the function's globals and closure: what permute / reshape sizes may name
        self.values: dict[str, Union[_Traced, _Pending, _Reduced]] = {}
        self.returned = returned  # read first: a returned name is stored where it is assigned
        self.outputs: list[EpilogueExpr] = []
        self.d_value: Optional[_Traced] = None
        self.d_reads = 0
        self.operands: dict[str, tuple[DataType, LayoutType]] = {}  # C's and D's types and layouts
        self.transforms: dict[str, Transform] = {}  # tensors given in another shape or order than the kernel's
        self.problem = (1, 0, 0)  # (L, M, N), from accum's example

    def example(self, name: str) -> _Example:
        if name not in self.examples:
            raise RuntimeError(f"Example input for {name} is not provided.")
        return _example(name, self.examples[name])

    @property
    def identity(self) -> _View:
        return _View(False, (self.problem[0],))

    # -- shapes against accum's (L, M, N) --

    def kind(self, shape: tuple[int, ...]) -> Optional[str]:
        L, M, N = self.problem
        if shape in {(M, N), (1, M, N), (L, M, N)}:
            return "matrix"
        if shape in {(N,), (1, N), (1, 1, N), (L, 1, N)}:
            return "row"
        if shape in {(M, 1), (1, M, 1), (L, M, 1)}:
            return "column"
        if shape in {(), (1,), (1, 1), (1, 1, 1), (L, 1, 1)}:
            return "scalar"
        return None

    def full(self, name: str, example: _Example) -> LayoutType:
        """C, D and stores: accum's shape (one matrix per batch)."""
        L, M, N = self.problem
        if example.shape not in ({(L, M, N), (M, N)} if L == 1 else {(L, M, N)}):
            given = self.example(name).shape
            seen = "" if given == example.shape else f", which the epilogue's permute() / reshape() make {example.shape}"
            raise ConfigError(f"Tensor {name} has shape {given or '(a number)'}{seen}; it is written (or read) per "
                              f"batch like accum, so it must come to accum's shape {(L, M, N)}.")
        return _layout(name, example)

    def canonical(self, name: str, example: _Example, view: _View) -> _Example:
        """A tensor's example as the kernel sees it, `view` undone (its batch extents joined, its last two axes swapped
        back), and the transform run() applies to the tensor recorded."""
        assert example.shape is not None
        shape, stride = example.shape, example.stride
        reshape_to: Optional[tuple[int, ...]] = None
        if len(view.batch) > 1 and len(shape) == len(view.batch) + 2:
            lead, lead_stride = shape[:-2], stride[:-2]
            if lead != view.batch and any(extent != 1 for extent in lead):
                raise ConfigError(f"Tensor {name} has shape {shape}; where it is read the value has leading extents "
                                  f"{view.batch}, so its leading extents are those or all 1.")
            steps = [step for extent, step in zip(lead, lead_stride) if extent > 1]
            kept = [extent for extent in lead if extent > 1]
            if any(steps[i] != steps[i + 1] * kept[i + 1] for i in range(len(steps) - 1)):
                raise ConfigError(f"Tensor {name}: its leading extents {lead} (strides {lead_stride}) are not one "
                                  "evenly strided batch extent; make it contiguous.")
            shape, stride = (math.prod(lead), *shape[-2:]), (steps[-1] if steps else 0, *stride[-2:])
            reshape_to = shape
        if view.transposed:
            if len(shape) < 2:  # a vector along the value's last axis, which is accum's M
                shape, stride = (1, *shape), (0, *stride)
                reshape_to = shape
            shape, stride = (*shape[:-2], shape[-1], shape[-2]), (*stride[:-2], stride[-1], stride[-2])
        if reshape_to is not None or view.transposed:
            self.transforms[name] = (reshape_to, view.transposed)
        return _Example(shape, stride, example.element)

    # -- arguments and returned names --

    def take_arguments(self, arguments: tuple[str, ...]) -> None:
        """accum's node (its example gives the problem's shape), C's and the other inputs' once read."""
        for name in ["accum", *(a for a in arguments if a != "accum")]:
            if name == "D":
                raise SyntaxError("'D' is the epilogue's output; it cannot be an argument.")
            example = self.example(name)
            if name == "accum":
                if example.shape is None or len(example.shape) not in (2, 3):
                    raise ConfigError(f"accum's example must be a tensor of shape (M, N) or (L, M, N); got "
                                      f"{example.shape or 'a number'}.")
                L, M, N = example.shape if len(example.shape) == 3 else (1, *example.shape)
                self.problem = (L, M, N)
                self.values[name] = _Traced(_gemmkit._evt_accumulator(), self.identity)
            elif example.shape is None:
                self.values[name] = _Traced(_gemmkit._evt_scalar(name), None)
            else:
                self.values[name] = _Pending(name)

    def check_returned(self, arguments: tuple[str, ...]) -> None:
        for name in self.returned:
            self.example(name)
        if "D" not in self.returned:
            raise SyntaxError("The epilogue must return D (the tree's root, written to the GEMM's D), but the variable "
                              "'D' is not found in the return values.")
        for name in self.returned:
            if name in arguments:
                raise SyntaxError(f"The epilogue returns its argument '{name}'; return only names it assigns.")

    def resolve(self, pending: _Pending, view: _View) -> _Traced:
        """An input tensor's node, read in `view`: a matrix, a row or column vector against accum's shape."""
        name = pending.name
        example = self.example(name)
        if pending.shape is not None:
            example = _Example(pending.shape, _packed(pending.shape), example.element)
        example = self.canonical(name, example, view)
        if pending.shape is not None:
            reshape_to, transposed = self.transforms.get(name, (None, False))
            self.transforms[name] = (reshape_to or pending.shape, transposed)
        assert example.shape is not None
        if name == "C":
            self.operands["C"] = (self.element(example), self.full(name, example))
            node = _gemmkit._evt_source()
        else:
            kind = self.kind(example.shape)
            if kind == "matrix":
                node = _gemmkit._evt_aux(name, example.element, _layout(name, example))
            elif kind == "row":
                node = _gemmkit._evt_row_broadcast(name, example.element)
            elif kind == "column":
                node = _gemmkit._evt_column_broadcast(name, example.element)
            elif kind == "scalar":
                raise ConfigError(f"Tensor {name} of shape {example.shape} is a scalar tensor; tensor scalars are not "
                                  f"supported yet: give {name} as a Python number (a scalar passed at run time).")
            else:
                raise ConfigError(f"Tensor {name} has shape {example.shape}, which the epilogue cannot read against "
                                  f"accum's {self.problem}: an input is (M, N) or (L, M, N) (a matrix), (N,), (1, N) "
                                  "or (L, 1, N) (a row vector), (M, 1) or (L, M, 1) (a column vector), or a Python "
                                  "number (a scalar); permute() and reshape() of it count.")
        traced = _Traced(node, view)
        self.values[name] = traced
        return traced

    @staticmethod
    def element(example: _Example) -> DataType:
        assert example.element is not None  # a tensor's (full() has checked that it is one)
        return example.element

    # -- statements --

    def statement(self, statement: ast.stmt) -> None:
        if isinstance(statement, ast.Pass):
            return
        if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name)):
            raise SyntaxError(f"Unsupported statement `{ast.unparse(statement)}`: an epilogue is single assignments "
                              "`name = expression` and one final return.")
        self.assign(statement.targets[0].id, statement.value)

    def finish(self) -> Epilogue:
        """The tree, once every statement is read: D's value, and the outputs besides it."""
        for name in self.returned:
            if name != "D" and name not in self.values:
                raise SyntaxError(f"Variable '{name}' is undefined.")
        if self.d_value is None:
            raise SyntaxError("Variable 'D' is undefined.")
        if self.d_reads:
            raise RuntimeError(f"D is expected to be an output node with 0 users, but got {self.d_reads}: D is the "
                               "tree's root, the value the kernel writes last, so nothing in the epilogue can read "
                               "it; compute the value under another name, read that, and assign it to D.")
        d_example = self.canonical("D", self.example("D"), self.d_value.view or self.identity)
        self.operands["D"] = (self.element(d_example), self.full("D", d_example))
        return Epilogue(_expr(self.d_value.expr), self.outputs)

    def assign(self, name: str, rhs: ast.expr) -> None:
        if name in self.values or (name == "D" and self.d_value is not None):
            raise SyntaxError(f"Variable '{name}' cannot be defined twice.")
        if name == "C":
            raise SyntaxError("'C' is the GEMM's C: take it as an argument; it cannot be assigned.")
        if name == "D":
            self.d_value = self.tensor_value(rhs)
        elif name in self.returned:
            self.values[name] = self.output(name, rhs)
        else:
            self.values[name] = self.traced(rhs)

    def output(self, name: str, rhs: ast.expr) -> Union[_Traced, _Reduced]:
        """A returned name other than D: a store (an m x n example) or a reduction (a vector or scalar one)."""
        example = self.example(name)
        reduction = (rhs.func.id if isinstance(rhs, ast.Call) and isinstance(rhs.func, ast.Name)
                     and rhs.func.id in _REDUCTIONS else None)
        if reduction is None:
            value = self.tensor_value(rhs)
            assert value.view is not None
            canonical = example if example.shape is None else self.canonical(name, example, value.view)
            kind = "scalar" if canonical.shape is None else self.kind(canonical.shape)
            if kind in ("row", "column", "scalar"):
                raise ConfigError(f"Output {name} has the example shape {example.shape or '(a number)'}, a reduction's; "
                                  f"assign it a reduction, e.g. `{name} = max(value, dim=...)` or sum(...).")
            if kind is None:
                raise ConfigError(f"Output {name} has shape {example.shape}, neither accum's {self.problem} (a stored "
                                  "matrix) nor a reduction's ((N,) / (L, 1, N), (M, 1) / (L, M, 1), (1,) / (L, 1, 1)).")
            stored = _gemmkit._evt_store(_expr(value.expr), name, canonical.element, self.full(name, canonical))
            self.outputs.append(stored)
            return _Traced(stored, value.view)
        kind = "scalar" if example.shape is None else self.kind(example.shape)
        if kind == "matrix":
            raise ConfigError(f"'{name} = {ast.unparse(rhs)}' reduces, but {name}'s example has the full shape "
                              f"{example.shape}; give it the reduced shape: (N,) or (L, 1, N) reduces over the "
                              "rows, (M, 1) or (L, M, 1) over the columns, (1,) or (L, 1, 1) to a scalar.")
        if kind is None:
            raise ConfigError(f"Output {name} has shape {example.shape}, neither accum's {self.problem} (a stored "
                              "matrix) nor a reduction's ((N,) / (L, 1, N), (M, 1) / (L, M, 1), (1,) / (L, 1, 1)).")
        assert isinstance(rhs, ast.Call)
        self.check_arguments(rhs, reduction, 1, 2, ("dim",))  # dim: the example's shape says what is reduced
        reduced = self.tensor_value(rhs.args[0])
        if reduced.view is not None and reduced.view != self.identity:
            raise ConfigError(f"'{name} = {ast.unparse(rhs)}' reduces a permuted or reshaped value; reduce the value "
                              "in accum's shape and order.")
        node = _gemmkit._evt_reduction(kind, _expr(reduced.expr), name, reduction, example.element)
        self.outputs.append(node)
        return _Reduced()

    # -- expressions --

    def read(self, name: str) -> Union[_Traced, _Pending]:
        if name == "D" and self.d_value is not None:
            self.d_reads += 1
            return self.d_value
        value = self.values.get(name)
        if value is None:
            raise SyntaxError(f"Variable '{name}' is undefined.")
        if isinstance(value, _Reduced):
            raise SyntaxError(f"Variable '{name}' is a reduction's output; it cannot be read in the epilogue.")
        return value

    def traced(self, node: ast.expr) -> _Traced:
        """The value of `node`, an input it is alone read in accum's view."""
        value = self.value(node)
        return self.resolve(value, self.identity) if isinstance(value, _Pending) else value

    def tensor_value(self, node: ast.expr) -> _Traced:
        """A value written to a tensor (D, a store, a reduction): a number or scalar stands in accum's view."""
        value = self.traced(node)
        return value if value.view is not None else _Traced(value.expr, self.identity)

    def combine(self, operands: Sequence[Union[_Traced, _Pending]], what: str) -> tuple[list[Value], Optional[_View]]:
        """The operands' nodes in one view: that of the tensors among them, which inputs not read yet take."""
        views = {value.view for value in operands if isinstance(value, _Traced) and value.view is not None}
        if len(views) > 1:
            raise ConfigError(f"`{what}` combines values of different shapes or axis orders (a permute() or reshape() "
                              "on one side only); permute or reshape the other side alike.")
        view = next(iter(views), None)
        resolved = [self.resolve(value, view or self.identity) if isinstance(value, _Pending) else value
                    for value in operands]
        views = {value.view for value in resolved if value.view is not None}
        if len(views) > 1:
            raise ConfigError(f"`{what}` reads an input in two shapes or axis orders; read it in one.")
        return [value.expr for value in resolved], next(iter(views), None)

    def value(self, node: ast.expr) -> Union[_Traced, _Pending]:
        if isinstance(node, ast.Name):
            return self.read(node.id)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value,
                                                                                                     bool):
            return _Traced(float(node.value), None)
        if isinstance(node, ast.BinOp):
            if type(node.op) not in _BINARY:
                raise SyntaxError(f"`{ast.unparse(node)}`: the epilogue's operators are + - * / (and unary -).")
            (left, right), view = self.combine([self.value(node.left), self.value(node.right)], ast.unparse(node))
            return _Traced(_BINARY[type(node.op)](left, right), view)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            operand = self.traced(node.operand)
            return _Traced(-operand.expr if isinstance(node.op, ast.USub) else operand.expr, operand.view)
        if isinstance(node, ast.Call):
            return self.call(node)
        raise SyntaxError(f"Unsupported expression `{ast.unparse(node)}`: an epilogue computes with + - * /, "
                          f"numbers, its variables and calls of {_OFFERED}.")

    @staticmethod
    def check_arguments(call: ast.Call, name: str, least: int, most: int, keywords: Sequence[str] = ()) -> None:
        unknown = [k.arg for k in call.keywords if k.arg not in keywords]
        if unknown or not least <= len(call.args) <= most:
            raise SyntaxError(f"`{ast.unparse(call)}`: {name}() takes {least if least == most else f'{least} to {most}'}"
                              f" positional argument(s){' and ' + ', '.join(keywords) + '=' if keywords else ''}.")

    def layout_argument(self, call: ast.Call, keyword: str) -> tuple[int, ...]:
        """permute's indices / reshape's new_shape: a tuple of whole numbers written in the function."""
        self.check_arguments(call, call.func.id if isinstance(call.func, ast.Name) else "", 1, 2, (keyword,))
        given = call.args[1:] + [k.value for k in call.keywords]
        if len(given) != 1:
            raise SyntaxError(f"`{ast.unparse(call)}` needs its {keyword}.")
        try:
            value = ast.literal_eval(given[0])
        except ValueError:  # names of the function's module or closure, as running it would read them
            try:
                value = eval(compile(ast.Expression(given[0]), "<epilogue>", "eval"), dict(self.namespace))
            except Exception:  # noqa: BLE001 (whatever fails, the message below says what is wanted)
                value = None
        if not (isinstance(value, (tuple, list)) and all(isinstance(v, int) for v in value)):
            raise ConfigError(f"`{ast.unparse(call)}`: {keyword} must be a tuple of whole numbers written in the "
                              "function.")
        return tuple(value)

    def permute(self, call: ast.Call) -> Union[_Traced, _Pending]:
        indices = self.layout_argument(call, "indices")
        value = self.traced(call.args[0])
        if value.view is None:
            return value  # a number has no axes
        rank = len(value.view.batch) + 2
        if sorted(indices) != list(range(rank)):
            raise ConfigError(f"`{ast.unparse(call)}`: indices {indices} are not an order of the value's {rank} axes.")
        if list(indices[:-2]) != list(range(rank - 2)):
            raise ConfigError(f"`{ast.unparse(call)}` moves a batch axis; an epilogue permute may only swap the last "
                              "two axes (rows and columns).")
        swapped = indices[-2] == rank - 1
        return _Traced(value.expr, value.view._replace(transposed=value.view.transposed != swapped))

    def reshape(self, call: ast.Call) -> Union[_Traced, _Pending]:
        new_shape = self.layout_argument(call, "new_shape")
        value = self.value(call.args[0])
        if isinstance(value, _Pending):
            example = self.example(value.name)
            assert example.shape is not None
            if value.shape is not None or math.prod(new_shape) != math.prod(example.shape):
                raise ConfigError(f"`{ast.unparse(call)}`: {value.name} has shape {example.shape}, which cannot take "
                                  f"the shape {new_shape} (reshape an input once, to as many elements).")
            if example.stride != _packed(example.shape):
                raise ConfigError(f"`{ast.unparse(call)}`: {value.name} (strides {example.stride}) is not contiguous, "
                                  "so a reshape of it is no view of the same memory; make it contiguous.")
            return _Pending(value.name, new_shape)
        if value.view is None:
            return value
        L, M, N = self.problem
        rows, columns = (N, M) if value.view.transposed else (M, N)
        if len(new_shape) < 2 or new_shape[-2:] != (rows, columns) or math.prod(new_shape[:-2]) != L:
            raise ConfigError(f"`{ast.unparse(call)}`: an epilogue reshape of a computed value may only split or join "
                              f"its batch extent: the new shape keeps its last two extents {(rows, columns)} and has "
                              f"{L} matrices.")
        return _Traced(value.expr, value.view._replace(batch=tuple(new_shape[:-2]) or (1,)))

    def call(self, call: ast.Call) -> Union[_Traced, _Pending]:
        if not isinstance(call.func, ast.Name):
            raise SyntaxError(f"`{ast.unparse(call)}`: call epilogue functions by their bare name, as in relu(x) "
                              "(from gemmkit.epilogue import relu).")
        name = call.func.id
        if name in _REDUCTIONS:
            raise SyntaxError(f"`{ast.unparse(call)}`: {name}() reduces into an output; write it as the whole value of "
                              f"a returned name, e.g. `F_{name} = {name}(F, dim=...)`, and return F_{name}.")
        if name == "permute":
            return self.permute(call)
        if name == "reshape":
            return self.reshape(call)
        if name == "leaky_relu":
            self.check_arguments(call, name, 1, 2, ("slope", "negative_slope"))
            slopes = call.args[1:] + [k.value for k in call.keywords]
            slope = self.traced(slopes[0]).expr if slopes else 0.01
            if isinstance(slope, EpilogueExpr):
                raise ConfigError(f"`{ast.unparse(call)}`: leaky_relu's slope must be a number written in the "
                                  "function, not a run-time scalar.")
            operand = self.traced(call.args[0])
            return _Traced(_gemmkit._evt_activation(Activation.leaky_relu, _expr(operand.expr), slope), operand.view)
        if name in _ACTIVATIONS:
            self.check_arguments(call, name, 1, 1)
            operand = self.traced(call.args[0])
            return _Traced(_gemmkit._evt_activation(Activation.__members__[name], _expr(operand.expr)), operand.view)
        if name in _COMPUTES:
            self.check_arguments(call, name, _COMPUTES[name], _COMPUTES[name])
            operands, view = self.combine([self.value(arg) for arg in call.args], ast.unparse(call))
            return _Traced(_gemmkit._evt_compute(name, [_expr(operand) for operand in operands]), view)
        raise ConfigError(f"`{ast.unparse(call)}`: '{name}' is not an epilogue function; there are {_OFFERED}.")

def _packed(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The strides of a contiguous (row-major) tensor of `shape`."""
    return tuple(math.prod(shape[axis + 1:]) for axis in range(len(shape)))


def _function_definition(fn: Callable[..., Any]) -> ast.FunctionDef:
    if not inspect.isfunction(fn):
        raise TypeError(f"trace takes a Python function (def), not {type(fn).__name__}.")
    try:
        source = inspect.getsource(fn)
    except OSError as error:  # a function of `python -c`, or of exec'd text not in linecache
        raise OSError(f"trace reads {fn.__qualname__}'s source, which Python cannot find ({error}); define the "
                      "function in a file, a notebook cell or the interactive prompt.") from error
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:  # a lambda's line, cut out of the expression around it
        tree = ast.Module(body=[], type_ignores=[])
    definition = tree.body[0] if tree.body else None
    if not isinstance(definition, ast.FunctionDef) or definition.name != fn.__name__:
        raise TypeError(f"trace takes a function defined with def; {fn.__qualname__}'s source is not one.")
    return definition


def _returned_names(definition: ast.FunctionDef) -> tuple[tuple[str, ...], list[ast.stmt]]:
    """The names of the final return (read before the body: a returned name is stored where it is assigned) and
    the statements before it."""
    body = list(definition.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    last = body[-1] if body else None
    if not isinstance(last, ast.Return) or last.value is None:
        raise SyntaxError("The epilogue must end with `return D` (or `return D, F, ...`).")
    values = last.value.elts if isinstance(last.value, ast.Tuple) else [last.value]
    if not all(isinstance(value, ast.Name) for value in values):
        raise SyntaxError("Return value cannot be an expression")
    names = tuple(value.id for value in values if isinstance(value, ast.Name))
    if len(set(names)) != len(names):
        raise SyntaxError(f"The epilogue returns a name twice: {', '.join(names)}.")
    return names, body[:-1]
