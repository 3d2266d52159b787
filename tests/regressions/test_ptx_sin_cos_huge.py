"""Fuzz finding (ptxsim): ``sin(in3)`` on f32 was off by up to 1.73 for huge inputs.

f32 (and f16/bf16, computed in f32) sin/cos reduced by 2*pi in f32 (a hi/lo
split), which is only exact for moderate |x|; above that the remainder was noise.
They must be within a few f32 ulps of NumPy's result (computed in f64 and rounded)
for every finite input, and sin/cos(+-inf, nan) = nan, sin(-0.0) = -0.0.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

import wiadsl

pytest.importorskip("wiadsl.backends.ptx.sim")

F32_MAX = float(np.finfo(np.float32).max)
NAMED = [1e5, 1e10, 3e38, 1e38, -2.5e30, 8388608.5, 1e7 + 0.5, F32_MAX, -F32_MAX, 0.0, -0.0,
         1.0, -1.0, np.pi, np.pi / 2, 105615.0, 105616.0, 1e-45, 1e-30, 2.0 ** 24, 2.0 ** 50,
         2.0 ** 60, float.fromhex("0x1.921fb6p+0"), float.fromhex("0x1.921fb6p+20"), 1e4, -1e6, 1e6]
SPECIAL = [np.inf, -np.inf, np.nan]


def _random_f32(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    mant = rng.uniform(1.0, 2.0, n)
    exps = rng.integers(-149, 128, n)
    sign = rng.choice([-1.0, 1.0], n)
    x = (sign * np.ldexp(mant, exps)).astype(np.float32)
    return x[np.isfinite(x)]


X32 = np.concatenate([np.array(NAMED + SPECIAL, np.float32), _random_f32(200, 20240607),
                      np.float32(3e4) * _random_f32(40, 7).clip(-1, 1)])


def _bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 values to bfloat16 (nearest even), as float32."""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    nan = np.isnan(np.asarray(x, np.float32))
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    out = b.astype(np.uint32).view(np.float32)
    return np.where(nan, np.float32(np.nan), out)


DTYPES = {  # name: (to dtype, storage dtype, ulp of a value)
    "f32": (lambda v: np.asarray(v, np.float32), np.float32,
            lambda v: np.spacing(np.abs(v).astype(np.float32)).astype(np.float64)),
    "f16": (lambda v: np.asarray(v, np.float16), np.float16,
            lambda v: np.spacing(np.abs(v).astype(np.float16)).astype(np.float64)),
    "bf16": (_bf16, np.float32,
             lambda v: np.spacing(np.abs(v).astype(np.float32)).astype(np.float64) * 65536),
}
BOUND = {"f32": 4, "f16": 1, "bf16": 1}  # f32 ulps; f16/bf16: their own rounding


def _check(dtype: str, fn: str) -> None:
    to, store, ulp = DTYPES[dtype]
    with np.errstate(all="ignore"):
        x = to(X32).astype(store)
        want = to(getattr(np, fn)(x.astype(np.float64))).astype(store)
    src = f"kernel fz(input in3: {dtype}[N], output out0: {dtype}[N]) {{ out0 = {fn}(in3); }}"
    got = np.asarray(wiadsl.jit(src, kernel="fz", target="ptxsim")(x))
    assert got.dtype == want.dtype
    g, w = got.astype(np.float64), want.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=f"{fn} NaNs differ")
    ok = ~np.isnan(w)
    zero = ok & (w == 0)
    np.testing.assert_array_equal(np.signbit(g[zero]), np.signbit(w[zero]))
    with np.errstate(all="ignore"):
        err = np.where(g == w, 0.0, np.abs(g - w) / ulp(want))
    err = np.where(ok, err, 0.0)
    worst = int(np.argmax(err))
    assert err.max() <= BOUND[dtype], (
        f"{fn}({x[worst]!r}) = {got[worst]!r}, NumPy {want[worst]!r} ({err.max():.1f} ulp)")


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("fn", ["sin", "cos"])
def test_sin_cos_accurate_for_every_input(dtype: str, fn: str) -> None:
    _check(dtype, fn)


def test_sin_of_minus_zero_and_specials() -> None:
    src = "kernel fz(input in3: f32[N], output out0: f32[N]) { out0 = sin(in3); }"
    got = wiadsl.jit(src, kernel="fz", target="ptxsim")(
        np.array([-0.0, np.inf, -np.inf, np.nan], np.float32))
    assert got[0] == 0 and np.signbit(got[0])
    assert np.isnan(got[1:]).all()


def _ptxas() -> str:
    path = shutil.which("ptxas") or (
        "/usr/local/cuda/bin/ptxas" if os.path.exists("/usr/local/cuda/bin/ptxas") else None)
    if path is None:
        pytest.skip("ptxas not found")
    return path


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_sin_cos_assemble_without_spills(arch: str, dtype: str) -> None:
    from wiadsl.backends.ptx.emit import emit_ptx
    from wiadsl.frontend.compile import compile_to_ir

    src = (f"kernel fz(input x: {dtype}[N], output s: {dtype}[N], output c: {dtype}[N])"
           " { s = sin(x); c = cos(x); }")
    text, _ = emit_ptx(compile_to_ir(src, "<test>"), "fz")
    with tempfile.TemporaryDirectory() as d:
        Path(d, "k.ptx").write_text(text)
        p = subprocess.run([_ptxas(), "-v", "--gpu-name", arch, str(Path(d, "k.ptx")),
                            "-o", str(Path(d, "k.cubin"))], capture_output=True, text=True)
    log = p.stdout + p.stderr
    assert p.returncode == 0, log
    assert " 0 bytes spill stores, 0 bytes spill loads" in log, log
    assert "spill stores" in log
