"""Emitted kernels run in the PTX simulator and match the reference interpreter (the oracle)."""

from __future__ import annotations

import numpy as np
import pytest

from wiadsl.frontend.compile import compile_source
from wiadsl.signature import signature_of

from .corpus import OPS, SIZES, make_inputs
from .helpers import EXAMPLE_SHAPES, example_kernels, jit_kernel

pytest.importorskip("wiadsl.backends.ptx.sim")

TOL = {"rtol": 2e-5, "atol": 2e-5}
CASES = [(name, m, n) for name in sorted(OPS) for (m, n) in SIZES]


def _compare(got, want, name: str) -> None:
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, name
        if w.dtype.kind == "f":
            tol = {"rtol": 2e-3, "atol": 2e-3} if w.dtype == np.float16 else TOL
            np.testing.assert_allclose(g, w, **tol, err_msg=name)
        else:
            np.testing.assert_array_equal(g, w, err_msg=name)


@pytest.mark.parametrize("name,m,n", CASES, ids=[f"{c[0]}-{c[1]}x{c[2]}" for c in CASES])
def test_op_matches_interpreter(name: str, m: int, n: int) -> None:
    source, shapes = OPS[name]
    kernel = compile_source(source, "<ptx-corpus>").kernels[0]
    inputs = make_inputs(signature_of(kernel).inputs, shapes, m, n)
    want = jit_kernel(source, "k", "interp")(*inputs)
    got = jit_kernel(source, "k", "ptxsim")(*inputs)
    _compare(got, want, name)


EXAMPLES = [(p, k) for p, k in example_kernels()]


@pytest.mark.parametrize("path,kernel", EXAMPLES, ids=[k for _, k in EXAMPLES])
def test_example_matches_interpreter(path: str, kernel: str) -> None:
    source = open(path).read()
    compiled = compile_source(source, path)
    decl = next(k for k in compiled.kernels if k.name == kernel)
    params = signature_of(decl).inputs
    shapes = {p.name: EXAMPLE_SHAPES[kernel].get(p.name, tuple(p.dims or ())) for p in params}
    inputs = make_inputs(params, shapes, 0, 0, seed=1)
    want = jit_kernel(source, kernel, "interp", path)(*inputs)
    got = jit_kernel(source, kernel, "ptxsim", path)(*inputs)
    _compare(got, want, kernel)
