"""Verifier and parser errors: each names the problem and marks the line."""

from __future__ import annotations

import pytest

from wiadsl.diagnostics import WiaIRError
from wiadsl.dtypes import DType
from wiadsl.ir import Builder, FuncOp, TensorType, parse_module, verify
from wiadsl.ir.types import F32, I1


def _verify_text(text: str) -> None:
    verify(parse_module(text))


def _expect(text: str, *fragments: str) -> str:
    with pytest.raises(WiaIRError) as info:
        _verify_text(text)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message
    return message


def test_missing_terminator() -> None:
    message = _expect("""
func @f(%a: f32) -> f32 {
^entry:
  %0 = arith.neg %a : f32
}
""", "does not end with a terminator", "missing terminator after 'arith.neg'")
    assert "-->   %0 = arith.neg %a : f32" in message


def test_terminator_not_last() -> None:
    _expect("""
func @f(%a: f32) -> f32 {
^entry:
  return %a : f32
  %0 = arith.neg %a : f32
}
""", "'func.return' op is a terminator but not the last op of its block")


def test_empty_block() -> None:
    func = FuncOp("f", [], [])
    with pytest.raises(WiaIRError, match=r"block \^entry is empty"):
        verify(func)


def test_edge_arity_mismatch() -> None:
    _expect("""
func @f(%a: f32) -> f32 {
^entry:
  br ^exit
^exit(%r: f32):
  return %r : f32
}
""", "'cf.br' op passes 0 values to ^exit, which takes 1")


def test_edge_type_mismatch() -> None:
    _expect("""
func @f(%a: f32, %c: i1) -> f32 {
^entry:
  cond_br %c, ^exit(%a : f32), ^exit(%c : i1)
^exit(%r: f32):
  return %r : f32
}
""", "'cf.cond_br' op passes i1 as argument 0 of ^exit, which is f32")


def test_use_not_dominated() -> None:
    message = _expect("""
func @f(%a: f32, %c: i1) -> f32 {
^entry:
  cond_br %c, ^left, ^right
^left:
  %x = arith.neg %a : f32
  br ^exit
^right:
  br ^exit
^exit:
  %y = arith.abs %x : f32
  return %y : f32
}
""", "'arith.abs' op operand %x does not dominate this use")
    assert "-->   %y = arith.abs %x : f32" in message


def test_use_before_def_in_block() -> None:
    _expect("""
func @f(%a: f32) -> f32 {
^entry:
  %y = arith.abs %x : f32
  %x = arith.neg %a : f32
  return %y : f32
}
""", "operand %x does not dominate this use")


def test_loop_back_edge_value_is_fine() -> None:
    from ir_corpus import CASES
    _verify_text(CASES["cf.loop"])


def test_branch_to_entry_rejected() -> None:
    func = FuncOp("f", [], [])
    Builder(func.entry).br(func.entry)
    with pytest.raises(WiaIRError, match="branches to the entry block"):
        verify(func)


def test_return_type_mismatch() -> None:
    _expect("""
func @f(%a: f32) -> i32 {
^entry:
  return %a : f32
}
""", "'func.return' op returns (f32) but the signature of @f has (i32)")


def test_call_checks_callee() -> None:
    _expect("""
func @f(%a: f32) -> f32 {
^entry:
  %0 = func.call @g(%a) : (f32) -> f32
  return %0 : f32
}
""", "calls unknown function @g")
    _expect("""
func @g(%a: i32) -> f32 {
^entry:
  %0 = arith.constant 1.0 : f32
  return %0 : f32
}

func @f(%a: f32) -> f32 {
^entry:
  %0 = func.call @g(%a) : (f32) -> f32
  return %0 : f32
}
""", "passes (f32) but @g's signature has (i32)")


BAD_OPS = [
    ("%0 = tensor.reduce_sum %x {axes = [2]} : tensor<4x?xf32> -> f32", "axis 2 is out of range for rank 2"),
    ("%0 = tensor.reduce_sum %x : tensor<4x?xf32> -> f32", "attribute 'axes' must be a list of integers"),
    ("%0 = tensor.reduce_sum %x {axes = [0, 0]} : tensor<4x?xf32> -> tensor<?xf32>", "repeat an axis"),
    ("%0 = tensor.reduce_max %x {axes = [0]} : tensor<4x?xf32> -> tensor<?x1xf32>",
     "result type tensor<?x1xf32> does not match the expected tensor<?xf32>"),
    ("%0 = tensor.add %x, %i : (tensor<4x?xf32>, i32) -> tensor<4x?xf32>",
     "operand dtypes differ (f32, i32); insert a cast"),
    ("%0 = tensor.add %x, %y : (tensor<4x?xf32>, tensor<3x1xf32>) -> tensor<4x?xf32>",
     "do not broadcast"),
    ("%0 = tensor.matmul %y, %x : (tensor<3x1xf32>, tensor<4x?xf32>) -> tensor<3x?xf32>",
     "inner extents 1 and 4 differ"),
    ("%0 = tensor.transpose %x {perm = [0, 0]} : tensor<4x?xf32>", "is not a permutation"),
    ("%0 = arith.cmpf foo, %s, %s : f32", "attribute 'predicate' must be one of"),
    ("%0 = arith.cmpi slt, %s, %s : f32", "compares integer, i1 or index operands"),
    ("%0 = arith.exp %i : i32", "does not accept i32 operands"),
    ("%0 = arith.add %x, %x : tensor<4x?xf32>", "takes scalars; use tensor.add"),
    ("%0 = tensor.add %s, %s : f32", "needs a tensor operand; use arith.add"),
    ("%0 = arith.constant 300 : i8", "out of range for i8"),
    ("%0 = tensor.conv2d %x, %x {stride = [1, 1], padding = [0, 0]} : tensor<4x?xf32>",
     "takes an NCHW input and an OIHW weight"),
    ('%0 = tensor.extract_slice %x, %k {layout = ["x"]} : (tensor<4x?xf32>, i64) -> tensor<?xf32>',
     "attribute 'layout' must be a list"),
    ('%0 = tensor.extract_slice %x {layout = ["i"]} : tensor<4x?xf32> -> tensor<?xf32>',
     "expects 2 operands, got 1"),
    ("%0 = tensor.reshape %x : tensor<4x?xf32> -> tensor<?xf32>",
     "expects 1 index operands for the dynamic extents"),
    ("%0 = tensor.dim %x {axis = 5} : tensor<4x?xf32> -> index", "axis 5 is out of range"),
]


@pytest.mark.parametrize("line,fragment", BAD_OPS)
def test_bad_ops(line: str, fragment: str) -> None:
    text = f"""
func @f(%x: tensor<4x?xf32>, %y: tensor<3x1xf32>, %s: f32, %i: i32, %k: i64) -> f32 {{
^entry:
  {line}
  return %s : f32
}}
"""
    op_name = line.split("=")[1].split()[0]
    message = _expect(text, f"'{op_name}' op", fragment)
    assert f"-->   {line}" in message


def test_builder_made_ir_with_bad_operand_count() -> None:
    func = FuncOp("f", [F32], [F32])
    b = Builder(func.entry)
    v = b.value("arith.add", [func.args[0]], F32)
    b.ret([v])
    with pytest.raises(WiaIRError, match="'arith.add' op expects 2 operands, got 1"):
        verify(func)


def test_cond_br_needs_i1() -> None:
    t = TensorType(DType.F32, (4,))
    func = FuncOp("f", [t, I1], [])
    b = Builder(func.entry)
    exit_block = b.new_block(func, name="exit")
    b.cond_br(func.args[0], exit_block, [], exit_block, [])
    Builder(exit_block).ret()
    with pytest.raises(WiaIRError, match="condition must be i1"):
        verify(func)


PARSE_ERRORS = [
    ("func @f() {\n^entry:\n  %0 = tensor.nope : f32\n}", "<ir>:3:8: error: unknown op 'tensor.nope'"),
    ("func @f() -> f32 {\n^entry:\n  return %z : f32\n}", "<ir>:3:10: error: use of undefined value %z"),
    ("func @f() {\n^entry:\n  br ^nowhere\n}", "reference to undefined block ^nowhere"),
    ("func @f(%a: f32) -> f32 {\n^entry:\n  %a = arith.neg %a : f32\n  return %a : f32\n}",
     "redefinition of %a"),
    ("func @f(%a: f32) -> f32 {\n^entry:\n  %0 = arith.neg %a : i32\n  return %0 : i32\n}",
     "%a has type f32 but is used as i32"),
    ("func @f(%a: tensor<xf32>) {\n^entry:\n  return\n}", "<ir>:1:13: error: bad tensor type"),
    ("func @f() {\n^entry:\n  return\n", "expected '}' at the end of the function"),
    ("func @f() {\n^entry:\n  return ~\n}", "<ir>:3:10: error: unexpected character '~'"),
    ("func @f(%a: f32) -> f32 {\n^entry:\n  %0 = arith.add %a, %a : (f32) -> f32\n  return %0 : f32\n}",
     "has 2 operands and 1 results but its type lists 1 and 1"),
]


@pytest.mark.parametrize("text,fragment", PARSE_ERRORS)
def test_parse_errors(text: str, fragment: str) -> None:
    with pytest.raises(WiaIRError) as info:
        parse_module(text)
    assert fragment in str(info.value)
