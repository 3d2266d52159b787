"""Float remainder (``np.remainder``) in PTX: an exact ``fmod``, then NumPy's sign rule.

PTX has no ``fmod``, and ``a - trunc(a/b)*b`` is wrong once the quotient does not
fit the mantissa (``1e10 % 3``) or is infinite (``5.5 % inf``). The reduction here is
exact, as libdevice's is:

- f32 operands are widened to f64 (exactly, subnormals included) and reduced there:
  f64's range holds every quotient of two f32 values, so no step needs rescaling.
- Each loop step takes ``y' = |b| * 2^j`` with ``j`` chosen from the exponents so
  that ``r / y' < 2^52`` (j >= 0, ``y' <= r``). ``q = trunc(rn(r / y'))`` is then the
  true quotient or one more, ``r - q*y'`` is a multiple of ulp(y') smaller than y'
  in magnitude, hence exact in one ``fma``, and a negative result is fixed by adding
  ``y'`` (exact too). ``r`` drops by >= 2^49 per step, or below ``|b|`` when j = 0:
  at most ~44 steps for f64 (2^1024 / 2^-1074), 7 for f32.
- Then, as NumPy's ``npy_remainder`` in the operands' precision: a nonzero result
  whose sign differs from ``b``'s gets ``b`` added (``-5.5 % inf`` is inf), a zero
  result is ``copysign(0, b)``; ``b == 0``, NaNs and an infinite ``a`` give NaN.
"""

from __future__ import annotations

from .scalar_math import _f32, _f64
from .scalar_math_f64 import F64MathEmitter

#: Quotient bits kept per reduction step: ``r / y' < 2^(MARGIN + 1)`` stays exact
#: to within one when rounded to f64's 53 bits.
MARGIN = 50
SMALLEST_NORMAL = 2.0 ** -1022


class RemainderEmitter(F64MathEmitter):
    """Mixin of ScalarEmitter: ``fremainder`` (f32, f64; f16/bf16 come as f32)."""

    def fremainder(self, t: str, a: str, b: str) -> str:
        """``np.remainder(a, b)`` for registers of PTX type ``t`` (``f32`` or ``f64``)."""
        if t == "f32":
            wa, wb = self._r("f64"), self._r("f64")
            self._e(f"cvt.f64.f32 {wa}, {a}")
            self._e(f"cvt.f64.f32 {wb}, {b}")
            wide = self._fmod(wa, wb)
            m = self._r("f32")
            self._e(f"cvt.rn.f32.f64 {m}, {wide}")  # exact: fmod's result is an f32 value
        else:
            m = self._fmod(a, b)
        return self._divisor_sign(t, m, b)

    def _divisor_sign(self, t: str, m: str, b: str) -> str:
        """NumPy's adjustment of ``m = fmod(a, b)``, computed in precision ``t``."""
        zero = _f32(0.0) if t == "f32" else _f64(0.0)
        fixed, z, out = self._r(t), self._r(t), self._r(t)
        nonzero, neg_m, neg_b, is_zero = (self._r("pred") for _ in range(4))
        self._e(f"setp.ne.{t} {nonzero}, {m}, {zero}")
        self._e(f"setp.lt.{t} {neg_m}, {m}, {zero}")
        self._e(f"setp.lt.{t} {neg_b}, {b}, {zero}")
        self._e(f"xor.pred {neg_m}, {neg_m}, {neg_b}")
        self._e(f"and.pred {nonzero}, {nonzero}, {neg_m}")
        self._e(f"add.rn.{t} {fixed}, {m}, {b}")
        self._e(f"selp.{t} {out}, {fixed}, {m}, {nonzero}")
        self._e(f"setp.eq.{t} {is_zero}, {m}, {zero}")
        self._e(f"copysign.{t} {z}, {b}, {zero}")  # |0| with b's sign
        self._e(f"selp.{t} {out}, {z}, {out}, {is_zero}")
        return out

    def _fmod(self, x: str, y: str) -> str:
        """C's ``fmod(x, y)`` of two f64 registers, exactly (see the module docstring)."""
        kb = self.kb
        ax, ay, r, out = self._r("f64"), self._r("f64"), self._r("f64"), self._r("f64")
        ok, more = self._r("pred"), self._r("pred")
        self._e(f"abs.f64 {ax}, {x}")
        self._e(f"abs.f64 {ay}, {y}")
        # finite x and 0 < |y| (both false for NaN); otherwise the result is NaN
        self._e(f"setp.lt.f64 {ok}, {ax}, {_f64(float('inf'))}")
        self._e(f"setp.gt.and.f64 {ok}, {ay}, {_f64(0.0)}, {ok}")
        self._e(f"mov.f64 {r}, {ax}")
        ey = self._exponent(ay)
        top, done = kb.new_label("fmod"), kb.new_label("fmoddone")  # type: ignore[attr-defined]
        kb.label(top)  # type: ignore[attr-defined]
        self._e(f"setp.ge.and.f64 {more}, {r}, {ay}, {ok}")
        self._e(f"@!{more} bra {done}")
        self._reduce_step(r, ay, ey)
        self._e(f"bra {top}")
        kb.label(done)  # type: ignore[attr-defined]
        self._e(f"copysign.f64 {out}, {x}, {r}")  # fmod has the dividend's sign
        self._e(f"selp.f64 {out}, {out}, {_f64(float('nan'))}, {ok}")
        return out

    def _reduce_step(self, r: str, ay: str, ey: str) -> None:
        """``r = r mod (ay * 2^j)`` in place, for ``r >= ay > 0`` (exact)."""
        j, j1, j2 = self._r("b32"), self._r("b32"), self._r("b32")
        yp, q, rem, fixed = (self._r("f64") for _ in range(4))
        neg = self._r("pred")
        self._e(f"sub.s32 {j}, {self._exponent(r)}, {ey}")
        self._e(f"sub.s32 {j}, {j}, {MARGIN}")
        self._e(f"max.s32 {j}, {j}, 0")
        # j <= 2047 (2^1023 over 2^-1074); 2046 keeps both factors' exponents <= 1023
        self._e(f"min.s32 {j}, {j}, 2046")
        self._e(f"min.s32 {j1}, {j}, 1023")
        self._e(f"sub.s32 {j2}, {j}, {j1}")
        self._e(f"mul.rn.f64 {yp}, {ay}, {self._pow2(j1)}")  # exact: scaled up, <= r
        self._e(f"mul.rn.f64 {yp}, {yp}, {self._pow2(j2)}")
        self._e(f"div.rn.f64 {q}, {r}, {yp}")
        self._e(f"cvt.rzi.f64.f64 {q}, {q}")
        self._e(f"neg.f64 {q}, {q}")
        self._e(f"fma.rn.f64 {rem}, {q}, {yp}, {r}")
        self._e(f"setp.lt.f64 {neg}, {rem}, {_f64(0.0)}")
        self._e(f"add.rn.f64 {fixed}, {rem}, {yp}")
        self._e(f"selp.f64 {r}, {fixed}, {rem}, {neg}")

    def _exponent(self, v: str) -> str:
        """floor(log2(v)) as s32 for a positive finite f64 ``v`` (subnormals scaled by
        2^54 first, so the exponent field is exact)."""
        sub, s, bits = self._r("pred"), self._r("f64"), self._r("b64")
        e, adj = self._r("b32"), self._r("b32")
        self._e(f"setp.lt.f64 {sub}, {v}, {_f64(SMALLEST_NORMAL)}")
        self._e(f"mul.rn.f64 {s}, {v}, {_f64(2.0 ** 54)}")
        self._e(f"selp.f64 {s}, {s}, {v}, {sub}")
        self._e(f"mov.b64 {bits}, {s}")
        self._e(f"shr.u64 {bits}, {bits}, 52")
        self._e(f"cvt.u32.u64 {e}, {bits}")
        self._e(f"selp.s32 {adj}, 1077, 1023, {sub}")  # the bias, plus 54 when scaled
        self._e(f"sub.s32 {e}, {e}, {adj}")
        return e
