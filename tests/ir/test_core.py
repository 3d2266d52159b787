"""Use lists, RAUW, erase, successor views, builder placement and fold hooks."""

from __future__ import annotations

import numpy as np
import pytest

from wiadsl.diagnostics import WiaIRError
from wiadsl.dtypes import DType
from wiadsl.ir import OPS, Builder, FuncOp, ModuleOp, Trait, create_op, print_func, verify
from wiadsl.ir.types import F32, I1, TensorType


def _func() -> tuple[FuncOp, Builder]:
    func = FuncOp("f", [F32, F32], [F32], ["a", "b"])
    return func, Builder(func.entry)


def test_uses_and_replace_all_uses_with() -> None:
    func, b = _func()
    a, c = func.args
    s = b.value("arith.add", [a, a], F32, name="s")
    ret = b.ret([s])
    assert len(a.uses) == 2 and s.users == [ret]
    a.replace_all_uses_with(c)
    assert not a.uses and len(c.uses) == 2
    verify(func)
    assert "%s = arith.add %b, %b : f32" in print_func(func)


def test_erase_requires_no_uses_and_drops_operand_uses() -> None:
    func, b = _func()
    a = func.args[0]
    neg = b.value("arith.neg", [a], F32)
    ret = b.ret([neg])
    with pytest.raises(WiaIRError, match="still has uses"):
        neg.op.erase()
    ret.set_operand(0, a)
    neg.op.erase()
    assert len(a.uses) == 1 and func.entry.ops == [ret]
    verify(func)


def test_successor_args_are_uses() -> None:
    func = FuncOp("f", [F32, I1], [F32])
    b = Builder(func.entry)
    exit_block = b.new_block(func, [F32], ["r"], "exit")
    br = b.cond_br(func.args[1], exit_block, [func.args[0]], exit_block, [func.args[0]])
    Builder(exit_block).ret([exit_block.args[0]])
    assert [s.block for s in br.successors] == [exit_block, exit_block]
    assert len(func.args[0].uses) == 2
    br.set_successor(1, exit_block, [func.args[0]])
    assert len(func.args[0].uses) == 2
    assert exit_block.predecessors == [func.entry]
    verify(func)


def test_builder_insert_before_and_after() -> None:
    func, b = _func()
    ret = b.ret([func.args[0]])
    b.set_insertion_point_before(ret)
    first = b.value("arith.neg", [func.args[0]], F32, name="n")
    b.set_insertion_point_after(first.op)
    second = b.value("arith.abs", [first], F32, name="m")
    assert [op.name for op in func.entry.ops] == ["arith.neg", "arith.abs", "func.return"]
    assert second.op.parent is func.entry


def test_unknown_op_name_is_an_error() -> None:
    with pytest.raises(WiaIRError, match="unknown op 'tensor.frobnicate'"):
        create_op("tensor.frobnicate")


def test_traits() -> None:
    assert OPS["arith.add"].has_trait(Trait.COMMUTATIVE)
    assert not OPS["arith.sub"].has_trait(Trait.COMMUTATIVE)
    assert OPS["tensor.exp"].has_trait(Trait.ELEMENTWISE)
    assert OPS["cf.br"].has_trait(Trait.TERMINATOR)
    assert not OPS["func.call"].has_trait(Trait.PURE)


def test_fold_constants() -> None:
    func = FuncOp("f", [], [F32])
    b = Builder(func.entry)
    two = b.constant(2.0, F32)
    three = b.constant(3, F32)
    s = b.value("arith.mul", [two, three], F32)
    c = b.value("arith.cmpf", [two, three], I1, {"predicate": "olt"})
    assert s.op.fold() == [np.float32(6.0)]
    assert c.op.fold() == [np.True_]
    t = TensorType(DType.F32, (2,))
    k = b.constant([1.0, 2.0], t)
    assert b.value("tensor.add", [k, two], t).op.fold()[0].tolist() == [3.0, 4.0]
    assert b.value("arith.neg", [func.entry.ops[0].result], F32).op.fold() is not None
    x = FuncOp("g", [F32], [F32]).args[0]
    assert create_op("arith.neg", [x], [F32]).fold() is None


def test_module_lookup() -> None:
    f, _ = _func()
    module = ModuleOp([f])
    assert module["f"] is f and "f" in module and f.parent is module
    with pytest.raises(WiaIRError, match="duplicate function @f"):
        module.add(FuncOp("f", [], []))
    with pytest.raises(WiaIRError, match="no function @g"):
        module["g"]
