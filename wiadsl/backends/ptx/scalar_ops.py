"""Scalar operations as PTX text: the op -> instruction table of the emitter.

``ScalarEmitter.apply(fn, dtype, args)`` emits the instructions computing one
scalar op on compute registers (isa.DTYPES) and returns the result register.

Invariants:
- Results follow the reference interpreter (NumPy 2 semantics): IEEE-rounded
  ``add/sub/mul/div/sqrt`` (``.rn``), NaN-propagating ``max/min``, floor
  division and remainder for integers (and 0 for a zero divisor, as NumPy
  returns), the exact float remainder with the divisor's sign (``scalar_rem``), i8 arithmetic wrapped to 8 bits after every op, f16/bf16 rounded
  to their width after every op.
- Transcendentals are computed with range reduction around the ``.approx``
  instructions so results stay within a few ulp (see each helper), never the
  raw ~2^-11 ``tanh.approx``; f64 ones in software (``scalar_math_f64``).
- An integer ``pow`` whose exponent may be negative reports the interpreter's
  run-time error through a device error flag (``device_errors``).
- An op or dtype this table does not cover raises ``WiaError`` naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...diagnostics import WiaError
from ...dtypes import DType
from ...ir.ops_elementwise import TRANSCENDENTAL_FNS
from .builder import KernelBuilder
from .isa import float_literal, info
from .scalar_rem import RemainderEmitter

FLOAT_BINARY = {"add": "add.rn", "sub": "sub.rn", "mul": "mul.rn", "div": "div.rn"}
INT_BINARY = {"add": "add", "sub": "sub", "mul": "mul.lo"}
BITS_BINARY = {"and": "and", "or": "or"}
FLOAT_CMP = {"oeq": "eq", "one": "ne", "une": "neu", "olt": "lt", "ole": "le",
             "ogt": "gt", "oge": "ge"}
INT_CMP = {"eq": "eq", "ne": "ne", "slt": "lt", "sle": "le", "sgt": "gt", "sge": "ge"}
ROUNDING = {"floor": "rmi", "ceil": "rpi", "rint": "rni"}
PRED_FN = {"add": "or", "max": "or", "or": "or", "mul": "and", "min": "and", "and": "and"}


@dataclass
class ScalarEmitter(RemainderEmitter):
    """Emits scalar ops into ``kb``; registers are typed by ``isa.DTYPES[d].reg``."""

    kb: KernelBuilder
    #: error kind -> a global pointer register to its flag (``device_errors``)
    error_flag: Callable[[str], str] | None = None

    def apply(self, fn: str, dtype: DType, args: list[tuple[str, DType]],
              attrs: dict | None = None, rounded: bool = True) -> str:
        """Emit ``fn`` producing a ``dtype`` value from ``args`` (register, dtype) pairs.
        ``rounded=False``: an f16/bf16 arithmetic result is left unrounded in f32 (the
        caller rounds it once, e.g. by packing two lanes with ``cvt.rn.f16x2.f32``)."""
        attrs = attrs or {}
        if fn == "cast":
            return self.cast(args[0][0], args[0][1], dtype)
        if fn == "select":
            return self.select(args[0][0], args[1][0], args[2][0], dtype)
        if fn == "cmp":
            return self.compare(attrs["predicate"], args[0][0], args[1][0], args[0][1])
        regs = [a[0] for a in args]
        if dtype is DType.BOOL:
            out = self._pred_op(fn, regs)
        elif dtype.is_float:
            out = self._float_op(fn, dtype, regs)
        elif fn == "pow" and not attrs.get("nonnegative_exponent"):
            out = self.ipow(info(dtype).itype, regs[0], regs[1], checked=True)
        else:
            out = self._int_op(fn, dtype, regs)
        return self.round(out, dtype) if rounded or not dtype.is_float else out

    def device_error(self, pred: str, kind: str) -> None:
        """Raise the run-time error ``kind`` (``device_errors``) where ``pred`` holds."""
        if self.error_flag is None:
            raise WiaError(f"this PTX kernel cannot report run-time errors ('{kind}')")
        flag, one = self.error_flag(kind), self.kb.reg("b32")
        self.kb.emit(f"mov.u32 {one}, 1")
        self.kb.emit(f"@{pred} st.global.u32 [{flag}], {one}")

    # -------------------------------------------------------------- per kind
    def _pred_op(self, fn: str, regs: list[str]) -> str:
        kb = self.kb
        out = kb.reg("pred")
        if fn == "not":
            kb.emit(f"not.pred {out}, {regs[0]}")
        elif fn in PRED_FN:
            kb.emit(f"{PRED_FN[fn]}.pred {out}, {regs[0]}, {regs[1]}")
        else:
            raise WiaError(f"the PTX backend has no '{fn}' for i1 values")
        return out

    def _float_op(self, fn: str, dtype: DType, regs: list[str]) -> str:
        kb, t = self.kb, info(dtype).itype
        out = kb.reg(info(dtype).reg)
        if fn in FLOAT_BINARY:
            kb.emit(f"{FLOAT_BINARY[fn]}.{t} {out}, {regs[0]}, {regs[1]}")
        elif fn in ("max", "min"):
            return self.fminmax(fn, t, regs[0], regs[1])
        elif fn == "relu":
            return self.fminmax("max", t, regs[0], float_literal(0.0, dtype))
        elif fn in ("neg", "abs"):
            kb.emit(f"{fn}.{t} {out}, {regs[0]}")
        elif fn == "sqrt":
            kb.emit(f"sqrt.rn.{t} {out}, {regs[0]}")
        elif fn == "rsqrt":
            s = kb.reg(info(dtype).reg)
            kb.emit(f"sqrt.rn.{t} {s}, {regs[0]}")
            kb.emit(f"rcp.rn.{t} {out}, {s}")
        elif fn in ROUNDING:
            kb.emit(f"cvt.{ROUNDING[fn]}.{t}.{t} {out}, {regs[0]}")
        elif fn == "rem":
            return self.fremainder(t, regs[0], regs[1])
        elif fn in TRANSCENDENTAL_FNS:  # f_exp (f32, f16/bf16 computed in f32) or d_exp (f64)
            return getattr(self, f"{'d' if dtype is DType.F64 else 'f'}_{fn}")(*regs)
        else:
            raise WiaError(f"the PTX backend has no '{fn}' for {dtype} values")
        return out

    def _int_op(self, fn: str, dtype: DType, regs: list[str]) -> str:
        kb, t = self.kb, info(dtype).itype
        b = "b64" if dtype is DType.I64 else "b32"
        out = kb.reg(info(dtype).reg)
        if fn in INT_BINARY:
            kb.emit(f"{INT_BINARY[fn]}.{t} {out}, {regs[0]}, {regs[1]}")
        elif fn in BITS_BINARY:
            kb.emit(f"{BITS_BINARY[fn]}.{b} {out}, {regs[0]}, {regs[1]}")
        elif fn == "not":
            kb.emit(f"not.{b} {out}, {regs[0]}")
        elif fn in ("max", "min"):
            kb.emit(f"{fn}.{t} {out}, {regs[0]}, {regs[1]}")
        elif fn == "relu":
            kb.emit(f"max.{t} {out}, {regs[0]}, 0")
        elif fn in ("neg", "abs"):
            kb.emit(f"{fn}.{t} {out}, {regs[0]}")
        elif fn in ("floor", "ceil", "rint"):
            kb.emit(f"mov.{b} {out}, {regs[0]}")
        elif fn in ("div", "rem"):
            return self.floor_divmod(fn, t, regs[0], regs[1])
        elif fn == "pow":
            return self.ipow(t, regs[0], regs[1])
        else:
            raise WiaError(f"the PTX backend has no '{fn}' for {dtype} values")
        return out

    # -------------------------------------------------------------- helpers
    def round(self, reg: str, dtype: DType) -> str:
        """Round/wrap a compute register to ``dtype``'s width (f16, bf16, i8)."""
        kb = self.kb
        if dtype is DType.F16:
            h = kb.reg("b16")
            kb.emit(f"cvt.rn.f16.f32 {h}, {reg}")
            out = kb.reg("f32")
            kb.emit(f"cvt.f32.f16 {out}, {h}")
            return out
        if dtype is DType.BF16:
            h = kb.reg("b16")
            kb.emit(f"cvt.rn.bf16.f32 {h}, {reg}")
            return self.widen_bf16(h)
        if dtype is DType.I8:
            out = kb.reg("b32")
            kb.emit(f"shl.b32 {out}, {reg}, 24")
            kb.emit(f"shr.s32 {out}, {out}, 24")
            return out
        return reg

    def widen_bf16(self, h: str) -> str:
        """A bf16 bit pattern in a b16 register as an f32 register (exact)."""
        kb = self.kb
        r = kb.reg("b32")
        kb.emit(f"cvt.u32.u16 {r}, {h}")
        kb.emit(f"shl.b32 {r}, {r}, 16")
        out = kb.reg("f32")
        kb.emit(f"mov.b32 {out}, {r}")
        return out

    def compare(self, predicate: str, a: str, b: str, dtype: DType) -> str:
        kb = self.kb
        out = kb.reg("pred")
        if dtype is DType.BOOL:
            a, b = self.pred_to_int(a), self.pred_to_int(b)
            kb.emit(f"setp.{INT_CMP[predicate]}.s32 {out}, {a}, {b}")
        elif dtype.is_float:
            kb.emit(f"setp.{FLOAT_CMP[predicate]}.{info(dtype).itype} {out}, {a}, {b}")
        else:
            kb.emit(f"setp.{INT_CMP[predicate]}.{info(dtype).itype} {out}, {a}, {b}")
        return out

    def pred_to_int(self, p: str) -> str:
        r = self.kb.reg("b32")
        self.kb.emit(f"selp.u32 {r}, 1, 0, {p}")
        return r

    def select(self, c: str, a: str, b: str, dtype: DType) -> str:
        kb = self.kb
        if dtype is DType.BOOL:
            t, f, nc, out = kb.reg("pred"), kb.reg("pred"), kb.reg("pred"), kb.reg("pred")
            kb.emit(f"and.pred {t}, {c}, {a}")
            kb.emit(f"not.pred {nc}, {c}")
            kb.emit(f"and.pred {f}, {nc}, {b}")
            kb.emit(f"or.pred {out}, {t}, {f}")
            return out
        out = kb.reg(info(dtype).reg)
        kb.emit(f"selp.{info(dtype).itype} {out}, {a}, {b}, {c}")
        return out

    def cast(self, reg: str, src: DType, dst: DType) -> str:
        """The language's ``cast`` (LANGUAGE.md §3): NumPy ``astype``, except that
        float->int truncates toward zero, saturates and maps NaN to 0; x->bool is ``x != 0``."""
        kb = self.kb
        si, di = info(src), info(dst)
        if src is dst:
            return reg
        if dst is DType.BOOL:
            out = kb.reg("pred")
            if src.is_float:
                kb.emit(f"setp.neu.{si.itype} {out}, {reg}, {float_literal(0.0, src)}")
            else:
                kb.emit(f"setp.ne.{si.itype} {out}, {reg}, 0")
            return out
        if src is DType.BOOL:
            out = kb.reg(di.reg)
            one = float_literal(1.0, dst) if dst.is_float else "1"
            zero = float_literal(0.0, dst) if dst.is_float else "0"
            kb.emit(f"selp.{di.itype} {out}, {one}, {zero}, {reg}")
            return out
        out = kb.reg(di.reg)
        if si.itype == di.itype:
            kb.emit(f"mov.{'b64' if di.reg in ('b64', 'f64') else 'b32'} {out}, {reg}")
        elif src.is_float and dst.is_float:
            kb.emit(f"cvt.{'rn.' if di.itype == 'f32' else ''}{di.itype}.{si.itype} {out}, {reg}")
        elif src.is_float:  # cvt to an integer saturates to its range and maps NaN to 0
            kb.emit(f"cvt.rzi.{di.itype}.{si.itype} {out}, {reg}")
            if dst is DType.I8:  # computed in s32: saturate again to i8's range
                kb.emit(f"max.s32 {out}, {out}, -128")
                kb.emit(f"min.s32 {out}, {out}, 127")
        elif dst.is_float:
            kb.emit(f"cvt.rn.{di.itype}.{si.itype} {out}, {reg}")
        elif di.itype == "s32":  # s64 -> s32: keep the low bits, as NumPy wraps
            kb.emit(f"cvt.u32.u64 {out}, {reg}")
        else:
            kb.emit(f"cvt.{di.itype}.{si.itype} {out}, {reg}")
        return self.round(out, dst)
