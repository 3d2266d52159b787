"""Compile-time values (LANGUAGE.md §3): constant expressions fold in their result
dtype, exactly as the same expression computes at run time, in the checker (consts,
static indices and attributes) and in the lowering (the IR constant emitted)."""

from __future__ import annotations

import numpy as np
import pytest

import wiadsl
from tests.lowering.helpers import check as check_ir
from wiadsl.diagnostics import WiaRuntimeError
from wiadsl.dtypes import DType
from wiadsl.frontend.constfold import convert, fold_binary, fold_unary
from wiadsl.frontend.loader import MAIN_MODULE, load_program
from wiadsl.frontend.typecheck import check
from wiadsl.frontend.typerules import ValueType


def consts(src: str) -> dict[str, object]:
    return check(load_program(src + "\nkernel k(output y: f32) { y = 1.0; }", "t.wia")
                 ).consts[MAIN_MODULE]


I8, F16 = ValueType(DType.I8), ValueType(DType.F16)
WEAK_INT, WEAK_FLOAT = ValueType(DType.I64, (), True), ValueType(DType.F64, (), True)
WEAK_BOOL = ValueType(DType.BOOL, (), True)


def test_fold_binary_computes_in_the_result_dtype() -> None:
    assert fold_binary("*", 100, I8, 3, I8, I8) == 44
    assert fold_binary("*", 100, I8, 3, WEAK_INT, I8) == 44  # the weak 3 becomes i8
    assert fold_binary("+", 2048.0, F16, 1.0, WEAK_FLOAT, F16) == 2048.0
    assert fold_binary("+", True, WEAK_BOOL, True, WEAK_BOOL, WEAK_BOOL) is True
    bool_eq = ValueType(DType.BOOL)
    assert fold_binary("==", 2049.0, F16, 2048.0, WEAK_FLOAT, bool_eq) is True  # 2049 is 2048 in f16


def test_fold_leaves_an_op_that_fails_at_run_time_unfolded() -> None:
    assert fold_binary("**", 2, WEAK_INT, -1, WEAK_INT, WEAK_INT) is None
    assert fold_binary("max", 1, WEAK_INT, 2, WEAK_INT, WEAK_INT) is None  # not an operator


def test_fold_unary_and_convert_wrap_and_round() -> None:
    assert fold_unary("-", -128, I8) == -128
    assert fold_unary("!", True, WEAK_BOOL) is False
    assert convert(300, DType.I64, DType.I8) == 44
    assert convert(1e5, DType.F64, DType.F16) == float("inf")
    assert convert(((1.0, 2049.0),), DType.F64, DType.F16) == ((1.0, 2048.0),)


def test_consts_fold_in_i64_and_never_widen() -> None:
    got = consts("const BIG = 9223372036854775807 + 1;\nconst P = 2 ** 64;\nconst T = true + true;")
    assert got["BIG"] == np.iinfo(np.int64).min
    assert got["P"] == 0
    assert got["T"] is True


def test_static_index_is_computed_in_i8() -> None:
    # cast(100, i8) * cast(3, i8) is 44, so the index is 3, not 259 (out of range)
    src = "kernel k(input x: f32[4], output y: f32) { y = x[cast(100, i8) * cast(3, i8) - 41]; }"
    x = np.arange(4, dtype=np.float32)
    assert wiadsl.jit(src, kernel="k", target="interp")(x) == 3.0


def test_lowering_emits_the_folded_constant_in_its_dtype() -> None:
    check_ir("""kernel k(output a: f16, output b: i8, output c: i32, output d: bool) {
        a = cast(2048.0, f16) + 1.0 + 1.0;
        b = cast(100, i8) * cast(3, i8);
        c = cast(2147483647, i32) + cast(1, i32);
        d = cast(2.5, i32) + 1 == 3;
    }""", """
    CHECK:      %a = arith.constant 2.048e+03 : f16
    CHECK-NEXT: %b = arith.constant 44 : i8
    CHECK-NEXT: %c = arith.constant -2147483648 : i32
    CHECK-NEXT: %d = arith.constant true : i1
    CHECK-NEXT: return %a, %b, %c, %d
    """)


def test_integer_to_negative_power_is_a_run_time_error_with_a_span() -> None:
    k = wiadsl.jit("kernel k(output y: i64) {\n    y = 2 ** -1;\n}", kernel="k", target="interp")
    with pytest.raises(WiaRuntimeError) as info:
        k()
    assert info.value.span is not None and info.value.span.line == 2
