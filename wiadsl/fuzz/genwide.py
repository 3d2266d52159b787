"""The wider expression classes (issue 17): the shapes of bugs the first generator never made.

``WideGen(gen).build(depth)`` returns one of:
- ``matmul``: ``a @ b`` of two independent operands whose inner extents agree
  (``b`` transposed when only its last axis fits), as integer casts of int
  inputs (``cast(a, i32) @ cast(b, i32)``), as quantized int8 products
  (``cast(quantize(a, s, zp), i32) @ ...``, then maybe ``dequantize``), or as
  float casts; sometimes with a ``relu`` epilogue;
- ``quant``: ``quantize``/``dequantize``/``fake_quant`` chains;
- ``const``: constant arithmetic mixing cast constants in f16, bf16, i8, i32, i64
  near their limits with weak literals (the folder against run time);
- ``modpow``: ``%`` and ``**`` with large, negative, zero, infinite and NaN
  operands, integer powers with possibly negative exponents, ``1.0 / (a % b)``
  so the sign of a zero remainder shows;
- ``special_cast``: casts of NaN, infinities and out-of-range floats to
  i8/i32/i64/bool (and of narrow floats that overflow).

Invariants: the same as genexpr's -- every result type is the model's
prediction, discontinuous ops (quantize's rounding, casts to integers) take
``exact`` operands only, and weak integer literals next to a strong integer
operand are in that dtype's range (the language would wrap them, NumPy raises).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..dtypes import DType
from ..frontend import ast
from .model import VType, binary_type, binop, call, lit, name

if TYPE_CHECKING:
    from .genexpr import ExprGen, Typed

INF = math.inf
I64_MIN = -(2**63)
INTS = (DType.I8, DType.I32, DType.I64)
#: Values at the edges of each dtype (the cast constants of ``const``).
EDGES: dict[DType, tuple[int | float, ...]] = {
    DType.I8: (127, -128, 100, 3, -1),
    DType.I32: (2147483647, -2147483648, 65536, 46341, -7),
    DType.I64: (2**63 - 1, I64_MIN, 4294967296, 3037000500),
    DType.F16: (2048.0, 2047.0, 65504.0, -65504.0, 6.1e-05, 0.1, 1024.5),
    DType.BF16: (256.0, 257.0, 3.0e38, 1.0e-3, -7.5),
    DType.F32: (16777216.0, 1e38, 3.4e38, -1e-30, 0.1),
    DType.F64: (9007199254740992.0, 1e308, -0.0, 0.1),
}
#: Weak literals that stay in range for every integer dtype.
SMALL_INTS = (1, 2, 3, -1, 0, 127, -128)
BIG_FLOATS = (1e10, -1e10, 1e38, -1e38, 5.5, -5.5, 0.0, -0.0, 7.0, 1e-3, INF, -INF)
DIVISORS = (3.0, -3.0, 0.5, INF, -INF, 7.5, -0.0, 0.0, 1e-3, 2.5)
SCALES = (0.5, 0.25, 0.1, 0.05, 2.0, 1.0, 0.125)
ZERO_POINTS = (0, 3, -5, 127, -128, 10)


def nan_expr() -> ast.Expr:
    """NaN, as a program writes it (there is no NaN literal): ``1.0 / 0.0 - 1.0 / 0.0``."""
    return binop("-", lit(INF), lit(INF))


@dataclass
class WideGen:
    """The wider builders over the scope of ``gen`` (same rng, env and helpers)."""

    gen: ExprGen

    def build(self, depth: int) -> Typed | None:
        kinds = (self.matmul, self.matmul, self.quant, self.const, self.const, self.modpow,
                 self.modpow, self.special_cast)
        return self.gen.rng.choice(kinds)(depth)

    # ------------------------------------------------------------ matmul

    def matmul(self, depth: int) -> Typed | None:
        rng, env = self.gen.rng, self.gen.env
        lhs = [n for n in sorted(env) if env[n].rank in (1, 2) and env[n].dtype is not DType.BOOL
               and env[n].known]
        pairs = []
        for a in lhs:
            k = env[a].shape[-1]
            for b in lhs:
                tb = env[b]
                if tb.shape[0] == k:
                    pairs.append((a, b, False))
                if tb.rank == 2 and tb.shape[-1] == k:
                    pairs.append((a, b, True))
        if not pairs:
            return None
        a, b, transposed = rng.choice(pairs)
        ea, ta = self._operand(name(a), env[a])
        eb, tb = self._operand(name(b), env[b], like=ta)
        if transposed:
            eb, tb = call("transpose", eb), tb.with_(shape=tuple(reversed(tb.shape)))
        t = binary_type(ta, tb, "+")
        if t is None or t.dtype is DType.BOOL:
            return None
        rows = ta.shape[:-1]
        cols = tb.shape[1:] if tb.rank == 2 else ()
        out: Typed = (binop("@", ea, eb),
                      VType(t.dtype, rows + cols, t.weak, not t.dtype.is_float))
        if rng.random() < 0.3:
            out = call("relu", out[0]), out[1]
        if out[1].dtype is DType.I32 and rng.random() < 0.3:
            s = rng.choice(SCALES)
            out = call("dequantize", out[0], lit(s), lit(0)), out[1].with_(dtype=DType.F32)
        return out

    def _operand(self, e: ast.Expr, t: VType, like: VType | None = None) -> Typed:
        """A matmul operand: an integer cast, a quantized int8 cast, a float cast, or as is."""
        rng = self.gen.rng
        if like is not None and rng.random() < 0.7:  # the same treatment as the lhs
            want = like.dtype
        elif t.dtype.is_float and t.exact and rng.random() < 0.4:
            want = DType.I32
        else:
            want = rng.choice((DType.I32, DType.I32, DType.I64, t.dtype, DType.F32, DType.F16))
        if want.is_int and t.dtype.is_float:
            if not t.exact:
                return e, t
            q = call("quantize", e, lit(rng.choice(SCALES)), lit(rng.choice(ZERO_POINTS)))
            return call("cast", q, name(want.value)), t.with_(dtype=want, weak=False)
        if want is t.dtype:
            return e, t
        return call("cast", e, name(want.value)), t.with_(dtype=want, weak=False,
                                                            exact=t.exact or want.is_int)

    # ------------------------------------------------------------ quantization

    def quant(self, depth: int) -> Typed | None:
        rng = self.gen.rng
        x = self.gen.operand(depth, lambda t: t.dtype.is_float and t.exact)
        if x is None:
            return None
        e, t = x
        s, zp = lit(rng.choice(SCALES)), lit(rng.choice(ZERO_POINTS))
        if rng.random() < 0.3:  # a strong scale of the input's dtype
            s = call("cast", s, name(t.dtype.value))
        kind = rng.choice(("quantize", "fake_quant", "roundtrip", "requant"))
        shape = t.shape
        if kind == "fake_quant":
            return call("fake_quant", e, s, zp), VType(t.dtype, shape, False, True)
        q = call("quantize", e, s, zp)
        if kind == "quantize":
            return q, VType(DType.I8, shape, False, True)
        if kind == "roundtrip":
            return call("dequantize", q, s, zp), VType(DType.F32, shape, False, True)
        # requantize: int arithmetic on the codes, then dequantize the i32 result
        acc = binop(rng.choice(("+", "-", "*")), call("cast", q, name("i32")),
                    lit(rng.choice(SMALL_INTS)))
        return call("dequantize", acc, lit(rng.choice(SCALES)), zp), VType(DType.F32, shape,
                                                                             False, True)

    # ------------------------------------------------------------ constants

    def cast_const(self, dtype: DType | None = None) -> Typed:
        rng = self.gen.rng
        dt = dtype or rng.choice(tuple(EDGES))
        v = rng.choice(EDGES[dt])
        if dt.is_float:
            v = float(v)
        e = lit(v)
        if v == I64_MIN:  # no literal spells it: 9223372036854775808 is out of range
            e = binop("-", lit(v + 1), lit(1))
        return call("cast", e, name(dt.value)), VType(dt, (), False, True)

    def const(self, depth: int) -> Typed | None:
        """A chain of 1-3 operators over cast constants and weak literals."""
        rng = self.gen.rng
        if rng.random() < 0.1:  # weak bools: true + true is True
            op = rng.choice(("+", "*"))
            return binop(op, lit(True), lit(rng.random() < 0.5)), VType(DType.BOOL, (), True)
        e, t = self.cast_const()
        for _ in range(rng.randint(1, 3)):
            op = rng.choice(("+", "-", "*", "+", "*", "max", "min"))
            if rng.random() < 0.5:
                rhs, tr = self._weak_for(t)
            else:
                rhs, tr = self.cast_const(rng.choice((t.dtype, rng.choice(tuple(EDGES)))))
            nt = binary_type(t, tr, op)
            if nt is None or nt.dtype is DType.BOOL:
                continue
            e = call(op, e, rhs) if op in ("max", "min") else binop(op, e, rhs)
            t = nt
        if rng.random() < 0.3:  # meet a tensor: the constant's dtype takes part in promotion
            x = self.gen.var(lambda u: u.dtype is not DType.BOOL and u.rank >= 1)
            if x is not None:
                nt = binary_type(x[1], t, "+")
                if nt is not None:
                    return binop("+", x[0], e), nt
        return e, t

    def _weak_for(self, t: VType) -> Typed:
        rng = self.gen.rng
        if t.dtype.is_float and rng.random() < 0.7:
            return lit(rng.choice((1.0, 0.5, -1.0, 2.0, 1e10, 0.1))), VType(DType.F64, (), True)
        return lit(rng.choice(SMALL_INTS)), VType(DType.I64, (), True)

    # ------------------------------------------------------------ % and **

    def modpow(self, depth: int) -> Typed | None:
        rng = self.gen.rng
        if rng.random() < 0.45:
            return self._int_pow(depth)
        a = self._big_float(depth)
        if rng.random() < 0.6:
            b: Typed = (lit(rng.choice(DIVISORS)), VType(DType.F64, (), True))
        else:
            b = self._big_float(depth)
        op = "%" if rng.random() < 0.7 else "**"
        t = binary_type(a[1], b[1], op)
        if t is None:
            return None
        e: ast.Expr = binop(op, a[0], b[0])
        if op == "%" and rng.random() < 0.4:
            return binop("/", lit(1.0), e), t  # the sign of a zero remainder shows as +-inf
        return e, t

    def _big_float(self, depth: int) -> Typed:
        """A float operand: a large or special constant, cast or weak, or a float input."""
        rng = self.gen.rng
        r = rng.random()
        if r < 0.3:
            x = self.gen.var(lambda t: t.dtype.is_float and t.exact)
            if x is not None:
                return x
        v = rng.choice(BIG_FLOATS)
        if r < 0.45:
            return (nan_expr() if rng.random() < 0.5 else lit(v)), VType(DType.F64, (), True)
        dt = rng.choice((DType.F32, DType.F64, DType.F16, DType.BF16))
        return call("cast", lit(v), name(dt.value)), VType(dt, (), False, True)

    def _int_pow(self, depth: int) -> Typed | None:
        rng = self.gen.rng
        dt = rng.choice(INTS)
        if rng.random() < 0.5:
            x = self.gen.var(lambda t: t.dtype.is_int or (t.dtype.is_float and t.exact))
            if x is None:
                return None
            base: Typed = (call("cast", x[0], name(dt.value)), x[1].with_(dtype=dt, weak=False,
                                                                           exact=True))
        else:
            base = self.cast_const(dt)
        if rng.random() < 0.5:
            exp: Typed = (lit(rng.choice((-1, 0, 1, 2, 3, 5, 7, -2))), VType(DType.I64, (), True))
        else:  # an int input as the exponent: negative elements raise on every side
            y = self.gen.var(lambda t: t.dtype.is_int)
            if y is None:
                return None
            ey = y[0] if rng.random() < 0.5 else call("abs", y[0])
            exp = ey, y[1]
        op = "**" if rng.random() < 0.75 else "%"
        t = binary_type(base[1], exp[1], op)
        if t is None:
            return None
        return binop(op, base[0], exp[0]), t

    # ------------------------------------------------------------ casts

    def special_cast(self, depth: int) -> Typed | None:
        rng = self.gen.rng
        dst = rng.choice((DType.I8, DType.I32, DType.I64, DType.BOOL, DType.F16, DType.BF16))
        r = rng.random()
        if r < 0.3:
            x = self.gen.var(lambda t: t.dtype.is_float and t.exact)
            if x is None:
                return None
            src, ts = x
        elif r < 0.5:
            src, ts = nan_expr(), VType(DType.F64, (), True)
        else:
            v = rng.choice((INF, -INF, 1e10, -1e10, 300.7, -300.7, 2147483648.0, 9.3e18,
                            -9.3e18, 127.9, -128.9, 65520.0, 1e38, 0.0))
            src, ts = lit(v), VType(DType.F64, (), True)
            if rng.random() < 0.4:  # through a narrow float first: 65520 is inf in f16
                mid = rng.choice((DType.F16, DType.BF16, DType.F32))
                src, ts = call("cast", src, name(mid.value)), VType(mid, (), False, True)
        return call("cast", src, name(dst.value)), ts.with_(dtype=dst, weak=False, exact=True)
