"""``find_counted_loops``: what it recognizes (LoopBuilder's loops, the frontend's
``for`` once its exit takes the iteration values) and what it describes."""

from __future__ import annotations

import numpy as np

from wiadsl.ir import print_module, run_func
from wiadsl.loops.counted import find_counted_loops
from wiadsl.loops.loop_edit import Emit, give_exits_iteration_values, main_bound

from .loop_cases import DOT_SOURCE, ROWSUM, SUM, TRANSPOSE, loop_ir, tensor_ir


def test_a_reduction_loop_is_described():
    (loop,) = find_counted_loops(loop_ir(SUM)["f"])
    assert loop.step == 1 and loop.trip_count() is None and not loop.parallel
    assert loop.is_innermost and loop.body_entry is loop.latch
    assert [str(v.type) for v in loop.iters] == ["f32"] and len(loop.nexts) == 1
    assert loop.nexts[0].op.name == "arith.add" and loop.inits[0].op.attributes["value"] == 0.0
    assert list(loop.exit.args) and len(loop.blocks) == 2


def test_static_trip_counts():
    (loop,) = find_counted_loops(loop_ir(SUM, [(13,)])["f"])
    assert loop.trip_count() == 13


def test_nests_are_innermost_first_with_links():
    inner, outer = find_counted_loops(loop_ir(TRANSPOSE)["f"])
    assert inner.parent is outer and outer.children == [inner]
    assert outer.parallel and not inner.parallel and outer.contains(inner.header)
    assert not outer.is_innermost and inner.is_innermost
    rows = find_counted_loops(loop_ir(ROWSUM)["f"])
    assert [len(lp.iters) for lp in rows] == [1, 0]


def test_frontend_loops_are_recognized_once_their_exit_takes_the_values():
    module = loop_ir(DOT_SOURCE)
    func = module["f"]
    assert find_counted_loops(func) == []  # the exit reads the header's %acc directly
    a = np.arange(5, dtype=np.float32)
    want = run_func(module, "f", [a, a])[0]
    assert give_exits_iteration_values(func) == 1
    (loop,) = find_counted_loops(func)
    assert str(loop.iv.type) == "i64" and loop.step == 1 and len(loop.iters) == 1
    assert "^exit(%" in print_module(module)
    assert run_func(module, "f", [a, a])[0] == want
    assert give_exits_iteration_values(func) == 0  # idempotent


def test_while_loops_are_not_counted():
    src = """
kernel f(input x: f32[N], output y: f32[N]) {
    h = x;
    while reduce_max(abs(h)) >= 1.0 { h = h * 0.5; }
    y = h;
}
"""
    module = loop_ir(print_module(tensor_ir(src)))
    func = module["f"]
    give_exits_iteration_values(func)
    headers = {id(lp.header) for lp in find_counted_loops(func)}
    # the reductions' and elementwise loops inside are counted; the while loop is not
    for b in func.blocks:
        t = b.terminator
        if t is not None and t.name == "cf.cond_br" and id(b) not in headers and b.args:
            assert b.ops[0].name != "arith.cmpi" or b.ops[0].attributes.get("predicate") != "slt" \
                or len(b.ops) != 2
    assert headers


def test_main_bound_folds_static_and_covers_steps():
    module = loop_ir(SUM, [(11,)])
    func = module["f"]
    (loop,) = find_counted_loops(func)
    e = Emit(func, loop.preheader, loop.header)
    term = loop.preheader.terminator
    term.detach()
    assert e.const(0, loop.lo.type) is not None
    assert main_bound(e, loop.lo, loop.hi, 1, 4).op.attributes["value"] == 8   # 11 // 4 * 4
    assert main_bound(e, loop.lo, loop.hi, 3, 2).op.attributes["value"] == 12  # 0,3,6,9: two steps of 6
    assert main_bound(e, loop.hi, loop.lo, 1, 4).op.attributes["value"] == 11  # no trips: stays at lo
