"""Check a Python call against a kernel signature before any backend sees it.

Invariant: a ``BoundCall`` holds only arrays a backend can take as they are —
C-contiguous, aligned, of the declared dtype and rank, with every symbolic dim
bound consistently — and output buffers that are writable, of the exact dtype,
and distinct: no two outputs share memory (an output buffer may be an input: the
result is computed elsewhere and copied in). Every failure is a ``WiaCallError``
that names the argument (both outputs, for a shared buffer).
"""

from __future__ import annotations

import numbers
from typing import Protocol, cast

import numpy as np

from ..backends.contract import check_distinct_buffers
from ..diagnostics import WiaCallError, a_or_an
from ..dtypes import DType, from_numpy
from ..records import field, record
from ..signature import KernelSignature, ParamSpec


@record
class BoundCall:
    """A checked call: inputs by name, optional output buffers, bound dims."""

    inputs: dict[str, np.ndarray]
    out_buffers: dict[str, np.ndarray | None]
    dims: dict[str, int] = field(default_factory=dict)
    dim_sources: dict[str, str] = field(default_factory=dict)

    def input_types(self) -> dict[str, tuple[DType, tuple[int, ...]]]:
        """Each input's (dtype, shape): the key a backend specializes on."""
        return {n: (_dtype_of(a), a.shape) for n, a in self.inputs.items()}


def _fast_path(sig: KernelSignature, args: tuple) -> BoundCall | None:
    """The common call — every input a contiguous array of the declared dtype and
    rank, no output buffers — checked in a few µs; None sends it the general way."""
    params = sig.inputs
    if len(args) != len(params):
        return None
    inputs: dict[str, np.ndarray] = {}
    for p, a in zip(params, args):
        if (type(a) is not np.ndarray or p.dims is None or a.ndim != len(p.dims)
                or p.dtype is None or a.dtype != p.dtype.numpy
                or not (a.flags.c_contiguous and a.flags.aligned)):
            return None
        inputs[p.name] = a
    bound = BoundCall(inputs, {p.name: None for p in sig.outputs})
    for p, a in zip(params, args):
        if p.dims:
            _bind_dims(bound, p, a.shape)
    return bound


def _dtype_of(array: np.ndarray) -> DType:
    found = from_numpy(array.dtype)
    assert found is not None, "bind_call admits only language dtypes"
    return found


def bind_call(sig: KernelSignature, args: tuple, kwargs: dict) -> BoundCall:
    """Match positional and keyword arguments to parameters and check each one."""
    if not kwargs:
        bound = _fast_path(sig, args)
        if bound is not None:
            return bound
    given = _match_arguments(sig, args, kwargs)
    bound = BoundCall(inputs={}, out_buffers={p.name: None for p in sig.outputs})
    for param in sig.inputs:
        value = _as_input(param, given[param.name])
        _bind_dims(bound, param, value.shape)
        bound.inputs[param.name] = value
    for param in sig.outputs:
        if param.name in given:
            buffer = _as_output_buffer(param, given[param.name])
            _bind_dims(bound, param, buffer.shape)
            check_distinct_buffers(bound.out_buffers, param.name, buffer)
            bound.out_buffers[param.name] = buffer
    return bound


def _match_arguments(sig: KernelSignature, args: tuple, kwargs: dict) -> dict[str, object]:
    inputs = sig.inputs
    if len(args) > len(inputs):
        names = ", ".join(p.name for p in inputs)
        raise WiaCallError(
            f"{sig.name}() takes {len(inputs)} input(s) ({names}) but {len(args)} positional "
            "arguments were given; pass output buffers by name"
        )
    given: dict[str, object] = {p.name: a for p, a in zip(inputs, args)}
    known = {p.name for p in sig.params}
    for name, value in kwargs.items():
        if name not in known:
            raise WiaCallError(f"{sig.name}() got an unknown argument '{name}'; "
                               f"its parameters are: {sig.describe()}")
        if name in given:
            raise WiaCallError(f"{sig.name}() got argument '{name}' twice "
                               "(by position and by name)")
        given[name] = value
    missing = [p.name for p in inputs if p.name not in given]
    if missing:
        raise WiaCallError(f"{sig.name}() is missing input(s) {', '.join(map(repr, missing))}; "
                           f"it takes {sig.describe()}")
    return given


def _as_input(param: ParamSpec, value: object) -> np.ndarray:
    """The argument as an array the kernel can take, or a WiaCallError."""
    kind = type(value)
    if kind is float or kind is int or kind is bool or (
            kind is not np.ndarray and not isinstance(value, np.generic)
            and isinstance(value, numbers.Number)):
        return _python_scalar(param, cast("bool | numbers.Number", value))
    if not isinstance(value, (np.ndarray, np.generic)):
        raise WiaCallError(f"argument '{param.name}': expected a NumPy array or a scalar "
                           f"({param.describe()}), got {type(value).__name__}")
    array = np.asarray(value)
    dtype = from_numpy(array.dtype)
    if dtype is None:
        raise WiaCallError(f"argument '{param.name}': dtype {array.dtype} is not supported "
                           "(use bool, int8, int32, int64, float16, float32 or float64)")
    expected = param.dtype
    if expected is not None and dtype is not expected and not _bf16_as_f32(expected, dtype):
        got = a_or_an(str(array.dtype))
        raise WiaCallError(f"argument '{param.name}': expected {param.describe()}, got "
                           f"{got} array; convert it with .astype(np.{expected.numpy})")
    _check_rank(param, array.shape, "array")
    # A strided or unaligned view is copied, as NumPy ufuncs would read it: the
    # kernel sees a dense, aligned buffer and the caller's array is left untouched.
    flags = array.flags
    return array if flags.c_contiguous and flags.aligned else array.copy(order="C")


def _bf16_as_f32(expected: DType, got: DType) -> bool:
    # NumPy has no bfloat16: bf16 parameters take float32 arrays (values are rounded).
    return expected is DType.BF16 and got is DType.F32


class _RealNumber(Protocol):
    """What ``_python_scalar`` needs of a non-complex Python number."""

    def __float__(self) -> float: ...

    def __int__(self) -> int: ...


def _python_scalar(param: ParamSpec, value: bool | numbers.Number) -> np.ndarray:
    if param.dims is not None and param.dims != ():
        raise WiaCallError(f"argument '{param.name}': expected {param.describe()}, "
                           f"got the scalar {value!r}")
    if param.dtype is None:  # a ``tensor``: the dtype NumPy gives the value
        array = np.asarray(value)
        if from_numpy(array.dtype) is None:  # an int beyond int64, a Fraction...
            raise WiaCallError(f"argument '{param.name}': the scalar {value!r} has no dtype a "
                               "kernel takes (integers must fit int64)")
        return array
    target = param.dtype.numpy
    if isinstance(value, complex):
        raise WiaCallError(f"argument '{param.name}': complex values are not supported")
    # typeshed gives numbers.Number no methods; the Python numbers that get here
    # (bool, int, float, Fraction, Decimal) all convert with float() and int().
    real = cast(_RealNumber, value)
    is_int = param.dtype.is_int
    if is_int and not float(real).is_integer():
        raise WiaCallError(f"argument '{param.name}': expected {param.dtype}, got {value!r}")
    if param.dtype is DType.BOOL and not isinstance(value, (bool, np.bool_)):
        raise WiaCallError(f"argument '{param.name}': expected bool, got {value!r}")
    if is_int:
        info = np.iinfo(target)
        if not info.min <= int(real) <= info.max:
            raise WiaCallError(f"argument '{param.name}': {value!r} is out of range for "
                               f"{param.dtype}")
        return np.asarray(int(real), dtype=target)
    return np.asarray(value, dtype=target)


def _check_rank(param: ParamSpec, shape: tuple[int, ...], what: str) -> None:
    if param.dims is None:
        return
    if len(shape) != len(param.dims):
        got = "a scalar" if not shape else f"a {len(shape)}-D {what} of shape {shape}"
        raise WiaCallError(f"argument '{param.name}': expected {param.describe()} "
                           f"(rank {len(param.dims)}), got {got}")


def _as_output_buffer(param: ParamSpec, value: object) -> np.ndarray:
    if not isinstance(value, np.ndarray):
        raise WiaCallError(f"output '{param.name}': expected a NumPy array to write into, "
                           f"got {type(value).__name__}")
    dtype = from_numpy(value.dtype)
    if dtype is None or (param.dtype is not None and dtype is not param.dtype
                         and not _bf16_as_f32(param.dtype, dtype)):
        raise WiaCallError(f"output '{param.name}': expected a buffer of {param.describe()}, "
                           f"got {a_or_an(str(value.dtype))} array")
    if not value.flags.c_contiguous or not value.flags.writeable:
        raise WiaCallError(f"output '{param.name}': the buffer must be C-contiguous and "
                           "writable (pass np.empty(...) or a contiguous copy)")
    _check_rank(param, value.shape, "buffer")
    return value


def _bind_dims(bound: BoundCall, param: ParamSpec, shape: tuple[int, ...]) -> None:
    """Bind each symbolic dim; a fixed dim must match exactly."""
    if not param.dims:
        return
    dims = bound.dims
    for axis, (dim, extent) in enumerate(zip(param.dims, shape)):
        if isinstance(dim, int):
            if extent != dim:
                raise WiaCallError(f"argument '{param.name}': expected {param.describe()}, "
                                   f"got shape {shape}: axis {axis} must be {dim}")
            continue
        known = dims.get(dim)
        if known is None:
            dims[dim] = extent
            bound.dim_sources[dim] = f"'{param.name}' (axis {axis})"
        elif known != extent:
            raise WiaCallError(
                f"dim '{dim}' is {known} from argument {bound.dim_sources[dim]} "
                f"but {extent} from argument '{param.name}' (axis {axis})"
            )
