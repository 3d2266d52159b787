"""The judge accepts any value where a float reduction may overflow in some order
(npvalues ``Val.free``), and nothing more."""

import numpy as np

from wiadsl.frontend.parser import parse_source
from wiadsl.fuzz.differential import Outcome, judge
from wiadsl.fuzz.numpy_eval import evaluate_paths

PROD = """
kernel fz(input in3: i8[33, 35], output out1: f32[1, 33]) {
    t8 = cast(in3, f32);
    t9 = reduce_prod(t8 @ transpose(t8), axis=-2, keepdims=true);
    out1 = t9;
}
"""
SUM = """
kernel k(input x: f32[3], output y: f32) {
    y = reduce_sum(x);
}
"""


def _paths(src: str, kernel: str, **inputs: np.ndarray) -> list[Outcome]:
    return [Outcome(values=p.values, error=p.error, free=p.free)
            for p in evaluate_paths(parse_source(src), kernel, inputs)]


def _verdict(paths: list[Outcome], got: list[np.ndarray]) -> str:
    return judge("t", paths[0], Outcome(values=got), None, paths).kind


def _prod_inputs() -> np.ndarray:
    rng = np.random.default_rng(1818)
    x = rng.integers(-128, 128, (33, 35)).astype(np.int8)
    x[rng.random((33, 35)) < 0.1] = 0
    return x


def test_overflowing_product_is_ambiguous() -> None:
    paths = _paths(PROD, "fz", in3=_prod_inputs())
    ref = paths[0].values
    assert ref is not None and paths[0].free[0] is not None
    got = [ref[0].copy()]
    got[0][0, :2] = np.nan
    got[0][0, 2] = np.inf
    assert _verdict(paths, got) == "ambiguous"


def test_nan_without_overflow_is_a_mismatch() -> None:
    x = np.zeros((33, 35), np.int8)
    x[:, :2] = 1  # products of small values: nothing can overflow
    paths = _paths(PROD, "fz", in3=x)
    assert not any(m is not None for m in paths[0].free)
    ref = paths[0].values
    assert ref is not None
    got = [ref[0].copy()]
    got[0][0, 0] = np.nan
    assert _verdict(paths, got) == "mismatch"


def test_nan_at_a_non_overflowing_element_is_a_mismatch() -> None:
    x = _prod_inputs()
    x[:, 0] = 0  # row 0 of the Gram matrix is all 0: column 0's product is 0 in any order
    x[0, :] = 0
    paths = _paths(PROD, "fz", in3=x)
    free = paths[0].free[0]
    assert free is not None and not free[0, 0] and free.any()
    ref = paths[0].values
    assert ref is not None
    got = [np.where(free, np.nan, ref[0]).astype(np.float32)]
    assert _verdict(paths, got) == "ambiguous"
    got[0][0, 0] = np.nan
    assert _verdict(paths, got) == "mismatch"


def test_sum_overflowing_in_one_order_is_ambiguous() -> None:
    x = np.array([3e38, 3e38, -3e38], np.float32)
    paths = _paths(SUM, "k", x=x)
    assert paths[0].free[0] is not None
    for got in (np.float32(np.inf), np.float32(3e38), np.float32(np.nan)):
        assert _verdict(paths, [np.asarray(got)]) in ("ok", "ambiguous")


def test_wrong_finite_value_is_a_mismatch() -> None:
    x = np.array([1.0, 2.0, -3.5], np.float32)
    paths = _paths(SUM, "k", x=x)
    assert not any(m is not None for m in paths[0].free)
    assert _verdict(paths, [np.asarray(np.float32(7.0))]) == "mismatch"


BRANCH = """
kernel fz(input in0: f32[M, M], output out0: f32[M, M]) {
    t1 = in0 @ transpose(in0);
    if reduce_sum(t1) >= 0.5 {
        cv3 = in0;
    } else {
        cv3 = in0[::-1];
    }
    out0 = cv3;
}
"""


def test_a_branch_on_a_sum_that_overflows_in_some_order_goes_either_way() -> None:
    # fuzz seed 9400000000809: t1 holds inf and four -1.9e38, whose sum is inf in
    # one order and NaN (-inf + inf) in another; the condition decides nothing
    x = np.array([[0.375, -0.375, 2.5521175e38], [-0.625, -1.5, -0.75], [0.875, 0.25, -0.75]],
                 np.float32)
    paths = _paths(BRANCH, "fz", in0=x)
    assert len(paths) == 2
    for got in (x, x[::-1]):
        assert _verdict(paths, [got.copy()]) in ("ok", "ambiguous")
    assert _verdict(paths, [x[[1, 0, 2]].copy()]) == "mismatch"


def test_a_branch_on_a_sum_that_cannot_overflow_has_one_path() -> None:
    x = np.array([[0.375, -0.375, 2.5], [-0.625, -1.5, -0.75], [0.875, 0.25, -0.75]], np.float32)
    assert len(_paths(BRANCH, "fz", in0=x)) == 1
