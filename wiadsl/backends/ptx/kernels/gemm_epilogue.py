"""The fused epilogue of a tile kernel: evaluate the output expression per accumulator, store.

Invariants:
- The epilogue domain is the product's output domain; ``EpilogueMap`` says which
  domain axes a GEMM row enumerates (``row_axes``: ``(M,)`` for a matmul,
  ``(N, OH, OW)`` for a conv) and which a GEMM column enumerates, plus the batch axes.
- An output that is the product itself in its own dtype (``is_direct``) is stored
  from the accumulator, converted once by the store (f32 -> f16 is one ``cvt.rn``,
  not a round trip through f16 and back to f32 before it).
- Each accumulator is evaluated and stored under ``row < rows and col < cols``
  (tile edges); view offsets of the batch are computed once, outside every
  guarded region, so no register defined inside a guard is read after it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ....dtypes import DType
from ..codegen import ExprCodegen, IndexGroup
from ..expr import Acc, LoopSpec, walk
from ..symbolic import Sym


@dataclass(frozen=True)
class EpilogueMap:
    batch_axes: tuple[int, ...]
    batch_dims: tuple[Sym, ...]
    row_axes: tuple[int, ...]
    row_dims: tuple[Sym, ...]
    col_axes: tuple[int, ...]
    col_dims: tuple[Sym, ...]


def is_direct(node: object, dtype: DType, acc_dtype: DType) -> bool:
    """Whether an output expression is the accumulator itself, stored in its dtype, and
    the store's conversion of the ``acc_dtype`` accumulator is that cast (none, or f32
    rounded once to f16/bf16)."""
    return isinstance(node, Acc) and node.dtype is dtype and (
        dtype is acc_dtype or (acc_dtype is DType.F32 and dtype in (DType.F16, DType.BF16)))


def emit_epilogue(cg: ExprCodegen, epi: LoopSpec, emap: EpilogueMap, acc_dtype: DType,
                  rows: list[str], cols: list[str], m: str, n: str,
                  acc_at: Callable[[int, int], str]) -> None:
    """Store ``epi``'s outputs at every (rows[i], cols[j]) from accumulator ``acc_at(i, j)``."""
    kb = cg.kb
    acc_nodes = [x for x in walk([nd for nd, _ in epi.outputs]) if isinstance(x, Acc)]
    base = dict(cg.memo)
    views = list(range(len(epi.inputs))) + [-q - 1 for q in range(len(epi.outputs))]
    for a in views:
        cg.partial(a, 0)
    row_ok = []
    for r in rows:
        p = kb.reg("pred")
        kb.emit(f"setp.lt.u32 {p}, {r}, {m}")
        row_ok.append(p)
    for i, r in enumerate(rows):
        cg.set_group(1, IndexGroup(emap.row_axes, emap.row_dims, r))
        for a in views:
            cg.partial(a, 1)
        for j, c in enumerate(cols):
            cg.set_group(2, IndexGroup(emap.col_axes, emap.col_dims, c))
            for a in views:
                cg.partial(a, 2)
            p = kb.reg("pred")
            kb.emit(f"setp.lt.u32 {p}, {c}, {n}")
            kb.emit(f"and.pred {p}, {p}, {row_ok[i]}")
            skip = kb.new_label("edge")
            kb.bra(skip, p, negate=True)
            cg.memo = dict(base)
            if not all(is_direct(node, t.dtype, acc_dtype) for node, t in epi.outputs):
                for acc in acc_nodes:
                    cg.memo[id(acc)] = cg.ops.cast(acc_at(i, j), acc_dtype, acc.dtype)
            for q, (node, t) in enumerate(epi.outputs):
                v = acc_at(i, j) if is_direct(node, t.dtype, acc_dtype) else cg.value(node)
                cg.store(cg.address(-q - 1), v, t.dtype)
            kb.label(skip)
