"""On a machine with a GPU: every op test and example runs on the device and matches the interpreter."""

from __future__ import annotations

import numpy as np
import pytest

from wiadsl.frontend.compile import compile_source
from wiadsl.runtime.signature import signature_of

from .corpus import OPS, SIZES, make_inputs
from .helpers import jit_kernel

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("name", sorted(OPS))
def test_op_on_gpu(name: str) -> None:
    source, shapes = OPS[name]
    kernel = compile_source(source, "<ptx-corpus>").kernels[0]
    for m, n in SIZES + [(257, 1031)]:
        inputs = make_inputs(signature_of(kernel).inputs, shapes, m, n)
        want = jit_kernel(source, "k", "interp")(*inputs)
        got = jit_kernel(source, "k", "cuda")(*inputs)
        for g, w in zip(got if isinstance(got, tuple) else (got,),
                        want if isinstance(want, tuple) else (want,), strict=True):
            if np.asarray(w).dtype.kind == "f":
                np.testing.assert_allclose(g, w, rtol=2e-3, atol=2e-3, err_msg=name)
            else:
                np.testing.assert_array_equal(g, w, err_msg=name)


def test_matmul_large_on_gpu() -> None:
    src = "kernel k(input a: f32[M, K], input b: f32[K, N], output y: f32[M, N]) { y = a @ b; }"
    rng = np.random.default_rng(0)
    a = rng.standard_normal((513, 300)).astype(np.float32)
    b = rng.standard_normal((300, 257)).astype(np.float32)
    np.testing.assert_allclose(jit_kernel(src, "k", "cuda")(a, b), a @ b, rtol=1e-4, atol=1e-3)
