"""Integer and floating-point arithmetic: add sub mul mad fma div rem abs neg min max,
rcp sqrt rsqrt ex2 lg2 sin cos tanh copysign, and packed ``.f16x2``/``.bf16x2`` forms.

Invariant: a float op computes in a wider type (f16/bf16 in f32, fused ops and
directed rounding in f64) and rounds once to the instruction type; ``.ftz``,
``.sat`` and ``.rz/.rm/.rp`` are honoured for f32 (see ``fmath``).
"""

from __future__ import annotations

import numpy as np

from . import fmath
from .dispatch import Compiled, op, unsupported
from .operands import mods_of, reader, writer
from .ptxtypes import TYPES, PtxType

ROUND = ("rn", "rz", "rm", "rp")
_FLOAT_FN = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "fma": lambda a, b, c: a * b + c,
    "mad": lambda a, b, c: a * b + c,
    "div": lambda a, b: a / b,
    "min": np.fmin,
    "max": np.fmax,
    "abs": np.abs,
    "neg": np.negative,
    "rcp": lambda a: 1 / a,
    "sqrt": np.sqrt,
    "rsqrt": lambda a: 1 / np.sqrt(a),
    "ex2": np.exp2,
    "lg2": np.log2,
    "sin": np.sin,
    "cos": np.cos,
    "tanh": np.tanh,
    "copysign": lambda a, b: np.copysign(b, a),
}
_FUSED = {"fma", "mad"}
_FLOAT_FLAGS = set(ROUND) | {"ftz", "sat", "approx", "full", "NaN", "relu", "oob"}


def _float_compute(name: str, t: PtxType, flags: set[str]):
    """``f(*values of t) -> values of t`` implementing ``name`` with ``flags``."""
    fn = _FLOAT_FN[name]
    if name in _FUSED and t.bits == 64:  # f32 operands multiply exactly in float64; f64 do not
        fn = fmath.fma_f64
    if "NaN" in flags and name in ("min", "max"):
        fn = np.minimum if name == "min" else np.maximum
    mode = next((m for m in ROUND if m in flags), "rn")
    wide = np.float64 if (name in _FUSED or mode != "rn" or t.bits == 64) else np.float32
    do_ftz, do_sat, relu = "ftz" in flags, "sat" in flags, "relu" in flags

    def run(*xs):
        vals = [fmath.to_compute(x, t) for x in xs]
        if do_ftz:
            vals = [fmath.ftz(v) for v in vals]
        vals = [np.asarray(v).astype(wide, copy=False) for v in vals]
        r = fn(*vals)
        if t.bits == 32 and t.kind == "f":
            r = fmath.round_f32(r, mode) if wide is np.float64 else np.asarray(r, np.float32)
        if do_sat:
            r = fmath.sat(r)
        if relu:
            r = np.where(np.isnan(r) | (r > 0), r, 0).astype(r.dtype)
        if do_ftz:
            r = fmath.ftz(r)
        return fmath.from_compute(r, t, mode)

    return run


def _packed(run, t: PtxType):
    """Lift a per-half function to packed f16x2/bf16x2 bits."""

    def go(*xs):
        halves = [fmath.split_f16x2(x, t) for x in xs]
        lo = run(*(h[0] for h in halves))
        hi = run(*(h[1] for h in halves))
        return fmath.pack_f16x2(lo, hi)

    return go


def _int_compute(name: str, t: PtxType, flags: set[str], cx):
    bits = t.bits
    if name in ("add", "sub"):
        if "sat" in flags:
            if t.name != "s32":
                raise cx.error(f"{name}.sat needs .s32")

            def satf(a, b):
                r = a.astype(np.int64) + (b if name == "add" else -np.asarray(b, np.int64))
                return np.clip(r, -(2**31), 2**31 - 1).astype(np.int32)

            return satf
        sign = 1 if name == "add" else -1
        return lambda a, b: fmath.typed(
            fmath.uview(a, bits) + fmath.uview(b, bits) if sign > 0
            else fmath.uview(a, bits) - fmath.uview(b, bits), t)
    if name in ("mul", "mad"):
        mode = "hi" if "hi" in flags else "wide" if "wide" in flags else "lo"
        if mode == "lo":
            prod = lambda a, b: fmath.uview(a, bits) * fmath.uview(b, bits)  # noqa: E731
            add_t = TYPES[f"u{bits}"]
            out = lambda u: fmath.typed(u, t)  # noqa: E731
        elif mode == "hi":
            prod = lambda a, b: fmath.uview(fmath.mul_hi(a, b, t), bits)  # noqa: E731
            add_t = TYPES[f"u{bits}"]
            out = lambda u: fmath.typed(u, t)  # noqa: E731
        else:
            wt = TYPES[f"{t.kind}{bits * 2}"]
            prod = lambda a, b: fmath.uview(fmath.widen(a, t) * fmath.widen(b, t), bits * 2)  # noqa: E731
            add_t = TYPES[f"u{bits * 2}"]
            out = lambda u: fmath.typed(u, wt)  # noqa: E731
        if name == "mul":
            return lambda a, b: out(prod(a, b))
        return lambda a, b, c: out(prod(a, b) + fmath.uview(c, add_t.bits))
    if name in ("div", "rem"):
        k = 0 if name == "div" else 1
        return lambda a, b: fmath.int_divmod(a, b, t)[k]
    if name == "min":
        return np.minimum
    if name == "max":
        return np.maximum
    if name == "abs":
        return lambda a: fmath.typed(np.where(np.asarray(a) < 0, -fmath.uview(a, bits),
                                              fmath.uview(a, bits)), t)
    if name == "neg":
        return lambda a: fmath.typed(-fmath.uview(a, bits), t)
    raise cx.error(f"unsupported instruction '{cx.instr.opcode}' at line {cx.instr.line}")


_NSRC = {"add": 2, "sub": 2, "mul": 2, "mad": 3, "fma": 3, "div": 2, "rem": 2, "min": 2,
         "max": 2, "abs": 1, "neg": 1, "rcp": 1, "sqrt": 1, "rsqrt": 1, "ex2": 1, "lg2": 1,
         "sin": 1, "cos": 1, "tanh": 1, "copysign": 2}


@op(*_NSRC)
def build_arith(ins, cx) -> Compiled:
    name = ins.op
    flags, types = mods_of(ins)
    if len(types) != 1:
        raise cx.error(f"unsupported instruction '{ins.opcode}' at line {ins.line}")
    t = types[0]
    n = _NSRC[name]
    if len(ins.operands) != n + 1:
        raise cx.error(f"'{ins.opcode}' takes {n + 1} operands")
    packed = t.name in ("f16x2", "bf16x2")
    if t.is_float or packed:
        unsupported(cx, flags, _FLOAT_FLAGS)
        if name == "rem":
            raise cx.error(f"unsupported instruction '{ins.opcode}' at line {ins.line}")
        base = TYPES["f16"] if t.name == "f16x2" else TYPES["bf16"] if packed else t
        run = _float_compute(name, base, flags)
        if packed:
            run = _packed(run, t)
        src_t = dst_t = TYPES["b32"] if packed else t
    else:
        unsupported(cx, flags, {"lo", "hi", "wide", "sat"})
        if name in _FLOAT_FN and name not in ("add", "sub", "mul", "mad", "div", "min", "max",
                                              "abs", "neg"):
            raise cx.error(f"unsupported instruction '{ins.opcode}' at line {ins.line}")
        run = _int_compute(name, t, flags, cx)
        src_t = dst_t = t
        if "wide" in flags:
            dst_t = TYPES[f"{t.kind}{t.bits * 2}"]
    srcs = [reader(cx, o, src_t) for o in ins.operands[1:]]
    if name == "mad" and "wide" in flags:
        srcs[2] = reader(cx, ins.operands[3], dst_t)
    dst = writer(cx, ins.operands[0], dst_t)

    if n == 1:
        (a,) = srcs
        return Compiled(ins, lambda w, idx: dst(w, idx, run(a(w, idx))))
    if n == 2:
        a, b = srcs
        return Compiled(ins, lambda w, idx: dst(w, idx, run(a(w, idx), b(w, idx))))
    a, b, c = srcs
    return Compiled(ins, lambda w, idx: dst(w, idx, run(a(w, idx), b(w, idx), c(w, idx))))
