"""Constant folding in ``canonicalize`` and ``sccp`` computes in the op's dtype with the
interpreter's own evaluation (LANGUAGE.md §3): f16/bf16 round, integers wrap, bool
``add`` is "or", an op that fails at run time stays in the program. Each case is also
run unfolded by the interpreter: the folded constant must be that run-time value."""

from __future__ import annotations

import numpy as np
import pytest

from tests.reference.numpy_ref import round_to_bf16
from wiadsl.dtypes import DType
from wiadsl.ir import parse_module, run_func, verify
from wiadsl.ir.attributes import format_scalar
from wiadsl.ir.folding import evaluate_scalar
from wiadsl.ir.types import ScalarType

from .helpers import check

#: (op, type, lhs, rhs, the folded constant as printed)
BINARY = [
    ("arith.add", "f16", "2048.0", "1.0", "2.048e+03"),
    ("arith.add", "f16", "65504.0", "16.0", "inf"),
    ("arith.mul", "f16", "-65504.0", "2.0", "-inf"),
    ("arith.add", "bf16", "256.0", "1.0", "256.0"),
    ("arith.add", "bf16", "256.0", "3.0", "260.0"),
    ("arith.mul", "bf16", "3.0e38", "2.0", "inf"),
    ("arith.mul", "i8", "100", "3", "44"),
    ("arith.add", "i8", "127", "1", "-128"),
    ("arith.sub", "i8", "-128", "1", "127"),
    ("arith.pow", "i8", "3", "5", "-13"),
    ("arith.rem", "i8", "-7", "3", "2"),
    ("arith.div", "i8", "-7", "2", "-4"),
    ("arith.add", "i32", "2147483647", "1", "-2147483648"),
    ("arith.mul", "i32", "46341", "46341", "-2147479015"),
    ("arith.pow", "i64", "2", "63", "-9223372036854775808"),
    ("arith.mul", "i64", "-9223372036854775808", "-1", "-9223372036854775808"),
    ("arith.add", "i1", "true", "true", "true"),
    ("arith.mul", "i1", "true", "false", "false"),
    ("arith.rem", "f32", "-4.0", "2.0", "0.0"),
    ("arith.rem", "f32", "4.0", "-2.0", "-0.0"),
    ("arith.div", "f16", "1.0", "0.0", "inf"),
]


def _binary_ir(op: str, t: str, a: str, b: str) -> str:
    return f"""func @f() -> {t} {{
^entry:
  %a = arith.constant {a} : {t}
  %b = arith.constant {b} : {t}
  %r = {op} %a, %b : {t}
  return %r : {t}
}}"""


@pytest.mark.parametrize("pipeline", ["canonicalize", "sccp,dce"])
@pytest.mark.parametrize(("op", "t", "a", "b", "folded"), BINARY)
def test_binary_folds_to_the_run_time_value(op: str, t: str, a: str, b: str, folded: str,
                                            pipeline: str) -> None:
    ir = _binary_ir(op, t, a, b)
    check(ir, pipeline, f"""
    CHECK-NOT: {op}
    CHECK: arith.constant {folded} : {t}
    CHECK-NOT: {op}
    CHECK: return""")
    module = parse_module(ir)
    verify(module)
    (run,) = run_func(module, "f", [])  # unfolded, by the interpreter
    want = _numpy(op, _type(t), a, b)
    assert run.dtype == want.dtype and run.tobytes() == want.tobytes()
    assert format_scalar(want, _type(t).dtype) == folded, "the table disagrees with NumPy"


def _type(t: str) -> ScalarType:
    return ScalarType({"i1": DType.BOOL}.get(t) or DType(t))


def _numpy(op: str, t: ScalarType, a: str, b: str) -> np.generic:
    """NumPy's value of ``a op b`` in ``t`` (bf16: f32 math rounded to bf16)."""
    dtype = t.dtype
    storage = np.float32 if dtype is DType.BF16 else dtype.numpy
    x, y = (np.asarray({"true": True, "false": False}.get(v, v)).astype(storage)[()]
            for v in (a, b))
    fn = {"arith.add": np.add, "arith.sub": np.subtract, "arith.mul": np.multiply,
          "arith.pow": np.power, "arith.rem": np.remainder,
          "arith.div": np.floor_divide if dtype.is_int else np.true_divide}[op]
    with np.errstate(all="ignore"):
        out = fn(x, y)
    return round_to_bf16(out)[()] if dtype is DType.BF16 else out


@pytest.mark.parametrize("pipeline", ["canonicalize", "sccp,dce"])
def test_integer_to_a_negative_power_is_not_folded(pipeline: str) -> None:
    check(_binary_ir("arith.pow", "i32", "2", "-1"), pipeline, """
    CHECK: %r = arith.pow %a, %b : i32
    CHECK: return %r""")


def test_fold_warns_nothing() -> None:
    with np.errstate(all="raise"):  # an overflow warning would raise here
        assert evaluate_scalar("arith.mul", [(100, _type("i8")), (3, _type("i8"))],
                               _type("i8")) == 44
        assert evaluate_scalar("arith.mul", [(65504.0, _type("f16")), (2.0, _type("f16"))],
                               _type("f16")) == np.inf


def test_cast_folds_through_the_interpreters_cast() -> None:
    # NaN and out-of-range floats: whatever the run-time cast gives, folding gives too
    for value in ("nan", "inf", "1.0e38", "-3.0e9", "-2.75"):
        ir = f"""func @f() -> i32 {{
^entry:
  %a = arith.constant {value} : f64
  %r = arith.cast %a : f64 -> i32
  return %r : i32
}}"""
        module = parse_module(ir)
        (run,) = run_func(module, "f", [])
        check(ir, "canonicalize", f"CHECK: %r = arith.constant {int(run)} : i32")
