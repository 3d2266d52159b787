"""A tree-less LALR driver over Lark's parse table: reductions build AST nodes directly.

The table is Lark's, kept as plain data (grammar_tables.py). Lark's own LALR
parser first builds a parse tree (a ``Tree`` per rule, positions propagated into
each) that the AST builder then walks again; for a large file that was most of the
parse. Here each reduction calls the builder method of its
rule (``rule.alias`` or the rule's name) at once, with the rule's children
shaped exactly as Lark shapes a tree's children, and the rule's extent.

Invariants:
- Children: terminals are kept unless Lark filters them out; a ``_rule`` child
  (and Lark's ``__x_star`` helpers) is spliced into its parent; an absent
  ``[x]`` is a ``None`` placeholder (``maybe_placeholders``); a ``?rule`` with a
  single child passes that child's value up unchanged.
- Extents: next to each value the stack holds its ``(line, column, end_line,
  end_column)``, or None for a value that covers no text. A rule's extent runs
  from the first child's start to the last child's end, skipping None, which is
  what Lark's ``propagate_positions`` gives a tree's meta. A ``(e)`` returns the
  node of ``e`` (with its own span) but keeps the extent of the parentheses, so
  an enclosing node's span includes them.
- ``feed`` leaves the stacks as Lark's parser would (reductions done before an
  unexpected token stay done), so recovery can unwind them the same way.
- A run of pass-through reductions (``expr -> or_expr -> ... -> atom`` above each
  operand) changes only the top state, and which one it ends in depends only on
  the state below, the top state and the lookahead: it is looked up once per such
  triple (``_Table.unit_chains``), then taken in one step.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ..records import field, record
from .grammar_tables import Token, tables

Extent = tuple[int, int, int, int]
#: A builder method: (extent, children) -> value.
Build = Callable[[Extent | None, list[Any]], Any]


@record(frozen=True)
class _RulePlan:
    """How one grammar rule reduces: what it pops, where it goes, how it shapes children."""

    size: int  # symbols popped
    origin: str  # the nonterminal the goto follows
    callback: str | None  # builder method name; None: a `_rule` (its children are spliced)
    expand1: bool  # a `?rule`: a single child passes up unchanged
    kept: tuple[tuple[int, bool, int], ...]  # (child index, splice it, Nones before it)
    nones_after: int  # placeholders after the last kept child
    plain: bool  # kept == every child, unspliced, no placeholders

    @property
    def passes_through(self) -> bool:
        """``?rule: x``: the value and extent of ``x`` stay as they are on the stack."""
        return self.expand1 and self.plain and self.size == 1


@record(frozen=True)
class _Table:
    """Lark's LALR table re-encoded: ``actions[state][symbol]`` is a state to shift to
    (or go to, for a nonterminal) when ``>= 0``, else ``-1 - i`` reduces ``rules[i]``."""

    actions: dict[int, dict[str, int]]
    rules: tuple[_RulePlan, ...]
    start: int
    end: int
    #: (state below, top state, lookahead) -> the top state after the pass-through
    #: reductions the lookahead triggers there; filled as the parses meet them.
    unit_chains: dict[tuple[int, int, str], int] = field(default_factory=dict)

    def unit_chain(self, below: int, top: int, kind: str) -> int:
        """The top state once ``kind`` no longer reduces a pass-through rule."""
        key = (below, top, kind)
        target = self.unit_chains.get(key)
        if target is None:
            target = top
            while True:
                action = self.actions[target].get(kind)
                if action is None or action >= 0 or not self.rules[-1 - action].passes_through:
                    break
                target = self.actions[below][self.rules[-1 - action].origin]
            self.unit_chains[key] = target
        return target


@functools.cache
def _table() -> _Table:
    t = tables()
    return _Table(t.actions, tuple(_RulePlan(*plan) for plan in t.rules), t.start, t.end)


def _shaper(plan: _RulePlan) -> Callable[[list[Any]], list[Any]] | None:
    """The function from popped values to the rule's children (None: they are the same)."""
    if plan.plain:
        return None
    kept, nones_after = plan.kept, plan.nones_after

    def shape(values: list[Any]) -> list[Any]:
        out: list[Any] = []
        for i, splice, nones in kept:
            if nones:
                out += [None] * nones
            if splice:
                if out:
                    out += values[i]
                else:  # reuse the list: a left-recursive `x*` grows in place (linear)
                    out = values[i]
            else:
                out.append(values[i])
        if nones_after:
            out += [None] * nones_after
        return out

    return shape


def _reducer(plan: _RulePlan, builder: object) -> Build | None:
    """(extent, popped values) -> the rule's value; None for a pass-through rule."""
    if plan.passes_through:
        return None
    shape = _shaper(plan)
    if plan.callback is None:  # a `_rule`: its children list, spliced by the parent
        if shape is None:
            return lambda extent, values: values
        return lambda extent, values: shape(values)
    method = getattr(builder, plan.callback)
    if plan.expand1:
        def build(extent: Extent | None, values: list[Any]) -> Any:
            children = values if shape is None else shape(values)
            return children[0] if len(children) == 1 else method(extent, children)
        return build
    if shape is None:
        return method  # type: ignore[no-any-return]
    return lambda extent, values: method(extent, shape(values))


def _span_of(extents: list[Extent | None]) -> Extent | None:
    """From the first known start to the last known end (``propagate_positions``)."""
    for first in extents:
        if first is not None:
            break
    else:
        return None
    for last in reversed(extents):
        if last is not None:
            break
    if first is last:
        return first
    assert last is not None
    return (first[0], first[1], last[2], last[3])


class LalrParser:
    """The parser's stacks and the token-by-token ``feed``; ``result`` after ``$END``."""

    def __init__(self, builder: object):
        table = _table()
        self._table = table
        self._actions = table.actions
        self._end = table.end
        self._plans = table.rules
        self._builds = [_reducer(plan, builder) for plan in table.rules]
        self.states: list[int] = [table.start]
        self.values: list[Any] = []
        self.extents: list[Extent | None] = []

    def feed(self, token: Token) -> bool:
        """Shift ``token`` after the reductions it triggers; False when it is unexpected.

        For ``$END`` it returns True once the start rule is reduced (see ``result``).
        """
        actions, states, values, extents = self._actions, self.states, self.values, self.extents
        kind = token.type
        while True:
            action = actions[states[-1]].get(kind)
            if action is None:
                return False
            if action >= 0:
                states.append(action)
                values.append(token)
                extents.append((token.line, token.column, token.end_line,  # type: ignore[arg-type]
                                token.end_column))
                return True
            build = self._builds[-1 - action]
            if build is None:  # pass-through rules: skip the whole run
                states[-1] = self._table.unit_chain(states[-2], states[-1], kind)
                continue
            plan = self._plans[-1 - action]
            size = plan.size
            if size:
                popped, where = values[-size:], extents[-size:]
                del states[-size:], values[-size:], extents[-size:]
                extent = _span_of(where)
            else:
                popped, extent = [], None
            values.append(build(extent, popped))
            extents.append(extent)
            states.append(actions[states[-1]][plan.origin])
            if states[-1] == self._end:
                return True

    @property
    def result(self) -> Any:
        """The start rule's value, once ``feed`` of ``$END`` returned True."""
        return self.values[-1]

    def accepts(self) -> set[str]:
        """The terminals that would be shifted (or end the parse) from here.

        Unlike the table row, which merges lookaheads of similar states, this tries
        each candidate's reductions on a copy of the state stack.
        """
        return {kind for kind in self._actions[self.states[-1]]
                if kind.isupper() and self._would_accept(kind)}

    def _would_accept(self, kind: str) -> bool:
        states = list(self.states)
        while True:
            action = self._actions[states[-1]].get(kind)
            if action is None:
                return False
            if action >= 0:
                return True
            plan = self._plans[-1 - action]
            if plan.size:
                del states[-plan.size:]
            states.append(self._actions[states[-1]][plan.origin])
            if states[-1] == self._end:
                return True

    def unwind(self, sync: frozenset[str]) -> tuple[int, int] | None:
        """Pop to the nearest state whose row has a terminal in ``sync``.

        Any prefix of a valid LR stack is itself valid, so parsing can go on from
        there. Returns where the popped values start (None if they cover no text).
        """
        start: tuple[int, int] | None = None
        while len(self.states) > 1 and not self._actions[self.states[-1]].keys() & sync:
            self.states.pop()
            self.values.pop()
            extent = self.extents.pop()
            if extent is not None:
                start = extent[:2]
        return start
