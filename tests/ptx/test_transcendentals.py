"""f32 transcendentals of the PTX backend (``scalar_math``) on the simulator, in ulps.

Dense sweeps near the overflow thresholds (exp overflows above 88.7228) and through
the subnormal range (exp below -87.34, log of subnormals), against the correctly
rounded result (NumPy in f64, rounded once to f32) and NumPy's own f32 functions
(themselves up to 1-3 ulp off). Every accurate-mode kernel is checked to carry no
``.ftz``; ``fast_math=True`` is the only way to get the flushing ``.approx`` forms.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from wiadsl.backends.ptx.emit import emit_ptx
from wiadsl.backends.ptx.executor import PlanRun
from wiadsl.backends.ptx.simbackend import SimDevice
from wiadsl.diagnostics import WiaUsageError

from .helpers import corpus_module

pytest.importorskip("wiadsl.backends.ptx.sim")

SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan], np.float32)


def f32_range(lo: float, hi: float, count: int) -> np.ndarray:
    """``count`` f32 values evenly spread over [lo, hi] by bit pattern (so a range
    of a few ulps is swept exhaustively), both ends included."""
    a, b = np.float32(lo), np.float32(hi)
    ia, ib = (int(_ordered(np.array([v]))[0]) for v in (a, b))
    idx = np.unique(np.linspace(min(ia, ib), max(ia, ib), count).round().astype(np.int64))
    return _unordered(idx)


def _ordered(x: np.ndarray) -> np.ndarray:
    """f32 bit patterns mapped to integers in the order of the values (-0 == +0)."""
    bits = x.astype(np.float32).view(np.int32).astype(np.int64)
    return np.where(bits < 0, -(bits & 0x7FFFFFFF), bits)


def _unordered(idx: np.ndarray) -> np.ndarray:
    bits = np.where(idx < 0, (-idx) | 0x80000000, idx).astype(np.uint32)
    return bits.view(np.float32)


def ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Distance in f32 steps (subnormals count as steps too); 0 where both are NaN,
    huge where only one is."""
    both_nan = np.isnan(got) & np.isnan(want)
    one_nan = np.isnan(got) ^ np.isnan(want)
    d = np.abs(_ordered(got) - _ordered(want))
    return np.where(both_nan, 0, np.where(one_nan, 1 << 40, d))


def exact(fn, *args: np.ndarray) -> np.ndarray:
    """``fn`` in f64 rounded once to f32 (correct to < 1 ulp for these functions)."""
    with np.errstate(all="ignore"):
        return fn(*(a.astype(np.float64) for a in args)).astype(np.float32)


def run(expr: str, *args: np.ndarray, fast_math: bool = False) -> np.ndarray:
    """``expr`` of f32 vectors, emitted for their shape and run on the simulator."""
    names = "xyz"[:len(args)]
    params = ", ".join(f"input {n}: f32[N]" for n in names)
    src = f"kernel k({params}, output r: f32[N]) {{ r = {expr}; }}"
    text, plan = emit_ptx(corpus_module(src), "k", shapes={n: a.shape for n, a in zip(names, args)},
                          fast_math=fast_math)
    (out,) = PlanRun(plan, SimDevice(text)).run(list(args))
    return out


EXP_X = np.concatenate([
    f32_range(88.0, 88.72283, 40001),       # up to the largest x with a finite exp
    f32_range(88.72284, 89.5, 101),          # inf
    f32_range(-87.5, -103.9, 40001),         # subnormal results
    f32_range(-103.9, -104.5, 2001),         # the last subnormal, then 0
    f32_range(-20.0, 20.0, 8001), SPECIAL])


def test_exp_is_within_one_ulp_up_to_overflow_and_through_subnormals() -> None:
    got = run("exp(x)", EXP_X)
    want = exact(np.exp, EXP_X)
    err = ulps(got, want)
    worst = int(np.argmax(err))
    assert err.max() <= 1, f"exp({EXP_X[worst]!r}) = {got[worst]!r}, exact {want[worst]!r}"
    with np.errstate(all="ignore"):
        assert ulps(got, np.exp(EXP_X)).max() <= 2  # NumPy's f32 exp is itself 1 ulp off
    finite = EXP_X <= np.float32(88.72283)
    assert np.isfinite(got[finite]).all() and np.isinf(got[EXP_X > 88.7229]).all()
    assert (got[(EXP_X < -87.34) & (EXP_X > -103.2)] > 0).all()  # subnormal, not flushed


LOG_X = np.concatenate([
    f32_range(1e-45, 1.17e-38, 20001),       # subnormals
    f32_range(0.5, 2.0, 20001), f32_range(0.999, 1.001, 4001),
    f32_range(1e-30, 1e30, 4001), f32_range(1e37, 3.4028235e38, 2001),
    -f32_range(1e-3, 1e3, 11), SPECIAL])


def test_log_is_within_one_ulp_for_every_positive_input() -> None:
    got = run("log(x)", LOG_X)
    want = exact(np.log, LOG_X)
    err = ulps(got, want)
    worst = int(np.argmax(err))
    assert err.max() <= 1, f"log({LOG_X[worst]!r}) = {got[worst]!r}, exact {want[worst]!r}"
    assert np.signbit(got[LOG_X == 0]).all() and np.isinf(got[LOG_X == 0]).all()


SIG_X = np.concatenate([f32_range(-104.0, -87.0, 8001), f32_range(-20.0, 20.0, 8001),
                        f32_range(87.0, 104.0, 101), SPECIAL])


@pytest.mark.parametrize("expr,ref,inputs,bound", [
    # as the interpreter defines it: 1 / (1 + exp(-x)), subnormal results included
    ("sigmoid(x)", lambda x: 1 / (1 + np.exp(-x)), SIG_X, 2),
    ("tanh(x)", np.tanh, np.concatenate([f32_range(-12.0, 12.0, 16001),
                                         f32_range(1e-38, 0.3, 2001), SPECIAL]), 2),
    ("erf(x)", np.vectorize(math.erf, otypes=[np.float64]),
     np.concatenate([f32_range(-6.0, 6.0, 8001), f32_range(1e-38, 0.5, 2001), SPECIAL]), 3),
])
def test_exp_based_functions_stay_accurate_near_their_limits(expr, ref, inputs, bound) -> None:
    got = run(expr, inputs)
    want = exact(ref, inputs)
    err = ulps(got, want)
    worst = int(np.argmax(err))
    assert err.max() <= bound, f"{expr} at {inputs[worst]!r}: {got[worst]!r}, exact {want[worst]!r}"


def _pow_cases() -> tuple[np.ndarray, np.ndarray]:
    ys = [f32_range(127.0, 128.5, 2001), f32_range(-126.0, -150.5, 2001), f32_range(-8.0, 8.0, 2001)]
    x = np.concatenate([np.full(len(ys[0]), 2.0), np.full(len(ys[1]), 2.0),
                        f32_range(0.01, 100.0, len(ys[2]))]).astype(np.float32)
    # 10 ** 38.53 is the last finite power of 10; 0.5 ** y into the subnormals
    y = np.concatenate(ys).astype(np.float32)
    x = np.concatenate([x, np.full(1001, 10.0), np.full(1001, 0.5)]).astype(np.float32)
    y = np.concatenate([y, f32_range(38.0, 38.6, 1001), f32_range(125.0, 150.0, 1001)])
    return x, y.astype(np.float32)


def test_pow_is_within_one_ulp_up_to_overflow_and_through_subnormals() -> None:
    x, y = _pow_cases()
    got = run("x ** y", x, y)
    want = exact(np.power, x, y)
    err = ulps(got, want)
    worst = int(np.argmax(err))
    assert err.max() <= 1, f"{x[worst]!r} ** {y[worst]!r} = {got[worst]!r}, exact {want[worst]!r}"


def test_a_half_power_is_a_square_root() -> None:
    """As NumPy and the CPU backend: ``x ** 0.5`` is ``sqrt(x)``, so -inf gives NaN and
    -0.0 gives -0.0 where pow gives inf and 0.0 (fuzz seed 11500000000111)."""
    x = np.concatenate([SPECIAL, f32_range(1e-45, 1e30, 2001), -f32_range(1e-3, 1e3, 11)])
    got = run("x ** 0.5", x)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(got, np.sqrt(x))
    assert np.signbit(got[(x == 0) & np.signbit(x)]).all()


EVERY_FN = "exp(x) + log(x) + tanh(x) + sigmoid(x) + erf(x) + sin(x) + cos(x) + x ** x"


def test_ftz_only_under_fast_math() -> None:
    src = f"kernel k(input x: f32[N], output r: f32[N]) {{ r = {EVERY_FN}; }}"
    accurate, _ = emit_ptx(corpus_module(src), "k")
    fast, _ = emit_ptx(corpus_module(src), "k", fast_math=True)
    assert ".ftz" not in accurate
    assert "ex2.approx.ftz.f32" in fast and "lg2.approx.ftz.f32" in fast


def test_fast_math_runs_and_flushes_as_documented() -> None:
    x = np.concatenate([f32_range(-10.0, 10.0, 2001), np.array([-95.0], np.float32)])
    got = run("exp(x)", x, fast_math=True)
    want = exact(np.exp, x)
    np.testing.assert_allclose(got[:-1], want[:-1], rtol=2e-6)
    assert got[-1] == 0  # exp(-95) is subnormal: flushed under fast math


def test_fast_math_must_be_a_bool() -> None:
    src = "kernel k(input x: f32[N], output r: f32[N]) { r = exp(x); }"
    with pytest.raises(WiaUsageError, match="fast_math"):
        emit_ptx(corpus_module(src), "k", fast_math=1)  # type: ignore[arg-type]


def test_fast_math_reaches_the_jit_targets_and_wiac(tmp_path) -> None:
    from wiadsl.runtime.jit import jit
    from wiadsl.tools.cli import main as wiac

    src = "kernel k(input x: f32[N], output r: f32[N]) { r = exp(x); }"
    x = np.array([-95.0, 0.5, 88.5], np.float32)
    accurate = jit(src, kernel="k", target="ptxsim")(x)
    fast = jit(src, kernel="k", target="ptxsim", fast_math=True)(x)
    assert accurate[0] > 0 and np.isfinite(accurate[2]) and fast[0] == 0
    path = tmp_path / "k.wia"
    path.write_text(src)
    for flags, has_ftz in (([], False), (["--fast-math"], True)):
        out = tmp_path / f"k{len(flags)}.ptx"
        assert wiac([str(path), "-D", "N=64", "-o", str(out), *flags]) == 0
        assert (".ftz" in out.read_text()) is has_ftz
