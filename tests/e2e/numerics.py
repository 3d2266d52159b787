"""Helpers of the numerics regression tests: targets, edge values, bit-exact comparison.

The edge-value tests run one small kernel on every target (the interpreter, the CPU
backend after no pipeline and after -O3, the PTX simulator, the systolic backend)
and compare with NumPy bit for bit: the sign of a zero counts, and any NaN equals
any NaN (payloads and NaN signs are not part of the contract).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from tests.e2e.harness import TARGETS as CPU_TARGETS
from tests.e2e.harness import jit

#: Every target a numerics test runs on (``cpu`` is the -O3 pipeline).
TARGETS = [*CPU_TARGETS, "ptxsim", "systolic"]

FLOAT_DTYPES = ["f16", "bf16", "f32", "f64"]
INT_DTYPES = ["i8", "i32", "i64"]

#: Sizes that give the CPU's vector bodies and scalar tails work (1, 7, 33, 129).
SIZES = [1, 7, 33, 129]

#: f32 values that are exactly representable: the host type of every float dtype
#: but f64 (bf16 is held in float32), before rounding to the dtype.
EDGE_VALUES = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 0.5, -0.5, 2.0, -2.0, 3.0,
               -4.0, 5.5, -7.25, 1e-30, 1e10, -1e10, 1e38, 3.4e38, -3.4e38, 1e-45, -1e-45,
               1.1754942e-38, 6e-8, -6e-8, 65504.0, 127.5, 127.9, -128.9, -129.0, 128.0,
               255.0, 2.0**31, -(2.0**31), 2.0**31 - 128, 2147483520.0, 3e9, 2.0**63,
               -(2.0**63), 9.2e18, 1.5e19, 0.1, -0.3, 100.0]

#: Extra f64-only edges: subnormals and magnitudes outside f32's range.
F64_EDGES = [5e-324, -5e-324, 2.2250738585072014e-308, 1e-310, 1e300, -1e300,
             1.7976931348623157e308, 2.0**63 - 1024, 2.0**31 - 1, -(2.0**31) - 1,
             9.223372036854775e18, -9.223372036854777e18]


def host_numpy(dtype: str) -> np.dtype:
    """The NumPy dtype a kernel takes for ``dtype`` (bf16: float32)."""
    return np.dtype({"f16": np.float16, "bf16": np.float32, "f32": np.float32,
                     "f64": np.float64, "i8": np.int8, "i32": np.int32, "i64": np.int64,
                     "bool": np.bool_}[dtype])


def round_bf16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to bf16 (nearest even) and held in float32; NaN stays NaN."""
    f = np.ascontiguousarray(x, np.float32)
    bits = f.view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return np.where(np.isnan(f), f, bits.view(np.float32))


def as_dtype(values: Any, dtype: str) -> np.ndarray:
    """``values`` as host values of ``dtype`` (rounded, overflowing to inf as NumPy does)."""
    with np.errstate(all="ignore"):
        out = np.asarray(values, np.float64).astype(host_numpy(dtype))
    return round_bf16(out) if dtype == "bf16" else out


def edges(dtype: str) -> np.ndarray:
    """The edge values of a float dtype (duplicates after rounding kept: cheap)."""
    values = EDGE_VALUES + (F64_EDGES if dtype == "f64" else [])
    return as_dtype(values, dtype)


def random_values(dtype: str, n: int, seed: int) -> np.ndarray:
    """Random floats of several magnitudes and both signs."""
    g = np.random.default_rng(seed)
    mags = g.uniform(-3, 3, n) if dtype in ("f16",) else g.uniform(-10, 12, n)
    return as_dtype(g.choice([-1.0, 1.0], n) * 10.0 ** mags * g.uniform(1, 10, n), dtype)


def assert_same_bits(got: Any, want: np.ndarray, context: str = "") -> None:
    """Equal dtype and shape, equal values bit for bit (sign of zero included), NaN
    where NumPy has NaN; reports the first few differing elements."""
    got_a = np.asarray(got)
    assert got_a.dtype == want.dtype, f"{context}: dtype {got_a.dtype}, expected {want.dtype}"
    assert got_a.shape == want.shape, f"{context}: shape {got_a.shape}, expected {want.shape}"
    if want.dtype.kind == "f":
        nan_g, nan_w = np.isnan(got_a), np.isnan(want)
        uint = np.dtype(f"u{want.dtype.itemsize}")
        same = (nan_g & nan_w) | (~nan_g & ~nan_w & (got_a.view(uint) == want.view(uint)))
    else:
        same = got_a == want
    bad = np.flatnonzero(~same.reshape(-1))
    assert bad.size == 0, (f"{context}: {bad.size} of {want.size} elements differ, e.g. "
                           + ", ".join(f"[{i}] got {got_a.reshape(-1)[i]!r} want "
                                       f"{want.reshape(-1)[i]!r}" for i in bad[:6]))


@functools.cache
def kernel(src: str, target: str) -> Any:
    """The only kernel of ``src`` compiled (once) for a test target (``cpu-O0`` included)."""
    mod = jit(src, target)
    (name,) = mod.kernels
    return getattr(mod, name)
