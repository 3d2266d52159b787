"""Random well-typed expressions over the values in scope.

``ExprGen.expr(depth)`` returns an expression and its predicted ``VType``. Every
builder either returns something the checker accepts or None ("not possible with
what is in scope"), in which case the caller tries another builder.

Invariants:
- Operands of discontinuous ops (comparisons, floor/ceil, casts to integer or
  bool, argmax/argmin, float ``%``) are ``exact`` (model.py), so rounding noise
  cannot change a branch or an integer result.
- Domains are kept safe: ``log``/``sqrt``/``rsqrt`` take ``abs(x) + 1``, divisors
  of floats are ``abs(x) + 1``, integer powers have small literal exponents, so
  the results stay finite for the input ranges the driver uses.
- Static indices are in range for every binding (symbolic dims bind to >= 1 except
  in cases built to probe empty tensors, where both sides must then fail alike).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from ..dtypes import DType
from ..frontend import ast
from .model import (
    SPAN,
    VType,
    array,
    binary_type,
    binop,
    broadcast,
    call,
    dim_expr,
    lit,
    name,
)

FLOATS = (DType.F16, DType.BF16, DType.F32, DType.F64)
SAFE_UNARY = ("abs", "neg", "relu", "floor", "ceil", "sqrt")
INEXACT_UNARY = ("exp", "tanh", "sigmoid", "sin", "cos", "erf", "log", "rsqrt")
ARITH = ("+", "-", "*", "max", "min", "/", "%", "**")
CMP = ("<", "<=", ">", ">=", "==", "!=")

Typed = tuple[ast.Expr, VType]


@dataclass
class FuncSig:
    """A generated helper: ``ops`` fold ``a``/``b``/weak int literals left to right."""

    name: str
    arity: int
    ops: tuple[tuple[str, str], ...]
    conditional: bool = False


@dataclass
class ExprGen:
    """Expressions over ``env`` (name -> type), drawing choices from ``rng``."""

    rng: random.Random
    env: dict[str, VType]
    funcs: list[FuncSig] = field(default_factory=list)

    # ------------------------------------------------------------ leaves

    def var(self, pred: Callable[[VType], bool] = lambda t: True) -> Typed | None:
        names = sorted(n for n, t in self.env.items() if pred(t))
        if not names:
            return None
        n = self.rng.choice(names)
        return name(n), self.env[n]

    def literal_for(self, t: VType) -> Typed:
        """A weak literal that keeps ``t``'s dtype when combined with it."""
        if t.dtype is DType.BOOL:
            v: int | float | bool = self.rng.random() < 0.5
            return lit(v), VType(DType.BOOL, (), True)
        if t.dtype.is_float and self.rng.random() < 0.6:
            v = self.rng.choice([0.5, 1.5, 2.0, -0.25, 3.0, -1.0, 0.1])
            return lit(v), VType(DType.F64, (), True)
        v = self.rng.choice([0, 1, 2, 3, -2, 5])
        return lit(v), VType(DType.I64, (), True)

    # ------------------------------------------------------------ dispatch

    def expr(self, depth: int = 2, pred: Callable[[VType], bool] = lambda t: True) -> Typed:
        """A random expression whose type satisfies ``pred`` (falls back to a variable)."""
        builders = [self.unary, self.binary, self.binary, self.reduce, self.matmul,
                    self.index, self.cast, self.where, self.shape_op, self.func_call,
                    self.compare_scalar, self.wide, self.wide]
        if depth > 0:
            for _ in range(6):
                made = self.rng.choice(builders)(depth - 1)
                if made is not None and pred(made[1]):
                    return made
        found = self.var(pred)
        if found is None:
            raise LookupError("no value in scope satisfies the predicate")
        return found

    def operand(self, depth: int, pred: Callable[[VType], bool] = lambda t: True) -> Typed | None:
        if depth <= 0 or self.rng.random() < 0.5:
            return self.var(pred)
        try:
            return self.expr(depth, pred)
        except LookupError:
            return None

    # ------------------------------------------------------------ builders

    def wide(self, depth: int) -> Typed | None:
        """One of the wider classes of issue 17 (genwide.py)."""
        from .genwide import WideGen

        return WideGen(self).build(depth)

    def unary(self, depth: int) -> Typed | None:
        x = self.operand(depth, lambda t: t.dtype is not DType.BOOL)
        if x is None:
            return None
        e, t = x
        fn = self.rng.choice(SAFE_UNARY + INEXACT_UNARY)
        if fn in INEXACT_UNARY or fn == "sqrt":
            if not t.dtype.is_float:
                return None
            if fn in ("log", "rsqrt", "sqrt"):
                e = binop("+", call("abs", e), lit(1))
            exact = t.exact and fn == "sqrt"
            return call(fn, e), t.with_(exact=exact)
        if fn in ("floor", "ceil") and not t.exact:
            return None
        if fn == "neg":
            return ast.UnaryOp("-", e, span=SPAN), t
        return call(fn, e), t

    def binary(self, depth: int) -> Typed | None:
        a = self.operand(depth)
        if a is None:
            return None
        ea, ta = a
        op = self.rng.choice(ARITH)
        if ta.dtype is DType.BOOL and op in ("-", "/", "%", "**"):
            op = self.rng.choice(("+", "*", "max", "min"))
        if self.rng.random() < 0.35:
            eb, tb = self.literal_for(ta)
        else:
            b = self.operand(depth, lambda t: broadcast(t.shape, ta.shape) is not None)
            if b is None:
                return None
            eb, tb = b
        if op == "**":
            eb, tb = lit(self.rng.choice([2, 3, 0, 1])), VType(DType.I64, (), True)
        t = binary_type(ta, tb, op)
        if t is None or (t.dtype is DType.BOOL and op in ("-", "/", "%", "**")):
            return None
        if op == "%" and t.dtype.is_float and not (ta.exact and tb.exact):
            return None
        if op in ("/", "%") and t.dtype.is_float:
            if tb.dtype is DType.BOOL:
                return None  # abs(b) + 1 would be an integer: another result dtype
            eb = binop("+", call("abs", eb), lit(1))
        if op in ("max", "min"):
            return call(op, ea, eb), t
        return binop(op, ea, eb), t

    def compare(self, depth: int) -> Typed | None:
        a = self.operand(depth, lambda t: t.exact)
        if a is None:
            return None
        ea, ta = a
        if self.rng.random() < 0.5:
            eb, tb = self.literal_for(ta)
        else:
            b = self.operand(depth, lambda t: t.exact and broadcast(t.shape, ta.shape) is not None)
            if b is None:
                return None
            eb, tb = b
        op = self.rng.choice(CMP)
        t = binary_type(ta, tb, op)
        return (binop(op, ea, eb), t) if t is not None else None

    def compare_scalar(self, depth: int) -> Typed | None:
        """A bool combination of comparisons (also scalar ``&&``/``||``)."""
        c = self.compare(depth)
        if c is None or self.rng.random() < 0.6:
            return c
        d = self.compare(depth)
        if d is None or broadcast(c[1].shape, d[1].shape) is None:
            return c
        op = self.rng.choice(("&&", "||"))
        t = binary_type(c[1], d[1], op)
        return (binop(op, c[0], d[0]), t) if t is not None else c

    def reduce(self, depth: int) -> Typed | None:
        x = self.operand(depth, lambda t: t.rank >= 1)
        if x is None:
            return None
        e, t = x
        fn = self.rng.choice(("reduce_sum", "reduce_max", "reduce_min", "reduce_mean",
                              "reduce_prod", "argmax", "argmin"))
        kw: dict[str, ast.Expr] = {}
        axis: int | None = None
        if self.rng.random() < 0.6:
            axis = self.rng.randrange(-t.rank, t.rank)
            kw["axis"] = lit(axis)
        keep = fn.startswith("reduce") and self.rng.random() < 0.3
        if keep:
            kw["keepdims"] = ast.BoolLit(True, span=SPAN)
        if fn.startswith("arg"):
            if not t.exact or t.dtype is DType.BOOL:
                return None
            dtype, exact = DType.I64, True
        elif fn == "reduce_mean":
            if t.dtype is DType.BOOL:
                return None
            dtype = t.dtype if t.dtype.is_float else DType.F64
            exact = False
        elif fn in ("reduce_sum", "reduce_prod"):
            # NumPy accumulates bool and every integer in the default int (i64)
            dtype = t.dtype if t.dtype.is_float else DType.I64
            exact = not t.dtype.is_float
        else:
            dtype, exact = t.dtype, t.exact
        if axis is None:
            shape: tuple = tuple(1 for _ in t.shape) if keep else ()
        else:
            k = axis % t.rank
            shape = t.shape[:k] + ((1,) if keep else ()) + t.shape[k + 1:]
        # computed only from weak values: weak (LANGUAGE.md §3), as the checker has it
        return call(fn, e, **kw), VType(dtype, shape, t.weak, exact)

    def matmul(self, depth: int) -> Typed | None:
        x = self.operand(depth, lambda t: t.rank in (1, 2) and t.dtype is not DType.BOOL)
        if x is None:
            return None
        e, t = x
        # a product of weak values (array literals) is weak: fuzz seed 4001's
        # max(t3 @ t3, f32 value) is f32 (the model had said f64)
        exact = not t.dtype.is_float
        if t.rank == 1:
            return binop("@", e, e), VType(t.dtype, (), t.weak, exact)
        if self.rng.random() < 0.5:
            return binop("@", e, call("transpose", e)), VType(t.dtype, (t.shape[0], t.shape[0]),
                                                            t.weak, exact)
        return call("matmul", call("transpose", e), e), VType(t.dtype, (t.shape[1], t.shape[1]),
                                                             t.weak, exact)

    def index(self, depth: int) -> Typed | None:
        x = self.var(lambda t: t.rank >= 1)
        if x is None:
            return None
        e, t = x
        items: list[ast.Expr | ast.Slice] = []
        shape: list = []
        for k, d in enumerate(t.shape):
            if k > 0 and self.rng.random() < 0.3:
                shape += list(t.shape[k:])
                break
            item, extent, kept = self._item(d)
            items.append(item)
            if kept:
                shape.append(extent)
        return ast.Index(e, tuple(items), span=SPAN), t.with_(shape=tuple(shape))

    def _item(self, d: object) -> tuple[ast.Expr | ast.Slice, object, bool]:
        """One index item for an axis of extent ``d``: (item, kept extent, kept?)."""
        r = self.rng.random()
        if r < 0.3:
            return lit(self.rng.choice([0, -1])), None, False
        if isinstance(d, int) and d > 1 and r < 0.7:
            lo = self.rng.randrange(0, d)
            hi = self.rng.randrange(lo + 1, d + 1)
            step = self.rng.choice([None, None, 2, -1])
            if step == -1:
                s = ast.Slice(lit(hi - 1), None if lo == 0 else lit(lo - 1), lit(-1), span=SPAN)
                return s, len(range(hi - 1, lo - 1 if lo else -1, -1)), True
            s = ast.Slice(lit(lo), lit(hi), None if step is None else lit(step), span=SPAN)
            return s, len(range(lo, hi, step or 1)), True
        if r < 0.85:
            return ast.Slice(None, None, None, span=SPAN), d, True
        return ast.Slice(None, None, lit(-1), span=SPAN), d, True

    def cast(self, depth: int) -> Typed | None:
        x = self.operand(depth)
        if x is None:
            return None
        e, t = x
        choices = list(FLOATS) + ([DType.I8, DType.I32, DType.I64, DType.BOOL] if t.exact else [])
        dt = self.rng.choice(choices)
        exact = t.exact and (dt.is_float or t.exact)
        return call("cast", e, name(dt.value)), VType(dt, t.shape, False, exact)

    def where(self, depth: int) -> Typed | None:
        c = self.compare(depth)
        if c is None:
            return None
        a = self.operand(depth, lambda t: broadcast(t.shape, c[1].shape) is not None)
        if a is None:
            return None
        b = self.literal_for(a[1]) if self.rng.random() < 0.4 else self.var(
            lambda t: broadcast(t.shape, a[1].shape) is not None)
        if b is None:
            return None
        t = binary_type(a[1], b[1], "+")
        shape = broadcast(c[1].shape, t.shape) if t is not None else None
        if t is None or shape is None:
            return None
        return call("where", c[0], a[0], b[0]), t.with_(shape=shape)

    def shape_op(self, depth: int) -> Typed | None:
        x = self.var(lambda t: t.rank >= 1 and t.known)
        if x is None:
            return None
        e, t = x
        kind = self.rng.choice(("transpose", "concat", "broadcast", "zeros", "full", "arange",
                                "flatten", "array"))
        if kind == "transpose":
            return call("transpose", e), t.with_(shape=tuple(reversed(t.shape)))
        if kind == "concat":
            axis = self.rng.randrange(t.rank)
            d = t.shape[axis]
            shape = t.shape[:axis] + ((2 * d,) if isinstance(d, int) else (None,)) + t.shape[axis + 1:]
            return call("concat", array([e, e]), axis=lit(axis)), t.with_(shape=shape)
        if kind == "broadcast":
            new = (self.rng.choice([2, 3]),) + t.shape
            return call("broadcast_to", e, array([dim_expr(d) for d in new])), t.with_(shape=new)
        tail = [d for d in t.shape[1:] if isinstance(d, int)]
        if kind == "flatten" and t.rank >= 2 and len(tail) == t.rank - 1:
            rest = 1
            for d in tail:
                rest *= d
            return call("flatten", e), t.with_(shape=(t.shape[0], rest))
        if kind == "arange":
            return call("arange", dim_expr(t.shape[0])), VType(DType.I64, (t.shape[0],))
        if kind == "array":
            values = [self.rng.choice([0.5, -1.25, 2.0, 3.0]) for _ in range(3)]
            return array([lit(v) for v in values]), VType(DType.F64, (3,), True)
        dt = self.rng.choice(FLOATS + (DType.I32, DType.I8))
        dims = array([dim_expr(d) for d in t.shape])
        if kind == "zeros":
            return call(self.rng.choice(("zeros", "ones")), dims, name(dt.value)), t.with_(
                dtype=dt, weak=False, exact=True)
        return call("full", dims, lit(self.rng.choice([2, -3])), name(dt.value)), t.with_(
            dtype=dt, weak=False, exact=True)

    def func_call(self, depth: int) -> Typed | None:
        if not self.funcs:
            return None
        f = self.rng.choice(self.funcs)
        a = self.operand(depth, lambda t: t.dtype is not DType.BOOL and (t.exact or not f.conditional))
        if a is None:
            return None
        args = [a]
        if f.arity == 2:
            b = self.operand(depth, lambda t: t.dtype is not DType.BOOL
                             and broadcast(t.shape, a[1].shape) is not None)
            if b is None:
                return None
            args.append(b)
        t = apply_sig(f, [x[1] for x in args])
        if t is None:
            return None
        return ast.Call(f.name, tuple(x[0] for x in args), (), span=SPAN), t


def apply_sig(f: FuncSig, args: list[VType]) -> VType | None:
    """The result type of calling ``f`` on ``args`` (folding its ops)."""
    acc: VType | None = args[0]
    for op, operand in f.ops:
        other = {"a": args[0], "b": args[-1]}.get(operand, VType(DType.I64, (), True))
        acc = binary_type(acc, other, op) if acc is not None else None
    return acc
