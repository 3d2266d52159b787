"""An integer to a negative integer power is a run-time error on every target (issue 17,
defect 4).

Found: the interpreter, the CPU backend and the systolic backend raise WiaRuntimeError
("integers to negative integer powers are not allowed", as NumPy raises ValueError),
while the PTX backend returned 1 for such elements. Kernels now report it through a
device error flag that the launch plan checks after the launch.

Then (issue 17, round 2; fuzz seeds 5000009, 5000025, 6000061): the CPU backend checked
only a stand-alone ``tensor.pow``; a scalar ``arith.pow`` and one inside a fused body
(``a ** s + a``, ``reduce_max(a ** b)`` after -O3 fusion) returned 0. Every integer pow
now lowers through one checked scalar lowering (wiadsl/loops/scalar.py ``int_pow``).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.e2e.numerics import INT_DTYPES, SIZES, TARGETS, assert_same_bits, host_numpy, kernel
from wiadsl.diagnostics import WiaRuntimeError

ELEMENTWISE = "kernel k(input a: {t}[N], input b: {t}[N], output c: {t}[N]) {{ c = a ** b; }}"
ROWS = ("kernel k(input a: {t}[M, N], input b: {t}[M, N], output c: {t}[M]) "
        "{{ c = reduce_max(a ** b, axis=1); }}")
SCALAR = "kernel k(input a: {t}[N], input s: {t}, output c: {t}[N]) {{ c = a ** s + a; }}"
#: Scalar operands only: ``arith.pow`` outside any tensor op (a constant base too).
SCALARS = "kernel k(input x: {t}, input s: {t}, output y: {t}, output z: {t}) {{ y = x ** s; z = 3 ** s; }}"
CONSTANT = "kernel k(input x: f32[2], output y: i64) { y = 128 ** -2; }"
MESSAGE = "negative integer powers"


def operands(dtype: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    g = np.random.default_rng(seed)
    t = host_numpy(dtype)
    return g.integers(-5, 6, n).astype(t), g.integers(0, 6, n).astype(t)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_negative_exponent_raises(target: str, dtype: str, n: int) -> None:
    a, b = operands(dtype, n, n)
    k = kernel(ELEMENTWISE.format(t=dtype), target)
    with np.errstate(over="ignore"):
        assert_same_bits(k(a, b), np.power(a, b), f"{target} {dtype} **")
    b[n // 2] = -1
    with pytest.raises(WiaRuntimeError, match=MESSAGE):
        k(a, b)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["i8", "i32"])
def test_negative_exponent_in_a_reduced_row_raises(target: str, dtype: str) -> None:
    a, b = (x.reshape(3, 11) for x in operands(dtype, 33, 3))
    k = kernel(ROWS.format(t=dtype), target)
    with np.errstate(over="ignore"):
        want = np.power(a, b).max(axis=1)
    assert_same_bits(k(a, b), want, f"{target} {dtype} rows")
    b[2, 10] = -3
    with pytest.raises(WiaRuntimeError, match=MESSAGE):
        k(a, b)


@pytest.mark.parametrize("target", TARGETS)
def test_negative_scalar_exponent_raises(target: str) -> None:
    a = np.arange(-3, 4, dtype=np.int32)
    k = kernel(SCALAR.format(t="i32"), target)
    assert_same_bits(k(a, np.int32(3)), a ** 3 + a, f"{target} a ** 3")
    with pytest.raises(WiaRuntimeError, match=MESSAGE):
        k(a, np.int32(-2))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_negative_exponent_of_scalars_raises(target: str, dtype: str) -> None:
    t = host_numpy(dtype)
    k = kernel(SCALARS.format(t=dtype), target)
    y, z = k(t.type(-3), t.type(3))
    assert_same_bits(np.asarray(y), np.asarray(t.type(-27)), f"{target} {dtype} x ** s")
    assert_same_bits(np.asarray(z), np.asarray(t.type(27)), f"{target} {dtype} 3 ** s")
    with pytest.raises(WiaRuntimeError, match=MESSAGE):
        k(t.type(2), t.type(-1))


@pytest.mark.parametrize("target", TARGETS)
def test_negative_constant_exponent_raises(target: str) -> None:
    with pytest.raises(WiaRuntimeError, match=MESSAGE):
        kernel(CONSTANT, target)(np.zeros(2, np.float32))


EMPTY = "kernel k(input a: i64[N], output c: i64[N]) { c = a ** -2; }"


@pytest.mark.parametrize("target", TARGETS)
def test_negative_exponent_of_no_element_does_not_raise(target: str) -> None:
    # NumPy fails only for an exponent that meets an element: ``empty ** -2`` is empty.
    # The interpreter raised here while the CPU and PTX code (no element, no check) did not.
    a = np.zeros(0, np.int64)
    assert kernel(EMPTY, target)(a).shape == (0,)
    with pytest.raises(WiaRuntimeError, match=MESSAGE):
        kernel(EMPTY, target)(np.ones(3, np.int64))
