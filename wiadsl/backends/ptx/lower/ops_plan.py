"""Per-op planning: result shapes, free views, and the kernel each materialized op becomes.

Invariants:
- ``result_shape`` is the symbolic shape of an op's (first) result; static
  extents of the IR type always win over derived expressions.
- ``compute(op)`` appends the steps that produce every result of ``op`` as a
  fresh dense buffer and returns their views (in result order).
"""

from __future__ import annotations

import numpy as np

from ....diagnostics import WiaError
from ....dtypes import DType
from ....ir.core import Operation, Value
from ....ir.types import TensorType
from ..expr import Apply, Const, Iota, LoopSpec, Node, ReduceStage, Stage, TensorArg
from ..kernels.column_reduce import (
    column_kernels,
    column_reduce_applies,
    column_splits,
    partial_shape,
)
from ..kernels.elementwise import elementwise_kernel
from ..kernels.grid_reduce import (
    GRID_MAX,
    final_kernel,
    grid_reduce_applies,
    partial_buffers,
    partial_kernel,
)
from ..kernels.row import row_kernel
from ..symbolic import Sym, add, call, mul
from .fuse import REDUCE_KIND, SpecBuilder, expand_body, is_elementwise, value_dtype
from .products import ProductsMixin
from .values import HostScalar, Lazy, View, broadcast_shapes, dense_view

SMALL_ROW = 32


class OpsMixin(ProductsMixin):
    # ------------------------------------------------------------ shapes
    def result_shape(self, op: Operation) -> tuple[Sym, ...]:
        t = op.results[0].type
        if not isinstance(t, TensorType):
            return ()
        derived = self._derived_shape(op)
        if derived is None or len(derived) != t.rank:
            derived = tuple(d if d is not None else self._unknown(op) for d in t.shape)
        return tuple(d if d is not None else derived[i] for i, d in enumerate(t.shape))

    def _unknown(self, op: Operation) -> Sym:
        raise WiaError(f"the PTX planner cannot derive the shape of '{op.name}'")

    def _derived_shape(self, op: Operation) -> tuple[Sym, ...] | None:
        name = op.name
        shapes = [self.shape(v) for v in op.operands if isinstance(v.type, TensorType)]
        if is_elementwise(op) or name == "tensor.fused_elementwise":
            return broadcast_shapes(shapes, self.unify)
        if name in REDUCE_KIND or name == "tensor.fused_reduce":
            src = broadcast_shapes(shapes, self.unify)
            axes = [a % len(src) for a in op.attributes["axes"]]
            keep = op.attributes.get("keepdims", False)
            return tuple(1 if i in axes else d for i, d in enumerate(src) if keep or i not in axes)
        if name in ("tensor.matmul", "tensor.fused_matmul"):
            return self.matmul_shape(shapes[0], shapes[1])
        if name in ("tensor.full", "tensor.arange", "tensor.reshape", "tensor.broadcast_to"):
            return self._shape_from_operands(op)
        if name == "tensor.concat":
            axis = op.attributes["axis"] % len(shapes[0])
            total: Sym = 0
            for s in shapes:
                total = add(total, s[axis])
            return tuple(total if i == axis else d for i, d in enumerate(shapes[0]))
        if name in ("tensor.insert", "tensor.insert_slice"):
            return self.shape(op.operands[1])
        if name in ("tensor.conv2d", "tensor.fused_conv2d", "tensor.max_pool", "tensor.avg_pool"):
            return self.window_shape(op)
        return None

    def _shape_from_operands(self, op: Operation) -> tuple[Sym, ...]:
        t = op.results[0].type
        first = 0 if op.name == "tensor.arange" else 1
        dyn = iter(self.host(v).sym for v in op.operands[first:])
        return tuple(d if d is not None else next(dyn) for d in t.shape)  # type: ignore[union-attr]

    # ------------------------------------------------------------ views
    def view_op(self, op: Operation) -> View:
        src = self.materialize(op.operands[0])
        name = op.name
        if name == "tensor.transpose":
            return src.permuted(list(op.attributes["perm"]))
        if name == "tensor.cast":  # same dtype: a shape refinement
            return src
        if name == "tensor.reshape":
            src = src if src.dense else self.copy(src)
            shape = self.result_shape(op)
            self.check(f"{_numel(src.shape)} == {_numel(shape)}",
                       f"'tensor.reshape' cannot reshape {list(src.shape)} to {list(shape)}")
            return dense_view(src.buffer, src.dtype, shape)
        if name == "tensor.broadcast_to":
            shape = self.result_shape(op)
            lead = len(shape) - len(src.shape)
            strides: list[Sym] = [0] * lead
            for d, s, n in zip(src.shape, src.strides, shape[lead:], strict=True):
                strides.append(0 if d == 1 and n != 1 else s)
            return View(src.buffer, src.dtype, shape, tuple(strides), src.offset)
        return self.slice_view(op, src)

    def slice_view(self, op: Operation, src: View) -> View:
        """``extract_slice``: offset and strides of the selection (Python slice rules)."""
        specs = op.layout()  # type: ignore[attr-defined]
        ops = iter(self.host(v).sym for v in op.operands[op.base:])  # type: ignore[attr-defined]
        offset, shape, strides = src.offset, [], []
        for axis, (n, s) in enumerate(zip(src.shape, src.strides, strict=True)):
            spec = specs[axis] if axis < len(specs) else None
            if spec is not None and spec.is_index:
                index = next(ops)
                # checked on the host even when the selection is empty (no kernel reads it)
                self.check(f"-({n}) <= ({index}) < ({n})",
                           f"'{op.name}': an index is out of range for axis {axis}")
                offset = add(offset, mul(call("wrap_index", index, n), s))
                continue
            if spec is None or not (spec.start or spec.stop or spec.step):
                shape.append(n)
                strides.append(s)
                continue
            start = next(ops) if spec.start else None
            stop = next(ops) if spec.stop else None
            step = next(ops) if spec.step else None
            offset = add(offset, mul(call("slice_start", start, stop, step, n), s))
            shape.append(call("slice_len", start, stop, step, n))
            strides.append(mul(s, step if step is not None else 1))
        return View(src.buffer, src.dtype, tuple(shape), tuple(strides), offset)

    def check(self, cond: str, message: str) -> None:
        from ..symbolic import _fold
        folded = _fold(cond)
        if folded == 1:
            return
        self.steps.append({"op": "check", "cond": cond, "message": message})

    # ------------------------------------------------------------ kernels
    def copy(self, src: View, dst: View | None = None, dtype: DType | None = None) -> View:
        """Copy (and cast) ``src`` into ``dst`` (a fresh dense buffer by default)."""
        out = dst or self.alloc(dtype or src.dtype, src.shape)
        spec = LoopSpec(self.kernel_name("copy"), out.shape, len(out.shape))
        b = SpecBuilder(self, spec)
        node = b.load(src, tuple(range(len(src.shape))))
        if out.dtype is not src.dtype:
            node = Apply(out.dtype, "cast", [node])
        spec.outputs.append((node, TensorArg(out.buffer, out.dtype, out.strides, out.offset)))
        self.add_kernel(elementwise_kernel(spec))
        return out

    def loop(self, spec: LoopSpec) -> None:
        if grid_reduce_applies(spec):
            self.grid_reduce(spec)
        elif column_reduce_applies(spec):
            self.column_reduce(spec)
        elif spec.stages:
            inner = spec.domain[spec.n_outer:]
            small = all(isinstance(d, int) for d in inner) and \
                int(np.prod([int(d) for d in inner] or [1])) <= SMALL_ROW
            self.add_kernel(row_kernel(spec, thread_rows=small))
        else:
            self.add_kernel(elementwise_kernel(spec))

    def grid_reduce(self, spec: LoopSpec) -> None:
        """A large full reduction: partials from many blocks, then one folding block."""
        parts = self.partials(spec, (GRID_MAX,))
        self.add_kernel(partial_kernel(spec, spec.name + "_partial", parts))
        self.add_kernel(final_kernel(spec, spec.name + "_final", parts))

    def column_reduce(self, spec: LoopSpec) -> None:
        """A reduction over leading axes read coalesced (``kernels/column_reduce``): one
        kernel, or a split pass writing [S, kept] partials and a folding pass."""
        if column_splits(spec) == 1:
            self.add_kernel(column_kernels(spec, None)[0])
            return
        for k in column_kernels(spec, self.partials(spec, partial_shape(spec))):
            self.add_kernel(k)

    def partials(self, spec: LoopSpec, shape: tuple[Sym, ...]) -> list[tuple[str, str | None]]:
        """Per stage of a two-pass reduction: (its partial values' buffer, its partial
        indices' buffer for argmax/argmin, else None), each of ``shape``."""
        parts: list[tuple[str, str | None]] = []
        for t, needs_index in partial_buffers(spec):
            v = self.alloc(t, shape)
            i = self.alloc(DType.I32, shape) if needs_index else None
            parts.append((v.buffer, i.buffer if i is not None else None))
        return parts

    def compute(self, op: Operation) -> list[View]:
        name = op.name
        if is_elementwise(op) or name == "tensor.fused_elementwise":
            return self.elementwise(op)
        if name in REDUCE_KIND or name == "tensor.fused_reduce":
            return self.reduce(op)
        if name in ("tensor.full", "tensor.arange"):
            return [self.creation(op)]
        if name in ("tensor.matmul", "tensor.fused_matmul"):
            return [self.matmul(op)]
        if name in ("tensor.conv2d", "tensor.fused_conv2d", "tensor.max_pool", "tensor.avg_pool"):
            return [self.window(op)]
        if name in ("tensor.concat", "tensor.insert", "tensor.insert_slice", "tensor.constant"):
            return [getattr(self, name[7:])(op)]
        raise WiaError(f"the PTX backend does not support '{name}'")

    def elementwise(self, op: Operation) -> list[View]:
        shape = self.result_shape(op)
        if len(op.results) == 1:
            prods = [p for p in (self.lazy_product(v) for v in op.operands) if p is not None]
            if prods and self.result_shape(prods[0]) == shape and not self.lazy_rows(op):
                return [self.matmul(prods[0], sink=op)]
        spec = LoopSpec(self.kernel_name("ew"), shape, len(shape))
        b = SpecBuilder(self, spec)
        amap = tuple(range(len(shape)))
        args = [b.operand(op, i, amap) for i in range(len(op.operands))]
        if op.name == "tensor.fused_elementwise":
            nodes = expand_body(op.regions[0].blocks[0], args)
        else:
            nodes = [b.expand(op, amap)]
        outs = [self.alloc(value_dtype(r), shape) for r in op.results]  # type: ignore[arg-type]
        for n, v in zip(nodes, outs, strict=True):
            spec.outputs.append((n, TensorArg(v.buffer, v.dtype, v.strides)))
        if spec.stages:
            spec.name = self.kernel_name("row")
        self.loop(spec)
        return outs

    def lazy_rows(self, op: Operation) -> bool:
        """Whether ``op`` reads a lazy keepdims reduction through lazy elementwise ops. A
        product epilogue has no stages: as the matmul's sink it would compute each such
        reduction by a kernel of its own (and the matmul twice, once per use: -O0
        softmax(q @ k^T) was 5 kernels); as a row kernel it loads the product once."""
        for v in op.operands:
            pv = self.env.get(id(v))
            if not isinstance(pv, Lazy):
                continue
            if pv.op.name in REDUCE_KIND or pv.op.name == "tensor.fused_reduce":
                return True
            if is_elementwise(pv.op) and self.lazy_rows(pv.op):
                return True
        return False

    def reduce(self, op: Operation) -> list[View]:
        """A reduction (or fused_reduce with its epilogue) as a row kernel over permuted axes."""
        shapes = [self.shape(v) for v in op.operands if isinstance(v.type, TensorType)]
        src = broadcast_shapes(shapes, self.unify)
        rank = len(src)
        axes = sorted(a % rank for a in op.attributes["axes"])
        kept = [i for i in range(rank) if i not in axes]
        perm = kept + axes
        pos = {a: j for j, a in enumerate(perm)}
        domain = tuple(src[p] for p in perm)
        spec = LoopSpec(self.kernel_name("reduce"), domain, len(kept))
        b = SpecBuilder(self, spec)
        amap = tuple(pos[i] for i in range(rank))
        args = [b.operand(op, i, amap) for i in range(len(op.operands))]
        if op.name == "tensor.fused_reduce":
            kinds = op.kinds()  # type: ignore[attr-defined]
            values = expand_body(op.regions[0].blocks[0], args)
        else:
            kinds, values = [REDUCE_KIND[op.name]], args[:1]
        if any(k in ("max", "min", "argmax", "argmin") for k in kinds):
            # NumPy's rule, as the interpreter and the CPU backend: a max/min/arg*
            # over zero elements has no value
            count = " * ".join(f"({src[a]})" for a in axes) or "1"
            self.check(f"{count} > 0", f"'{op.name}' of an empty tensor")
        outs = []
        # an operand may have added stages of its own (a keepdims reduction fused in
        # as a stage): this op's reductions are the stages after those
        first = len(spec.stages)
        for k, (kind, v, r) in enumerate(zip(kinds, values, op.results, strict=False)):
            dtype = value_dtype(r)
            spec.stages.append(ReduceStage(kind, v, dtype))  # type: ignore[arg-type]
            out = self.alloc(dtype, self.shape_of_result(op, r))  # type: ignore[arg-type]
            spec.outputs.append((Stage(dtype, first + k), self.reduced_arg(out, kept, axes, perm, op)))  # type: ignore[arg-type]
            outs.append(out)
        if len(op.regions) == 2:
            stages: list[Node] = [Stage(s.dtype, first + k) for k, s in enumerate(spec.stages[first:])]
            for n, r in zip(expand_body(op.regions[1].blocks[0], args + stages),
                            op.results[len(kinds):], strict=True):
                out = self.alloc(value_dtype(r), src)  # type: ignore[arg-type]
                strides = tuple(out.strides[p] for p in perm)
                spec.outputs.append((n, TensorArg(out.buffer, out.dtype, strides)))
                outs.append(out)
        self.loop(spec)
        return outs

    def shape_of_result(self, op: Operation, r: Value) -> tuple[Sym, ...]:
        """The shape of reduction result ``r`` of ``op``."""
        if not isinstance(r.type, TensorType):
            return ()
        if r is op.results[0]:
            return self.result_shape(op)
        dims = r.type.shape
        static = tuple(d for d in dims if d is not None)
        if len(static) == len(dims):
            return static
        # every reduction of one fused_reduce has the same reduced shape: a dynamic
        # extent is the first result's (it used to leave None in the plan)
        first = self.result_shape(op)
        return tuple(first[i] if d is None else d for i, d in enumerate(dims))

    def reduced_arg(self, out: View, kept: list[int], axes: list[int], perm: list[int],
                    op: Operation) -> TensorArg:
        keep = bool(op.attributes.get("keepdims"))
        strides: list[Sym] = []
        for a in perm:
            if a in axes:
                strides.append(0)
            else:
                idx = a if keep else kept.index(a)
                strides.append(out.strides[idx])
        return TensorArg(out.buffer, out.dtype, tuple(strides))

    def creation(self, op: Operation) -> View:
        shape = self.result_shape(op)
        dtype = value_dtype(op.results[0])
        out = self.alloc(dtype, shape)  # type: ignore[arg-type]
        spec = LoopSpec(self.kernel_name(op.name[7:]), shape, len(shape))
        b = SpecBuilder(self, spec)
        if op.name == "tensor.full":
            node = b.node(op.operands[0], ())
            if node.dtype is not dtype:
                node = Apply(dtype, "cast", [node])  # type: ignore[arg-type]
        else:
            start, step = op.attributes.get("start", 0), op.attributes.get("step", 1)
            i = Apply(dtype, "cast", [Iota(DType.I64, 0)])  # type: ignore[arg-type]
            node = Apply(dtype, "add", [Const(dtype, start),  # type: ignore[arg-type]
                                        Apply(dtype, "mul", [Const(dtype, step), i])])  # type: ignore[arg-type]
        spec.outputs.append((node, TensorArg(out.buffer, out.dtype, out.strides)))
        self.add_kernel(elementwise_kernel(spec))
        return out

    def concat(self, op: Operation) -> View:
        shape = self.result_shape(op)
        out = self.alloc(value_dtype(op.results[0]), shape)  # type: ignore[arg-type]
        axis = op.attributes["axis"] % len(shape)
        start: Sym = 0
        for v in op.operands:
            src = self.materialize(v)
            dst = View(out.buffer, out.dtype, src.shape, out.strides, mul(start, out.strides[axis]))
            self.copy(src, dst)
            start = add(start, src.shape[axis])
        return out

    def insert_slice(self, op: Operation) -> View:
        out = self.copy(self.materialize(op.operands[1]))
        target = self.slice_view(op, out)
        spec = LoopSpec(self.kernel_name("insert"), target.shape, len(target.shape))
        b = SpecBuilder(self, spec)
        v = op.operands[0]
        rank = len(target.shape)
        node = b.node(v, tuple(range(rank - v.type.rank, rank)) if isinstance(v.type, TensorType) else ())
        if node.dtype is not out.dtype:
            node = Apply(out.dtype, "cast", [node])
        spec.outputs.append((node, TensorArg(out.buffer, out.dtype, target.strides, target.offset)))
        self.add_kernel(elementwise_kernel(spec))
        return out

    def insert(self, op: Operation) -> View:
        out = self.copy(self.materialize(op.operands[1]))
        value: HostScalar = self.host(op.operands[0])
        index: Sym = 0
        for k, v in enumerate(op.operands[2:]):
            index = add(index, mul(call("wrap_index", self.host(v).sym, out.shape[k]), out.strides[k]))
        self.steps.append({"op": "write", "buffer": out.buffer, "index": index,
                           "dtype": str(out.dtype), "value": value.entry()})
        return out

    def constant(self, op: Operation) -> View:
        data = np.asarray(op.attributes["value"])
        dtype = value_dtype(op.results[0])
        out = self.alloc(dtype, tuple(int(d) for d in data.shape))  # type: ignore[arg-type]
        self.steps.append({"op": "upload", "buffer": out.buffer, "dtype": str(dtype),
                           "data": data.astype(np.float64 if dtype.is_float else np.int64).ravel().tolist()})  # type: ignore[union-attr]
        return out


def _numel(shape: tuple[Sym, ...]) -> str:
    return " * ".join(f"({d})" for d in shape) or "1"
