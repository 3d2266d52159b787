"""``copy_module`` copies op by op: the copy prints as the original, verifies, keeps
source locations, and shares nothing the passes mutate."""

from __future__ import annotations

import numpy as np
import pytest
from ir_corpus import CASES

from wiadsl.diagnostics import Span
from wiadsl.ir import parse_module, print_module, verify
from wiadsl.ir.copying import copy_module
from wiadsl.ir.core import walk_nested


def _ops(module):
    return [op for f in module.funcs for op in walk_nested(f.blocks)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_copy_prints_as_the_original_and_verifies(name: str) -> None:
    module = parse_module(CASES[name])
    copy = copy_module(module)
    verify(copy)
    assert print_module(copy) == print_module(module)
    for old, new in zip(_ops(module), _ops(copy), strict=True):
        assert type(new) is type(old) and new is not old
        assert not set(map(id, new.all_operands)) & set(map(id, old.all_operands))


def test_the_copy_shares_nothing_a_pass_mutates() -> None:
    module = parse_module(CASES[sorted(CASES)[0]])
    module.funcs[0].attributes["note"] = [1, {"k": [2]}, np.arange(3)]
    op = _ops(module)[0]
    op.attributes["list"] = [4, 5]
    op.loc = Span("k.wia", 3, 7, 3, 9)
    copy = copy_module(module)
    new_op = _ops(copy)[0]
    assert new_op.loc is op.loc  # spans are immutable: shared
    new_op.attributes["list"].append(6)
    copy.funcs[0].attributes["note"][1]["k"].append(3)
    copy.funcs[0].attributes["note"][2][0] = 9
    assert op.attributes["list"] == [4, 5]
    assert module.funcs[0].attributes["note"][1] == {"k": [2]}
    assert module.funcs[0].attributes["note"][2][0] == 0
    before = {id(v): len(v.uses) for o in _ops(module) for v in o.all_operands}
    copy_module(module)
    assert before == {id(v): len(v.uses) for o in _ops(module) for v in o.all_operands}


BACKWARD_BLOCKS = """\
func @f(%x: f32) -> f32 {
^entry:
  br ^def
^use(%a: f32):
  %s = arith.add %a, %y : f32
  return %s : f32
^def:
  %y = arith.mul %x, %x : f32
  br ^use(%y : f32)
}
"""


def test_an_operand_defined_later_in_block_order_is_mapped() -> None:
    """Dominance, not block order, orders definitions: ``%y`` is defined in a block
    after the one that reads it."""
    module = parse_module(BACKWARD_BLOCKS)
    verify(module)
    copy = copy_module(module)
    verify(copy)
    assert print_module(copy) == print_module(module) == BACKWARD_BLOCKS
    add = next(op for op in _ops(copy) if op.name == "arith.add")
    mul = next(op for op in _ops(copy) if op.name == "arith.mul")
    assert add.operands[1] is mul.result
