"""The abstract syntax tree of WIA DSL: frozen dataclasses, each with a source span.

Invariants:
- ``span`` is excluded from equality, so two parses of the same program compare
  equal whatever the layout (the unparser round-trip relies on this).
- Parentheses leave no node; ``else if`` is an ``If`` as the only statement of
  the ``else`` block; ``x += e`` stays an ``AugAssign`` (the checker and the
  lowering desugar it).
- Dtype names in argument position (``cast(x, f16)``) are plain ``Name`` nodes;
  the checker gives them meaning.
"""

from __future__ import annotations

from typing import Union

from .. import records
from ..diagnostics import Span
from ..records import field, record


def _span() -> Span:
    """A keyword-only span field left out of equality and repr."""
    return field(compare=False, repr=False, kw_only=True)


# ---------------------------------------------------------------- expressions

@record(frozen=True)
class IntLit:
    value: int
    span: Span = _span()


@record(frozen=True)
class FloatLit:
    value: float
    span: Span = _span()


@record(frozen=True)
class BoolLit:
    value: bool
    span: Span = _span()


@record(frozen=True)
class ArrayLit:
    """``[e0, e1, ...]``; nested for higher rank."""

    elements: tuple[Expr, ...]
    span: Span = _span()


@record(frozen=True)
class Name:
    id: str
    span: Span = _span()


@record(frozen=True)
class QualifiedName:
    """``module.name`` used as a value (an imported const)."""

    module: str
    name: str
    span: Span = _span()


@record(frozen=True)
class UnaryOp:
    """``op`` is ``-`` or ``!``."""

    op: str
    operand: Expr
    span: Span = _span()


@record(frozen=True)
class BinOp:
    """``op`` is one of ``|| && == != < <= > >= + - * / % @ **``."""

    op: str
    lhs: Expr
    rhs: Expr
    span: Span = _span()


@record(frozen=True)
class Keyword:
    name: str
    value: Expr
    span: Span = _span()


@record(frozen=True)
class Call:
    """``name(args, kw=...)`` or ``module.name(...)`` (``module`` is None for builtins/funcs)."""

    name: str
    args: tuple[Expr, ...]
    keywords: tuple[Keyword, ...] = ()
    module: str | None = None
    span: Span = _span()


@record(frozen=True)
class Slice:
    """``start:stop:step`` inside an index; each part may be omitted."""

    start: Expr | None
    stop: Expr | None
    step: Expr | None
    span: Span = _span()


IndexItem = Union["Expr", Slice]


@record(frozen=True)
class Index:
    """``base[i, :, 1:3]``."""

    base: Expr
    items: tuple[IndexItem, ...]
    span: Span = _span()


Expr = IntLit | FloatLit | BoolLit | ArrayLit | Name | QualifiedName | UnaryOp | BinOp | Call | Index


# ---------------------------------------------------------------- types

@record(frozen=True)
class ScalarType:
    """``f32``, ``i64``, ``bool``... (``dtype`` is the source spelling)."""

    dtype: str
    span: Span = _span()


@record(frozen=True)
class Dim:
    """One extent in a tensor type: an integer literal or a symbolic name."""

    value: int | str
    span: Span = _span()


@record(frozen=True)
class TensorType:
    """``f32[M, 4]``."""

    dtype: str
    dims: tuple[Dim, ...]
    span: Span = _span()


@record(frozen=True)
class AnyTensorType:
    """``tensor``: dtype and rank fixed at call time."""

    span: Span = _span()


TypeExpr = ScalarType | TensorType | AnyTensorType


# ---------------------------------------------------------------- statements

@record(frozen=True)
class Block:
    stmts: tuple[Stmt, ...]
    span: Span = _span()


@record(frozen=True)
class Assign:
    target: str
    value: Expr
    span: Span = _span()


@record(frozen=True)
class AugAssign:
    """``target op= value`` with ``op`` one of ``+ - * /``."""

    target: str
    op: str
    value: Expr
    span: Span = _span()


@record(frozen=True)
class SliceAssign:
    """``target[items] = value``: a functional update making a new value of ``target``."""

    target: str
    items: tuple[IndexItem, ...]
    value: Expr
    span: Span = _span()


@record(frozen=True)
class If:
    cond: Expr
    then_body: Block
    else_body: Block | None = None
    span: Span = _span()


@record(frozen=True)
class For:
    """``for var in range(start, stop, step)``; ``start``/``step`` None when omitted."""

    var: str
    start: Expr | None
    stop: Expr
    step: Expr | None
    body: Block
    span: Span = _span()


@record(frozen=True)
class While:
    cond: Expr
    body: Block
    span: Span = _span()


@record(frozen=True)
class Return:
    value: Expr
    span: Span = _span()


Stmt = Assign | AugAssign | SliceAssign | If | For | While | Return


# ---------------------------------------------------------------- declarations

@record(frozen=True)
class Param:
    """A kernel parameter; ``direction`` is ``input`` or ``output``."""

    direction: str
    name: str
    type: TypeExpr
    span: Span = _span()


@record(frozen=True)
class FuncParam:
    """A func parameter; ``default`` is its constant default expression, if any."""

    name: str
    default: Expr | None = None
    span: Span = _span()


@record(frozen=True)
class Import:
    module: str
    span: Span = _span()


@record(frozen=True)
class Const:
    name: str
    value: Expr
    span: Span = _span()


@record(frozen=True)
class Func:
    name: str
    params: tuple[FuncParam, ...]
    body: Block
    span: Span = _span()


@record(frozen=True)
class Kernel:
    name: str
    params: tuple[Param, ...]
    body: Block
    span: Span = _span()


Decl = Import | Const | Func | Kernel


@record(frozen=True)
class Program:
    """One source file: its declarations in source order."""

    decls: tuple[Decl, ...]
    filename: str = field(default="<string>", compare=False)

    def of_type(self, cls: type) -> list:
        return [d for d in self.decls if isinstance(d, cls)]

    @property
    def kernels(self) -> list[Kernel]:
        return self.of_type(Kernel)

    @property
    def funcs(self) -> list[Func]:
        return self.of_type(Func)


_CHILD_FIELDS: dict[type, tuple[str, ...] | None] = {}


def child_fields(kind: type) -> tuple[str, ...] | None:
    """The field names but ``span`` of a node class, None for any other type.

    Looked up once per type: the walks over every node of a file (the nesting
    check, ``scope.iter_nodes``) ask for each node.
    """
    if kind not in _CHILD_FIELDS:
        _CHILD_FIELDS[kind] = (tuple(f.name for f in records.fields(kind) if f.name != "span")
                               if records.is_record(kind) else None)
    return _CHILD_FIELDS[kind]
