"""Fuzz finding: ``abs``/``relu``/``floor``/``ceil`` of a bool passed the checker
(its rule keeps the dtype) but the lowering built ``tensor.abs`` on i1, which the IR
verifier rejects: an internal error ("'tensor.abs' op does not accept i1
operands") instead of a result. On bools the four are the identity.
"""

import numpy as np
import pytest

import wiadsl


@pytest.mark.parametrize("fn", ["abs", "relu", "floor", "ceil"])
@pytest.mark.parametrize("target", ["interp", "cpu"])
def test_unary_of_bool_is_the_identity(fn: str, target: str) -> None:
    src = f"kernel k(input c: bool[4], output y: bool[4]) {{ y = {fn}(c); }}"
    c = np.array([True, False, True, False])
    np.testing.assert_array_equal(wiadsl.jit(src, kernel="k", target=target)(c), c)


def test_in_an_expression() -> None:
    src = "kernel k(input c: bool[3], output y: i64) { y = reduce_sum(abs(c) + 1); }"
    c = np.array([True, False, True])
    assert wiadsl.jit(src, kernel="k")(c) == 5
