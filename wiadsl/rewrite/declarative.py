"""Declarative rewrite patterns in text (the seed's ``pattern Name { match: ...
rewrite: ... }``), parsed with Lark; the grammar is ``patterns/pattern.lark``.

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

from lark import Lark, Transformer
from lark.exceptions import LarkError, VisitError

from ..diagnostics import WiaUsageError
from ..ir.core import Operation, OpResult, Value
from ..ir.ops import OPS, create_op, op_class
from ..ir.types import ScalarType
from .pattern import PatternRewriter, RewritePattern

_DIR = pathlib.Path(__file__).parent / "patterns"


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


class _Build(Transformer):
    def values(self, items):
        return tuple(str(v)[1:] for v in items)

    def opname(self, items):
        return ".".join(map(str, items))

    def stmt(self, items):
        return Stmt(str(items[0])[1:], items[1], items[2] or ())

    def stmts(self, items):
        return list(items)

    def rewrite_op(self, items):
        return Stmt(str(items[0])[1:], items[1], items[2] or ())

    def rewrite_forward(self, items):
        return Stmt(str(items[0])[1:], "", (str(items[1])[1:],))

    def pattern(self, items):
        return DeclarativePattern(str(items[0]), items[1], items[2])

    def start(self, items):
        return list(items)


@functools.cache
def _parser() -> Lark:
    # cache=True: Lark keys a cache file on the grammar and options, so a process
    # after the first skips building the grammar and its tables (~50 ms of every
    # cold compile, where the built-in patterns are parsed once per process)
    return Lark((_DIR / "pattern.lark").read_text(), parser="lalr", cache=True)


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
    try:
        tree = _parser().parse(text)
    except LarkError as e:
        raise WiaUsageError(f"{filename}: cannot parse patterns: {e}") from None
    try:
        return _Build().transform(tree)
    except VisitError as e:  # an error of ours inside a transformer callback
        raise e.orig_exc from None


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
    out: list[DeclarativePattern] = []
    for f in sorted(_DIR.glob("*.pat")):
        out += parse_patterns(f.read_text(), str(f))
    return tuple(out)


_ = create_op
