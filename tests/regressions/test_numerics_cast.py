"""Float -> integer and float -> bool casts agree on every target (issue 17, defect 5).

Found: NaN and out-of-range values differed by target (the CPU backend saturated to
i64 and then kept the low bits, PTX saturated to i32 and wrapped i8, the interpreter
gave INT_MIN). LANGUAGE.md §3: "A float -> integer `cast` rounds toward zero and
saturates to the destination range; NaN becomes 0". A cast to bool is ``x != 0``
(NaN is true), as NumPy's.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.e2e.numerics import (
    FLOAT_DTYPES,
    INT_DTYPES,
    SIZES,
    TARGETS,
    as_dtype,
    assert_same_bits,
    edges,
    host_numpy,
    kernel,
    random_values,
)

SRC = "kernel k(input x: {s}[N], output y: {d}[N]) {{ y = cast(x, {d}); }}"
SCALAR_SRC = "kernel k(input x: {s}, output y: {d}) {{ y = cast(x, {d}); }}"


def contract_cast(x: np.ndarray, dst: str) -> np.ndarray:
    """LANGUAGE.md §3's rule, computed exactly in float64 (which holds every source)."""
    v = np.asarray(x, np.float64)
    if dst == "bool":
        return v != 0
    bits = {"i8": 8, "i32": 32, "i64": 64}[dst]
    t = np.trunc(v)
    big, small, nan = t >= 2.0 ** (bits - 1), t < -(2.0 ** (bits - 1)), np.isnan(t)
    out = np.where(big | small | nan, 0, t).astype(np.int64)
    out = np.where(big, 2 ** (bits - 1) - 1, np.where(small, -(2 ** (bits - 1)), out))
    return out.astype(host_numpy(dst))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dst", [*INT_DTYPES, "bool"])
@pytest.mark.parametrize("src", FLOAT_DTYPES)
def test_cast_of_edge_values(target: str, src: str, dst: str) -> None:
    e = edges(src).astype(np.float64)
    x = as_dtype(np.concatenate([e, -e, e * 0.999, e + 0.5]), src)  # both sides of bounds
    got = kernel(SRC.format(s=src, d=dst), target)(x)
    assert_same_bits(got, contract_cast(x, dst), f"{target} cast {src} -> {dst}")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dst", [*INT_DTYPES, "bool"])
@pytest.mark.parametrize("src", FLOAT_DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_cast_of_random_values(target: str, src: str, dst: str, n: int) -> None:
    x = random_values(src, n, seed=n)
    got = kernel(SRC.format(s=src, d=dst), target)(x)
    assert_same_bits(got, contract_cast(x, dst), f"{target} cast {src} -> {dst} (n={n})")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dst", [*INT_DTYPES, "bool"])
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf, 1e10, -1e10, 127.5, -128.9,
                                   3e9, 2.0**63, -1e30])
def test_cast_of_a_scalar(target: str, dst: str, value: float) -> None:
    x = np.float32(value)
    got = kernel(SCALAR_SRC.format(s="f32", d=dst), target)(x)
    want = contract_cast(np.array([x]), dst)[0]
    assert_same_bits(np.asarray(got), np.asarray(want), f"{target} scalar cast -> {dst}")
