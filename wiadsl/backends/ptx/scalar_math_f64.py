"""f64 transcendentals in software: PTX has no f64 ``ex2/lg2/sin/cos`` instructions.

Each function reduces its argument exactly (or to within an ulp) and evaluates a
Taylor polynomial whose truncation error is below 2^-55 on the reduced range,
with ``fma`` Horner steps, as libdevice does.

Invariants (accuracy vs. NumPy's float64 results, measured in tests/ptx):
- ``exp``: ``x - k*ln2`` with ``fma`` (exact first step), degree-13 polynomial,
  ``2^k`` applied in two halves so subnormal results round once: <= 2 ulp;
  overflow gives inf, underflow 0, NaN stays NaN.
- ``log``: ``x = m * 2^e`` with m in [sqrt(1/2), sqrt(2)], ``log m = 2 atanh(s)``
  with s = f/(2+f) (series to s^23), summed with ``e*ln2`` in double-double
  arithmetic: <= 1 ulp; subnormals are scaled first; log(0) = -inf, log(x<0) = NaN.
- ``tanh``: ``expm1(2|x|) / (expm1(2|x|) + 2)`` (no cancellation near 0), 1 for
  |x| >= 22: <= 4 ulp. ``sigmoid``: ``1 / (1 + exp(-x))``.
- ``sin/cos``: ``x - k*pi/2`` with pi/2 in three 53-bit parts (the first step is
  exact) for |x| < 2^50; above, Payne-Hanek: the 192 bits of 2/pi that matter
  for x's exponent (a ``.const`` table) times x's mantissa in 64-bit integer
  limbs; polynomials to r^21 / r^20, quadrant from k: <= 2 ulp.
- ``erf``: a Taylor series at 0 for |x| < 1, then ``1 - exp(-x^2) * erfcx(|x|)``
  with erfcx's Taylor polynomial around 1.5, 2.75 or 4.7 (coefficients from its
  ODE in 110-digit decimals, at first use), 1 from 5.9 on: <= 2 ulp.
- ``pow``: ``exp(y * log|x|)`` with log (to ~2^-57 relative) and the product in
  double-double arithmetic: <= 1 ulp while |y log|x|| < 20, up to ~12 ulp as it
  nears 700 (one double would give ~800); NumPy's special cases as
  ``MathEmitter.pow_signs``.
"""

from __future__ import annotations

import functools
import math
from decimal import Decimal, localcontext
from fractions import Fraction

from .scalar_math import MathEmitter
from .scalar_math import _f64 as _d


def machin_pi(bits: int) -> Fraction:
    """pi to ``bits`` bits (plus 64 guard bits) by Machin's formula in integers."""
    scale = bits + 64

    def atan_inv(n: int) -> int:  # atan(1/n) * 2^scale
        total, power, k = 0, (1 << scale) // n, 0
        while power:
            total += (-1) ** k * (power // (2 * k + 1))
            power //= n * n
            k += 1
        return total

    return Fraction(16 * atan_inv(5) - 4 * atan_inv(239), 1 << scale)


def _split(value: Fraction, parts: int) -> list[float]:
    """``value`` as a sum of ``parts`` doubles, each the rounded remainder of the rest."""
    out = []
    for _ in range(parts):
        out.append(float(value))
        value -= Fraction(out[-1])
    return out


PI = machin_pi(512)  # the three-part pi/2 split needs ~160 bits
HALF_PI = _split(PI / 2, 3)
TWO_OVER_PI = 2 / math.pi
#: ln2 = sum 1 / (k 2^k), to ~310 bits
LN2_EXACT = Fraction(sum((1 << 320) // (k << k) for k in range(1, 320)), 1 << 320)
#: ln2 as two doubles, for exp's reduction
LN2 = _split(LN2_EXACT, 2)
#: ln2 = LN2_HI + LN2_LO with LN2_HI cut to 32 bits, so e * LN2_HI is exact for
#: any exponent e (|e| < 2^21), for log's ``e * ln2``
LN2_HI = math.ldexp(math.floor(math.ldexp(float(LN2_EXACT), 32)), -32)
LN2_LO = float(LN2_EXACT - Fraction(LN2_HI))
LOG2E = 1.4426950408889634
SQRT_HALF_BITS = 0x3FE6A09E667F3BCD
#: Sin/cos arguments at or above this are reduced by Payne-Hanek (Cody-Waite's
#: k = rint(x * 2/pi) is no longer within one of the true quotient).
TRIG_LIMIT = 2.0 ** 50


@functools.cache
def _two_over_pi_words(count: int = 20) -> list[int]:
    """2/pi's first ``64 * count`` bits as u64 words after one word of zeros (so a
    window may start above 2/pi's first bit)."""
    bits = 64 * count
    pi = machin_pi(bits + 64)
    value = (2 << bits) * pi.denominator // pi.numerator  # floor(2/pi * 2^bits)
    mask = (1 << 64) - 1
    return [0] + [(value >> (64 * (count - 1 - j))) & mask for j in range(count)]


#: erf: a Taylor series at 0 below the first start; from each (center, start, terms)
#: on, ``1 - exp(-x^2) * erfcx(x)`` with erfcx (the scaled erfc) as a Taylor
#: polynomial around center; from ERF_ONE on, erf rounds to 1. Term counts keep
#: the truncation < 2^-57.
ERF_PIECES = ((1.5, 1.0, 22), (2.75, 2.0, 24), (4.7, 3.5, 26))
ERF_ONE = 5.9


@functools.cache
def _erf_coefficients() -> tuple[list[float], list[list[float]]]:
    """Horner-order coefficients: erf's series at 0 (in x^2) and erfcx's around each
    center, from its ODE ``y' = 2xy - 2/sqrt(pi)``, in 110-digit decimal arithmetic
    (the recurrence is unstable, so the precision is generous)."""
    with localcontext() as ctx:
        ctx.prec = 110
        pi = Decimal(PI.numerator) / Decimal(PI.denominator)
        two_over_sqrt_pi = 2 / pi.sqrt()
        series = [two_over_sqrt_pi * (-1) ** n / (math.factorial(n) * (2 * n + 1))
                  for n in range(19)]

        def erf(c: Decimal) -> Decimal:
            total, term, n = Decimal(0), c, 0
            while n < 8 or abs(term) > Decimal(10) ** -100:
                total += term / (2 * n + 1)
                n += 1
                term = -term * c * c / n
            return two_over_sqrt_pi * total

        pieces = []
        for center, _, count in ERF_PIECES:
            c = Decimal(center)
            y = [(c * c).exp() * (1 - erf(c))]
            for n in range(count - 1):
                y.append((2 * c * y[n] + (2 * y[n - 1] if n else -two_over_sqrt_pi)) / (n + 1))
            pieces.append([float(v) for v in reversed(y)])
        return [float(v) for v in reversed(series)], pieces


def _taylor(first: int, last: int) -> list[float]:
    """Coefficients ``1 / n!`` for n = last, last - 1, ..., first (Horner order)."""
    return [1.0 / math.factorial(n) for n in range(last, first - 1, -1)]


class F64MathEmitter(MathEmitter):
    """Mixin of ScalarEmitter: the f64 versions of the transcendentals (``d_*``)."""

    def _horner(self, coeffs: list[float], z: str) -> str:
        """``coeffs[0] * z^(n-1) + ... + coeffs[-1]`` by ``fma`` steps."""
        p = self._r("f64")
        self._e(f"mov.f64 {p}, {_d(coeffs[0])}")
        for c in coeffs[1:]:
            self._e(f"fma.rn.f64 {p}, {p}, {z}, {_d(c)}")
        return p

    def _pow2(self, n: str) -> str:
        """``2^n`` for an s32 register ``n`` in [-1022, 1023], built from its bits."""
        b, wide, out = self._r("b32"), self._r("b64"), self._r("f64")
        self._e(f"add.s32 {b}, {n}, 1023")
        self._e(f"cvt.u64.u32 {wide}, {b}")
        self._e(f"shl.b64 {wide}, {wide}, 52")
        self._e(f"mov.b64 {out}, {wide}")
        return out

    def _ldexp(self, y: str, k: str) -> str:
        """``y * 2^k`` for an integral f64 ``k`` in [-2000, 2000], in two steps so a
        subnormal result is rounded once (``y`` is near 1, so the first is exact)."""
        n, n1, n2 = self._r("b32"), self._r("b32"), self._r("b32")
        t, out = self._r("f64"), self._r("f64")
        self._e(f"cvt.rni.s32.f64 {n}, {k}")
        self._e(f"shr.s32 {n1}, {n}, 1")
        self._e(f"sub.s32 {n2}, {n}, {n1}")
        self._e(f"mul.rn.f64 {t}, {y}, {self._pow2(n1)}")
        self._e(f"mul.rn.f64 {out}, {t}, {self._pow2(n2)}")
        return out

    def _reduce_ln2(self, x: str) -> tuple[str, str]:
        """(k, r) with ``x = k*ln2 + r``, |r| <= ln2/2 (first ``fma`` exact)."""
        k, r = self._r("f64"), self._r("f64")
        self._e(f"mul.rn.f64 {k}, {x}, {_d(LOG2E)}")
        self._e(f"cvt.rni.f64.f64 {k}, {k}")
        self._e(f"fma.rn.f64 {r}, {k}, {_d(-LN2[0])}, {x}")
        self._e(f"fma.rn.f64 {r}, {k}, {_d(-LN2[1])}, {r}")
        return k, r

    def _nan_through(self, x: str, value: str) -> str:
        """``value``, or ``x`` itself where ``x`` is NaN."""
        p, out = self._r("pred"), self._r("f64")
        self._e(f"setp.nan.f64 {p}, {x}, {x}")
        self._e(f"selp.f64 {out}, {x}, {value}, {p}")
        return out

    # ------------------------------------------------------------ exp family
    def d_exp(self, x: str) -> str:
        c = self._r("f64")
        self._e(f"max.f64 {c}, {x}, {_d(-746.0)}")  # exp(-746) is 0, exp(710) inf
        self._e(f"min.f64 {c}, {c}, {_d(710.0)}")
        k, r = self._reduce_ln2(c)
        p = self._horner(_taylor(0, 13), r)
        return self._nan_through(x, self._ldexp(p, k))

    def _expm1_nonneg(self, y: str) -> str:
        """``exp(y) - 1`` for y in [0, 44] without cancellation near 0."""
        k, r = self._reduce_ln2(y)
        q, less = self._r("f64"), self._r("f64")
        p = self._horner(_taylor(1, 14), r)  # (exp(r) - 1) / r
        self._e(f"mul.rn.f64 {q}, {p}, {r}")
        one = self._r("f64")
        self._e(f"mov.f64 {one}, {_d(1.0)}")
        scale = self._ldexp(one, k)
        self._e(f"sub.rn.f64 {less}, {scale}, {_d(1.0)}")  # 2^k - 1: exact for k <= 53
        out = self._r("f64")
        self._e(f"fma.rn.f64 {out}, {scale}, {q}, {less}")
        return out

    def d_tanh(self, x: str) -> str:
        a, a2, d, q, out = (self._r("f64") for _ in range(5))
        big = self._r("pred")
        self._e(f"abs.f64 {a}, {x}")
        self._e(f"min.f64 {a2}, {a}, {_d(22.0)}")
        self._e(f"add.rn.f64 {a2}, {a2}, {a2}")
        e = self._expm1_nonneg(a2)
        self._e(f"add.rn.f64 {d}, {e}, {_d(2.0)}")
        self._e(f"div.rn.f64 {q}, {e}, {d}")
        self._e(f"setp.ge.f64 {big}, {a}, {_d(22.0)}")  # tanh(22) rounds to 1
        self._e(f"selp.f64 {q}, {_d(1.0)}, {q}, {big}")
        self._e(f"copysign.f64 {out}, {x}, {q}")
        return self._nan_through(x, out)

    def d_sigmoid(self, x: str) -> str:
        n, den, out = self._r("f64"), self._r("f64"), self._r("f64")
        self._e(f"neg.f64 {n}, {x}")
        self._e(f"add.rn.f64 {den}, {self.d_exp(n)}, {_d(1.0)}")
        self._e(f"div.rn.f64 {out}, {_d(1.0)}, {den}")
        return out

    # ------------------------------------------------------------ log
    def d_log(self, x: str) -> str:
        hi, _ = self._log_double_double(x)
        return self._log_specials(x, hi)

    def _log_double_double(self, x: str) -> tuple[str, str]:
        """``log x`` as an unevaluated sum hi + lo (|lo| <= ulp(hi)/2; relative error
        2^-57 for x near sqrt(2), where the series tail is largest, 2^-68 for
        large |log x|) for finite x > 0; other x give garbage the callers mask."""
        sub, big = self._r("pred"), self._r("pred")
        xs, bits, mant, ebits = self._r("f64"), self._r("b64"), self._r("b64"), self._r("b64")
        e32, bias = self._r("b32"), self._r("b32")
        # subnormals: scale by 2^54 so the exponent field holds the whole exponent
        self._e(f"setp.lt.f64 {sub}, {x}, {_d(2.0 ** -1022)}")
        self._e(f"mul.rn.f64 {xs}, {x}, {_d(2.0 ** 54)}")
        self._e(f"selp.f64 {xs}, {xs}, {x}, {sub}")
        self._e(f"selp.s32 {bias}, 1077, 1023, {sub}")
        self._e(f"mov.b64 {bits}, {xs}")
        # m in [sqrt(1/2), sqrt(2)): the mantissa with the exponent of 1/2's binade
        # or 1's, whichever keeps it in range
        self._e(f"and.b64 {mant}, {bits}, 0x000FFFFFFFFFFFFF")
        self._e(f"setp.gt.u64 {big}, {mant}, {SQRT_HALF_BITS & 0x000FFFFFFFFFFFFF}")
        self._e(f"shr.u64 {ebits}, {bits}, 52")
        self._e(f"cvt.u32.u64 {e32}, {ebits}")
        self._e(f"sub.s32 {e32}, {e32}, {bias}")
        self._e(f"@{big} add.s32 {e32}, {e32}, 1")
        top = self._r("b64")
        self._e(f"selp.b64 {top}, 0x3FE0000000000000, 0x3FF0000000000000, {big}")
        self._e(f"or.b64 {mant}, {mant}, {top}")
        m, f, den, den_lo, s, s_lo, z, e = (self._r("f64") for _ in range(8))
        self._e(f"mov.b64 {m}, {mant}")
        self._e(f"sub.rn.f64 {f}, {m}, {_d(1.0)}")  # exact (Sterbenz)
        # s = f / (2 + f) to twice the precision: 2 + f = den + den_lo exactly, and
        # the division's residual f - s*(den + den_lo) by fma
        self._e(f"add.rn.f64 {den}, {f}, {_d(2.0)}")
        self._e(f"sub.rn.f64 {den_lo}, {_d(2.0)}, {den}")
        self._e(f"add.rn.f64 {den_lo}, {den_lo}, {f}")
        self._e(f"div.rn.f64 {s}, {f}, {den}")
        self._e(f"neg.f64 {s_lo}, {s}")
        self._e(f"fma.rn.f64 {s_lo}, {s_lo}, {den}, {f}")
        self._e(f"mul.rn.f64 {z}, {s}, {den_lo}")
        self._e(f"sub.rn.f64 {s_lo}, {s_lo}, {z}")
        self._e(f"div.rn.f64 {s_lo}, {s_lo}, {den}")
        # log m = 2s + 2 s_lo + s^3 * (2/3 + 2 s^2/5 + ...)
        self._e(f"mul.rn.f64 {z}, {s}, {s}")
        tail = self._horner([2.0 / n for n in range(23, 2, -2)], z)
        self._e(f"mul.rn.f64 {tail}, {tail}, {z}")
        self._e(f"mul.rn.f64 {tail}, {tail}, {s}")
        self._e(f"fma.rn.f64 {tail}, {s_lo}, {_d(2.0)}, {tail}")
        self._e(f"cvt.rn.f64.s32 {e}, {e32}")
        self._e(f"fma.rn.f64 {tail}, {e}, {_d(LN2_LO)}, {tail}")
        # e*LN2_HI (exact) + 2s, summed exactly (Fast2Sum: |e*LN2_HI| >= |2s| or e = 0)
        lead, two_s = self._r("f64"), self._r("f64")
        self._e(f"mul.rn.f64 {lead}, {e}, {_d(LN2_HI)}")
        self._e(f"add.rn.f64 {two_s}, {s}, {s}")
        hi, lo = self._two_sum(lead, two_s)
        self._e(f"add.rn.f64 {lo}, {lo}, {tail}")
        return self._two_sum(hi, lo)

    def _two_sum(self, a: str, b: str) -> tuple[str, str]:
        """(a + b rounded, its exact rounding error): Knuth's TwoSum, any order."""
        s, bb, err, t = (self._r("f64") for _ in range(4))
        self._e(f"add.rn.f64 {s}, {a}, {b}")
        self._e(f"sub.rn.f64 {bb}, {s}, {a}")
        self._e(f"sub.rn.f64 {t}, {s}, {bb}")
        self._e(f"sub.rn.f64 {t}, {a}, {t}")
        self._e(f"sub.rn.f64 {err}, {b}, {bb}")
        self._e(f"add.rn.f64 {err}, {err}, {t}")
        return s, err

    def _log_specials(self, x: str, value: str) -> str:
        p, out = self._r("pred"), self._r("f64")
        self._e(f"setp.eq.f64 {p}, {x}, {_d(0.0)}")
        self._e(f"selp.f64 {out}, {_d(-math.inf)}, {value}, {p}")
        self._e(f"setp.lt.f64 {p}, {x}, {_d(0.0)}")
        self._e(f"selp.f64 {out}, {_d(math.nan)}, {out}, {p}")
        self._e(f"setp.eq.f64 {p}, {x}, {_d(math.inf)}")
        self._e(f"selp.f64 {out}, {x}, {out}, {p}")
        return self._nan_through(x, out)

    # ------------------------------------------------------------ sin / cos
    def _quadrant(self, x: str) -> tuple[str, str, str]:
        """(sin r, cos r, k mod 4 as b32) with x = k*pi/2 + r, |r| <= pi/4."""
        r, q = self.reduce_half_pi(x)
        z, sr, cr = (self._r("f64") for _ in range(3))
        self._e(f"mul.rn.f64 {z}, {r}, {r}")
        sp = self._horner([(-1.0) ** (n // 2) / math.factorial(n) for n in range(21, 0, -2)], z)
        self._e(f"mul.rn.f64 {sr}, {sp}, {r}")
        cp = self._horner([(-1.0) ** (n // 2) / math.factorial(n) for n in range(20, -1, -2)], z)
        self._e(f"mov.f64 {cr}, {cp}")
        return sr, cr, q

    def reduce_half_pi(self, x: str) -> tuple[str, str]:
        """(r, k mod 4 as b32) with x = k*pi/2 + r, |r| <= pi/4 (to ~2^-60 relative):
        Cody-Waite below TRIG_LIMIT, Payne-Hanek at and above it. For +-inf r is
        garbage (callers give NaN), for NaN it is NaN."""
        k, r, kc, ax = (self._r("f64") for _ in range(4))
        q, huge = self._r("b32"), self._r("pred")
        self._e(f"abs.f64 {ax}, {x}")
        self._e(f"mul.rn.f64 {k}, {x}, {_d(TWO_OVER_PI)}")
        self._e(f"cvt.rni.f64.f64 {k}, {k}")
        self._e(f"min.f64 {kc}, {k}, {_d(TRIG_LIMIT)}")  # keep the s64 conversion in range
        self._e(f"max.f64 {kc}, {kc}, {_d(-TRIG_LIMIT)}")
        self._e(f"fma.rn.f64 {r}, {k}, {_d(-HALF_PI[0])}, {x}")
        self._e(f"fma.rn.f64 {r}, {k}, {_d(-HALF_PI[1])}, {r}")
        self._e(f"fma.rn.f64 {r}, {k}, {_d(-HALF_PI[2])}, {r}")
        wide = self._r("b64")
        self._e(f"cvt.rni.s64.f64 {wide}, {kc}")
        self._e(f"cvt.u32.u64 {q}, {wide}")
        big_r, big_q = self._payne_hanek(x, ax)
        self._e(f"setp.ge.f64 {huge}, {ax}, {_d(TRIG_LIMIT)}")
        self._e(f"selp.f64 {r}, {big_r}, {r}, {huge}")
        self._e(f"selp.b32 {q}, {big_q}, {q}, {huge}")
        self._e(f"and.b32 {q}, {q}, 3")
        return r, q

    def _payne_hanek(self, x: str, ax: str) -> tuple[str, str]:
        """(r, k mod 4) for x = k*pi/2 + r by exact integer arithmetic: |x| = M * 2^E
        (M the 53-bit mantissa); bits of 2/pi worth >= 4 after the product with
        2^E drop out mod 4, so only a 192-bit window W of 2/pi starting at bit E-1
        matters, and x*2/pi mod 4 = M*W / 2^190 mod 4. Meaningful for |x| >= 2^50."""
        name = "__wia_two_over_pi"
        words = _two_over_pi_words()
        self.kb.module_decls[name] = (  # type: ignore[attr-defined]
            f".const .align 8 .b64 {name}[{len(words)}] = {{{', '.join(map(str, words))}}};")
        bits, mant = self._r("b64"), self._r("b64")
        e, p, sh, rsh, j = (self._r("b32") for _ in range(5))
        self._e(f"mov.b64 {bits}, {ax}")
        self._e(f"shr.u64 {mant}, {bits}, 52")
        self._e(f"cvt.u32.u64 {e}, {mant}")
        # window start (1-based bit of the table, whose word 0 is zeros): E - 1 + 64
        self._e(f"sub.s32 {p}, {e}, {1075 + 1 - 64}")
        self._e(f"max.s32 {p}, {p}, 1")
        self._e(f"min.s32 {p}, {p}, {64 * (len(words) - 3)}")  # inf/NaN stay in the table
        self._e(f"sub.s32 {p}, {p}, 1")
        self._e(f"shr.u32 {j}, {p}, 6")
        self._e(f"and.b32 {sh}, {p}, 63")
        self._e(f"sub.s32 {rsh}, 64, {sh}")
        addr, off = self._r("b64"), self._r("b64")
        self._e(f"mov.u64 {addr}, {name}")
        self._e(f"mul.wide.u32 {off}, {j}, 8")
        self._e(f"add.u64 {addr}, {addr}, {off}")
        t = [self._r("b64") for _ in range(4)]
        for i, reg in enumerate(t):
            self._e(f"ld.const.u64 {reg}, [{addr}+{8 * i}]")
        w = []
        for i in range(3):  # W2 (most significant), W1, W0
            a, b = self._r("b64"), self._r("b64")
            self._e(f"shl.b64 {a}, {t[i]}, {sh}")
            self._e(f"shr.u64 {b}, {t[i + 1]}, {rsh}")  # a shift by 64 gives 0
            self._e(f"or.b64 {a}, {a}, {b}")
            w.append(a)
        self._e(f"and.b64 {mant}, {bits}, 0x000FFFFFFFFFFFFF")
        self._e(f"or.b64 {mant}, {mant}, 0x0010000000000000")
        hi0, lo1, hi1, lo2, carry = (self._r("b64") for _ in range(5))
        pc = self._r("pred")
        self._e(f"mul.hi.u64 {hi0}, {mant}, {w[2]}")
        self._e(f"mul.lo.u64 {lo1}, {mant}, {w[1]}")
        self._e(f"mul.hi.u64 {hi1}, {mant}, {w[1]}")
        self._e(f"mul.lo.u64 {lo2}, {mant}, {w[0]}")
        # bits 128..191 of M*W: limb2 (its top two bits are k mod 4); bits 64..127: limb1
        self._e(f"add.u64 {lo1}, {lo1}, {hi0}")
        self._e(f"setp.lt.u64 {pc}, {lo1}, {hi0}")
        self._e(f"selp.u64 {carry}, 1, 0, {pc}")
        self._e(f"add.u64 {lo2}, {lo2}, {hi1}")
        self._e(f"add.u64 {lo2}, {lo2}, {carry}")
        return self._fraction_to_angle(x, lo2, lo1)

    def _fraction_to_angle(self, x: str, limb2: str, limb1: str) -> tuple[str, str]:
        """(r, k) from the fixed-point x*2/pi mod 4 in limb2:limb1 (2 integer bits):
        rounds k to nearest (negating the 126-bit fraction when it is >= 1/2)."""
        q64, f2, f1, half = (self._r("b64") for _ in range(4))
        q = self._r("b32")
        up, nonzero, neg = self._r("pred"), self._r("pred"), self._r("pred")
        self._e(f"shr.u64 {q64}, {limb2}, 62")
        self._e(f"cvt.u32.u64 {q}, {q64}")
        self._e(f"and.b64 {f2}, {limb2}, 0x3FFFFFFFFFFFFFFF")
        self._e(f"and.b64 {half}, {limb2}, 0x2000000000000000")
        self._e(f"setp.ne.u64 {up}, {half}, 0")
        # 2^126 - f: the low limb negates, the high one borrows when the low is not 0
        n1, n2 = self._r("b64"), self._r("b64")
        self._e(f"neg.s64 {n1}, {limb1}")
        self._e(f"setp.ne.u64 {nonzero}, {limb1}, 0")
        self._e(f"sub.u64 {n2}, 0x4000000000000000, {f2}")
        self._e(f"@{nonzero} sub.u64 {n2}, {n2}, 1")
        self._e(f"selp.b64 {f1}, {n1}, {limb1}, {up}")
        self._e(f"selp.b64 {f2}, {n2}, {f2}, {up}")
        self._e(f"@{up} add.s32 {q}, {q}, 1")
        hi, lo, f, r, nr = (self._r("f64") for _ in range(5))
        self._e(f"cvt.rn.f64.u64 {hi}, {f2}")
        self._e(f"cvt.rn.f64.u64 {lo}, {f1}")
        self._e(f"mul.rn.f64 {lo}, {lo}, {_d(2.0 ** -64)}")
        self._e(f"add.rn.f64 {f}, {hi}, {lo}")
        self._e(f"mul.rn.f64 {f}, {f}, {_d(2.0 ** -62)}")  # exact: a power of two
        self._e(f"mul.rn.f64 {r}, {f}, {_d(HALF_PI[1])}")
        self._e(f"fma.rn.f64 {r}, {f}, {_d(HALF_PI[0])}, {r}")
        self._e(f"neg.f64 {nr}, {r}")
        self._e(f"selp.f64 {r}, {nr}, {r}, {up}")
        # x < 0: x*2/pi = -(|x|*2/pi), so r and k change sign
        nq = self._r("b32")
        self._e(f"setp.lt.f64 {neg}, {x}, {_d(0.0)}")
        self._e(f"neg.f64 {nr}, {r}")
        self._e(f"selp.f64 {r}, {nr}, {r}, {neg}")
        self._e(f"neg.s32 {nq}, {q}")
        self._e(f"selp.b32 {q}, {nq}, {q}, {neg}")
        return r, q

    def _trig(self, x: str, shift: int) -> str:
        """sin (shift 0) or cos (shift 1): the quadrant picks +-sin r or +-cos r."""
        sr, cr, q = self._quadrant(x)
        inf = self._r("pred")
        if shift:
            self._e(f"add.s32 {q}, {q}, {shift}")
        odd, neg, bit = self._r("pred"), self._r("pred"), self._r("b32")
        v, nv, out = self._r("f64"), self._r("f64"), self._r("f64")
        self._e(f"and.b32 {bit}, {q}, 1")
        self._e(f"setp.ne.u32 {odd}, {bit}, 0")
        self._e(f"and.b32 {bit}, {q}, 2")
        self._e(f"setp.ne.u32 {neg}, {bit}, 0")
        self._e(f"selp.f64 {v}, {cr}, {sr}, {odd}")
        self._e(f"neg.f64 {nv}, {v}")
        self._e(f"selp.f64 {out}, {nv}, {v}, {neg}")
        self._e(f"setp.eq.f64 {inf}, {x}, {_d(math.inf)}")
        self._e(f"setp.eq.or.f64 {inf}, {x}, {_d(-math.inf)}, {inf}")
        self._e(f"selp.f64 {out}, {_d(math.nan)}, {out}, {inf}")
        return self._nan_through(x, out)

    def d_sin(self, x: str) -> str:
        return self._trig(x, 0)

    def d_cos(self, x: str) -> str:
        return self._trig(x, 1)

    # ------------------------------------------------------------ erf
    def d_erf(self, x: str) -> str:
        series, pieces = _erf_coefficients()
        a, z, small, sq, sq_lo, nsq, h, v, out = (self._r("f64") for _ in range(9))
        p = self._r("pred")
        self._e(f"abs.f64 {a}, {x}")
        self._e(f"mul.rn.f64 {z}, {a}, {a}")
        self._e(f"mul.rn.f64 {small}, {self._horner(series, z)}, {a}")
        # exp(-a^2) with a^2 = sq + sq_lo exactly: exp(-sq) * (1 - sq_lo)
        self._e(f"neg.f64 {sq_lo}, {z}")
        self._e(f"fma.rn.f64 {sq_lo}, {a}, {a}, {sq_lo}")
        self._e(f"neg.f64 {nsq}, {z}")
        e = self.d_exp(nsq)
        self._e(f"mul.rn.f64 {sq_lo}, {sq_lo}, {e}")
        self._e(f"sub.rn.f64 {e}, {e}, {sq_lo}")
        self._e(f"mov.f64 {v}, {small}")
        for (center, start, _), coeffs in zip(ERF_PIECES, pieces, strict=True):
            piece = self._r("f64")
            self._e(f"sub.rn.f64 {h}, {a}, {_d(center)}")  # exact: a and center share a binade
            self._e(f"neg.f64 {piece}, {e}")
            self._e(f"fma.rn.f64 {piece}, {piece}, {self._horner(coeffs, h)}, {_d(1.0)}")
            self._e(f"setp.ge.f64 {p}, {a}, {_d(start)}")
            self._e(f"selp.f64 {v}, {piece}, {v}, {p}")
        self._e(f"setp.ge.f64 {p}, {a}, {_d(ERF_ONE)}")
        self._e(f"selp.f64 {v}, {_d(1.0)}, {v}, {p}")
        self._e(f"copysign.f64 {out}, {x}, {v}")
        return self._nan_through(x, out)

    # ------------------------------------------------------------ pow
    def d_pow(self, x: str, y: str) -> str:
        """``exp(y * log|x|)`` with the product carried to twice the precision:
        ``y * (hi + lo) = p + p_lo`` and ``exp(p + p_lo) = exp(p) * (1 + p_lo)``."""
        a, p, p_lo, t, r = (self._r("f64") for _ in range(5))
        edge = self._r("pred")
        self._e(f"abs.f64 {a}, {x}")
        hi, lo = self._log_double_double(a)
        hi = self._log_specials(a, hi)
        self._e(f"mul.rn.f64 {p}, {y}, {hi}")
        self._e(f"neg.f64 {p_lo}, {p}")
        self._e(f"fma.rn.f64 {p_lo}, {y}, {hi}, {p_lo}")
        self._e(f"fma.rn.f64 {p_lo}, {y}, {lo}, {p_lo}")
        m = self.d_exp(p)
        self._e(f"fma.rn.f64 {r}, {m}, {p_lo}, {m}")
        # exp gave 0 or inf (or log did): the correction is meaningless (maybe NaN)
        self._e(f"abs.f64 {t}, {m}")
        self._e(f"setp.eq.f64 {edge}, {t}, {_d(math.inf)}")
        self._e(f"setp.eq.or.f64 {edge}, {t}, {_d(0.0)}, {edge}")
        self._e(f"selp.f64 {r}, {m}, {r}, {edge}")
        return self.pow_signs("f64", x, y, r)
