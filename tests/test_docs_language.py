"""docs/language.md: every ```wia block is a complete program that compiles, and its
kernels run on random inputs with the same results on the CPU as on the interpreter."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import wiadsl
from wiadsl.signature import ParamSpec

DOC = Path(__file__).resolve().parents[1] / "docs" / "language.md"
BLOCKS = re.findall(r"^```wia\n(.*?)^```", DOC.read_text(encoding="utf-8"), re.S | re.M)
EXTENT = 4  # every symbolic dim


def test_the_doc_has_its_examples():
    assert len(BLOCKS) >= 9
    assert not re.search(r"^```(?!wia\n|python\n|text\n|\n)", DOC.read_text(), re.M), \
        "a code block with an unexpected language tag would not be tested"


def random_argument(param: ParamSpec, rng: np.random.Generator) -> object:
    if param.dtype is None:  # a 'tensor' parameter
        return rng.standard_normal((3, EXTENT)).astype(np.float32)
    shape = tuple(EXTENT if isinstance(d, str) else d for d in param.dims or ())
    dt = param.dtype.numpy
    if param.dtype.is_float:
        return rng.standard_normal(shape).astype(dt)[()]
    if param.dtype.is_int:
        return rng.integers(-5, 6, size=shape).astype(dt)[()]
    return (rng.random(shape) < 0.5)[()]


def outputs(result) -> tuple:
    return result if isinstance(result, tuple) else (result,)


@pytest.mark.parametrize("source", BLOCKS, ids=[re.search(r"kernel (\w+)", b).group(1)
                                                for b in BLOCKS])
def test_language_example_compiles_and_runs(source):
    interp = wiadsl.jit(source, filename=str(DOC), target="interp")
    cpu = wiadsl.jit(source, filename=str(DOC), target="cpu")
    assert interp.kernels, "every example declares a kernel"
    for name, fn in interp.kernels.items():
        rng = np.random.default_rng(0)
        args = [random_argument(p, rng) for p in fn.signature.inputs]
        want = outputs(fn(*args))
        got = outputs(getattr(cpu, name)(*args))
        for w, g in zip(want, got, strict=True):
            np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64),
                                       rtol=1e-4, atol=1e-5, equal_nan=True)
