"""Evaluating an op on constant operands: the one path the folders share with the interpreter.

Every folder (op ``fold`` hooks, ``sccp``, the frontend's compile-time values)
computes through ``evaluate_op``, which is also what the interpreter runs for
every op. So a value folded at compile time is, bit for bit, the value the
unfolded program computes at run time: in the op's result dtype, with NumPy's
rules (f16 rounding, integer wrap-around, bf16 rounded after every op).

Invariants:
- ``evaluate_op`` is ``Operation.evaluate`` on operands in their storage form
  (``numerics.finish``) with NumPy's floating-point warnings off: overflow to
  inf, integer wrap-around and ``0 / 0`` are values, not errors.
- ``try_evaluate`` answers None where the op raises (an integer to a negative
  power, say): a folder then leaves the op in the program, so the failure
  happens at run time, with its source line, exactly as unfolded.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..diagnostics import WiaError
from . import ops  # noqa: F401  (registers every op kind ``evaluate_scalar`` may name)
from .core import Operation, Value
from .numerics import finish
from .ops_base import constant_of, create_op
from .types import IRType

#: What an op's ``evaluate`` raises on bad values; the interpreter reports these
#: as run-time errors, so a folder must not turn them into compile-time ones.
EVALUATION_ERRORS = (WiaError, ValueError, IndexError, TypeError, ArithmeticError, MemoryError)


def evaluate_op(op: Operation, args: list[Any]) -> list[Any]:
    """The op's results on ``args`` (storage form), as the interpreter computes them."""
    with np.errstate(all="ignore"):
        return op.evaluate(args)


def try_evaluate(op: Operation, args: list[Any]) -> list[Any] | None:
    """``evaluate_op``, or None when running the op on these values would fail."""
    try:
        return evaluate_op(op, args)
    except EVALUATION_ERRORS:
        return None


def constant_operands(op: Operation) -> list[Any] | None:
    """Every operand's constant in storage form (as ``arith.constant`` evaluates
    it), or None when an operand is not defined by a constant op."""
    values = [constant_of(v) for v in op.operands]
    if any(v is None for v in values):
        return None
    return [finish(v, o.type) for v, o in zip(values, op.operands, strict=True)]


def evaluate_scalar(name: str, operands: Sequence[tuple[Any, IRType]], result: IRType,
                    attributes: dict[str, Any] | None = None) -> Any | None:
    """What op ``name`` computes from these (value, type) operands: a NumPy scalar
    of ``result``'s storage, or None when the op would fail at run time."""
    attrs = tuple(sorted((attributes or {}).items()))
    op = _detached(name, tuple(t for _, t in operands), result, attrs)
    out = try_evaluate(op, [finish(v, t) for v, t in operands])
    return None if out is None else out[0]


@functools.lru_cache(maxsize=1024)
def _detached(name: str, types: tuple[IRType, ...], result: IRType,
              attributes: tuple[tuple[str, Any], ...]) -> Operation:
    """A verified op on placeholder values, only to run its ``evaluate`` (which reads
    types and attributes, never the operand values): built once per signature."""
    op = create_op(name, [Value(t) for t in types], [result], dict(attributes))
    op.verify()  # a frontend bug, not a value to fold
    return op
