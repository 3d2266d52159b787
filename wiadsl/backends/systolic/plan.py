"""Placement: which IR ops run on the array, which on the vector unit, which on the host.

A ``Group`` is what one section computes: an optional product (matmul or conv2d,
on the array) and a DAG of elementwise steps (on the vector unit) fused behind
it. Groups come from three places, tried in this order:
- ``tensor.fused_matmul`` / ``tensor.fused_conv2d`` (product + body) and
  ``tensor.fused_elementwise`` (body only), when the body fits the vector unit;
- ``tensor.matmul`` / ``tensor.conv2d`` followed greedily by elementwise users
  (bias, relu, gelu's ops, requantize: ``tensor.<fn>``, ``cast``, ``quantize``...);
- runs of elementwise tensor ops not behind a product (vector-only groups).
Every other op runs on the host with the reference semantics.

Invariants:
- A group is closed: every value it computes except ``output`` is used only inside
  it, so it can run at the position of its last op (its other inputs are defined
  before that op) and its inner ops need not exist anywhere else.
- Array operands have dtypes the array multiplies natively (i8, f16, bf16, f32); an
  i32 product of two casts from i8 (and an f32 one of casts from bf16/f16) reads the
  narrow values and the casts, when used only there, are absorbed (never run).
- Everything the vector unit touches has a dtype in ``vector.VEC_DTYPES``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...dtypes import DType
from ...ir.core import Block, Operation, OpResult, Value
from ...ir.module import FuncOp
from ...ir.ops_elementwise import ELEMENTWISE_BY_NAME
from ...ir.types import IndexType, TensorType
from .epilogue import Src, VecStep
from .vector import VEC_DTYPES
from .views import Relayout

ARRAY_DTYPES = frozenset({DType.I8, DType.F16, DType.BF16, DType.F32})
#: casts an array product may read through: (cast source, product dtype)
ABSORBABLE = {(DType.I8, DType.I32), (DType.BF16, DType.F32), (DType.F16, DType.F32)}
PRODUCTS = {"tensor.matmul": "matmul", "tensor.conv2d": "conv2d"}
FUSED_PRODUCTS = {"tensor.fused_matmul": "matmul", "tensor.fused_conv2d": "conv2d"}
#: tensor-level op -> vector function
VECTOR_OPS: dict[str, str] = {f"tensor.{n}": n for n in ELEMENTWISE_BY_NAME}
VECTOR_OPS.update({"tensor.cast": "cast", "tensor.quantize": "quantize",
                   "tensor.dequantize": "dequantize", "tensor.fake_quant": "fake_quant"})
#: body op -> vector function (fused bodies hold scalar arith ops)
BODY_OPS: dict[str, str] = {f"arith.{n}": n for n in ELEMENTWISE_BY_NAME}
BODY_OPS["arith.cast"] = "cast"


def dtype_of(v: Value) -> DType | None:
    return None if isinstance(v.type, IndexType) else v.type.dtype


@dataclass
class Group:
    """One section's worth of IR: ``ops`` (block order; the last is where it runs)."""

    ops: list[Operation]
    output: Value
    product: str | None = None
    attrs: dict[str, Any] = field(default_factory=dict)
    lhs: Value | None = None
    rhs: Value | None = None
    product_dtype: DType | None = None
    steps: list[VecStep] = field(default_factory=list)
    #: external operands: IR values, or constants (NumPy scalars) from fused bodies
    externals: list[Value | np.ndarray] = field(default_factory=list)
    ext_dtypes: list[DType] = field(default_factory=list)
    absorbed: list[Operation] = field(default_factory=list)
    #: external index -> the transpose/reshape it is read through (rowplan.py)
    ext_relayouts: dict[int, Relayout] = field(default_factory=dict)
    #: the transpose/reshape the output is written through (rowplan.py)
    out_relayout: Relayout | None = None

    @property
    def placement(self) -> str:
        return "array" if self.product else "vector"


def _vec_ok(op: Operation) -> bool:
    values = [*op.operands, *op.results]
    return (op.name in VECTOR_OPS and len(op.results) == 1
            and isinstance(op.results[0].type, TensorType)
            and all(dtype_of(v) in VEC_DTYPES for v in values))


def array_operands(op: Operation, taken: frozenset[int] = frozenset()
                   ) -> tuple[Value, Value, list[Operation]] | None:
    """The values the array multiplies for product ``op`` (casts read through), or None.

    Casts already placed in another group (``taken``) are not read through: their
    source may be a value only that group computes."""
    a, b = op.operands[:2]
    dtype = dtype_of(a)
    if dtype in ARRAY_DTYPES:
        return a, b, []
    casts = [v.op for v in (a, b) if isinstance(v, OpResult)]
    if len(casts) == 2 and all(c.name == "tensor.cast" and id(c) not in taken for c in casts):
        srcs = [c.operands[0] for c in casts]
        src_dtypes = {dtype_of(s) for s in srcs}
        if len(src_dtypes) == 1 and (src_dtypes.pop(), dtype) in ABSORBABLE:
            absorbed = [c for c in casts if all(u is op for u in c.result.users)]
            return srcs[0], srcs[1], list(dict.fromkeys(absorbed))
    return None


class _StepBuilder:
    """Numbers sources while steps are appended (IR values -> anchor/step/ext)."""

    def __init__(self, group: Group):
        self.g = group
        self.where: dict[int, tuple[str, int]] = {}

    def external(self, v: Value | np.ndarray, dtype: DType) -> int:
        self.g.externals.append(v)
        self.g.ext_dtypes.append(dtype)
        return len(self.g.externals) - 1

    def src(self, v: Value, dtype: DType) -> Src:
        if id(v) not in self.where:
            self.where[id(v)] = ("ext", self.external(v, dtype))
        kind, idx = self.where[id(v)]
        return (kind, idx, dtype)

    def step(self, fn: str, dtype: DType, srcs: list[Src], result: Value | None) -> None:
        self.g.steps.append(VecStep(fn, dtype, tuple(srcs)))
        if result is not None:
            self.where[id(result)] = ("step", len(self.g.steps) - 1)


def _closed(members: list[Operation], output: Value) -> bool:
    """Every value but ``output`` is used, and only inside. A dead member is not
    allowed in: its operands would widen the section's iteration shape (fuzz seed
    1000029: an unused ``in1 * t2`` made ``t2 + 0.5`` come out as [1, M, 3])."""
    inside = {id(m) for m in members}
    return all(r.users and all(id(u) in inside for u in r.users)
               for m in members for r in m.results if r is not output)


def _grow(block: Block, start: int, members: list[Operation], taken: set[int]) -> list[Operation]:
    """The longest closed extension of ``members`` by later elementwise ops of ``block``."""
    best = list(members)
    values = {id(r) for m in members for r in m.results}
    current = list(members)
    for op in block.ops[start + 1:]:
        if id(op) in taken or not _vec_ok(op) or not any(id(v) in values for v in op.operands):
            continue
        current.append(op)
        values.add(id(op.result))
        if _closed(current, op.result):
            best = list(current)
    return best


def _tensor_group(members: list[Operation], product: str | None,
                  taken: frozenset[int] = frozenset()) -> Group:
    g = Group(members, members[-1].result)
    b = _StepBuilder(g)
    rest = members
    if product is not None:
        anchor = members[0]
        g.product, g.attrs = product, dict(anchor.attributes)
        g.lhs, g.rhs, g.absorbed = array_operands(anchor, taken)  # type: ignore[misc]
        g.product_dtype = dtype_of(anchor.result)
        b.where[id(anchor.result)] = ("anchor", 0)
        rest = members[1:]
    for op in rest:
        srcs = [b.src(v, dtype_of(v)) for v in op.operands]  # type: ignore[arg-type]
        b.step(VECTOR_OPS[op.name], dtype_of(op.result), srcs, op.result)  # type: ignore[arg-type]
    return g


def _fused_group(op: Operation) -> Group | None:
    """A group for a fused op whose body the vector unit can run, else None."""
    product = FUSED_PRODUCTS.get(op.name)
    if product is None and op.name != "tensor.fused_elementwise":
        return None
    if len(op.results) != 1 or dtype_of(op.result) not in VEC_DTYPES:
        return None
    g = Group([op], op.result)
    b = _StepBuilder(g)
    block = op.regions[0].blocks[0]
    args = list(block.args)
    if product is not None:
        operands = array_operands(op)
        if operands is None:
            return None
        g.product, g.attrs = product, {k: v for k, v in op.attributes.items() if k != "kernel"}
        g.lhs, g.rhs, g.absorbed = operands
        g.product_dtype = dtype_of(args[0])
        b.where[id(args[0])] = ("anchor", 0)
        args = args[1:]
    outer = op.operands[2:] if product else op.operands
    for arg, value in zip(args, outer):
        if dtype_of(value) not in VEC_DTYPES:
            return None
        b.where[id(arg)] = ("ext", b.external(value, dtype_of(value)))  # type: ignore[arg-type]
    for inner in block.ops:
        if inner.name == "tensor.yield":
            y = inner.operands[0]
            if id(y) not in b.where or b.where[id(y)][0] != "step" or \
                    b.where[id(y)][1] != len(g.steps) - 1:
                b.step("cast", dtype_of(y), [b.src(y, dtype_of(y))], None)  # type: ignore[arg-type]
            return g
        if inner.name == "arith.constant":
            if dtype_of(inner.result) not in VEC_DTYPES:
                return None
            dt = dtype_of(inner.result)
            b.where[id(inner.result)] = ("ext", b.external(
                np.asarray(inner.attributes["value"], dt.numpy), dt))  # type: ignore[union-attr, arg-type]
            continue
        if inner.name not in BODY_OPS or dtype_of(inner.result) not in VEC_DTYPES:
            return None
        srcs = [b.src(v, dtype_of(v)) for v in inner.operands]  # type: ignore[arg-type]
        b.step(BODY_OPS[inner.name], dtype_of(inner.result), srcs, inner.result)  # type: ignore[arg-type]
    return None


def plan_block(block: Block) -> list[Group]:
    """The groups of one block, in the order their last ops appear."""
    groups: list[Group] = []
    taken: set[int] = set()
    for i, op in enumerate(block.ops):
        fused = _fused_group(op)
        if fused is not None:
            groups.append(fused)
            taken.update(id(m) for m in [op, *fused.absorbed])
        elif op.name in PRODUCTS and array_operands(op, frozenset(taken)) is not None \
                and dtype_of(op.result) in VEC_DTYPES and isinstance(op.result.type, TensorType):
            members = _grow(block, i, [op], taken)
            group = _tensor_group(members, PRODUCTS[op.name], frozenset(taken))
            taken.update(id(m) for m in [*members, *group.absorbed])
            groups.append(group)
    for i, op in enumerate(block.ops):
        if id(op) not in taken and _vec_ok(op):
            members = _grow(block, i, [op], taken)
            taken.update(id(m) for m in members)
            groups.append(_tensor_group(members, None))
    position = {id(op): i for i, op in enumerate(block.ops)}
    return sorted(groups, key=lambda g: position[id(g.ops[-1])])


@dataclass
class FuncPlan:
    """Per op: the group it ends (run it there), or membership (skip it)."""

    runs: dict[int, Group]
    skips: set[int]
    groups: list[Group]


def plan_function(func: FuncOp) -> FuncPlan:
    runs: dict[int, Group] = {}
    skips: set[int] = set()
    groups: list[Group] = []
    for block in func.blocks:
        for g in plan_block(block):
            groups.append(g)
            runs[id(g.ops[-1])] = g
            skips.update(id(o) for o in g.ops[:-1])
            skips.update(id(o) for o in g.absorbed)
    return FuncPlan(runs, skips, groups)
