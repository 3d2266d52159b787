"""The op registry and the checks op ``verify`` methods are written with.

Invariants:
- ``OPS`` maps every op name the IR knows to its class; ``op_class`` of any
  other name is an error (never a silent generic op).
- Helpers raise ``WiaIRError`` through ``op.error`` so messages name the op.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..diagnostics import WiaIRError
from ..dtypes import DType
from .core import Block, Operation, Trait, Value
from .types import IndexType, IRType, ScalarType, TensorType, broadcast_shapes, shapes_compatible

OPS: dict[str, type[Operation]] = {}

PURE = frozenset({Trait.PURE})


def register(cls: type[Operation]) -> type[Operation]:
    """Class decorator: add an op kind to ``OPS`` under ``cls.name``."""
    if not cls.name or cls.name in OPS:
        raise ValueError(f"bad or duplicate op name {cls.name!r}")
    OPS[cls.name] = cls
    return cls


def op_class(name: str) -> type[Operation]:
    cls = OPS.get(name)
    if cls is None:
        raise WiaIRError(f"unknown op '{name}'")
    return cls


def create_op(name: str, operands: Sequence[Value] = (), result_types: Sequence[IRType] = (),
              attributes: dict[str, Any] | None = None,
              successors: Sequence[tuple[Block, Sequence[Value]]] = (),
              result_names: Sequence[str | None] | None = None) -> Operation:
    """Instantiate the registered class of ``name`` (detached, unverified)."""
    return op_class(name)(operands, result_types, attributes, successors, (), result_names)


# ------------------------------------------------------------ count checks

def expect_counts(op: Operation, operands: int | tuple[int, int | None], results: int) -> None:
    """Operand count exactly ``operands`` or within ``(lo, hi)`` (hi None: unbounded)."""
    n = len(op.operands)
    lo, hi = (operands, operands) if isinstance(operands, int) else operands
    if n < lo or (hi is not None and n > hi):
        want = str(lo) if lo == hi else f"{lo}..{'' if hi is None else hi}"
        raise op.error(f"expects {want} operands, got {n}")
    if len(op.results) != results:
        raise op.error(f"expects {results} results, got {len(op.results)}")
    if op.successors and not op.is_terminator:
        raise op.error("has successors but is not a terminator")


# --------------------------------------------------------- attribute checks

def attr_int(op: Operation, key: str, default: int | None = None) -> int:
    value = op.attributes.get(key, default)
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
        raise op.error(f"attribute '{key}' must be an integer, got {value!r}")
    return int(value)


def attr_bool(op: Operation, key: str, default: bool | None = None) -> bool:
    value = op.attributes.get(key, default)
    if not isinstance(value, bool):
        raise op.error(f"attribute '{key}' must be a bool, got {value!r}")
    return value


def attr_ints(op: Operation, key: str, length: int | None = None) -> list[int]:
    value = op.attributes.get(key)
    if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise op.error(f"attribute '{key}' must be a list of integers, got {value!r}")
    if length is not None and len(value) != length:
        raise op.error(f"attribute '{key}' must have {length} entries, got {len(value)}")
    return list(value)


def attr_choice(op: Operation, key: str, choices: Sequence[str]) -> str:
    value = op.attributes.get(key)
    if not isinstance(value, str) or value not in choices:
        raise op.error(f"attribute '{key}' must be one of {', '.join(choices)}; got {value!r}")
    return value


# --------------------------------------------------------------- type checks

def expect_tensor(op: Operation, t: IRType | None, what: str) -> TensorType:
    if not isinstance(t, TensorType):
        raise op.error(f"{what} must be a tensor, got {t}")
    return t


def expect_scalar(op: Operation, t: IRType, what: str) -> ScalarType:
    if not isinstance(t, ScalarType):
        raise op.error(f"{what} must be a scalar, got {t}")
    return t


def expect_index_like(op: Operation, t: IRType, what: str) -> None:
    """An i64 (or index) scalar: the type of runtime indices and bounds."""
    if not (isinstance(t, IndexType) or t == ScalarType(DType.I64)):
        raise op.error(f"{what} must be i64 or index, got {t}")


def expect_index(op: Operation, t: IRType, what: str) -> None:
    if not isinstance(t, IndexType):
        raise op.error(f"{what} must be index, got {t}")


def value_dtype(op: Operation, t: IRType, what: str) -> DType:
    """The dtype of a scalar or tensor operand (index is not accepted)."""
    if isinstance(t, IndexType):
        raise op.error(f"{what} must be a scalar or tensor, got index")
    return t.dtype


def expect_same_dtype(op: Operation, types: Sequence[IRType], what: str = "operand") -> DType:
    dtypes = [value_dtype(op, t, what) for t in types]
    if len(set(dtypes)) > 1:
        listed = ", ".join(d.ir_name for d in dtypes)
        raise op.error(f"{what} dtypes differ ({listed}); insert a cast")
    return dtypes[0]


def check_broadcast_result(op: Operation, types: Sequence[IRType], result: IRType) -> None:
    """``result`` must be a tensor whose shape agrees with the operands' broadcast."""
    shapes = [t.shape if isinstance(t, TensorType) else () for t in types]
    try:
        expected = broadcast_shapes(*shapes)
    except ValueError as e:
        raise op.error(f"operand shapes {' and '.join(map(str, types))} do not broadcast: {e}") from None
    got = result.shape if isinstance(result, TensorType) else ()
    if not shapes_compatible(expected, got):
        shown = "x".join("?" if d is None else str(d) for d in expected)
        raise op.error(f"result type {result} does not match the broadcast shape [{shown}]")


def expect_result_shape(op: Operation, result: IRType, dtype: DType,
                        shape: Sequence[int | None]) -> None:
    """``result`` has ``dtype`` and a shape compatible with ``shape`` (() means scalar)."""
    if len(shape) == 0:
        ok = result == ScalarType(dtype)
    else:
        ok = (isinstance(result, TensorType) and result.dtype is dtype
              and shapes_compatible(tuple(shape), result.shape))
    if not ok:
        shown = "x".join("?" if d is None else str(d) for d in shape)
        want = f"tensor<{shown}x{dtype.ir_name}>" if shape else dtype.ir_name
        raise op.error(f"result type {result} does not match the expected {want}")


def normalize_axis(op: Operation, axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < rank:
        raise op.error(f"{what} {axis} is out of range for rank {rank}")
    return axis % rank


def check_dynamic_extents(op: Operation, result: TensorType, extents: Sequence[Value]) -> None:
    """One ``index`` operand per ``?`` of the result (MLIR tensor.empty's rule)."""
    if len(extents) != result.num_dynamic:
        raise op.error(f"expects {result.num_dynamic} index operands for the dynamic extents "
                       f"of {result}, got {len(extents)}")
    for i, v in enumerate(extents):
        expect_index(op, v.type, f"dynamic extent operand {i}")


def constant_of(value: Value) -> Any | None:
    """The constant a value holds when defined by ``arith/tensor.constant``, else None."""
    from .core import OpResult
    if isinstance(value, OpResult) and value.op.name in ("arith.constant", "tensor.constant"):
        return value.op.attributes.get("value")
    return None


def has_dynamic_shape(op: Operation) -> bool:
    """Whether an operand or result is a tensor with a ``?`` extent: the op's shape
    checks then happen at run time (``Operation.may_trap``)."""
    return any(isinstance(t, TensorType) and not t.is_static
               for t in (*op.operand_types, *op.result_types))


class FoldConstantsMixin:
    """``fold`` by evaluating the op when every operand is a constant.

    Only for pure ops whose ``evaluate`` depends on operand values alone. The
    evaluation is the interpreter's (``folding.evaluate_op``), so the folded value
    is the run-time one; a runtime error while folding (e.g. an integer to a
    negative power) leaves the op unfolded so the error still happens at run time.
    """

    def fold(self) -> list[Any] | None:
        from .folding import constant_operands, try_evaluate
        op: Operation = self  # type: ignore[assignment]
        args = constant_operands(op)
        return None if args is None else try_evaluate(op, args)
