"""Declarative rewrite patterns in text (the seed's ``pattern Name { match: ...
rewrite: ... }``), parsed by pattern_text.py (the built-in patterns come parsed,
from the generated patterns_data.py).

What the sides can name:
- ``match``: statements ``%v = op(%a, ...)`` where ``op`` is a registered op name,
  short (``add`` = ``tensor.add``) or full (``arith.add``). The last statement is
  the root. An operand named by an earlier statement must be that statement's
  result, read by nothing else (a fused intermediate must not be needed
  elsewhere); other operand names bind any value, the same name the same value.
- ``rewrite`` (one statement, defining the root's name):
  ``%o = %x`` forwards a bound value; ``%o = op(%a, ...)`` creates that op with the
  root's result type; ``%o = fused_<name>(%args)`` creates a fused op whose body is
  the matched elementwise ops (a leading ``conv2d``/``matmul`` becomes the product
  of ``fused_conv2d``/``fused_matmul``), ``kernel = "<name>_fused"``; ``%args``
  are the fused op's operands and must cover every matched leaf. A product
  rewrite applies only when every epilogue operand provably broadcasts into the
  product (``passes.extents``): dynamic extents are never assumed equal.
Unknown op names and malformed rewrites are ``WiaUsageError`` at load time.
"""

from __future__ import annotations

import functools
import pathlib
from dataclasses import dataclass
from typing import cast

from ..diagnostics import WiaUsageError
from ..generated import made_from
from ..ir.core import Operation, OpResult, Value
from ..ir.ops import OPS, op_class
from ..ir.types import ScalarType
from .pattern import PatternRewriter, RewritePattern
from .pattern_text import PlainPattern, builtin_plain, builtin_sources, plain_patterns


@dataclass(frozen=True)
class Stmt:
    result: str
    op: str
    args: tuple[str, ...]


def _full_name(name: str, where: str) -> str:
    if name.startswith("fused_"):
        return name
    full = name if "." in name else f"tensor.{name}"
    if full not in OPS:
        raise WiaUsageError(f"pattern {where}: unknown op '{name}'")
    return full


class DeclarativePattern(RewritePattern):
    """One text pattern; ``root`` is its last match statement's op."""

    def __init__(self, name: str, match: list[Stmt], rewrite: Stmt):
        self.name = name
        self.match = [Stmt(s.result, _full_name(s.op, name), s.args) for s in match]
        self.by_result = {s.result: s for s in self.match}
        if rewrite.result != self.match[-1].result:
            raise WiaUsageError(f"pattern {name}: rewrite must define %{self.match[-1].result}")
        if rewrite.op and not rewrite.op.startswith("fused_"):
            rewrite = Stmt(rewrite.result, _full_name(rewrite.op, name), rewrite.args)
        self.rewrite = rewrite
        defined = set(self.by_result)
        for a in rewrite.args:
            if a in defined:
                raise WiaUsageError(f"pattern {name}: rewrite reads matched intermediate %{a}")
        self.root = self.match[-1].op  # type: ignore[misc]

    @property
    def label(self) -> str:
        return self.name

    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> bool:
        binds: dict[str, Value] = {}
        ops: dict[str, Operation] = {}
        if not self._match(self.match[-1], op, binds, ops):
            return False
        r = self.rewrite
        if not r.op:
            new = binds[r.args[0]]
            if new.type != op.result.type:
                return False
            rw.replace_op(op, [new])
        elif r.op.startswith("fused_"):
            new_op = self._fused(op, binds, ops)
            if new_op is None:
                return False
            for region in new_op.regions:
                for inner in region.blocks[0].ops:
                    inner.loc = inner.loc if inner.loc is not None else op.loc
            new_op.loc = ops[self.match[0].result].loc
            rw.insert_before(op, new_op)
            rw.replace_op(op, [new_op.result])
        else:
            new_op = rw.create_before(op, r.op, [binds[a] for a in r.args], [op.result.type])
            rw.replace_op(op, [new_op.result])
        for stmt in reversed(self.match[:-1]):
            m = ops[stmt.result]
            if m.parent is not None and not any(x.uses for x in m.results):
                rw.erase_op(m)
        return True

    def _match(self, stmt: Stmt, op: Operation, binds: dict[str, Value],
               ops: dict[str, Operation]) -> bool:
        if op.name != stmt.op or len(op.operands) != len(stmt.args) or len(op.results) != 1:
            return False
        ops[stmt.result] = op
        for name, v in zip(stmt.args, op.operands, strict=True):
            inner = self.by_result.get(name)
            if inner is not None:
                if not isinstance(v, OpResult) or len(v.uses) != 1 or v.op.parent is not op.parent:
                    return False
                if not self._match(inner, v.op, binds, ops):
                    return False
            elif name in binds and binds[name] is not v:
                return False
            else:
                binds[name] = v
        return True

    def _fused(self, root: Operation, binds: dict[str, Value], ops: dict[str, Operation]):
        from ..passes.fusion_body import is_fusible, make_body
        matched = [ops[s.result] for s in self.match]
        args = [binds[a] for a in self.rewrite.args]
        kernel = self.rewrite.op[len("fused_"):] + "_fused"
        first = matched[0]
        if first.name in ("tensor.conv2d", "tensor.matmul"):
            body, prod = matched[1:], first
            if not all(is_fusible(o) for o in body) or args[:2] != list(prod.operands):
                return None
            inputs = args[2:]
            from ..passes.extents import Extents
            ext = Extents()
            target = ext.of(prod.result)
            if not all(ext.fits(v, target) for v in inputs):
                return None  # an epilogue operand might grow the product at run time
            try:
                region, _, _ = make_body(inputs, body, [root.result],
                                         [ScalarType(prod.result.type.dtype)], [prod.result])  # type: ignore[union-attr]
            except (KeyError, ValueError):
                return None
            attrs = {**prod.attributes, "kernel": kernel}
            return op_class("tensor.fused_" + prod.name.split(".")[1])(
                args, [root.result.type], attrs, (), [region], [root.result.name_hint])
        if not all(is_fusible(o) for o in matched):
            return None
        try:
            region, _, _ = make_body(args, matched, [root.result])
        except (KeyError, ValueError):
            return None
        return op_class("tensor.fused_elementwise")(args, [root.result.type], {"kernel": kernel},
                                                    (), [region], [root.result.name_hint])


def parse_patterns(text: str, filename: str = "<patterns>") -> list[DeclarativePattern]:
    return _patterns(plain_patterns(text, filename))


def _patterns(plain: list[PlainPattern]) -> list[DeclarativePattern]:
    return [DeclarativePattern(name, [Stmt(*m) for m in match], Stmt(*rewrite))
            for name, match, rewrite in plain]


def load_patterns(path_or_text: str | pathlib.Path) -> list[DeclarativePattern]:
    """Patterns from a ``.pat`` file path, or from pattern text itself."""
    text = str(path_or_text)
    if "pattern" in text and "{" in text:
        return parse_patterns(text)
    p = pathlib.Path(text)
    if not p.is_file():
        raise WiaUsageError(f"pattern file {text} not found")
    return parse_patterns(p.read_text(), str(p))


@functools.cache
def builtin_patterns() -> tuple[DeclarativePattern, ...]:
    """The shipped patterns (``patterns/*.pat``), which every compile's ``patterns``
    pass applies: from patterns_data.py (pattern_text.py), or parsed with Lark when
    it is out of date."""
    from . import patterns_data

    if patterns_data.MADE_FROM == made_from(builtin_sources()):
        return tuple(_patterns(cast(list[PlainPattern], patterns_data.PATTERNS)))
    return tuple(_patterns(builtin_plain()))
