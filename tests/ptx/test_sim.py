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


# The reduction a branch tests is the scalar result of a fused_reduce whose other result
# is a tensor (CSE shares reduce_max(b) between t and the condition): the plan reads it
# back to the host for the branch (fuzz seed 10800000334: "%t is not a host scalar").
SHARED_SCALAR = """
kernel k(input b: f32[N], output o: i64) {
    t = reduce_max(b, axis=-1);
    u = max(b, t);
    if reduce_max(b) < 2.0 {
        o = argmin(u) + 2;
    } else {
        o = argmin(u) - 3;
    }
}
"""


@pytest.mark.parametrize("values", [[1.0], [3.0, -1.0, 5.0], [0.5, 1.5, -2.0, 1.0]])
def test_a_fused_reductions_scalar_result_feeds_a_branch(values: list[float]) -> None:
    b = np.asarray(values, np.float32)
    want = jit_kernel(SHARED_SCALAR, "k", "interp")(b)
    got = jit_kernel(SHARED_SCALAR, "k", "ptxsim")(b)
    _compare(got, want, "shared scalar")
