"""Build-and-run helpers for interpreter tests: one op applied to NumPy inputs."""

from __future__ import annotations

from typing import Any

import numpy as np

from wiadsl.dtypes import DType, from_numpy
from wiadsl.ir import Builder, FuncOp, IRType, ModuleOp, ScalarType, TensorType, run_func, verify


def type_of(value: Any, dtype: DType | None = None) -> IRType:
    array = np.asarray(value)
    d = dtype or from_numpy(array.dtype)
    assert d is not None
    return TensorType(d, array.shape) if array.ndim else ScalarType(d)


def run_op(name: str, inputs: list[Any], result: IRType, attrs: dict[str, Any] | None = None,
           input_types: list[IRType] | None = None) -> Any:
    """Run ``name`` on ``inputs`` (verified first) and return its one result."""
    types = input_types or [type_of(v) for v in inputs]
    func = FuncOp("f", types, [result])
    b = Builder(func.entry)
    b.ret([b.value(name, list(func.args), result, attrs)])
    verify(func)
    (out,) = run_func(ModuleOp([func]), "f", inputs)
    return out
