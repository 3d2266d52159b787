"""Reductions over the last two axes (lower_reduce._plane_reduction: one loop over the
plane's flat index, as a global average pool) against NumPy, for planes one pixel
wide or tall and for operands that are maps of the input (a widening cast, a scaled
value), whose elements are read through broadcasting.

Fuzz seeds 5500000000512 and 5500000000693: reduce_sum of an i8/i32 [N, 1] (cast to
i64 before summing) added the first element N times at -O0 and -O1.
"""

from __future__ import annotations

import numpy as np
import pytest

import wiadsl

SRC = """
kernel total(input x: {dt}[H, W], output y: {acc}) {{ y = reduce_sum(x); }}
kernel planes(input x: {dt}[B, H, W], output y: {acc}[B]) {{ y = reduce_sum(x, axis=[-2, -1]); }}
kernel mean_of_map(input x: {dt}[B, H, W], output y: f32[B, 1, 1]) {{
    y = reduce_mean(cast(x, f32) * 2.0, axis=[-2, -1], keepdims=true);
}}
kernel max_of_map(input x: {dt}[B, H, W], output y: f32[B]) {{
    y = reduce_max(cast(x, f32) - 1.0, axis=[-2, -1]);
}}
"""
WIDE = {"i8": "i64", "i32": "i64", "f32": "f32"}
NUMPY = {"i8": np.int8, "i32": np.int32, "f32": np.float32}


@pytest.fixture(scope="module", params=[("i8", 0), ("i32", 1), ("f32", 0), ("i32", 3)],
                ids=lambda p: f"{p[0]}-O{p[1]}")
def mod(request):
    dt, level = request.param
    return dt, wiadsl.jit(SRC.format(dt=dt, acc=WIDE[dt]), target="cpu", opt_level=level)


@pytest.mark.parametrize("hw", [(4, 1), (37, 1), (1, 4), (1, 1), (3, 5), (7, 33)])
def test_plane_reductions_match_numpy(mod, hw):
    dt, m = mod
    rng = np.random.default_rng(sum(hw))
    x = rng.integers(-100, 100, (3, *hw)).astype(NUMPY[dt])
    wide = x.astype(np.int64 if dt != "f32" else np.float32)
    np.testing.assert_allclose(m.total(x[0]), wide[0].sum(), rtol=1e-6)
    np.testing.assert_allclose(m.planes(x), wide.sum(axis=(-2, -1)), rtol=1e-6)
    f = x.astype(np.float32)
    np.testing.assert_allclose(m.mean_of_map(x), (f * 2).mean(axis=(-2, -1), keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(m.max_of_map(x), (f - 1).max(axis=(-2, -1)), rtol=1e-6)
