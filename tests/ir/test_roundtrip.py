"""print -> parse -> print is the identity, for every op kind."""

from __future__ import annotations

import pytest
from ir_corpus import CASES

from wiadsl.ir import OPS, parse_module, print_module, verify
from wiadsl.ir.core import walk_nested


@pytest.mark.parametrize("name", sorted(CASES))
def test_round_trip(name: str) -> None:
    text = CASES[name]
    module = parse_module(text)
    verify(module)
    printed = print_module(module)
    assert printed == text
    assert print_module(parse_module(printed)) == printed


def test_every_op_kind_is_covered() -> None:
    seen = {op.name for text in CASES.values() for f in parse_module(text)
            for op in walk_nested(f.blocks)}
    assert set(OPS) - seen == set()


def test_name_hints_kept_when_unique_else_numbered() -> None:
    from wiadsl.dtypes import DType
    from wiadsl.ir import Builder, FuncOp, ScalarType
    f32 = ScalarType(DType.F32)
    func = FuncOp("f", [f32], [f32], ["h"])
    b = Builder(func.entry)
    h1 = b.value("arith.neg", [func.args[0]], f32, name="h")
    h2 = b.value("arith.neg", [h1], f32, name="h")
    h3 = b.value("arith.neg", [h2], f32, name="9bad")
    b.ret([h3])
    text = print_module(parse_module(str(func)))
    assert "%0 = arith.neg %h : f32" in text
    assert "%1 = arith.neg %0 : f32" in text
    assert "%2 = arith.neg %1 : f32" in text
