"""Building a kernel's expression DAG from IR values: fusion of elementwise chains and row reductions.

``SpecBuilder.node(value, amap)`` returns the node computing ``value`` at the
current point of the kernel's domain, where ``amap[i]`` is the domain axis of
the value's axis ``i`` (right-aligned NumPy broadcasting).

Invariants:
- Materialized values become ``Load`` leaves; host scalars become ``Scalar``
  (or ``Const`` for literals); ``Lazy`` elementwise ops are expanded in place.
- A ``Lazy`` keepdims reduction becomes a ``Stage`` only when it reduces exactly
  the domain's column axes of a tensor shaped like the domain; otherwise it is
  materialized first by its own kernel (on demand) and loaded.
- A ``Lazy`` matmul becomes the ``Acc`` leaf only in a product epilogue.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ....diagnostics import WiaError
from ....dtypes import DType
from ....ir.core import Operation, Value
from ....ir.ops import ELEMENTWISE_BY_NAME
from ....ir.types import IndexType, ScalarType, TensorType
from ..expr import (
    Acc,
    Apply,
    Const,
    Load,
    LoopSpec,
    Node,
    ReduceStage,
    Scalar,
    ScalarArg,
    Stage,
    TensorArg,
)
from .values import HostScalar, Lazy, View, broadcast_shapes

if TYPE_CHECKING:
    from .products import PlannerBase

REDUCE_KIND = {"tensor.reduce_sum": "sum", "tensor.reduce_prod": "prod", "tensor.reduce_max": "max",
               "tensor.reduce_min": "min", "tensor.reduce_mean": "mean", "tensor.argmax": "argmax",
               "tensor.argmin": "argmin"}
QUANT_OPS = ("tensor.quantize", "tensor.dequantize", "tensor.fake_quant")


def value_dtype(v: Value) -> DType | None:
    t = v.type
    if isinstance(t, IndexType):
        return None
    return t.dtype


def product_dtype(op: Operation) -> DType:
    """The element type of a matmul's products (what the tile kernel accumulates): a
    fused_matmul's body takes it as its first argument, and its result may be another
    type (``cast(a @ b - c, f32)`` of i32 operands is an i32 product, an f32 result)."""
    if op.name == "tensor.fused_matmul":
        t = op.regions[0].blocks[0].args[0].type
        return t.dtype if isinstance(t, ScalarType) else DType.I64
    return value_dtype(op.results[0]) or DType.I64


def is_elementwise(op: Operation) -> bool:
    """Ops computed per element of their (broadcast) result: fusible into any loop kernel."""
    name = op.name
    if name.startswith("tensor.") and name[7:] in ELEMENTWISE_BY_NAME:
        return True
    if name in ("tensor.cmpf", "tensor.cmpi", "tensor.select", *QUANT_OPS):
        return True
    if name == "tensor.cast":
        return op.operand_types[0].dtype is not op.result.type.dtype  # type: ignore[union-attr]
    return name == "tensor.fused_elementwise" and len(op.results) == 1


class SpecBuilder:
    """Builds the nodes of one LoopSpec (or product epilogue) for the planner."""

    def __init__(self, planner: PlannerBase, spec: LoopSpec, allow_acc: bool = False):
        self.planner, self.spec = planner, spec
        self.memo: dict[tuple[int, tuple[int, ...]], Node] = {}
        self.allow_acc = allow_acc
        #: (id of a lazy fused_reduce, amap) -> the nodes of its results in this kernel
        self.fused: dict[tuple[int, tuple[int, ...]], list[Node]] = {}
        self.acc_op: Operation | None = None
        self.n_inner: int | None = None if spec.n_outer == len(spec.domain) else (
            len(spec.domain) - spec.n_outer)

    def node(self, value: Value, amap: tuple[int, ...]) -> Node:
        key = (id(value), amap)
        if key not in self.memo:
            self.memo[key] = self._build(value, amap)
        return self.memo[key]

    def _build(self, value: Value, amap: tuple[int, ...]) -> Node:
        pv = self.planner.lookup(value)
        if isinstance(pv, HostScalar):
            return self.scalar(pv)
        if isinstance(pv, View):
            return self.load(pv, amap)
        assert isinstance(pv, Lazy)
        op = pv.op
        if op.name in REDUCE_KIND:
            stage = self.try_stage(op, amap)
            if stage is not None:
                return stage
        elif op.name == "tensor.fused_reduce":
            nodes = self.try_fused_stages(op, amap)
            if nodes is not None:
                return nodes[next(i for i, r in enumerate(op.results) if r is value)]
        elif op.name in ("tensor.matmul", "tensor.fused_matmul") and self.allow_acc \
                and self.acc_op is None:
            self.acc_op = op
            acc = Acc(product_dtype(op))
            if op.name == "tensor.matmul":
                return acc
            # a fused_matmul's own epilogue (the bias of x @ w + b) runs first: -O2 makes
            # one for each bias add, and its consumer is the sink (it was dropped: issue 22)
            rest = [self.operand(op, i, amap) for i in range(2, len(op.operands))]
            return expand_body(op.regions[0].blocks[0], [acc, *rest])[0]
        elif is_elementwise(op):
            return self.expand(op, amap)
        return self.load(self.planner.materialize(value), amap)

    # ------------------------------------------------------------ leaves
    def scalar(self, s: HostScalar) -> Node:
        dtype = s.dtype or DType.I64
        if s.is_literal:
            return Const(dtype, s.value)
        return Scalar(dtype, self.spec.add_scalar(ScalarArg(str(s.value), dtype)))

    def load(self, view: View, amap: tuple[int, ...], guards: tuple = ()) -> Node:
        strides = view.domain_strides(amap, self.spec.domain)
        arg = TensorArg(view.buffer, view.dtype, strides, view.offset, guards)
        return Load(view.dtype, self.spec.add_input(arg))

    # ------------------------------------------------------------ ops
    def operand(self, op: Operation, i: int, amap: tuple[int, ...]) -> Node:
        v = op.operands[i]
        if isinstance(v.type, TensorType):
            return self.node(v, amap[len(amap) - v.type.rank:])
        return self.node(v, ())

    def expand(self, op: Operation, amap: tuple[int, ...]) -> Node:
        args = [self.operand(op, i, amap) for i in range(len(op.operands))]
        if op.name == "tensor.fused_elementwise":
            return expand_body(op.regions[0].blocks[0], args)[0]
        if op.name in QUANT_OPS:
            return quant_node(op.name[7:], args, op.operand_types[0].dtype)  # type: ignore[union-attr]
        return scalar_op_node(op.name[7:], value_dtype(op.results[0]), args, op.attributes)

    def try_stage(self, op: Operation, amap: tuple[int, ...]) -> Node | None:
        """``op`` as a Stage of this row kernel, or None when it does not fit the domain."""
        src = op.operands[0]
        if not self.fits_row(op, self.planner.shape(src), amap):
            return None
        expr = self.node(src, amap)
        return self.add_stage(op, REDUCE_KIND[op.name], expr, value_dtype(op.results[0]))  # type: ignore[arg-type]

    def try_fused_stages(self, op: Operation, amap: tuple[int, ...]) -> list[Node] | None:
        """Every result of a keepdims ``tensor.fused_reduce`` as nodes of this row kernel:
        its reductions as Stages, its epilogue results as the epilogue body applied to the
        operands and those Stages (the form ``fuse`` gives softmax and layer_norm at -O2);
        None when it does not fit the domain (it is then materialized and loaded)."""
        key = (id(op), amap)
        if key in self.fused:
            return self.fused[key]
        shapes = [self.planner.shape(v) for v in op.operands if isinstance(v.type, TensorType)]
        if not self.fits_row(op, broadcast_shapes(shapes), amap):
            return None
        args = [self.operand(op, i, amap) for i in range(len(op.operands))]
        values = expand_body(op.regions[0].blocks[0], args)
        kinds = op.kinds()  # type: ignore[attr-defined]
        nodes = [self.add_stage(op, kind, v, value_dtype(r))  # type: ignore[arg-type]
                 for kind, v, r in zip(kinds, values, op.results, strict=False)]
        if len(op.regions) == 2:
            nodes += expand_body(op.regions[1].blocks[0], args + nodes)
        self.fused[key] = nodes
        return nodes

    def fits_row(self, op: Operation, src: tuple, amap: tuple[int, ...]) -> bool:
        """Whether keepdims reduction ``op`` of a ``src``-shaped value reduces exactly this
        kernel's column axes (fixing them on first use: the kernel becomes a row kernel)."""
        if not op.attributes.get("keepdims") or self.acc_op is not None or self.allow_acc:
            return False
        rank = len(self.spec.domain)
        axes = sorted(a % rank for a in op.attributes["axes"])
        if amap != tuple(range(rank)) or src != self.spec.domain:
            return False
        k = len(axes)
        if axes != list(range(rank - k, rank)) or (self.n_inner not in (None, k)):
            return False
        if self.n_inner is None:
            self.n_inner = k
            self.spec.n_outer = rank - k
        return True

    def add_stage(self, op: Operation, kind: str, expr: Node, dtype: DType) -> Node:
        if kind in ("max", "min"):  # as OpsPlanner.reduce: no value over zero elements
            shape = self.spec.domain
            count = " * ".join(f"({shape[a]})" for a in range(self.spec.n_outer, len(shape))) or "1"
            self.planner.check(f"{count} > 0", f"'{op.name}' of an empty tensor")
        self.spec.stages.append(ReduceStage(kind, expr, dtype))
        return Stage(dtype, len(self.spec.stages) - 1)


def scalar_op_node(fn: str, dtype: DType | None, args: list[Node], attrs: dict) -> Node:
    """One scalar op (``tensor.X`` or ``arith.X`` without its prefix) as a node."""
    dtype = dtype or DType.I64
    if fn in ("cmpf", "cmpi"):
        return Apply(DType.BOOL, "cmp", args, {"predicate": attrs["predicate"]})
    if fn == "select":
        return Apply(dtype, "select", args)
    if fn == "cast":
        return Apply(dtype, "cast", args)
    if fn not in ELEMENTWISE_BY_NAME:
        raise WiaError(f"the PTX backend does not support '{fn}' inside a kernel")
    return Apply(dtype, fn, args)


def expand_body(block, args: list[Node]) -> list[Node]:
    """The nodes a fused op's body yields, given its block arguments' nodes."""
    env = {id(a): n for a, n in zip(block.args, args, strict=True)}
    for op in block.ops:
        if op.name == "tensor.yield":
            return [env[id(v)] for v in op.operands]
        t = op.results[0].type
        dtype = t.dtype if isinstance(t, ScalarType) else DType.I64
        if op.name == "arith.constant":
            env[id(op.results[0])] = Const(dtype, op.attributes["value"])
            continue
        if not op.name.startswith("arith."):
            raise WiaError(f"the PTX backend cannot compile '{op.name}' in a fused body")
        env[id(op.results[0])] = scalar_op_node(op.name[6:], dtype, [env[id(v)] for v in op.operands],
                                                op.attributes)
    raise WiaError("a fused body does not end in yield")


def quant_node(kind: str, args: list[Node], xd: DType) -> Node:
    """quantize: clamp(rint(x / scale) + zp, -128, 127) -> i8; dequantize: (q - zp) * scale."""
    x, scale, zp = args
    f32 = DType.F32
    if kind != "dequantize":
        q = Apply(xd, "rint", [Apply(xd, "div", [x, scale])])
        q = Apply(xd, "add", [q, Apply(xd, "cast", [zp])])
        q = Apply(xd, "min", [Apply(xd, "max", [q, Const(xd, -128.0)]), Const(xd, 127.0)])
        x = Apply(DType.I8, "cast", [q])
        if kind == "quantize":
            return x
    d = Apply(f32, "sub", [Apply(f32, "cast", [x]), Apply(f32, "cast", [zp])])
    return Apply(f32, "mul", [d, Apply(f32, "cast", [scale])])
