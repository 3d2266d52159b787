"""Multi-instruction scalar math (f32 transcendentals, floor division, NaN-aware min/max).

Invariants (accuracy, f32, vs. NumPy's correctly rounded float32 results):
- ``exp``: Cody-Waite reduction by ln2 (hi/lo split) around ``ex2.approx``:
  ~2 ulp; inputs clamped to [-104, 89] so -inf gives 0 and +inf gives inf.
- ``log``: ``lg2.approx`` times ln2: absolute error ~2^-22 (relative error grows
  near 1).
- ``tanh``: odd polynomial for |x| < 0.3, ``1 - 2/(exp(2|x|)+1)`` above: < 1e-6 rel.
- ``erf``: Taylor series for |x| < 0.5, Abramowitz-Stegun 7.1.26 above (abs < 2e-7).
- ``sin/cos``: ``x - k*pi/2`` with pi/2 in three f32 parts (the first with 20
  bits, so the first ``fma`` is exact) for |x| <= 105615; above (and for inf/NaN)
  a branch converts x to f64 and takes ``F64MathEmitter.reduce_half_pi``
  (Cody-Waite / Payne-Hanek), rounding r to f32. Then Taylor polynomials in f32
  (to r^9 / r^10, truncation < 0.05 ulp on |r| <= pi/4) and the quadrant from k:
  <= 2 ulp for every finite x (f16/bf16 round that once more);
  sin/cos(+-inf, NaN) = NaN, sin(-0) = -0.
- ``pow``: ``exp2(y*log2|x|)`` with NumPy's sign rules for negative bases and
  ``pow(x, 0) = 1``.
"""

from __future__ import annotations

import math

from ...dtypes import DType
from .isa import float_literal

LOG2E = 1.4426950408889634
LN2_HI, LN2_LO = 0.693145751953125, 1.428606765330187e-06
#: pi/2 = HALF_PI_F32[0] + [1] + [2] (- 9.5e-23): the first cut to 20 fraction bits
#: (k * it is exact, and so is x - k * it, for |k| < 2^17), the others f32-rounded
HALF_PI_F32 = (1.5707960128784180, 3.1391647326017846e-07, 5.390302953474238e-15)
#: |x| above which the f32 reduction by HALF_PI_F32 loses accuracy
TRIG_LIMIT_F32 = 105615.0
TWO_OVER_PI = 0.6366197723675814


def _f32(v: float) -> str:
    """An exact f32 immediate."""
    return float_literal(v, DType.F32)


def _f64(v: float) -> str:
    """An exact f64 immediate."""
    return float_literal(v, DType.F64)


class MathEmitter:
    """Mixin of ScalarEmitter: helpers that need several instructions."""

    kb: object  # KernelBuilder, set by the dataclass that mixes this in

    def _r(self, cls: str = "f32") -> str:
        return self.kb.reg(cls)  # type: ignore[attr-defined]

    def _e(self, s: str) -> None:
        self.kb.emit(s)  # type: ignore[attr-defined]

    # ------------------------------------------------------------ min/max/div/pow
    def fminmax(self, fn: str, t: str, a: str, b: str) -> str:
        out = self._r("f64" if t == "f64" else "f32")
        if t == "f32":
            self._e(f"{fn}.NaN.f32 {out}, {a}, {b}")
            return out
        p, s, m = self._r("pred"), self._r("f64"), self._r("f64")
        self._e(f"{fn}.f64 {m}, {a}, {b}")
        self._e(f"setp.nan.f64 {p}, {a}, {b}")
        self._e(f"add.rn.f64 {s}, {a}, {b}")
        self._e(f"selp.f64 {out}, {s}, {m}, {p}")
        return out

    def floor_divmod(self, fn: str, t: str, a: str, b: str) -> str:
        """Floor division / remainder (NumPy); a zero divisor gives 0. A divisor of -1
        divides by 1 instead (then negates the quotient), so ``MIN / -1`` wraps as
        NumPy's does rather than leaving the hardware's overflow result."""
        cls = "b64" if t == "s64" else "b32"
        bits = "b64" if t == "s64" else "b32"
        q, r, x, out = self._r(cls), self._r(cls), self._r(cls), self._r(cls)
        pz, pr, pn, pm = self._r("pred"), self._r("pred"), self._r("pred"), self._r("pred")
        safe = self._r(cls)
        self._e(f"setp.eq.{t} {pz}, {b}, 0")
        self._e(f"setp.eq.{t} {pm}, {b}, -1")
        self._e(f"or.pred {pn}, {pz}, {pm}")
        self._e(f"selp.{t} {safe}, 1, {b}, {pn}")
        self._e(f"div.{t} {q}, {a}, {safe}")
        self._e(f"rem.{t} {r}, {a}, {safe}")
        self._e(f"setp.ne.{t} {pr}, {r}, 0")
        self._e(f"xor.{bits} {x}, {r}, {safe}")
        self._e(f"setp.lt.{t} {pn}, {x}, 0")
        self._e(f"and.pred {pr}, {pr}, {pn}")
        if fn == "div":
            self._e(f"@{pr} sub.{t} {q}, {q}, 1")
            self._e(f"@{pm} neg.{t} {q}, {q}")
            self._e(f"selp.{t} {out}, 0, {q}, {pz}")
        else:
            self._e(f"@{pr} add.{t} {r}, {r}, {safe}")
            self._e(f"selp.{t} {out}, 0, {r}, {pz}")
        return out

    def ipow(self, t: str, a: str, b: str, checked: bool = False) -> str:
        """Integer power by repeated squaring; ``checked``: a negative exponent raises
        the interpreter's error (through ``device_error``), else it must be >= 0."""
        cls = "b64" if t == "s64" else "b32"
        res, base, e, bit = self._r(cls), self._r(cls), self._r(cls), self._r(cls)
        p = self._r("pred")
        kb = self.kb
        if checked:
            self._e(f"setp.lt.{t} {p}, {b}, 0")
            self.device_error(p, "negative_power")  # type: ignore[attr-defined]
        top, done = kb.new_label("pow"), kb.new_label("powdone")  # type: ignore[attr-defined]
        self._e(f"mov.{t} {res}, 1")
        self._e(f"mov.{t} {base}, {a}")
        self._e(f"mov.{t} {e}, {b}")
        kb.label(top)  # type: ignore[attr-defined]
        self._e(f"setp.le.{t} {p}, {e}, 0")
        self._e(f"@{p} bra {done}")
        self._e(f"and.{'b64' if cls == 'b64' else 'b32'} {bit}, {e}, 1")
        self._e(f"setp.ne.{t} {p}, {bit}, 0")
        self._e(f"@{p} mul.lo.{t} {res}, {res}, {base}")
        self._e(f"mul.lo.{t} {base}, {base}, {base}")
        self._e(f"shr.{t} {e}, {e}, 1")
        self._e(f"bra {top}")
        kb.label(done)  # type: ignore[attr-defined]
        return res

    # ------------------------------------------------------------ f32 math
    def f_exp(self, x: str) -> str:
        c, t, j, r, e, out = (self._r() for _ in range(6))
        self._e(f"max.NaN.f32 {c}, {x}, {_f32(-104.0)}")
        self._e(f"min.NaN.f32 {c}, {c}, {_f32(89.0)}")
        self._e(f"mul.rn.f32 {t}, {c}, {_f32(LOG2E)}")
        self._e(f"cvt.rni.f32.f32 {j}, {t}")
        self._e(f"fma.rn.f32 {r}, {j}, {_f32(-LN2_HI)}, {c}")
        self._e(f"fma.rn.f32 {r}, {j}, {_f32(-LN2_LO)}, {r}")
        self._e(f"mul.rn.f32 {r}, {r}, {_f32(LOG2E)}")
        self._e(f"ex2.approx.ftz.f32 {r}, {r}")
        self._e(f"ex2.approx.ftz.f32 {e}, {j}")
        self._e(f"mul.rn.f32 {out}, {r}, {e}")
        return out

    def f_log(self, x: str) -> str:
        t, out = self._r(), self._r()
        self._e(f"lg2.approx.f32 {t}, {x}")
        self._e(f"mul.rn.f32 {out}, {t}, {_f32(0.6931471805599453)}")
        return out

    def f_sigmoid(self, x: str) -> str:
        n, d, out = self._r(), self._r(), self._r()
        self._e(f"neg.f32 {n}, {x}")
        e = self.f_exp(n)
        self._e(f"add.rn.f32 {d}, {e}, {_f32(1.0)}")
        self._e(f"div.rn.f32 {out}, {_f32(1.0)}, {d}")
        return out

    def f_tanh(self, x: str) -> str:
        a, a2, d, q, big, x2, poly, out = (self._r() for _ in range(8))
        p = self._r("pred")
        self._e(f"abs.f32 {a}, {x}")
        self._e(f"add.rn.f32 {a2}, {a}, {a}")
        e = self.f_exp(a2)
        self._e(f"add.rn.f32 {d}, {e}, {_f32(1.0)}")
        self._e(f"div.rn.f32 {q}, {_f32(2.0)}, {d}")
        self._e(f"sub.rn.f32 {big}, {_f32(1.0)}, {q}")
        self._e(f"copysign.f32 {big}, {x}, {big}")
        self._e(f"mul.rn.f32 {x2}, {x}, {x}")
        coeffs = [-1382.0 / 155925, 62.0 / 2835, -17.0 / 315, 2.0 / 15, -1.0 / 3, 1.0]
        self._e(f"mov.f32 {poly}, {_f32(coeffs[0])}")
        for c in coeffs[1:]:
            self._e(f"fma.rn.f32 {poly}, {poly}, {x2}, {_f32(c)}")
        self._e(f"mul.rn.f32 {poly}, {poly}, {x}")
        self._e(f"setp.lt.f32 {p}, {a}, {_f32(0.3)}")
        self._e(f"selp.f32 {out}, {poly}, {big}, {p}")
        return out

    def f_erf(self, x: str) -> str:
        a, x2, small, t, den, poly, big, out = (self._r() for _ in range(8))
        p = self._r("pred")
        self._e(f"abs.f32 {a}, {x}")
        self._e(f"mul.rn.f32 {x2}, {x}, {x}")
        taylor = [-1.0 / 75600, 1.0 / 9360, -1.0 / 1320, 1.0 / 216, -1.0 / 42, 1.0 / 10,
                  -1.0 / 3, 1.0]
        self._e(f"mov.f32 {small}, {_f32(taylor[0])}")
        for c in taylor[1:]:
            self._e(f"fma.rn.f32 {small}, {small}, {x2}, {_f32(c)}")
        self._e(f"mul.rn.f32 {small}, {small}, {x}")
        self._e(f"mul.rn.f32 {small}, {small}, {_f32(1.1283791670955126)}")
        self._e(f"fma.rn.f32 {den}, {a}, {_f32(0.3275911)}, {_f32(1.0)}")
        self._e(f"rcp.rn.f32 {t}, {den}")
        coeffs = [1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592]
        self._e(f"mov.f32 {poly}, {_f32(coeffs[0])}")
        for c in coeffs[1:]:
            self._e(f"fma.rn.f32 {poly}, {poly}, {t}, {_f32(c)}")
        self._e(f"mul.rn.f32 {poly}, {poly}, {t}")
        nx2 = self._r()
        self._e(f"neg.f32 {nx2}, {x2}")
        e = self.f_exp(nx2)
        self._e(f"mul.rn.f32 {poly}, {poly}, {e}")
        self._e(f"sub.rn.f32 {big}, {_f32(1.0)}, {poly}")
        self._e(f"copysign.f32 {big}, {x}, {big}")
        self._e(f"setp.lt.f32 {p}, {a}, {_f32(0.5)}")
        self._e(f"selp.f32 {out}, {small}, {big}, {p}")
        return out

    def _reduce_half_pi_f32(self, x: str) -> tuple[str, str]:
        """(r as f32, k as b32) with x = k*pi/2 + r, |r| <~ pi/4, for every x: f32
        Cody-Waite for |x| <= TRIG_LIMIT_F32, else (a branch, inf and NaN too) the
        f64 reduction; r is NaN for +-inf and NaN."""
        ax, j, r = self._r(), self._r(), self._r()
        q, small = self._r("b32"), self._r("pred")
        self._e(f"abs.f32 {ax}, {x}")
        self._e(f"mul.rn.f32 {j}, {x}, {_f32(TWO_OVER_PI)}")
        self._e(f"cvt.rni.f32.f32 {j}, {j}")
        self._e(f"fma.rn.f32 {r}, {j}, {_f32(-HALF_PI_F32[0])}, {x}")
        self._e(f"fma.rn.f32 {r}, {j}, {_f32(-HALF_PI_F32[1])}, {r}")
        self._e(f"fma.rn.f32 {r}, {j}, {_f32(-HALF_PI_F32[2])}, {r}")
        self._e(f"cvt.rni.s32.f32 {q}, {j}")
        done = self.kb.new_label("trig32")  # type: ignore[attr-defined]
        self._e(f"setp.le.f32 {small}, {ax}, {_f32(TRIG_LIMIT_F32)}")  # false for NaN
        self._e(f"@{small} bra {done}")
        xd, nan = self._r("f64"), self._r("f64")
        self._e(f"cvt.f64.f32 {xd}, {x}")
        rd, qd = self.reduce_half_pi(xd)  # type: ignore[attr-defined]
        self._e(f"sub.rn.f64 {nan}, {xd}, {xd}")  # NaN for +-inf and NaN, else 0
        self._e(f"add.rn.f64 {rd}, {rd}, {nan}")
        self._e(f"cvt.rn.f32.f64 {r}, {rd}")
        self._e(f"mov.b32 {q}, {qd}")
        self.kb.label(done)  # type: ignore[attr-defined]
        return r, q

    def _trig_f32(self, x: str, shift: int) -> str:
        """sin (shift 0) or cos (shift 1) of an f32 register."""
        r, q = self._reduce_half_pi_f32(x)
        z, t, sp, cp, v, nv, out = (self._r() for _ in range(7))
        bit = self._r("b32")
        odd, neg = self._r("pred"), self._r("pred")
        self._e(f"mul.rn.f32 {z}, {r}, {r}")
        sin_c = [(-1.0) ** (n // 2) / math.factorial(n) for n in range(9, 2, -2)]
        self._e(f"mov.f32 {sp}, {_f32(sin_c[0])}")
        for c in sin_c[1:]:
            self._e(f"fma.rn.f32 {sp}, {sp}, {z}, {_f32(c)}")
        self._e(f"mul.rn.f32 {t}, {r}, {z}")
        self._e(f"fma.rn.f32 {sp}, {t}, {sp}, {r}")  # r + r^3 * P(r^2)
        cos_c = [(-1.0) ** (n // 2) / math.factorial(n) for n in range(10, -1, -2)]
        self._e(f"mov.f32 {cp}, {_f32(cos_c[0])}")
        for c in cos_c[1:]:
            self._e(f"fma.rn.f32 {cp}, {cp}, {z}, {_f32(c)}")
        if shift:
            self._e(f"add.s32 {q}, {q}, {shift}")
        self._e(f"and.b32 {bit}, {q}, 1")
        self._e(f"setp.ne.u32 {odd}, {bit}, 0")
        self._e(f"and.b32 {bit}, {q}, 2")
        self._e(f"setp.ne.u32 {neg}, {bit}, 0")
        self._e(f"selp.f32 {v}, {cp}, {sp}, {odd}")
        self._e(f"neg.f32 {nv}, {v}")
        self._e(f"selp.f32 {out}, {nv}, {v}, {neg}")
        if not shift:  # sin(+-0) = +-0 (the reduction loses the sign of -0)
            zero = self._r("pred")
            self._e(f"setp.eq.f32 {zero}, {x}, {_f32(0.0)}")
            self._e(f"selp.f32 {out}, {x}, {out}, {zero}")
        return out

    def f_sin(self, x: str) -> str:
        return self._trig_f32(x, 0)

    def f_cos(self, x: str) -> str:
        return self._trig_f32(x, 1)

    def f_pow(self, x: str, y: str) -> str:
        a, lg, prod, r = (self._r() for _ in range(4))
        self._e(f"abs.f32 {a}, {x}")
        self._e(f"lg2.approx.f32 {lg}, {a}")
        self._e(f"mul.rn.f32 {prod}, {lg}, {y}")
        self._e(f"ex2.approx.f32 {r}, {prod}")
        return self.pow_signs("f32", x, y, r)

    def pow_signs(self, t: str, x: str, y: str, magnitude: str) -> str:
        """``x ** y`` from ``|x| ** y`` with NumPy's rules: a base with the sign bit
        set (-0 too) and an odd integral y gives a negative result; a finite
        negative base with a non-integral y gives NaN; ``x ** 0 = 1``,
        ``1 ** y = 1`` and ``(-1) ** +-inf = 1`` (even for NaN)."""
        lit = _f32 if t == "f32" else _f64
        r, neg, half, fr, ax, ay, sign = (self._r(t) for _ in range(7))
        pneg, pint, podd, pnan, pone, pinf = (self._r("pred") for _ in range(6))
        self._e(f"copysign.{t} {sign}, {x}, {lit(1.0)}")
        self._e(f"setp.lt.{t} {pneg}, {sign}, {lit(0.0)}")
        self._e(f"cvt.rzi.{t}.{t} {fr}, {y}")
        self._e(f"setp.eq.{t} {pint}, {fr}, {y}")
        self._e(f"mul.rn.{t} {half}, {y}, {lit(0.5)}")
        self._e(f"cvt.rzi.{t}.{t} {fr}, {half}")
        self._e(f"setp.ne.{t} {podd}, {fr}, {half}")
        self._e(f"neg.{t} {neg}, {magnitude}")
        self._e(f"and.pred {podd}, {podd}, {pneg}")
        self._e(f"and.pred {podd}, {podd}, {pint}")
        self._e(f"selp.{t} {r}, {neg}, {magnitude}, {podd}")
        self._e(f"abs.{t} {ax}, {x}")
        self._e(f"setp.lt.{t} {pnan}, {x}, {lit(0.0)}")
        self._e(f"setp.ne.and.{t} {pnan}, {ax}, {lit(float('inf'))}, {pnan}")
        self._e(f"not.pred {pint}, {pint}")
        self._e(f"and.pred {pnan}, {pnan}, {pint}")
        self._e(f"selp.{t} {r}, {lit(float('nan'))}, {r}, {pnan}")
        self._e(f"abs.{t} {ay}, {y}")
        self._e(f"setp.eq.{t} {pone}, {ax}, {lit(1.0)}")
        self._e(f"setp.eq.{t} {pinf}, {ay}, {lit(float('inf'))}")
        self._e(f"and.pred {pinf}, {pinf}, {pone}")
        self._e(f"setp.eq.{t} {pone}, {x}, {lit(1.0)}")
        self._e(f"or.pred {pinf}, {pinf}, {pone}")
        self._e(f"setp.eq.{t} {pone}, {y}, {lit(0.0)}")
        self._e(f"or.pred {pinf}, {pinf}, {pone}")
        self._e(f"selp.{t} {r}, {lit(1.0)}, {r}, {pinf}")
        return r
