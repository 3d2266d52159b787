"""``loop.qgemm``: the int8 GEMM at the loop level (i8 x i8 -> i32, exact).

    loop.qgemm %a, %b, %c, %aoff, %boff, %coff, %m, %n, %k, %lda, %ldb, %ldc : (...) -> ()

Semantics: ``C[m, n] = sum_k int32(A[m, k]) * int32(B[k, n])`` on row-major
panels of i8 buffers A and B, written (never accumulated) into the i32 buffer C.

Invariants:
- Exact: every product fits in 15 bits and the sum wraps modulo 2**32 exactly as
  NumPy's int32 matmul of the widened operands (no saturation anywhere).
- The tensor-level form it implements is ``tensor.matmul(cast(a, i32), cast(b, i32))``
  with ``a``, ``b`` i8: ``lower_linalg`` emits it instead of materializing the
  widened operands, and the backend emits a ``pmaddwd``-shaped micro-kernel.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dtypes import DType
from ..ir.core import Operation
from ..ir.ops_base import OPS, expect_counts, expect_index, expect_tensor, register

NAME = "loop.qgemm"


class QGemmOp(Operation):
    """``loop.qgemm``: operands A, B (i8 buffers), C (i32 buffer), then nine ``index``
    values aoff, boff, coff, m, n, k, lda, ldb, ldc; no results."""

    name = NAME

    def verify(self) -> None:
        expect_counts(self, 12, 0)
        types = [expect_tensor(self, t, f"operand {i}") for i, t in enumerate(self.operand_types[:3])]
        if types[0].dtype is not DType.I8 or types[1].dtype is not DType.I8 or types[2].dtype is not DType.I32:
            raise self.error(f"takes i8, i8, i32 buffers, got {', '.join(map(str, types))}")
        for i, t in enumerate(self.operand_types[3:]):
            expect_index(self, t, f"operand {i + 3}")

    def evaluate(self, args: list[Any]) -> list[Any]:
        a, b, c = (x.reshape(-1) for x in args[:3])
        ao, bo, co, m, n, k, lda, ldb, ldc = (int(x) for x in args[3:])
        am = np.lib.stride_tricks.as_strided(a[ao:], (m, k), (lda, 1)).astype(np.int64)
        bm = np.lib.stride_tricks.as_strided(b[bo:], (k, n), (ldb, 1)).astype(np.int64)
        cm = np.lib.stride_tricks.as_strided(c[co:], (m, n), (ldc * 4, 4))
        cm[...] = (am @ bm).astype(np.int32)  # int64 sums wrapped to int32: NumPy's int32 result
        return []


if NAME not in OPS:  # re-imports (reloads in tests) keep the first registration
    register(QGemmOp)
