"""Func parameters with defaults, and calls by keyword (LANGUAGE.md §4): what binds
where, and the errors with their carets."""

from __future__ import annotations

import numpy as np
import pytest

import wiadsl
from wiadsl.diagnostics import WiaError
from wiadsl.frontend.loader import load_program
from wiadsl.frontend.parser import parse_source
from wiadsl.frontend.typecheck import check
from wiadsl.frontend.unparse import unparse

FUNC = "func f(x, axis=-1, eps=1e-5) {\n    return x / reduce_sum(x, axis=axis) + eps;\n}\n"


def rendered(src: str) -> str:
    with pytest.raises(WiaError) as info:
        check(load_program(src, "t.wia"))
    return str(info.value)


def kernel_calling(call: str) -> str:
    return FUNC + f"kernel k(input x: f32[N], output y: f32[N]) {{\n    y = {call};\n}}\n"


@pytest.mark.parametrize("call, expected", [
    ("f(x, axes=0)",
     "t.wia:5:14: error: func 'f' has no parameter 'axes'; did you mean 'axis'?\n"
     "        y = f(x, axes=0);\n"
     "                 ^^^^^^"),
    ("f(x, 0, axis=0)",
     "t.wia:5:17: error: func 'f' got multiple values for parameter 'axis'\n"
     "        y = f(x, 0, axis=0);\n"
     "                    ^^^^^^"),
    ("f(eps=0.1)",
     "t.wia:5:9: error: func 'f' is missing parameter 'x'\n"
     "        y = f(eps=0.1);\n"
     "            ^^^^^^^^^^"),
    ("f(x, 0, 0.1, x)",
     "t.wia:5:22: error: func 'f' takes from 1 to 3 arguments but 4 were given\n"
     "        y = f(x, 0, 0.1, x);\n"
     "                         ^"),
], ids=["unknown", "duplicate", "missing", "too-many"])
def test_bad_calls_have_carets(call, expected):
    assert rendered(kernel_calling(call)) == expected


def test_default_before_non_default_is_a_syntax_error():
    with pytest.raises(WiaError) as info:
        parse_source("func g(a, b=1, c) { return a; }", "t.wia")
    assert str(info.value) == (
        "t.wia:1:16: error: parameter 'c' without a default follows parameter 'b' with one\n"
        "    func g(a, b=1, c) { return a; }\n"
        "                   ^")


def test_non_constant_default_is_an_error_even_if_never_used():
    src = "func g(x, s=sqrt(2.0)) { return x * s; }\n"
    assert rendered(src) == (
        "t.wia:1:13: error: default of parameter 's' of func 'g' must be a constant expression\n"
        "    func g(x, s=sqrt(2.0)) { return x * s; }\n"
        "                ^^^^^^^^^")


def test_defaults_may_use_the_modules_consts_and_unparse_back():
    src = "const E = 0.001;\n\nfunc g(x, eps=E * 2.0) {\n    return x + eps;\n}\n"
    assert unparse(parse_source(src)) == src
    k = wiadsl.jit(src + "kernel k(input x: f32[N], output y: f32[N]) { y = g(x); }",
                   target="interp").k
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(k(x), x + np.float32(2e-3))


@pytest.mark.parametrize("call, want", [
    ("f(x)", lambda x: x / x.sum() + np.float32(1e-5)),
    ("f(x, eps=0.5)", lambda x: x / x.sum() + np.float32(0.5)),
    ("f(x, eps=0.5, axis=0)", lambda x: x / x.sum() + np.float32(0.5)),
    ("f(x, 0, 2.0)", lambda x: x / x.sum() + np.float32(2.0)),
])
def test_calls_bind_by_position_then_name(call, want):
    k = wiadsl.jit(kernel_calling(call), target="interp").k
    x = np.array([1.0, 2.0, 5.0], np.float32)
    np.testing.assert_allclose(k(x), want(x), rtol=1e-6)


@pytest.mark.parametrize("src, expected", [
    ("kernel k(input x: f32[N], output y: f32) {\n    y = reduce_sum(x) + none;\n}\n",
     "t.wia:2:25: error: 'none' (all axes) can only be an axis argument, as in "
     "reduce_sum(x, axis=none), or a func's argument or default\n"
     "        y = reduce_sum(x) + none;\n"
     "                            ^^^^"),
    ("func f(x, a=none) {\n    return x * a;\n}\n"
     "kernel k(input x: f32[N], output y: f32[N]) {\n    y = f(x);\n}\n",
     "t.wia:2:16: error: 'a' is none (all axes) here, and none can only be an axis "
     "argument, as in reduce_sum(x, axis=none), or a func's argument or default\n"
     "        return x * a;\n"
     "                   ^"),
    ("kernel k(input x: f32[N], output y: f32) {\n    y = reduce_sum(x, axis=[0, none]);\n}\n",
     "t.wia:2:32: error: 'none' (all axes) can only be an axis argument, as in "
     "reduce_sum(x, axis=none), or a func's argument or default\n"
     "        y = reduce_sum(x, axis=[0, none]);\n"
     "                                   ^^^^"),
    ("const C = none;\nkernel k(input x: f32[N], output y: f32[N]) {\n    y = x;\n}\n",
     "t.wia:1:11: error: 'none' (all axes) can only be an axis argument, as in "
     "reduce_sum(x, axis=none), or a func's argument or default\n"
     "    const C = none;\n"
     "              ^^^^"),
], ids=["operand", "param-read-as-value", "in-a-list", "const"])
def test_none_is_only_an_axis(src, expected):
    assert rendered(src) == expected


def test_a_local_named_none_is_a_value():
    mod = wiadsl.jit("kernel k(input x: f32[N], output y: f32[N]) {\n"
                     "    none = 2.0;\n    y = x * none;\n}\n", target="interp")
    np.testing.assert_array_equal(mod.k(np.ones(3, np.float32)), np.full(3, 2.0, np.float32))
