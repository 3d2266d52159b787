"""Shared helpers of the end-to-end suite: targets, compiled-kernel cache, inputs, oracles.

Every test compiles WIA DSL source with ``wiadsl.jit(src, target=T)`` and compares
the result with NumPy (``tests/reference/numpy_ref.py`` for builtins and stdlib).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

import wiadsl

TARGETS = ["interp"]
try:  # the LLVM CPU backend is being built alongside; run it when it imports
    import wiadsl.backends.llvm.backend  # noqa: F401

    TARGETS += ["cpu", "cpu-O0"]  # the CPU backend after the -O3 pipeline and after none
except ImportError:
    pass

#: A test target name -> (jit target, options).
TARGET_OPTIONS: dict[str, tuple[str, dict[str, Any]]] = {"cpu-O0": ("cpu", {"opt_level": 0})}


def jit(src: str, target: str, **kwargs: Any) -> Any:
    """``wiadsl.jit`` for a test target name (``cpu-O0`` is ``cpu`` with ``opt_level=0``)."""
    name, options = TARGET_OPTIONS.get(target, (target, {}))
    return wiadsl.jit(src, target=name, **options, **kwargs)

#: Shapes that exercise extents of 1 and odd sizes (kept small for the interpreter).
ODD_SHAPES_1D = [(1,), (7,), (33,)]
ODD_SHAPES_2D = [(1, 1), (1, 7), (7, 1), (3, 5), (33, 7)]

TOLERANCE = {
    np.dtype(np.float16): {"rtol": 1e-2, "atol": 1e-3},
    np.dtype(np.float32): {"rtol": 1e-5, "atol": 1e-6},
    np.dtype(np.float64): {"rtol": 1e-12, "atol": 1e-14},
}


@functools.cache
def _jit(src: str, target: str) -> Any:
    return jit(src, target)


def kernel(src: str, target: str, name: str | None = None) -> Any:
    """The kernel ``name`` (default: the only one) of ``src``, compiled once per target."""
    mod = _jit(src, target)
    if name is None:
        (name,) = mod.kernels
    return getattr(mod, name)


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def rand(shape: tuple[int, ...], dtype: Any = np.float32, seed: int = 0,
         low: float = -2.0, high: float = 2.0) -> np.ndarray:
    """Uniform floats in [low, high), or integers in [low, high] for integer dtypes."""
    g = rng(seed)
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        return g.integers(int(low), int(high) + 1, size=shape).astype(dt)
    if dt.kind == "b":
        return g.random(shape) < 0.5
    return g.uniform(low, high, size=shape).astype(dt)


def assert_matches(got: Any, want: Any, *, dtype: Any = None) -> None:
    """``got`` has NumPy's dtype and shape and equals ``want``: exactly for integer and
    bool results, within the float dtype's tolerance otherwise."""
    want = np.asarray(want)
    got_a = np.asarray(got)
    expected_dtype = np.dtype(dtype) if dtype is not None else want.dtype
    assert got_a.dtype == expected_dtype, f"dtype {got_a.dtype}, expected {expected_dtype}"
    assert got_a.shape == want.shape, f"shape {got_a.shape}, expected {want.shape}"
    if expected_dtype.kind in "biu":
        np.testing.assert_array_equal(got_a, want.astype(expected_dtype))
    else:
        np.testing.assert_allclose(got_a.astype(np.float64), want.astype(np.float64),
                                   **TOLERANCE[expected_dtype], equal_nan=True)
