"""Host-side scalar ops of a launch plan, evaluated with the IR's own NumPy semantics.

Invariant: a ``scalar`` step computes exactly what the reference interpreter
computes for that op (the op class's ``evaluate``), so host control flow (loop
counters, comparisons of reduced values) matches the oracle bit for bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...dtypes import IR_DTYPE_NAMES
from ...ir.core import Value
from ...ir.ops import create_op
from ...ir.types import INDEX, IRType, ScalarType


def scalar_type(name: str) -> IRType:
    return INDEX if name == "index" else ScalarType(IR_DTYPE_NAMES[name])


def evaluate_host_op(name: str, attrs: dict[str, Any], types: list[str], result: str,
                     args: list[Any]) -> Any:
    """``name`` applied to ``args`` (operand types ``types``); a NumPy scalar."""
    operands = [Value(scalar_type(t)) for t in types]
    op = create_op(name, operands, [scalar_type(result)], attrs)
    with np.errstate(all="ignore"):
        return np.asarray(op.evaluate([np.asarray(a) for a in args])[0])[()]
