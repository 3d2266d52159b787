"""Multi-instruction scalar math (f32 transcendentals, floor division, NaN-aware min/max).

Invariants (accuracy, f32, vs. the correctly rounded result; tests/ptx/test_transcendentals.py):
- No instruction carries ``.ftz`` unless the kernel is planned with ``fast_math``
  (``options.CodegenOptions``); then exp/log/pow are the raw ``ex2/lg2.approx.ftz`` forms.
- ``exp``: Cody-Waite reduction by ln2 (9-bit hi part, exact), a degree-7 polynomial
  in pure ``fma.rn`` (so the simulator computes exactly what a GPU does) and the scale
  2^j applied as two normal powers of two: <= 1 ulp from the subnormal results
  (x < -87.34) to the overflow threshold 88.7228; inputs clamped to [-104, 89].
- ``log``: x = m * 2^k, m in [sqrt(1/2), sqrt(2)) from the bits (subnormals scaled by
  2^23 first), a polynomial for log(m): <= 1 ulp for every positive x; 0, negatives,
  inf and NaN take ``lg2.approx``'s exact special results.
- ``sigmoid``: ``e / (1 + e)``, e = exp(-|x|) (numerator 1 for x >= 0): <= 2 ulp,
  subnormal results below -87 included.
- ``pow``: computed in f64 (double-double log, ``d_exp``) and rounded once: <= 1 ulp.
- ``tanh``: odd polynomial for |x| < 0.3, ``1 - 2/(exp(2|x|)+1)`` above: < 1e-6 rel.
- ``erf``: Taylor series for |x| < 0.5, Abramowitz-Stegun 7.1.26 above (abs < 2e-7).
- ``sin/cos``: ``x - k*pi/2`` with pi/2 in three f32 parts (the first with 20
  bits, so the first ``fma`` is exact) for |x| <= 105615; above (and for inf/NaN)
  a branch converts x to f64 and takes ``F64MathEmitter.reduce_half_pi``
  (Cody-Waite / Payne-Hanek), rounding r to f32. Then Taylor polynomials in f32
  (to r^9 / r^10, truncation < 0.05 ulp on |r| <= pi/4) and the quadrant from k:
  <= 2 ulp for every finite x (f16/bf16 round that once more);
  sin/cos(+-inf, NaN) = NaN, sin(-0) = -0.
- ``pow`` keeps NumPy's sign rules for negative bases and ``pow(x, 0) = 1``.
"""

from __future__ import annotations

import math

from ...dtypes import DType
from .isa import float_literal

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
#: exp: ln2 = EXP_LN2_HI + EXP_LN2_LO, the first with 9 significant bits (j * it is
#: exact for |j| <= 2^15); EXP_POLY: (exp(r) - 1 - r) / r^2 on |r| <= ln2/2 (Cephes expf)
EXP_LN2_HI, EXP_LN2_LO = 0.693359375, -2.12194440e-4
EXP_POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
            1.6666665459e-1, 5.0000001201e-1)
#: log: (log(1+f) - f + f^2/2) / f^3 on f in [sqrt(1/2)-1, sqrt(2)-1] (Cephes logf),
#: and ln2 split as for exp (but added, so the signs differ)
LOG_POLY = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1,
            1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1,
            3.3333331174e-1)
LOG_LN2_HI, LOG_LN2_LO = 0.693359375, 2.12194440e-4
SQRT_HALF_BITS = 0x3F3504F3
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
    @property
    def fast_math(self) -> bool:
        return self.kb.options.fast_math  # type: ignore[attr-defined]

    def f_exp(self, x: str) -> str:
        """``exp`` of an f32 register: ~1 ulp from the subnormal range to the overflow
        threshold (88.7228); under fast math ``ex2.approx.ftz(x * log2 e)``."""
        if self.fast_math:
            t, out = self._r(), self._r()
            self._e(f"mul.rn.ftz.f32 {t}, {x}, {_f32(LOG2E)}")
            self._e(f"ex2.approx.ftz.f32 {out}, {t}")
            return out
        c, j, r, z, out = (self._r() for _ in range(5))
        # exp(-104) rounds to 0 and exp(89) overflows: the clamp keeps j in [-150, 129]
        self._e(f"max.NaN.f32 {c}, {x}, {_f32(-104.0)}")
        self._e(f"min.NaN.f32 {c}, {c}, {_f32(89.0)}")
        self._e(f"mul.rn.f32 {j}, {c}, {_f32(LOG2E)}")
        self._e(f"cvt.rni.f32.f32 {j}, {j}")
        self._e(f"fma.rn.f32 {r}, {j}, {_f32(-EXP_LN2_HI)}, {c}")  # exact (9-bit hi)
        self._e(f"fma.rn.f32 {r}, {j}, {_f32(-EXP_LN2_LO)}, {r}")
        self._e(f"mul.rn.f32 {z}, {r}, {r}")
        p = self._horner_f32(EXP_POLY, r)
        self._e(f"fma.rn.f32 {p}, {p}, {z}, {r}")
        self._e(f"add.rn.f32 {p}, {p}, {_f32(1.0)}")  # exp(r), r in [-ln2/2, ln2/2]
        return self._ldexp_f32(p, j, out)

    def _horner_f32(self, coeffs: tuple[float, ...], v: str) -> str:
        p = self._r()
        self._e(f"mov.f32 {p}, {_f32(coeffs[0])}")
        for c in coeffs[1:]:
            self._e(f"fma.rn.f32 {p}, {p}, {v}, {_f32(c)}")
        return p

    def _ldexp_f32(self, p: str, j: str, out: str) -> str:
        """``out = p * 2^j`` (p near 1, j integral in [-150, 129]) as two exact powers
        of two, 2^(j>>1) and 2^(j-(j>>1)), both normal: the first product is exact,
        so a subnormal result is rounded once and 2^128 itself never overflows."""
        n, n1, n2, b1, b2 = (self._r("b32") for _ in range(5))
        s1, s2, t = self._r(), self._r(), self._r()
        self._e(f"cvt.rni.s32.f32 {n}, {j}")  # NaN -> 0: p is NaN already
        self._e(f"shr.s32 {n1}, {n}, 1")
        self._e(f"sub.s32 {n2}, {n}, {n1}")
        for k, b, sc in ((n1, b1, s1), (n2, b2, s2)):
            self._e(f"add.s32 {b}, {k}, 127")
            self._e(f"shl.b32 {b}, {b}, 23")
            self._e(f"mov.b32 {sc}, {b}")
        self._e(f"mul.rn.f32 {t}, {p}, {s1}")
        self._e(f"mul.rn.f32 {out}, {t}, {s2}")
        return out

    def f_log(self, x: str) -> str:
        """``log`` of an f32 register: ~1 ulp for every positive x (subnormals
        included: scaled by 2^23 first); 0, negatives, inf and NaN take
        ``lg2.approx``'s exact special results. Fast math: ``lg2.approx.ftz * ln2``."""
        if self.fast_math:
            t, out = self._r(), self._r()
            self._e(f"lg2.approx.ftz.f32 {t}, {x}")
            self._e(f"mul.rn.ftz.f32 {out}, {t}, {_f32(LN2)}")
            return out
        sub, normal = self._r("pred"), self._r("pred")
        xs, e, m, f, z, y, out, special = (self._r() for _ in range(8))
        bits, k, mb = self._r("b32"), self._r("b32"), self._r("b32")
        self._e(f"setp.lt.f32 {sub}, {x}, {_f32(2.0 ** -126)}")
        self._e(f"mul.rn.f32 {xs}, {x}, {_f32(2.0 ** 23)}")
        self._e(f"selp.f32 {xs}, {xs}, {x}, {sub}")
        # x = m * 2^k with m in [sqrt(1/2), sqrt(2)): k from the bits above sqrt(1/2)'s
        self._e(f"mov.b32 {bits}, {xs}")
        self._e(f"sub.s32 {k}, {bits}, {SQRT_HALF_BITS}")
        self._e(f"shr.s32 {k}, {k}, 23")
        self._e(f"shl.b32 {mb}, {k}, 23")
        self._e(f"sub.s32 {mb}, {bits}, {mb}")
        self._e(f"mov.b32 {m}, {mb}")
        self._e(f"cvt.rn.f32.s32 {e}, {k}")
        self._e(f"@{sub} sub.rn.f32 {e}, {e}, {_f32(23.0)}")
        self._e(f"sub.rn.f32 {f}, {m}, {_f32(1.0)}")  # exact (Sterbenz)
        self._e(f"mul.rn.f32 {z}, {f}, {f}")
        p = self._horner_f32(LOG_POLY, f)
        self._e(f"mul.rn.f32 {y}, {p}, {f}")
        self._e(f"mul.rn.f32 {y}, {y}, {z}")
        self._e(f"fma.rn.f32 {y}, {e}, {_f32(-LOG_LN2_LO)}, {y}")
        self._e(f"fma.rn.f32 {y}, {z}, {_f32(-0.5)}, {y}")
        self._e(f"add.rn.f32 {out}, {f}, {y}")
        self._e(f"fma.rn.f32 {out}, {e}, {_f32(LOG_LN2_HI)}, {out}")
        self._e(f"setp.gt.f32 {normal}, {x}, {_f32(0.0)}")
        self._e(f"setp.lt.and.f32 {normal}, {x}, {_f32(math.inf)}, {normal}")
        self._e(f"lg2.approx.f32 {special}, {x}")  # -inf, NaN, inf exactly
        self._e(f"selp.f32 {out}, {out}, {special}, {normal}")
        return out

    def f_sigmoid(self, x: str) -> str:
        """``1 / (1 + exp(-x))`` as ``e / (1 + e)`` with ``e = exp(-|x|)`` (numerator 1
        for x >= 0): exp never overflows, so x < -88.72 keeps its subnormal result."""
        a, e_arg, d, num, out = (self._r() for _ in range(5))
        neg = self._r("pred")
        self._e(f"abs.f32 {a}, {x}")
        self._e(f"neg.f32 {e_arg}, {a}")
        e = self.f_exp(e_arg)
        self._e(f"add.rn.f32 {d}, {e}, {_f32(1.0)}")
        self._e(f"setp.lt.f32 {neg}, {x}, {_f32(0.0)}")
        self._e(f"selp.f32 {num}, {e}, {_f32(1.0)}, {neg}")
        self._e(f"div.rn.f32 {out}, {num}, {d}")
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
        """``x ** y`` in f32: ``exp(y * log|x|)`` evaluated in f64 (``d_exp``, the
        double-double log), so the result is rounded once to f32 (<= 1 ulp up to
        overflow and through the subnormals). Fast math: ``ex2/lg2.approx.ftz``."""
        if self.fast_math:
            a, lg, prod, r = (self._r() for _ in range(4))
            self._e(f"abs.f32 {a}, {x}")
            self._e(f"lg2.approx.ftz.f32 {lg}, {a}")
            self._e(f"mul.rn.ftz.f32 {prod}, {lg}, {y}")
            self._e(f"ex2.approx.ftz.f32 {r}, {prod}")
            return self.pow_signs("f32", x, y, r)
        ad, yd, prod, r = (self._r("f64") for _ in range(4))
        mag = self._r()
        self._e(f"cvt.f64.f32 {ad}, {x}")
        self._e(f"abs.f64 {ad}, {ad}")
        self._e(f"cvt.f64.f32 {yd}, {y}")
        hi, _ = self._log_double_double(ad)  # type: ignore[attr-defined]
        hi = self._log_specials(ad, hi)  # type: ignore[attr-defined]
        self._e(f"mul.rn.f64 {prod}, {yd}, {hi}")
        self._e(f"mov.f64 {r}, {self.d_exp(prod)}")  # type: ignore[attr-defined]
        self._e(f"cvt.rn.f32.f64 {mag}, {r}")
        return self.pow_signs("f32", x, y, mag)

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
