"""The planner: walks a kernel's blocks and emits device kernels plus the host launch plan.

Invariants:
- Scalars (``f32``, ``i64``, ``index``...) live on the host; a scalar computed
  on the device (a full reduction, a dot, ``tensor.extract``) is copied back
  with a ``read`` step right where the IR computes it; a host scalar needed as a
  tensor is written into a one-element buffer (``scalar_buffer``) and viewed.
- Tensor values crossing a block boundary (branch arguments, returns) are dense
  buffers; inside a block, views are free and fusible ops stay ``Lazy`` until a
  consumer that cannot fuse them (or a block boundary) materializes them.
- Every op the planner does not know raises WiaError naming it.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ....diagnostics import WiaError, WiaRuntimeError
from ....dtypes import DType
from ....ir.core import Block, Operation, Value
from ....ir.module import FuncOp
from ....ir.types import IndexType, TensorType
from .. import device_errors
from ..isa import DEFAULT_ARCH
from ..kernels.elementwise import EmittedKernel
from ..symbolic import Sym, call, evaluate
from .attention_plan import AttentionMixin
from .fuse import REDUCE_KIND, is_elementwise, value_dtype
from .ops_plan import OpsMixin
from .values import HostScalar, Lazy, View, broadcast_shapes, dense_view, numel

VIEW_OPS = ("tensor.transpose", "tensor.reshape", "tensor.broadcast_to", "tensor.extract_slice")


def sanitize(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def unique_block_names(blocks: list[Block]) -> dict[int, str]:
    """Plan names of blocks: their hints, numbered apart where two share one (an
    inlined function's ``then`` beside the caller's, or a function inlined twice)."""
    names: dict[int, str] = {}
    for i, b in enumerate(blocks):
        name = sanitize(b.name_hint or f"bb{i}")
        while name in names.values():
            name = f"{name}_{i}"
        names[id(b)] = name
    return names


class Planner(AttentionMixin, OpsMixin):
    """Plans one function; ``run()`` returns the plan dict (kernels in ``self.kernels``)."""

    def __init__(self, func: FuncOp, shapes: dict[str, tuple[int | None, ...]] | None = None,
                 aliases: dict[str, str] | None = None, arch: str = DEFAULT_ARCH):
        self.func = func
        self.arch = arch
        #: dim symbol -> representative: input extents that broadcast together in a
        #: checked program are equal (the type checker unified their names).
        self.aliases = dict(aliases or {})
        self.equalities: list[tuple[str, str]] = []
        self.kernel_count = 0
        self.shapes = dict(shapes or {})
        self.env: dict[int, Any] = {}
        self.sym_shapes: dict[int, tuple[Sym, ...]] = {}
        self.kernels: list[EmittedKernel] = []
        self.steps: list[dict[str, Any]] = []
        self.blocks: list[dict[str, Any]] = []
        self.dims: dict[str, dict[str, Any]] = {}
        self.inputs: list[dict[str, Any]] = []
        self.temps: dict[str, dict[str, Any]] = {}
        #: id of a scalar IR value -> its one-element buffer in the block being planned
        self.scalar_views: dict[int, View] = {}
        self.counter = 0
        self.block_names = unique_block_names(func.blocks)
        self.flash_ready: dict[int, Any] = {}

    # ------------------------------------------------------------ names
    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"{stem}{self.counter}"

    def kernel_name(self, kind: str) -> str:
        self.kernel_count += 1
        return sanitize(f"{self.func.name}_k{self.kernel_count}_{kind}")

    def unify(self, a: str, b: str) -> bool:
        """Record that input dims ``a`` and ``b`` must be equal (checked at launch)."""
        if a in self.dims and b in self.dims:
            self.equalities.append((a, b))
            return True
        return False

    def alloc(self, dtype: DType, shape: tuple[Sym, ...]) -> View:
        name = self.fresh("t")
        self.temps[name] = {"dtype": str(dtype), "shape": list(shape)}
        self.steps.append({"op": "alloc", "buffer": name, "dtype": str(dtype), "size": numel(shape),
                           "shape": list(shape)})
        return dense_view(name, dtype, shape)

    def add_kernel(self, k: EmittedKernel, when: str | None = None) -> None:
        """Launch ``k`` (only where the plan expression ``when`` holds, if given); a device
        error flag it reports through (``device_errors``) gets a zeroed buffer before the
        launch and a read and check after it."""
        self.kernels.append(k)
        args, flags = [], []
        for a in k.args:
            kind = device_errors.kind_of(a)
            if kind is not None:
                flag = self.alloc(DType.I32, (1,)).buffer
                self.steps.append({"op": "write", "buffer": flag, "index": 0, "dtype": "i32",
                                   "value": {"value": 0, "dtype": "i32"}})
                flags.append((kind, flag))
                a = {"buffer": flag}
            args.append(a)
        k.args = args
        step: dict[str, Any] = {"op": "launch", "kernel": k.name, "kind": k.kind,
                                "grid": list(k.grid), "block": list(k.block), "args": args}
        if k.builder.dynamic_shared:
            step["shared_bytes"] = k.builder.dynamic_shared
        if when is not None:
            step["when"] = when
        self.steps.append(step)
        for kind, flag in flags:
            seen = self.fresh("err")
            self.steps.append({"op": "read", "dst": seen, "buffer": flag, "index": 0,
                               "dtype": "i32"})
            self.check(f"{seen} == 0", device_errors.MESSAGES[kind])

    # ------------------------------------------------------------ values
    def lookup(self, v: Value) -> Any:
        try:
            return self.env[id(v)]
        except KeyError:
            raise WiaError(f"the PTX planner reached %{v.name_hint or '?'} before its "
                           f"definition") from None

    def shape(self, v: Value) -> tuple[Sym, ...]:
        if not isinstance(v.type, TensorType):
            return ()
        pv = self.env.get(id(v))
        if isinstance(pv, View):
            return pv.shape
        if isinstance(pv, Lazy):
            return pv.shape
        if id(v) in self.sym_shapes:
            return self.sym_shapes[id(v)]
        raise WiaError(f"no shape known for %{v.name_hint or '?'}")

    def host(self, v: Value) -> HostScalar:
        pv = self.lookup(v)
        if not isinstance(pv, HostScalar):
            raise WiaError(f"%{v.name_hint or '?'} is not a host scalar")
        return pv

    def materialize(self, v: Value) -> View:
        pv = self.lookup(v)
        if isinstance(pv, View):
            return pv
        if isinstance(pv, HostScalar):
            return self.scalar_buffer(v, pv)
        views = self.compute(pv.op)
        for r, view in zip(pv.op.results, views, strict=True):
            self.env[id(r)] = view
        return self.env[id(v)]

    def scalar_buffer(self, v: Value, s: HostScalar) -> View:
        """A host scalar needed as a tensor (the operand of ``broadcast_to``, which the
        front end puts wherever a scalar meets a tensor-only op): a rank-0 device buffer
        of the IR value's dtype, filled by a host ``write`` step in that dtype. Made once
        per plan block: a buffer written in another block may not have been written on
        the path that reached this one."""
        key = id(v)
        if key not in self.scalar_views:
            dtype = value_dtype(v) or DType.I64  # an index is an i64 on the device
            view = self.alloc(dtype, ())
            self.steps.append({"op": "write", "buffer": view.buffer, "index": 0,
                               "dtype": str(dtype), "value": s.entry()})
            self.scalar_views[key] = view
        return self.scalar_views[key]

    def dense(self, v: Value) -> View:
        view = self.materialize(v)
        return view if view.dense else self.copy(view)

    # ------------------------------------------------------------ driver
    def run(self) -> dict[str, Any]:
        for i, arg in enumerate(self.func.args):
            self.bind_input(i, arg)
        for block in self.func.blocks:
            self.plan_block(block)
        return {"kernel": self.func.name, "inputs": self.inputs, "dims": self.dims,
                "outputs": list(self.func.attributes.get("outputs", [])),
                "temporaries": self.temps, "entry": self.blocks[0]["name"],
                "blocks": self.blocks,
                "kernels": [k.name for k in self.kernels]}

    def bind_input(self, i: int, arg: Value) -> None:
        name = sanitize(arg.name_hint or f"arg{i}")
        t = arg.type
        if isinstance(t, TensorType):
            given = self.shapes.get(arg.name_hint or name)
            shape: list[Sym] = []
            for axis, d in enumerate(t.shape):
                fixed = None if given is None else given[axis]  # None: -D left it symbolic
                if d is not None:
                    shape.append(d)
                elif fixed is not None:
                    shape.append(int(fixed))
                else:
                    own = f"{name}_{axis}"
                    sym = self.aliases.get(own, own)
                    if sym in self.dims:
                        self.dims[sym].setdefault("equal", []).append({"input": name, "axis": axis})
                    else:
                        self.dims[sym] = {"input": name, "axis": axis}
                    shape.append(sym)
            self.env[id(arg)] = dense_view(name, t.dtype, tuple(shape))
            self.inputs.append({"name": name, "kind": "tensor", "dtype": str(t.dtype),
                                "shape": shape})
        else:
            self.env[id(arg)] = HostScalar(name, value_dtype(arg))
            self.inputs.append({"name": name, "kind": "scalar",
                                "dtype": "index" if isinstance(t, IndexType) else str(t.dtype)})

    def plan_block(self, block: Block) -> None:
        self.steps = []
        self.scalar_views = {}
        params = []
        for arg in block.args if block is not self.func.entry else []:
            pname = self.fresh("v")
            if isinstance(arg.type, TensorType):
                shape = self.sym_shapes.get(id(arg))
                if shape is None:
                    raise WiaError(f"block ^{block.name_hint} is reached before any branch to it")
                self.env[id(arg)] = dense_view(pname, arg.type.dtype, shape)
                params.append({"buffer": pname, "dtype": str(arg.type.dtype), "shape": list(shape)})
            else:
                self.env[id(arg)] = HostScalar(pname, value_dtype(arg))
                params.append({"scalar": pname, "dtype": str(value_dtype(arg) or "index")})
        self.begin_block(block)
        for op in block.ops:
            self.plan_op(op)
        self.blocks.append({"name": self.block_names[id(block)], "params": params,
                            "steps": self.steps})

    # ------------------------------------------------------------ ops
    def plan_op(self, op: Operation) -> None:
        if id(op) in self.deferred:  # inside an attention pattern (``attention_plan``)
            return
        if id(op) in self.attention:
            self.prepare_attention(op)
        if op.name in ("cf.br", "cf.cond_br", "func.return"):
            self.plan_terminator(op)
        elif op.results and all(not isinstance(r.type, TensorType) for r in op.results):
            self.plan_scalar(op)
        elif op.name in VIEW_OPS or (op.name == "tensor.cast" and not is_elementwise(op)):
            self.env[id(op.results[0])] = self.view_op(op)
        elif self.fusible(op):
            self.env[id(op.results[0])] = Lazy(op, self.result_shape(op))
        elif self.fusible_rows(op):
            for r, shape in zip(op.results, self.fused_reduce_shapes(op), strict=True):
                self.env[id(r)] = Lazy(op, shape)
        else:
            for r, view in zip(op.results, self.compute(op), strict=True):
                # a scalar result beside tensor ones (a fused_reduce's reduction without
                # keepdims, which CSE may share with a branch condition): read back to the
                # host, as plan_scalar reads a one-result op's
                self.env[id(r)] = view if isinstance(r.type, TensorType) else \
                    self.read(view.buffer, view.offset, view.dtype)

    def fusible(self, op: Operation) -> bool:
        """Whether ``op``'s one result can be computed inside each of its consumers."""
        if len(op.results) != 1:
            return False
        r = op.results[0]
        users = r.users
        if not users or any(u.parent is not op.parent or u.is_terminator for u in users):
            return False
        if op.name == "tensor.cast" and all(u.owner.name in ("tensor.matmul", "tensor.fused_matmul")
                                            and u.index < 2 for u in r.uses):
            # read narrow and widened while loading the tile, also under -O2's fused_matmul
            return widening(value_dtype(op.operands[0]), value_dtype(r))
        if op.name in ("tensor.matmul", "tensor.fused_matmul"):
            return len(r.uses) == 1 and is_elementwise(users[0]) and \
                users[0].results[0].type.rank == r.type.rank and self.epilogue_ok(op)  # type: ignore[union-attr]
        consumers_ok = all(_fuses_operands(u) for u in users)
        if op.name in REDUCE_KIND:
            return consumers_ok and bool(op.attributes.get("keepdims")) \
                and not op.name.startswith("tensor.arg")
        return consumers_ok and is_elementwise(op)

    def fusible_rows(self, op: Operation) -> bool:
        """Whether a keepdims ``tensor.fused_reduce`` (reductions + epilogue, what -O2's
        ``fuse`` makes of softmax and layer_norm) can stay lazy: its reductions become
        stages and its epilogue results expressions of the row kernel of whatever consumes
        them, as the unfused ops would (``SpecBuilder.try_fused_stages``)."""
        if op.name != "tensor.fused_reduce" or not op.attributes.get("keepdims"):
            return False
        if any(k.startswith("arg") for k in op.kinds()):  # type: ignore[attr-defined]
            return False
        users = [u for r in op.results for u in r.users]
        return bool(users) and all(u.parent is op.parent and not u.is_terminator
                                   and _fuses_operands(u) for u in users)

    def fused_reduce_shapes(self, op: Operation) -> list[tuple[Sym, ...]]:
        """The symbolic shape of each result of a fused_reduce: reductions, then epilogue."""
        n = len(op.kinds())  # type: ignore[attr-defined]
        full = broadcast_shapes([self.shape(v) for v in op.operands
                                 if isinstance(v.type, TensorType)], self.unify)
        return [self.shape_of_result(op, r) if i < n else full for i, r in enumerate(op.results)]

    def plan_terminator(self, op: Operation) -> None:
        if op.name == "func.return":
            self.steps.append({"op": "return", "values": [self.edge_value(v) for v in op.operands]})
            return
        targets = []
        for succ in op.successors:
            args = []
            for barg, v in zip(succ.block.args, succ.args, strict=True):
                if isinstance(v.type, TensorType) and id(barg) not in self.sym_shapes:
                    self.sym_shapes[id(barg)] = self.shape(v)
                args.append(self.edge_value(v))
            targets.append({"target": self.block_names[id(succ.block)], "args": args})
        if op.name == "cf.br":
            self.steps.append({"op": "br", **targets[0]})
        else:
            cond = self.host(op.operands[0])
            self.steps.append({"op": "cond_br", "cond": cond.entry(), "true": targets[0],
                               "false": targets[1]})

    def edge_value(self, v: Value) -> dict[str, Any]:
        if isinstance(v.type, TensorType):
            view = self.dense(v)
            return {"buffer": view.buffer, "shape": list(view.shape)}
        return self.host(v).entry()

    # ------------------------------------------------------------ host scalars
    def plan_scalar(self, op: Operation) -> None:
        r = op.results[0]
        if op.name == "arith.constant":
            self.env[id(r)] = HostScalar(_literal(op.attributes["value"], value_dtype(r)), value_dtype(r))
        elif op.name.startswith("arith."):
            args = [self.host(v) for v in op.operands]
            if all(a.is_literal for a in args):
                # Fold at plan time only what cannot fail: an op that traps on its constant
                # operands (an integer to a negative power) becomes a 'scalar' step in its own
                # plan block, so the error happens exactly when the op runs (not in a loop run
                # zero times or a branch not taken), as on the interpreter.
                try:
                    with np.errstate(all="ignore"):
                        out = op.evaluate([np.asarray(a.value) for a in args])[0]
                except WiaRuntimeError:
                    pass
                else:
                    self.env[id(r)] = HostScalar(_literal(out, value_dtype(r)), value_dtype(r))
                    return
            name = self.fresh("s")
            self.steps.append({"op": "scalar", "dst": name, "ir": op.name,
                               "attrs": _json_attrs(op.attributes),
                               "args": [a.entry() for a in args],
                               "types": [str(t) for t in op.operand_types], "type": str(r.type)})
            self.env[id(r)] = HostScalar(name, value_dtype(r))
        elif op.name == "tensor.dim":
            axis = op.attributes["axis"] % op.operand_types[0].rank  # type: ignore[union-attr]
            self.env[id(r)] = self.let(self.shape(op.operands[0])[axis], None)
        elif op.name == "tensor.extract":
            view = self.materialize(op.operands[0])
            index = view.offset
            for k, v in enumerate(op.operands[1:]):
                i = call("wrap_index", self.host(v).sym, view.shape[k])
                index = _sym_add(index, _sym_mul(i, view.strides[k]))
            self.env[id(r)] = self.read(view.buffer, index, view.dtype)
        else:  # a tensor op with a scalar result: compute on the device, copy back
            view = self.compute(op)[0]
            self.env[id(r)] = self.read(view.buffer, view.offset, view.dtype)

    def let(self, sym: Sym, dtype: DType | None) -> HostScalar:
        if isinstance(sym, int):
            return HostScalar(sym, dtype)
        name = self.fresh("s")
        self.steps.append({"op": "let", "dst": name, "expr": sym})
        return HostScalar(name, dtype)

    def read(self, buffer: str, index: Sym, dtype: DType) -> HostScalar:
        name = self.fresh("s")
        self.steps.append({"op": "read", "dst": name, "buffer": buffer, "index": index,
                           "dtype": str(dtype)})
        return HostScalar(name, dtype)


def _fuses_operands(op: Operation) -> bool:
    """Whether ``op``'s kernel computes a lazy operand in place (elementwise ops and
    reductions, fused or not; arg reductions load theirs)."""
    return is_elementwise(op) or op.name == "tensor.fused_reduce" or \
        (op.name in REDUCE_KIND and not op.name.startswith("tensor.arg"))


def widening(src: DType | None, dst: DType | None) -> bool:
    """Whether a cast is exact and cheap to do while loading a matmul operand."""
    if src is None or dst is None:
        return False
    if src.is_int and dst.is_int:
        return src.bits <= dst.bits
    return src in (DType.F16, DType.BF16) and dst is DType.F32


def _literal(value: Any, dtype: DType | None) -> int | float | bool:
    v = np.asarray(value).item()
    if dtype is DType.BOOL:
        return bool(v)
    if dtype is not None and dtype.is_float:
        return float(v)
    return int(v)


def _json_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attrs.items() if isinstance(v, (int, float, str, bool, list))}


def _sym_add(a: Sym, b: Sym) -> Sym:
    from ..symbolic import add
    return add(a, b)


def _sym_mul(a: Sym, b: Sym) -> Sym:
    from ..symbolic import mul
    return mul(a, b)


__all__ = ["Planner", "evaluate", "sanitize"]
