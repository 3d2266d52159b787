"""``tile{size=64,interchange=false}``: strip-mine innermost counted loops; with
``interchange=true``, tile perfect 2-deep nests with both tile loops outside
(cache tiling).

Strip-mining (every innermost loop whose trip count is not statically <= size):

    for iv in range(lo, hi, s): body            ->
    for t in range(lo, hi, s * size):           // the tile loop
        for iv in range(t, min(t + s * size, hi), s): body

Nest tiling (``interchange=true``), for ``for i: [index ops]; for j: body; [index ops]``:

    for ti in range(lo_i, hi_i, s_i * size):
        for tj in range(lo_j, hi_j, s_j * size):
            for i in range(ti, min(ti + s_i * size, hi_i), s_i):
                [index ops]; for j in range(tj, min(tj + s_j * size, hi_j), s_j): body

Invariants:
- Strip-mining keeps the iteration order, so iteration values simply thread
  through the tile loop: results are bit-identical.
- Nest tiling reorders iterations, so it applies only when it is legal: the outer
  loop is marked ``parallel`` (its iterations touch disjoint memory, so only the
  order of ``j`` for one ``i`` matters, and tiling keeps that), neither loop
  carries iteration values, the nest is perfect (the outer body holds only the
  inner loop plus pure, non-trapping ``arith`` ops and ``tensor.dim``, which may run
  once per tile instead of once per ``i``), and the inner bounds do not depend
  on ``i`` (constants defined in the outer body are re-created outside).
- The ``parallel`` mark ends up on the outermost tile loop only, and only when
  the original outermost loop had it; the point loops lose it.
- Loops the pass created are not tiled again.
"""

from __future__ import annotations

from typing import ClassVar

from ..diagnostics import WiaUsageError
from ..ir.core import Block, Operation, Value
from ..ir.module import FuncOp, ModuleOp
from ..passes.base import Pass, PassContext
from ..records import record
from .counted import CountedLoop, find_counted_loops
from .loop_edit import Emit, entry_emit, escapes, give_exits_iteration_values, invariant_copy


def _point_bound(e: Emit, t: Value, span: int, hi: Value) -> Value:
    """``min(t + span, hi)``: where the tile starting at ``t`` ends."""
    return e.arith("min", e.add_const(t, span), hi)


def _bound(loop: CountedLoop, stop: Value) -> None:
    """Make ``loop`` a point loop: it stops at ``stop`` and is no longer ``parallel``."""
    loop.header.ops[0].set_operand(1, stop)
    loop.branch.attributes.pop("parallel", None)


def _worth_tiling(loop: CountedLoop, size: int) -> bool:
    trip = loop.trip_count()
    return trip is None or trip > size


def strip_mine(func: FuncOp, loop: CountedLoop, size: int) -> list[Block]:
    """Strip-mine ``loop`` into tiles of ``size`` iterations; the tile loop's header
    (none when the loop does not qualify)."""
    if not _worth_tiling(loop, size) or escapes(loop):
        return []
    lo, hi, span, inits = loop.lo, loop.hi, loop.step * size, loop.inits
    e = entry_emit(func, loop)
    tile = e.new_block([lo.type, *(v.type for v in inits)], "tile")
    tile_body, tile_next = e.new_block((), "tile_body"), e.new_block([v.type for v in inits], "tile_next")
    e.br(tile, [lo, *inits])
    e.move_to(tile)
    t, its = tile.args[0], list(tile.args[1:])
    e.cond_br(e.slt(t, hi), tile_body, [], loop.exit, its, loop.parallel)
    e.move_to(tile_body)
    _bound(loop, _point_bound(e, t, span, hi))
    e.br(loop.header, [t, *its])
    loop.branch.set_successor(1, tile_next, loop.iters)
    e.move_to(tile_next)
    e.br(tile, [_advance(e, t, span), *tile_next.args])
    return [tile]


def _advance(e: Emit, t: Value, span: int) -> Value:
    # always an add (never folded away): the tile loop's step must be visible
    return e.create("arith.add", [t, e.const(span, t.type)], [t.type]).result


def _index_only(ops: list[Operation]) -> bool:
    """Pure, non-trapping index arithmetic: safe to run once per tile instead of once."""
    return all((op.name.startswith("arith.") or op.name == "tensor.dim") and not op.may_trap()
               for op in ops)


def perfect_nest(outer: CountedLoop) -> CountedLoop | None:
    """The inner loop when ``outer`` is a legal nest to tile and interchange (see the
    module docstring), else None."""
    if len(outer.children) != 1 or not outer.parallel or outer.iters:
        return None
    inner = outer.children[0]
    if not inner.is_innermost or inner.iters or inner.preheader is not outer.body_entry \
            or inner.exit is not outer.latch or len(outer.blocks) != len(inner.blocks) + 3:
        return None
    if not _index_only(outer.body_entry.ops[:-1]) or not _index_only(outer.latch.ops[:-1]):
        return None
    if escapes(outer) or escapes(inner):
        return None
    return inner


def tile_nest(func: FuncOp, outer: CountedLoop, inner: CountedLoop, size: int) -> list[Block]:
    """Tile the perfect nest ``outer``/``inner`` with both tile loops outside; the tile
    loops' headers (none when the nest does not qualify)."""
    if not (_worth_tiling(outer, size) or _worth_tiling(inner, size)):
        return []
    e = entry_emit(func, outer)
    lo_j, hi_j = invariant_copy(e, outer, inner.lo), invariant_copy(e, outer, inner.hi)
    if lo_j is None or hi_j is None:  # the inner bounds vary with i: not rectangular
        e.br(outer.header, [outer.lo])
        return []
    span_i, span_j = outer.step * size, inner.step * size
    ti_head, ti_body = e.new_block([outer.lo.type], "tile_i"), e.new_block((), "tile_i_body")
    tj_head, tj_body = e.new_block([lo_j.type], "tile_j"), e.new_block((), "tile_j_body")
    tj_next, ti_next = e.new_block((), "tile_j_next"), e.new_block((), "tile_i_next")
    e.br(ti_head, [outer.lo])
    e.move_to(ti_head)
    ti = ti_head.args[0]
    e.cond_br(e.slt(ti, outer.hi), ti_body, [], outer.exit, [], outer.parallel)
    e.move_to(ti_body)
    stop_i = _point_bound(e, ti, span_i, outer.hi)
    e.br(tj_head, [lo_j])
    e.move_to(tj_head)
    tj = tj_head.args[0]
    e.cond_br(e.slt(tj, hi_j), tj_body, [], ti_next, [])
    e.move_to(tj_body)
    stop_j = _point_bound(e, tj, span_j, hi_j)
    e.br(outer.header, [ti])  # the point loop over i runs once per j tile
    _bound(outer, stop_i)
    outer.branch.set_successor(1, tj_next, [])
    enter_j = inner.preheader.terminator
    assert enter_j is not None
    enter_j.set_successor(0, inner.header, [tj])
    _bound(inner, stop_j)
    e.move_to(tj_next)
    e.br(tj_head, [_advance(e, tj, span_j)])
    e.move_to(ti_next)
    e.br(ti_head, [_advance(e, ti, span_i)])
    return [ti_head, tj_head]


def tile_func(func: FuncOp, size: int, interchange: bool) -> int:
    """Tile every qualifying loop (nest) of ``func``; how many."""
    give_exits_iteration_values(func)
    seen: dict[int, Block] = {}  # headers handled (kept alive so ids stay unique)
    count = 0
    while True:
        loops = [lp for lp in find_counted_loops(func) if id(lp.header) not in seen]
        nests = [(lp, inner) for lp in loops if interchange and (inner := perfect_nest(lp)) is not None]
        if nests:
            outer, inner = nests[0]
            made = tile_nest(func, outer, inner, size)
            handled = [outer.header, inner.header]
        else:
            todo = [lp for lp in loops if lp.is_innermost]
            if not todo:
                return count
            made = strip_mine(func, todo[0], size)
            handled = [todo[0].header]
        count += bool(made)
        # neither the loops handled nor the new tile loops are tiled again
        seen.update((id(b), b) for b in [*handled, *made])


@record(frozen=True)
class Tile(Pass):
    """Strip-mine innermost loops into tiles of ``size`` iterations; ``interchange``:
    tile perfect parallel 2-deep nests with both tile loops outside (tile.py)."""

    name: ClassVar[str] = "tile"
    size: int = 64
    interchange: bool = False

    def __post_init__(self) -> None:
        if self.size < 1:
            raise WiaUsageError(f"option 'size' of pass 'tile' must be at least 1, got {self.size}")

    def run(self, module: ModuleOp, ctx: PassContext) -> None:
        for func in list(module):
            ctx.count("loops tiled", tile_func(func, self.size, self.interchange))


__all__ = ["Tile", "perfect_nest", "strip_mine", "tile_func", "tile_nest"]
