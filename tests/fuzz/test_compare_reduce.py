"""The comparison's tolerance rules and the reducer, on hand-made cases."""

import numpy as np

from wiadsl.frontend import ast
from wiadsl.frontend.parser import parse_source
from wiadsl.fuzz.compare import compare_outputs, compare_values
from wiadsl.fuzz.genprog import FuzzCase, generate, make_inputs
from wiadsl.fuzz.reduce import reduce_case, variants


def test_integers_must_be_exact() -> None:
    assert compare_values(np.array([1, 2], np.int32), np.array([1, 2], np.int32)).ok
    assert not compare_values(np.array([1, 2], np.int32), np.array([1, 3], np.int32)).ok
    assert not compare_values(np.array([1, 2], np.int32), np.array([1, 2], np.int64)).ok


def test_float_tolerance_scales_with_the_largest_value() -> None:
    ref = np.array([1000.0, 1e-3], np.float32)
    assert compare_values(ref, ref + np.float32(0.05)).ok         # 5e-5 of the scale
    assert not compare_values(ref, ref + np.float32(1.0)).ok
    assert not compare_values(np.array([1.0], np.float64), np.array([1.0 + 1e-6])).ok


def test_nan_and_inf_must_match() -> None:
    a = np.array([np.nan, np.inf, 1.0], np.float32)
    assert compare_values(a, a.copy()).ok
    assert not compare_values(a, np.array([0.0, np.inf, 1.0], np.float32)).ok
    assert not compare_values(a, np.array([np.nan, -np.inf, 1.0], np.float32)).ok
    assert not compare_outputs([a], [a[:2]]).ok


def test_reducer_keeps_only_what_the_failure_needs() -> None:
    src = """
kernel fz(input in0: f32[M, 3], output out0: f32[M, 3], output out1: f32) {
    t1 = in0 * 2.0;
    t2 = exp(in0) + reduce_sum(t1);
    t3 = t2 @ transpose(t2);
    for ix4 in range(2) {
        t1 = t1 + 1.0;
    }
    out0 = t1;
    out1 = reduce_max(t3);
}
"""
    program = parse_source(src)
    dims = {"M": 2}
    case = FuzzCase(5, program, "fz", dims, make_inputs(program, "fz", dims, 5))

    def fails(c: FuzzCase) -> bool:  # "the bug": any use of exp
        from wiadsl.frontend.compile import compile_source
        try:
            compile_source(c.source)
        except Exception:
            return False
        return "exp(" in c.source

    small = reduce_case(case, fails, budget_s=60)
    assert fails(small)
    assert small.source.count(";") <= 3, small.source
    assert "@" not in small.source and "for" not in small.source


def test_variants_are_smaller_programs() -> None:
    case = generate(3)
    size = len(case.source)
    for v in list(variants(case.program, case.kernel))[:50]:
        assert isinstance(v, ast.Program)
        from wiadsl.frontend.unparse import unparse
        assert len(unparse(v)) <= size


def test_working_precision_loosens_the_tolerance():
    # an f64 result of f16 math is only as exact as f16 (backends may differ by an ulp)
    ref, got = np.array([4.42529297]), np.array([4.42578125])
    assert not compare_values(ref, got).ok
    assert compare_values(ref, got, "f16").ok
    assert not compare_values(ref, got + 1.0, "f16").ok
    assert compare_values(ref, got, "f64").ok is False  # never tighter than the result's own


def test_working_precision_of_a_program():
    from wiadsl.frontend.parser import parse_source
    from wiadsl.fuzz.differential import working_precision
    from wiadsl.fuzz.genprog import FuzzCase

    def case(src: str) -> FuzzCase:
        return FuzzCase(0, parse_source(src), "k", {})

    assert working_precision(case("kernel k(input x: f32[N], output y: f64[N]) { y = cast(x, f16); }")) == "f16"
    assert working_precision(case("kernel k(input x: f32[N], output y: f64[N]) { y = x; }")) == "f32"
    assert working_precision(case("kernel k(input x: i32[N], output y: i32[N]) { y = x; }")) is None
    # dequantize's result is f32 whatever the program names (fuzz seed 10300000000918:
    # an f64 output of an i64 times an f32 rsqrt, 1 ulp of f32 apart on two paths)
    dq = "kernel k(input q: i32[N], output y: f64[N]) { t = cast(q, i64); t *= rsqrt(dequantize(q, 0.5, 0) + 1); y = t; }"
    assert working_precision(case(dq)) == "f32"
