"""Math functions emitted inline, so loops that call them still vectorize.

libm calls (``expf``...) are opaque to the loop vectorizer; NumPy's own exp is
SIMD, so a scalar libm loop would lose to it. ``exp_f32`` and ``tanh_f32`` are
Cephes' single-precision algorithms (range reduction + polynomial, about
1 ulp), ``erf_f32`` a rational approximation (at most 7 ulp), written with plain
IR and intrinsics that have vector forms. Other
functions use LLVM intrinsics or libm (f64 always libm: accuracy first).

Vectors (``<8 x float>``): ``intrinsic`` names the vector overload
(``llvm.sqrt.v8f32``), ``exp_f32``/``tanh_f32`` work lane-wise on float vectors,
and ``libm`` refuses them (no vector libm here: the vectorize pass leaves such
loops scalar).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from ...diagnostics import WiaIRError
from .types import F32, F64, I32, I64, element, like

LOG2E = 1.44269504088896341
C1, C2 = 0.693359375, -2.12194440e-4
EXP_POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
            1.6666665459e-1, 5.0000001201e-1)
TANH_POLY = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1,
             -3.33332819422e-1)
#: erf(x) = x P(x^2) / Q(x^2) on [-4, 4] (outside, erf is +-1 in f32): the rational
#: approximation Eigen and XLA use for float. Measured against math.erf on 2e6 points
#: of [-5, 5] and 2e4 of [1e-30, 1]: at most 7 ulp, 4.3e-7 absolute (near |x| = 3.6,
#: where erf is 1 - 3e-7); libm's erff is 1 ulp but a scalar call per element.
ERF_NUM = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06,
           -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
           -1.60960333262415e-02)
ERF_DEN = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
           -7.37332916720468e-03, -1.42647390514189e-02)


def type_suffix(t: ir.Type) -> str:
    """The overload suffix of an intrinsic: ``f32``, ``i64``, ``v8f32``..."""
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{type_suffix(t.element)}"
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    return {F32: "f32", F64: "f64"}.get(t, str(t))


def intrinsic(b: ir.IRBuilder, name: str, args: list[ir.Value]) -> ir.Value:
    mod = b.module
    t = args[0].type
    full = f"llvm.{name}.{type_suffix(t)}"
    fn = mod.globals.get(full)
    if fn is None:
        fn = ir.Function(mod, ir.FunctionType(t, [t] * len(args)), full)
    return b.call(fn, args)


def libm(b: ir.IRBuilder, name: str, args: list[ir.Value]) -> ir.Value:
    mod = b.module
    t = args[0].type
    if isinstance(t, ir.VectorType):
        raise WiaIRError(f"no vector form of '{name}' in the LLVM backend")
    symbol = name + ("f" if t == F32 else "")
    fn = mod.globals.get(symbol)
    if fn is None:
        fn = ir.Function(mod, ir.FunctionType(t, [t] * len(args)), symbol)
    return b.call(fn, args)


def _poly(b: ir.IRBuilder, x: ir.Value, coeffs: tuple[float, ...]) -> ir.Value:
    """Horner's scheme, each step one ``llvm.fmuladd`` (a fused multiply-add where the
    host has one, a multiply and an add elsewhere)."""
    acc: ir.Value = ir.Constant(x.type, coeffs[0])
    for c in coeffs[1:]:
        acc = intrinsic(b, "fmuladd", [acc, x, ir.Constant(x.type, c)])
    return acc


def exp_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """e**x for float: n = round(x log2 e), r = x - n ln 2, e**r by polynomial,
    scaled by 2**n in two steps so subnormal results and overflow to inf come out right.
    ``x`` is a float or a vector of floats."""
    t = x.type

    def _f(v: float) -> ir.Constant:
        return ir.Constant(t, v)
    i32 = like(x, I32)
    xc = intrinsic(b, "minnum", [intrinsic(b, "maxnum", [x, _f(-104.0)]), _f(89.0)])
    n = intrinsic(b, "rint", [b.fmul(xc, _f(LOG2E))])
    r = b.fsub(b.fsub(xc, b.fmul(n, _f(C1))), b.fmul(n, _f(C2)))
    p = b.fadd(b.fadd(b.fmul(b.fmul(_poly(b, r, EXP_POLY), r), r), r), _f(1.0))
    ni = b.fptosi(n, i32)
    half = b.ashr(ni, ir.Constant(i32, 1))
    rest = b.sub(ni, half)

    def pow2(k: ir.Value) -> ir.Value:
        return b.bitcast(b.shl(b.add(k, ir.Constant(i32, 127)), ir.Constant(i32, 23)), t)
    y = b.fmul(b.fmul(p, pow2(half)), pow2(rest))
    return b.select(b.fcmp_unordered("uno", x, x), x, y)


def tanh_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """tanh for float: an odd polynomial below |x| = 0.625, else 1 - 2/(e**2|x| + 1)."""
    t = x.type

    def _f(v: float) -> ir.Constant:
        return ir.Constant(t, v)
    ax = intrinsic(b, "fabs", [x])
    z = b.fmul(x, x)
    small = b.fadd(b.fmul(b.fmul(_poly(b, z, TANH_POLY), z), x), x)
    e = exp_f32(b, b.fmul(ax, _f(2.0)))
    big = b.fsub(_f(1.0), b.fdiv(_f(2.0), b.fadd(e, _f(1.0))))
    big = intrinsic(b, "copysign", [big, x])
    return b.select(b.fcmp_ordered("<", ax, _f(0.625)), small, big)


def erf_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """erf for float (ERF_NUM / ERF_DEN); NaN-propagating clamp, so NaN stays NaN and
    +-inf give +-1; -0.0 gives -0.0. ``x`` is a float or a vector of floats."""
    t = x.type
    xc = intrinsic(b, "minimum", [intrinsic(b, "maximum", [x, ir.Constant(t, -4.0)]),
                                  ir.Constant(t, 4.0)])
    z = b.fmul(xc, xc)
    # x * (P / Q), not (x P) / Q: x P would be subnormal (imprecise) for tiny x
    return b.fmul(xc, b.fdiv(_poly(b, z, ERF_NUM), _poly(b, z, ERF_DEN)))


def exp(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return exp_f32(b, x) if element(x.type) == F32 else libm(b, "exp", [x])


def erf(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return erf_f32(b, x) if element(x.type) == F32 else libm(b, "erf", [x])


def tanh(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return tanh_f32(b, x) if element(x.type) == F32 else libm(b, "tanh", [x])


def fptosi_sat(b: ir.IRBuilder, x: ir.Value, int_type: ir.IntType = I64) -> ir.Value:
    """float -> ``int_type`` (lane-wise for vectors), truncating toward zero; NaN gives
    0 and values beyond the type's range saturate (LANGUAGE.md §3's cast rule)."""
    out = like(x, int_type)
    if int_type.width < 64:
        return _fptosi_clamped(b, x, out)
    name = f"llvm.fptosi.sat.{type_suffix(out)}.{type_suffix(x.type)}"
    fn = b.module.globals.get(name)
    if fn is None:
        fn = ir.Function(b.module, ir.FunctionType(out, [x.type]), name)
    return b.call(fn, [x])


def _fptosi_clamped(b: ir.IRBuilder, x: ir.Value, out: ir.Type) -> ir.Value:
    """``fptosi.sat`` to a narrow type as clamp + ``fptosi`` + selects: the same value,
    but x86 has vector forms of these (``llvm.fptosi.sat`` to i8/i32 is scalarized)."""
    width = element(out).width
    top = 2.0 ** (width - 1)  # the first value past the range: exact in f32 and f64
    below = float(np.nextafter(np.float32(top) if element(x.type) == F32 else top, 0))
    clamped = intrinsic(b, "minnum", [intrinsic(b, "maxnum", [x, ir.Constant(x.type, -top)]),
                                      ir.Constant(x.type, below)])  # maxnum(NaN, lo) = lo
    i = b.select(b.fcmp_ordered(">=", x, ir.Constant(x.type, top)),
                 ir.Constant(out, (1 << (width - 1)) - 1), b.fptosi(clamped, out))
    return b.select(b.fcmp_unordered("uno", x, x), ir.Constant(out, 0), i)
