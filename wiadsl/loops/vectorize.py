"""The loop-level ``vectorize`` pass: innermost counted loops -> SIMD main loop + scalar rest.

For an innermost loop ``for i in range(lo, hi)`` (``counted.CountedLoop``, step 1,
one body block) it emits, in front of the loop,

    ^pre:    ... %rest = lo + (max(hi - lo, 0) floordiv W) * W
             br ^vloop(%lo, <broadcast identity per reduction>)
    ^vloop(%vi: index, %vacc...):   %c = arith.cmpi slt, %vi, %rest; cond_br %c, ^vbody, ^vdone(%vacc...)
    ^vbody:  <the body on vector<Wx..> values>; br ^vloop(%vi + W, ...)
    ^vdone(%v...):  %r = loop.vreduce %v; %acc = arith.<kind> %init, %r
             br ^loop(%rest, %acc...)          // the original loop: the scalar remainder

(when both bounds are constants and W divides the trip count the scalar loop goes
and ``^vdone`` branches to its exit; otherwise its header's ``cond_br`` gets the unit
attribute ``remainder``, which this pass and ``prefetch`` leave alone). Both loops are ``CountedLoop``s again, so
later passes (prefetch, unrolling) see them.

What it vectorizes (anything else leaves the loop unchanged, with a ``missed`` remark):
- values of the body are *uniform* (defined outside, or pure ops of uniform
  operands: kept scalar, splatted with ``loop.broadcast`` where a vector op reads
  them), *affine* (``index`` values ``i + u`` with ``u`` uniform: unit stride; kept
  scalar at the first lane and used only as load/store offsets), or *vector*;
- ``loop.load``/``loop.store`` at affine offsets become ``loop.vload``/``loop.vstore``;
  loads at uniform offsets stay scalar (splatted); stores must be affine;
- elementwise ``arith`` ops, ``cmpf``/``cmpi``, ``select`` and ``cast`` on the dtypes
  and functions the CPU backend lowers for vectors (``VECTOR_FNS``: no libm calls);
- iteration values must be reductions: ``acc' = arith.<add|mul|max|min> acc, x``
  with ``acc`` read only there and ``acc'`` only by the back edge. The vector
  accumulator starts at the identity (``-0.0`` for float add, ``-inf`` for max...)
  and is folded into the initial value after the loop. Integer and max/min
  reductions are exact; **float add/mul are reassociated** (W partial sums, then
  the lanes): the result differs from the sequential sum by rounding. They are
  vectorized when the op carries ``reassoc`` (as the lowering of
  ``reduce_sum``/``reduce_prod`` emits) or when the pass option ``reassoc=true``
  (the default) allows any float reduction; ``reassoc=false`` keeps the others scalar.
- memory: every access to a buffer the loop stores to must be affine with the
  same offset as the store, unless the two buffers provably differ (distinct
  ``loop.alloc``s or kernel parameters, followed through ``loop.retype`` and
  through the call sites of outlined functions). Buffers at the loop level are
  whole allocations (never partial views), so equal or disjoint is all there is.
  Not vectorized: non-unit strides, other loop-carried values, calls, checks,
  copies, f16/bf16, loops with a static trip count below W.

Run it after ``parallelize,fuse-parallel`` (fuse-parallel reads only scalar
``loop.load``/``loop.store`` accesses).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..dtypes import DType
from ..ir.builder import Builder
from ..ir.core import Block, BlockArgument, Operation, OpResult, Value
from ..ir.module import FuncOp, ModuleOp
from ..ir.ops import create_op
from ..ir.ops_arith import CastOp, CmpOp
from ..ir.ops_elementwise import ArithElementwiseOp
from ..ir.types import INDEX, IRType, ScalarType, TensorType, VectorType
from ..records import field, record
from .builder import const_value
from .counted import CountedLoop, find_counted_loops

#: dtypes with vector registers here (f16/bf16 round after every op: not vectorized)
VECTOR_DTYPES = frozenset({DType.BOOL, DType.I8, DType.I32, DType.I64, DType.F32, DType.F64})

_FLOAT_COMMON = frozenset({"add", "sub", "mul", "div", "rem", "pow", "max", "min", "neg", "abs",
                           "sqrt", "rsqrt", "relu", "sin", "cos", "floor", "ceil", "rint"})
#: elementwise functions the CPU backend emits on vectors, per dtype (exp/tanh/sigmoid/erf
#: of f32 are inline polynomials; libm-only functions such as log are left out)
VECTOR_FNS: dict[DType, frozenset[str]] = {
    DType.F32: _FLOAT_COMMON | {"exp", "tanh", "sigmoid", "erf"},
    DType.F64: _FLOAT_COMMON,
    DType.I8: frozenset({"add", "sub", "mul", "div", "rem", "max", "min", "neg", "abs", "relu",
                         "floor", "ceil", "rint", "and", "or", "not"}),
    DType.BOOL: frozenset({"add", "mul", "max", "min", "and", "or", "not"}),
}
VECTOR_FNS[DType.I32] = VECTOR_FNS[DType.I64] = VECTOR_FNS[DType.I8]

REDUCTIONS = ("add", "mul", "max", "min")

_UNIFORM, _AFFINE, _VECTOR = "uniform", "affine", "vector"


class Skip(Exception):
    """Why a loop stays scalar (the text of a ``missed`` remark)."""


def identity(kind: str, dtype: DType) -> int | float | bool:
    """The neutral element of reduction ``kind`` on ``dtype``."""
    if dtype is DType.BOOL:
        return kind in ("mul", "min")
    if dtype.is_float:
        return {"add": -0.0, "mul": 1.0, "max": -np.inf, "min": np.inf}[kind]
    info = np.iinfo(dtype.numpy)
    return {"add": 0, "mul": 1, "max": int(info.min), "min": int(info.max)}[kind]


# ------------------------------------------------------------------ buffers

Origin = tuple[str, ...]


def buffer_origin(v: Value, func: FuncOp, module: ModuleOp | None, depth: int = 0,
                  sites: dict[str, list[tuple[FuncOp, Operation]]] | None = None) -> Origin | None:
    """Where a buffer comes from: ``('alloc', id)`` or ``('param', kernel, index)``;
    None when unknown (a block argument, a call result, an ambiguous parameter).
    ``sites``: the module's ``func.call`` ops by callee, for a caller that asks about
    many arguments (else the module is walked for each)."""
    while isinstance(v, OpResult) and v.op.name == "loop.retype":
        v = v.op.operands[0]
    if isinstance(v, OpResult):
        return ("alloc", str(id(v.op))) if v.op.name == "loop.alloc" else None
    if not isinstance(v, BlockArgument) or v.block is not func.entry:
        return None
    if func.is_kernel:
        return ("param", func.name, str(v.index))
    if module is None or depth > 4:
        return None
    found: set[Origin | None] = set()
    calls = sites.get(func.name, []) if sites is not None else \
        [(caller, op) for caller in module for op in caller.walk()
         if op.name == "func.call" and op.attributes.get("callee") == func.name]
    for caller, op in calls:
        found.add(buffer_origin(op.operands[v.index], caller, module, depth + 1, sites))
    if len(found) != 1:
        return None
    return found.pop()


def may_alias(a: Origin | None, b: Origin | None) -> bool:
    return a is None or b is None or a == b


# ------------------------------------------------------------------ analysis

Key = tuple[object, ...]


@record
class Plan:
    """What ``vectorize_loop`` needs: a class per body value and the reductions."""

    loop: CountedLoop
    width: int
    classes: dict[int, str] = field(default_factory=dict)
    #: iteration index -> (reduction kind, the reducing op)
    reductions: dict[int, tuple[str, Operation]] = field(default_factory=dict)


class Analysis:
    def __init__(self, loop: CountedLoop, func: FuncOp, module: ModuleOp | None, width: int,
                 reassoc: bool):
        self.loop, self.func, self.module = loop, func, module
        self.plan = Plan(loop, width)
        self.reassoc = reassoc
        self.cls = self.plan.classes
        self._keys: dict[int, Key] = {}

    def kind(self, v: Value) -> str:
        k = self.cls.get(id(v))
        if k is not None:
            return k
        if not self.loop.defines(v):
            return _UNIFORM
        raise Skip(f"value %{v.name_hint or '?'} is used before it is classified")

    # -------------------------------------------------- structural keys
    def key(self, v: Value) -> Key:
        """Equal keys mean equal uniform values (through pure ops recomputed in the body)."""
        if id(v) in self._keys:
            return self._keys[id(v)]
        c = const_value(v)
        if c is not None:
            out: Key = ("const", str(v.type), c)
        elif isinstance(v, OpResult) and self.loop.defines(v) and v.op.name.startswith("arith."):
            parts = [self.key(o) for o in v.op.operands]
            if v.op.name in ("arith.add", "arith.mul", "arith.max", "arith.min"):
                parts.sort(key=repr)
            attrs = tuple(sorted((k, repr(a)) for k, a in v.op.attributes.items()))
            out = (v.op.name, attrs, str(v.type), *parts)
        else:
            out = ("value", id(v))
        self._keys[id(v)] = out
        return out

    def linear(self, v: Value) -> tuple[tuple[tuple[Key, int], ...], int]:
        """An affine offset ``i + sum(coef * u) + const`` as a hashable form."""
        terms: dict[Key, int] = {}
        const = 0

        def walk(x: Value, sign: int) -> None:
            nonlocal const
            if x is self.loop.iv:
                return
            if self.kind(x) == _UNIFORM:
                c = const_value(x)
                if c is not None:
                    const += sign * int(c)
                else:
                    k = self.key(x)
                    terms[k] = terms.get(k, 0) + sign
                return
            assert isinstance(x, OpResult)
            a, b = x.op.operands
            walk(a, sign)
            walk(b, -sign if x.op.name == "arith.sub" else sign)
        walk(v, 1)
        return tuple(sorted(((k, c) for k, c in terms.items() if c), key=repr)), const

    # -------------------------------------------------- classification
    def run(self) -> Plan:
        loop = self.loop
        if not loop.is_innermost:
            raise Skip("not an innermost loop")
        if loop.step != 1:
            raise Skip(f"step {loop.step} (only step-1 loops are vectorized)")
        if len(loop.blocks) != 2 or loop.latch is not loop.body_entry:
            raise Skip("the body is not one block")
        trip = loop.trip_count()
        if trip is not None and trip < self.plan.width:
            raise Skip(f"{trip} iterations, fewer than {self.plan.width} lanes")
        self.cls[id(loop.iv)] = _AFFINE
        self._reductions()
        body = loop.latch
        for op in body.ops[:-1]:
            for r, k in zip(op.results, self.classify(op), strict=True):
                self.cls[id(r)] = k
        self._check_uses()
        self._check_memory()
        return self.plan

    def _reductions(self) -> None:
        loop = self.loop
        nexts = loop.nexts
        for n, acc in enumerate(loop.iters):
            t = acc.type
            if not isinstance(t, ScalarType) or t.dtype not in VECTOR_DTYPES:
                raise Skip(f"iteration value of type {t}")
            nxt = nexts[n]
            if not isinstance(nxt, OpResult) or not isinstance(nxt.op, ArithElementwiseOp) \
                    or nxt.op.fn.name not in REDUCTIONS or acc not in nxt.op.operands \
                    or nxt.op.operands[0] is nxt.op.operands[1] or nxt.op.parent is not loop.latch:
                raise Skip("an iteration value that is not an add/mul/max/min reduction")
            users = [u for u in acc.users if u is not loop.branch]
            if users != [nxt.op] or [u for u in nxt.users if u is not loop.back_edge]:
                raise Skip("a reduction whose partial values are read in the loop")
            kind = nxt.op.fn.name
            if t.dtype.is_float and kind in ("add", "mul") and not (
                    self.reassoc or nxt.op.attributes.get("reassoc")):
                raise Skip(f"a float {kind} reduction without reassoc")
            self.cls[id(acc)] = _VECTOR
            self.plan.reductions[n] = (kind, nxt.op)

    def _vector_dtype(self, t: IRType, what: str) -> DType:
        if not isinstance(t, ScalarType) or t.dtype not in VECTOR_DTYPES:
            raise Skip(f"{what} of type {t}")
        return t.dtype

    def classify(self, op: Operation) -> list[str]:
        name = op.name
        kinds = [self.kind(v) for v in op.operands]
        if name == "arith.constant":
            return [_UNIFORM]
        if name in ("tensor.dim", "loop.retype"):
            if kinds[0] != _UNIFORM:
                raise Skip(f"'{name}' of a buffer made in the loop")
            return [_UNIFORM]
        if name == "loop.load":
            if kinds[0] != _UNIFORM:
                raise Skip("a load from a buffer made in the loop")
            if kinds[1] == _UNIFORM:
                return [_UNIFORM]
            self._vector_dtype(op.result.type, "a load")
            return [_VECTOR]
        if name == "loop.store":
            if kinds[1] != _UNIFORM or kinds[2] != _AFFINE:
                raise Skip("a store that is not at a unit-stride offset")
            if kinds[0] == _AFFINE:
                raise Skip("a store of the induction variable")
            self._vector_dtype(op.operand_types[0], "a store")
            return []
        pure_arith = isinstance(op, (ArithElementwiseOp, CmpOp, CastOp)) or name == "arith.select"
        if not pure_arith:
            raise Skip(f"'{name}' in the body")
        if all(k == _UNIFORM for k in kinds):
            return [_UNIFORM]
        if _AFFINE in kinds:
            if name in ("arith.add", "arith.sub") and kinds.count(_AFFINE) == 1 and \
                    (name == "arith.add" or kinds[0] == _AFFINE) and _VECTOR not in kinds:
                return [_AFFINE]
            raise Skip(f"the induction variable used by '{name}' (not a unit-stride offset)")
        # a vector op
        if isinstance(op, ArithElementwiseOp):
            dtype = self._vector_dtype(op.result.type, f"'{name}'")
            if op.fn.name not in VECTOR_FNS[dtype]:
                raise Skip(f"'{name}' on {dtype.ir_name} has no vector form")
        elif isinstance(op, CmpOp):
            self._vector_dtype(op.operand_types[0], f"'{name}'")
        elif isinstance(op, CastOp):
            self._vector_dtype(op.operand_types[0], f"'{name}'")
            self._vector_dtype(op.result.type, f"'{name}'")
        else:  # select
            self._vector_dtype(op.result.type, f"'{name}'")
        return [_VECTOR]

    def _check_uses(self) -> None:
        """Affine values feed only offsets and other affine values (and the back edge)."""
        loop = self.loop
        for op in loop.latch.ops[:-1]:
            for r in op.results:
                if self.cls[id(r)] != _AFFINE:
                    continue
                for use in r.uses:
                    user, i = use.owner, use.index
                    ok = (user.name == "loop.load" and i == 1) or (user.name == "loop.store" and i == 2) \
                        or (user is loop.back_edge and i == 0) \
                        or (user.parent is loop.latch and self.cls.get(id(user.results[0])) == _AFFINE
                            if user.results else False)
                    if not ok:
                        raise Skip(f"an index value of the induction variable is used by '{user.name}'")
        for use in loop.iv.uses:
            if use.owner is loop.header.ops[0]:
                continue
            user = use.owner
            if user.parent is not loop.latch:
                raise Skip("the induction variable is used outside the body")

    def _check_memory(self) -> None:
        loop = self.loop
        accesses = []  # (op, buffer, origin, is_store, offset form or None if uniform)
        for op in loop.latch.ops:
            if op.name in ("loop.load", "loop.store"):
                buf, off = (op.operands[0], op.operands[1]) if op.name == "loop.load" \
                    else (op.operands[1], op.operands[2])
                form = self.linear(off) if self.kind(off) == _AFFINE else None
                accesses.append((op, buffer_origin(buf, self.func, self.module),
                                 op.name == "loop.store", form))
        for s_op, s_origin, s_store, s_form in accesses:
            if not s_store:
                continue
            for x_op, x_origin, _, x_form in accesses:
                if x_op is s_op or not may_alias(s_origin, x_origin):
                    continue
                if x_form is None or x_form != s_form:
                    raise Skip(f"'{x_op.name}' may touch what another lane's store writes")


# ------------------------------------------------------------------ rewrite

IndexTerm = Value | int

_FOLD: dict[str, Callable[[int, int], int]] = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
         "max": max, "div": lambda x, y: x // y}


def _index_op(b: Builder, fn: str, x: IndexTerm, y: IndexTerm) -> IndexTerm:
    """``arith.<fn>`` on index values, folded when both are constants (ints stay
    Python ints until ``_materialize``)."""
    cx = x if isinstance(x, int) else const_value(x)
    cy = y if isinstance(y, int) else const_value(y)
    if cx is not None and cy is not None:
        return int(_FOLD[fn](int(cx), int(cy)))
    if fn == "add" and cx == 0:
        return y
    if fn in ("add", "sub") and cy == 0 or fn in ("mul", "div") and cy == 1:
        return x
    return b.value(f"arith.{fn}", [_materialize(b, x), _materialize(b, y)], INDEX)


def _materialize(b: Builder, x: IndexTerm) -> Value:
    return b.constant(x, INDEX) if isinstance(x, int) else x


def _clone(b: Builder, op: Operation, operands: list[Value], result_types: list[IRType]) -> Operation:
    new = create_op(op.name, operands, result_types, dict(op.attributes))
    new.loc = op.loc
    for r, old in zip(new.results, op.results, strict=True):
        r.name_hint = old.name_hint
    return b.insert(new)


def vectorize_loop(plan: Plan, func: FuncOp, interleave: int = 1) -> None:
    """Put the vector loop of ``plan`` in front of its (now remainder) loop.

    ``interleave`` copies of the vector body per iteration (step ``width * interleave``),
    each reduction with one vector accumulator per copy: independent add chains
    that hide the FP latency; the copies are combined lane-wise after the loop."""
    loop, width = plan.loop, plan.width
    trip = loop.trip_count()
    while interleave > 1 and trip is not None and trip < width * interleave:
        interleave //= 2
    step = width * interleave
    region = loop.header.parent
    assert region is not None
    pre_term = loop._entry_edge
    b = Builder()
    b.set_insertion_point_before(pre_term)
    b.loc = pre_term.loc
    lo, hi = loop.lo, loop.hi
    span = _index_op(b, "max", _index_op(b, "sub", hi, lo), 0)
    rest = _materialize(b, _index_op(b, "add", lo, _index_op(b, "mul", _index_op(b, "div", span, step),
                                                            step)))
    inits = loop.inits
    nred = len(loop.iters)
    vtypes: list[VectorType] = []
    vinits: list[Value] = []
    for n in range(nred):
        kind, _ = plan.reductions[n]
        t = loop.iters[n].type
        assert isinstance(t, ScalarType)
        vt = VectorType(t.dtype, width)
        vtypes.append(vt)
        ident = b.constant(identity(kind, t.dtype), t)
        vinits.append(b.value("loop.broadcast", [ident], vt))
    # accumulator (n, copy j) is argument 1 + j * nred + n
    names = [f"vacc{n}" if j == 0 else f"vacc{n}_{j}" for j in range(interleave) for n in range(nred)]
    index = region.blocks.index(loop.header)
    vhead = Block([INDEX, *vtypes * interleave], ["vi", *names], "vloop")
    vbody = Block(name_hint="vbody")
    vdone = Block(vtypes * interleave, None, "vdone")
    for k, blk in enumerate((vhead, vbody, vdone)):
        region.add_block(blk, index + k)
    pre_term.set_successor(0, vhead, [lo, *vinits * interleave])

    # header
    hb = Builder(vhead)
    hb.loc = loop.branch.loc
    cond = hb.value("arith.cmpi", [vhead.args[0], rest], ScalarType(DType.BOOL), {"predicate": "slt"})
    hb.cond_br(cond, vbody, [], vdone, list(vhead.args[1:]))

    # body: one copy per interleaved step
    vb = Builder(vbody)
    vnexts: list[Value] = []
    for j in range(interleave):
        vb.loc = loop.back_edge.loc
        base = vhead.args[0] if j == 0 else \
            vb.value("arith.add", [vhead.args[0], vb.constant(j * width, INDEX)], INDEX)
        vmap = {id(loop.iv): base}
        for n, acc in enumerate(loop.iters):
            vmap[id(acc)] = vhead.args[1 + j * nred + n]
        _body_copy(plan, vb, vmap)
        vnexts += [vmap[id(loop.nexts[n])] for n in range(nred)]
    vb.loc = loop.back_edge.loc
    vnext = vb.value("arith.add", [vhead.args[0], vb.constant(step, INDEX)], INDEX)
    vb.br(vhead, [vnext, *vnexts])
    _drop_dead(vbody)

    # after the vector loop: combine the copies, fold the lanes into the initial values
    db = Builder(vdone)
    db.loc = loop.back_edge.loc
    accs = []
    for n, init in enumerate(inits):
        kind, red = plan.reductions[n]
        attrs = {"reassoc": True} if red.attributes.get("reassoc") else None
        v: Value = vdone.args[n]
        for j in range(1, interleave):
            v = db.value(f"arith.{kind}", [v, vdone.args[j * nred + n]], v.type, attrs)
        r = db.value("loop.vreduce", [v], init.type, {"kind": kind})
        accs.append(db.value(f"arith.{kind}", [init, r], init.type, attrs))
    if trip is not None and trip % step == 0:
        db.br(loop.exit, accs)
        _remove_loop(loop, region)
    else:
        db.br(loop.header, [rest, *accs])
        loop.branch.attributes["remainder"] = True


def _body_copy(plan: Plan, vb: Builder, vmap: dict[int, Value]) -> None:
    """Emit one vector copy of the loop body at ``vb``; ``vmap`` maps the induction
    variable and the accumulators in, and gets every body value's counterpart."""
    loop, width = plan.loop, plan.width
    splats: dict[int, Value] = {}

    def scalar(v: Value) -> Value:
        return vmap.get(id(v), v)

    def vector(v: Value) -> Value:
        if plan.classes.get(id(v)) == _VECTOR:
            return vmap[id(v)]
        if id(v) not in splats:
            s = scalar(v)
            splats[id(v)] = vb.value("loop.broadcast", [s], VectorType(s.type.dtype, width))  # type: ignore[union-attr]
        return splats[id(v)]

    for op in loop.latch.ops[:-1]:
        vb.loc = op.loc
        k = plan.classes.get(id(op.results[0])) if op.results else None
        if op.name == "loop.store":
            buf, off = scalar(op.operands[1]), scalar(op.operands[2])
            new = create_op("loop.vstore", [vector(op.operands[0]), buf, off])
            new.loc = op.loc
            vb.insert(new)
        elif k != _VECTOR:
            vmap[id(op.results[0])] = _clone(vb, op, [scalar(v) for v in op.operands],
                                             list(op.result_types)).results[0]
        elif op.name == "loop.load":
            t = op.operand_types[0]
            assert isinstance(t, TensorType)
            new = create_op("loop.vload", [scalar(op.operands[0]), scalar(op.operands[1])],
                            [VectorType(t.dtype, width)])
            new.loc = op.loc
            vmap[id(op.result)] = vb.insert(new).result
        else:
            operands = [vector(v) for v in op.operands]
            if op.name == "arith.select" and plan.classes.get(id(op.operands[0]), _UNIFORM) == _UNIFORM:
                operands[0] = scalar(op.operands[0])
            rt = op.result.type
            assert isinstance(rt, ScalarType)
            vmap[id(op.result)] = _clone(vb, op, operands, [VectorType(rt.dtype, width)]).result


def _drop_dead(block: Block) -> None:
    """Remove ops of ``block`` that nothing reads and that have no effect."""
    changed = True
    while changed:
        changed = False
        for op in reversed(block.ops):
            if op.results and not op.is_terminator and all(not r.uses for r in op.results) \
                    and op.name not in ("loop.vstore", "loop.store"):
                op.erase()
                changed = True


def _remove_loop(loop: CountedLoop, region: object) -> None:
    for blk in loop.blocks:
        for op in blk.ops:
            op.drop_all_references()
    for blk in loop.blocks:
        for op in list(blk.ops):
            op.detach()
        region.remove_block(blk)  # type: ignore[attr-defined]


def vectorize_func(func: FuncOp, module: ModuleOp | None, width: int, reassoc: bool = True,
                   missed: list[tuple[str, Operation]] | None = None, interleave: int = 1) -> int:
    """Vectorize every innermost counted loop of ``func`` that qualifies; how many."""
    if width < 2 or width & (width - 1):
        from ..diagnostics import WiaUsageError
        raise WiaUsageError(f"vectorize: width must be a power of two >= 2, got {width}")
    if interleave < 1 or interleave & (interleave - 1):
        from ..diagnostics import WiaUsageError
        raise WiaUsageError(f"vectorize: interleave must be a power of two >= 1, got {interleave}")
    return sum(vectorize_counted(loop, func, module, width, reassoc, missed, interleave)
               for loop in find_counted_loops(func) if candidate(loop))


def candidate(loop: CountedLoop) -> bool:
    """An innermost loop that is neither a vectorized loop's remainder nor vector code."""
    return loop.is_innermost and not loop.branch.attributes.get("remainder") \
        and not _is_vector_loop(loop)


def vectorize_counted(loop: CountedLoop, func: FuncOp, module: ModuleOp | None, width: int,
                      reassoc: bool = True, missed: list[tuple[str, Operation]] | None = None,
                      interleave: int = 1) -> bool:
    """Vectorize one ``candidate`` loop if it qualifies; whether it did (why not goes
    to ``missed``)."""
    try:
        plan = Analysis(loop, func, module, width, reassoc).run()
    except Skip as why:
        if missed is not None:
            missed.append((str(why), loop.branch))
        return False
    vectorize_loop(plan, func, interleave)
    return True


def _is_vector_loop(loop: CountedLoop) -> bool:
    """Already vector code (a loop this pass made, or one holding vector values)."""
    return any(isinstance(t, VectorType) for blk in loop.blocks for op in blk.ops
               for t in (*op.operand_types, *op.result_types))


__all__ = ["REDUCTIONS", "VECTOR_DTYPES", "VECTOR_FNS", "buffer_origin", "candidate", "identity",
           "may_alias", "vectorize_counted", "vectorize_func", "vectorize_loop"]
