"""Issue 17, defect 2: constant folding ignored the dtype.

``cast(2048.0, f16) + 1.0 + 1.0`` folded to 2050 (f16 gives 2048), ``cast(100, i8) *
cast(3, i8)`` failed to compile ("value 300 is out of range for i8"; NumPy wraps to
44), ``true + true`` gave 2. LANGUAGE.md §3: a constant expression folds to exactly
what the same expression gives at run time in its result dtype.

Each case is one kernel with two outputs: ``folded`` computes the expression from
constants (``cast(LIT, dtype)``), ``run`` computes it from inputs holding the same
values. Both must equal NumPy (bit for bit: the sign of a zero, NaN) on every target.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from tests.e2e import harness
from tests.reference.numpy_ref import round_to_bf16

NUMPY = {"bool": np.bool_, "i8": np.int8, "i32": np.int32, "i64": np.int64,
         "f16": np.float16, "f32": np.float32, "f64": np.float64}
#: Literal text for values a number literal cannot spell.
SPECIAL = {"nan": "(0.0 / 0.0)", "inf": "(1.0 / 0.0)", "-inf": "(-1.0 / 0.0)"}
BOOLS = {"true": True, "false": False}


@dataclass(frozen=True)
class Case:
    """``expr`` with operands ``{a}``, ``{b}``: each a (dtype, literal text)."""

    expr: str
    operands: tuple[tuple[str, str], ...]
    numpy: Callable[..., Any]
    out: str = ""  # the result dtype when NumPy has none (bf16)

    @property
    def id(self) -> str:
        return self.expr.format(**{n: f"{d}({v})" for n, (d, v) in self.named().items()})

    def named(self) -> dict[str, tuple[str, str]]:
        return dict(zip("ab", self.operands, strict=False))

    def values(self) -> dict[str, Any]:
        out = {}
        for name, (dtype, text) in self.named().items():
            value = float(text) if text in SPECIAL else BOOLS[text] if text in BOOLS \
                else eval(text)  # noqa: S307 - a number literal
            if dtype == "bf16":
                out[name] = round_to_bf16(np.float32(value))[()]
            else:
                with np.errstate(all="ignore"):
                    out[name] = np.asarray(value).astype(NUMPY[dtype])[()]
        return out

    def expected(self) -> Any:
        with np.errstate(all="ignore"):
            want = self.numpy(**self.values())
        return round_to_bf16(want)[()] if self.out == "bf16" else want

    def source(self) -> str:
        named = self.named()
        folded = self.expr.format(**{n: f"cast({SPECIAL.get(v, v)}, {d})"
                                     for n, (d, v) in named.items()})
        run = self.expr.format(**{n: n for n in named})
        out = self.out or _dtype_name(np.asarray(self.expected()).dtype)
        params = "".join(f"input {n}: {d}, " for n, (d, _) in named.items())
        return (f"kernel k({params}output folded: {out}, output run: {out}) "
                f"{{ folded = {folded}; run = {run}; }}")


#: The e2e targets (interpreter, CPU at -O3 and -O0) and the PTX simulator: scalar
#: kernels compile fast on every one.
TARGETS = [*harness.TARGETS, "ptxsim"]


def _dtype_name(dtype: np.dtype) -> str:
    return next(name for name, t in NUMPY.items() if np.dtype(t) == dtype)


F16, BF16, I8, I32, I64 = "f16", "bf16", "i8", "i32", "i64"
I64_MAX, I64_MIN = "9223372036854775807", "(-9223372036854775807 - 1)"

CASES = [
    # f16: the value is rounded after every op (spacing 2 at 2048, 32 at 65504)
    Case("{a} + 1.0 + 1.0", ((F16, "2048.0"),), lambda a: a + 1.0 + 1.0),
    Case("{a} + 1.0 == 2048.0", ((F16, "2048.0"),), lambda a: a + 1.0 == 2048.0),
    Case("{a} + {b}", ((F16, "2048.0"), (F16, "3.0")), lambda a, b: a + b),
    Case("{a} + 15.0", ((F16, "65504.0"),), lambda a: a + 15.0),
    Case("{a} + 16.0", ((F16, "65504.0"),), lambda a: a + 16.0),
    Case("{a} * {b}", ((F16, "65504.0"), (F16, "2.0")), lambda a, b: a * b),
    Case("-{a} - {b}", ((F16, "65504.0"), (F16, "65504.0")), lambda a, b: -a - b),
    Case("{a} / {b}", ((F16, "1.0"), (F16, "3.0")), lambda a, b: a / b),
    Case("{a} / {b}", ((F16, "1.0"), (F16, "0.0")), lambda a, b: a / b),
    Case("{a} ** {b}", ((F16, "2.0"), (F16, "16.0")), lambda a, b: a ** b),
    Case("{a} + 1", ((F16, "2048.0"),), lambda a: a + 1),  # a weak int keeps f16
    # bf16: NumPy has none; the project's bf16 is f32 math rounded to bf16
    Case("{a} + 1.0", ((BF16, "256.0"),), lambda a: a + np.float32(1.0), BF16),
    Case("{a} + 3.0", ((BF16, "256.0"),), lambda a: a + np.float32(3.0), BF16),
    Case("{a} * {b}", ((BF16, "3.0e38"), (BF16, "2.0")), lambda a, b: a * b, BF16),
    # integers wrap, as NumPy's fixed-width integers do
    Case("{a} * {b}", ((I8, "100"), (I8, "3")), lambda a, b: a * b),
    Case("{a} * 3", ((I8, "100"),), lambda a: a * 3),
    Case("{a} + {b}", ((I8, "127"), (I8, "1")), lambda a, b: a + b),
    Case("{a} - {b}", ((I8, "-128"), (I8, "1")), lambda a, b: a - b),
    Case("-{a}", ((I8, "-128"),), lambda a: -a),
    Case("{a} ** {b}", ((I8, "3"), (I8, "5")), lambda a, b: a ** b),
    Case("{a} % {b}", ((I8, "-128"), (I8, "-1")), lambda a, b: a % b),
    Case("{a} % {b}", ((I8, "-7"), (I8, "3")), lambda a, b: a % b),
    Case("{a} / {b}", ((I8, "-128"), (I8, "-1")), lambda a, b: a / b),
    Case("{a} + {b}", ((I32, "2147483647"), (I32, "1")), lambda a, b: a + b),
    Case("{a} * {b}", ((I32, "46341"), (I32, "46341")), lambda a, b: a * b),
    Case("{a} ** {b}", ((I32, "2"), (I32, "31")), lambda a, b: a ** b),
    Case("{a} - {b} > 0", ((I32, "-2147483647"), (I32, "2")), lambda a, b: a - b > 0),
    Case("{a} + 1", ((I64, I64_MAX),), lambda a: a + 1),
    Case("{a} * {b}", ((I64, I64_MIN), (I64, "-1")), lambda a, b: a * b),
    Case("{a} ** {b}", ((I64, "2"), (I64, "63")), lambda a, b: a ** b),
    Case("{a} % {b}", ((I32, "7"), (I32, "0")), lambda a, b: a % b),
    Case("{a} + 0.5", ((I8, "1"),), lambda a: a + 0.5),  # a weak float gives f64
    # bool arithmetic is NumPy's: + is "or", * is "and", % and ** give i8
    Case("{a} + {b}", (("bool", "true"), ("bool", "true")), lambda a, b: a + b),
    Case("{a} * {b}", (("bool", "true"), ("bool", "false")), lambda a, b: a * b),
    Case("cast({a} + {b}, i32)", (("bool", "true"), ("bool", "true")),
         lambda a, b: (a + b).astype(np.int32)),
    Case("{a} ** {b}", (("bool", "true"), ("bool", "false")), lambda a, b: a ** b),
    # float % gives the divisor's sign, a zero result included
    Case("{a} % {b}", (("f32", "-4.0"), ("f32", "2.0")), lambda a, b: a % b),
    Case("{a} % {b}", (("f32", "4.0"), ("f32", "-2.0")), lambda a, b: a % b),
    Case("{a} % {b}", (("f64", "-1.0"), ("f64", "3.0")), lambda a, b: a % b),
    # casts that NumPy defines (truncation toward zero, wrapping between integers)
    Case("cast({a}, i8)", ((I32, "300"),), lambda a: a.astype(np.int8)),
    Case("cast({a}, i32)", (("f64", "-2.75"),), lambda a: a.astype(np.int32)),
    Case("cast({a}, f16)", (("f64", "1e5"),), lambda a: a.astype(np.float16)),
    Case("cast({a}, bool)", (("f32", "-0.0"),), lambda a: a.astype(np.bool_)),
    Case("cast({a}, f32) + 1.0", ((F16, "2048.0"),), lambda a: a.astype(np.float32) + 1.0),
]


def _same(got: Any, want: Any) -> bool:
    """Equal dtype and bits: NaN equals NaN, 0.0 is not -0.0."""
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype != want.dtype:
        return False
    if got.dtype.kind == "f":
        both_nan = np.isnan(got) & np.isnan(want)
        return bool(both_nan or (got == want and np.signbit(got) == np.signbit(want)))
    return bool(got == want)


def _run(case: Case, target: str) -> tuple[Any, Any]:
    values = case.values()
    return harness.jit(case.source(), target, kernel="k")(*values.values())


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_folded_equals_run_time_equals_numpy(case: Case, target: str) -> None:
    folded, run = _run(case, target)
    want = case.expected()
    assert _same(run, want), f"run time: {run!r}, NumPy: {want!r}"
    assert _same(folded, want), f"folded: {folded!r}, NumPy: {want!r}"


# Float -> integer casts NumPy leaves undefined: §3 says truncate toward zero,
# saturate, NaN -> 0. Folding goes through the interpreter's cast, so the folded
# value is the run-time one whatever that is; the §3 value is checked below.
UNDEFINED_CASTS = [
    Case("cast({a}, i32)", (("f64", v),), lambda a: a, )
    for v in ("nan", "inf", "-inf", "1e38", "-1e38", "3e9")
] + [Case("cast({a}, i8)", ((F16, v),), lambda a: a) for v in ("300.0", "-300.0", "nan")] \
  + [Case("cast({a}, i64)", (("f32", v),), lambda a: a) for v in ("1e38", "-inf")]


def _section3_cast(value: Any, dtype: str) -> Any:
    """Truncate toward zero, saturate to the range of ``dtype``, NaN -> 0 (Python ints: exact)."""
    info = np.iinfo(NUMPY[dtype])
    v = float(value)
    if math.isnan(v):
        return NUMPY[dtype](0)
    t = info.max if v == math.inf else info.min if v == -math.inf else int(v)
    return NUMPY[dtype](min(max(t, info.min), info.max))


def _cast_source(case: Case) -> str:
    (dtype, text), = case.operands
    dst = case.expr.split(", ")[1].rstrip(")")
    folded = case.expr.format(a=f"cast({SPECIAL.get(text, text)}, {dtype})")
    run = case.expr.format(a="a")
    return (f"kernel k(input a: {dtype}, output folded: {dst}, output run: {dst}) "
            f"{{ folded = {folded}; run = {run}; }}")


@pytest.mark.parametrize("case", UNDEFINED_CASTS, ids=[c.id for c in UNDEFINED_CASTS])
def test_undefined_cast_folds_to_the_interpreters_run_time_value(case: Case) -> None:
    folded, run = harness.jit(_cast_source(case), "interp", kernel="k")(*case.values().values())
    assert _same(folded, run), f"folded {folded!r}, run time {run!r}"


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", UNDEFINED_CASTS, ids=[c.id for c in UNDEFINED_CASTS])
def test_undefined_cast_saturates_as_section3_says(case: Case, target: str) -> None:
    (value,) = case.values().values()
    dst = case.expr.split(", ")[1].rstrip(")")
    want = _section3_cast(value, dst)
    folded, run = harness.jit(_cast_source(case), target, kernel="k")(value)
    assert _same(run, want), f"run time: {run!r}, §3: {want!r}"
    assert _same(folded, want), f"folded: {folded!r}, §3: {want!r}"
