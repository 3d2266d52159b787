"""Every kernel of every example runs on target="cpu" like the interpreter, at -O0 and -O3."""

from __future__ import annotations

import numpy as np
import pytest

import wiadsl
from wiadsl.dtypes import DType

from .programs import EXAMPLES, random_inputs

CASES = []
for _path in EXAMPLES:
    _mod = wiadsl.jit(_path.read_text(), filename=str(_path))
    CASES += [(_path, name) for name in _mod.kernels]


def close(got: object, want: object, dtype: np.dtype) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype
    if dtype.kind == "f":
        tol = 2e-2 if dtype.itemsize == 2 else 1e-4 if dtype.itemsize == 4 else 1e-9
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("level", [0, 3])
@pytest.mark.parametrize("path,kernel", CASES, ids=[f"{p.stem}.{k}" for p, k in CASES])
def test_example_matches_interpreter(path, kernel, level):
    src = path.read_text()
    cpu = wiadsl.jit(src, kernel=kernel, filename=str(path), target="cpu", opt_level=level)
    ref = wiadsl.jit(src, kernel=kernel, filename=str(path), target="interp")
    for seed in range(2):
        rng = np.random.default_rng(seed)
        sizes = {"N": 33, "M": 7} if seed else {}
        inputs = random_inputs(cpu.signature, rng, sizes)
        want = ref(*inputs)
        got = cpu(*inputs)
        wants = want if isinstance(want, tuple) else (want,)
        gots = got if isinstance(got, tuple) else (got,)
        for g, w in zip(gots, wants, strict=True):
            close(g, w, np.asarray(w).dtype)


def test_stats_report_compile_time():
    path = EXAMPLES[0]
    mod = wiadsl.jit(path.read_text(), filename=str(path), target="cpu")
    name, fn = next(iter(mod.kernels.items()))
    fn(*random_inputs(fn.signature, np.random.default_rng(0)))
    assert fn.stats["compile_ms"] > 0


__all__ = ["DType"]
