"""Text -> IR: a hand-written recursive-descent parser for the printer's output.

Invariants:
- Unknown op names, undefined or redefined values and blocks, and a value used
  at a type other than its definition's are errors with ``line:col``.
- Values and blocks may be referenced before their definition (a loop's back
  edge); a placeholder stands in until the definition replaces it.
- ``%12``-style names give values no name hint; ``%norm`` gives the hint ``norm``.
- Parsing does not verify; call ``verify`` on the result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .core import Block, Operation, Region, Value
from .lexer import Token
from .module import FuncOp, ModuleOp
from .ops import CMP_OPS, OPS, SHORT_NAMES, create_op, op_class
from .parse_attrs import TokenCursor
from .types import I1, IndexType, IRType

_LONG_NAMES = {short: long for long, short in SHORT_NAMES.items()} | {"yield": "tensor.yield"}


def _hint(token_text: str) -> str | None:
    name = token_text[1:]
    return None if name[0].isdigit() else name


class FuncScope:
    """Names of one function: defined values, forward references, blocks."""

    def __init__(self, parser: Parser, func: FuncOp):
        self.parser = parser
        self.func = func
        self.values: dict[str, Value] = {}
        self.forward: dict[str, tuple[Value, Token]] = {}
        self.blocks: dict[str, Block] = {}
        self.block_refs: dict[str, Token] = {}
        self.labelled: set[str] = set()

    def define(self, tok: Token, value: Value) -> None:
        if tok.text in self.values:
            raise self.parser.error(f"redefinition of {tok.text}", tok)
        value.name_hint = _hint(tok.text)
        self.values[tok.text] = value
        pending = self.forward.pop(tok.text, None)
        if pending is not None:
            placeholder, use_tok = pending
            if placeholder.type != value.type:
                raise self.parser.error(f"{tok.text} is used as {placeholder.type} but defined "
                                        f"as {value.type}", use_tok)
            placeholder.replace_all_uses_with(value)

    def use(self, tok: Token, type: IRType) -> Value:
        value = self.values.get(tok.text)
        if value is None and tok.text in self.forward:
            value = self.forward[tok.text][0]
        if value is None:
            value = Value(type, _hint(tok.text))
            self.forward[tok.text] = (value, tok)
        if value.type != type:
            raise self.parser.error(f"{tok.text} has type {value.type} but is used as {type}", tok)
        return value

    def block(self, tok: Token) -> Block:
        name = tok.text[1:]
        self.block_refs.setdefault(name, tok)
        if name not in self.blocks:
            self.blocks[name] = Block(name_hint=name)
        return self.blocks[name]

    def finish(self) -> None:
        for name, (_, tok) in self.forward.items():
            raise self.parser.error(f"use of undefined value {name}", tok)
        for name, tok in self.block_refs.items():
            if name not in self.labelled:
                raise self.parser.error(f"reference to undefined block ^{name}", tok)


class Parser(TokenCursor):
    """Parses a module (a sequence of ``func``s) from IR text."""

    def parse_module(self) -> ModuleOp:
        module = ModuleOp()
        while not self.at("EOF"):
            tok = self.peek()
            func = self.parse_func()
            if func.name in module:
                raise self.error(f"duplicate function @{func.name}", tok)
            module.add(func)
        return module

    # ---------------------------------------------------------- functions

    def parse_func(self) -> FuncOp:
        self.expect("IDENT", "func")
        name = self.expect("SYMBOL", what="a function name").text[1:]
        self.punct("(")
        params = self.comma_list(self._param, ")")
        self.punct(")")
        results = self.type_group() if self.accept("ARROW") else []
        attrs = self.attr_dict() if self.accept("IDENT", "attributes") else {}
        func = FuncOp(name, [t for _, t in params], results, attributes=attrs, entry_name=None)
        scope = FuncScope(self, func)
        for (tok, _), arg in zip(params, func.args, strict=False):
            scope.define(tok, arg)
        self.punct("{")
        self._parse_body(scope)
        scope.finish()
        return func

    def _param(self) -> tuple[Token, IRType]:
        tok = self.expect("VALUE", what="a parameter name")
        self.punct(":")
        return tok, self.parse_type()

    def _parse_body(self, scope: FuncScope) -> None:
        current: Block = scope.func.entry
        while not self.accept_punct("}"):
            if self.at("BLOCK"):
                current = self._parse_label(scope, current)
            elif self.at("EOF"):
                raise self.error("expected '}' at the end of the function")
            else:
                self.parse_op(scope, current)

    def _parse_label(self, scope: FuncScope, current: Block) -> Block:
        tok = self.next()
        name = tok.text[1:]
        if name in scope.labelled:
            raise self.error(f"redefinition of block ^{name}", tok)
        scope.labelled.add(name)
        entry = scope.func.entry
        is_entry = current is entry and not entry.ops and len(scope.labelled) == 1
        if is_entry:
            if name in scope.blocks:  # a branch to the entry: keep one Block object
                raise self.error("the entry block cannot be a branch target", scope.block_refs[name])
            entry.name_hint = name
            scope.blocks[name] = entry
            block = entry
        else:
            block = scope.block(tok)
            scope.func.body.add_block(block)
        if self.accept_punct("("):
            if is_entry:
                raise self.error("the entry block's arguments are the function's parameters", tok)
            for arg_tok, t in self.comma_list(self._param, ")"):
                scope.define(arg_tok, block.add_arg(t))
            self.punct(")")
        self.punct(":")
        return block

    # -------------------------------------------------------------- ops

    def parse_op(self, scope: FuncScope, block: Block) -> Operation:
        result_toks = self.comma_list(lambda: self.expect("VALUE")) if self.at("VALUE") else []
        if result_toks:
            self.punct("=")
        name_tok = self.expect("IDENT", what="an op name")
        name = _LONG_NAMES.get(name_tok.text, name_tok.text)
        if name not in OPS:
            raise self.error(f"unknown op '{name_tok.text}'", name_tok)
        parse = _CUSTOM.get(name, Parser._generic)
        operands, types, results, attrs, succs = parse(self, scope, name, len(result_toks))
        regions = []
        while self.at("PUNCT", "{"):  # only op regions can follow the type signature
            regions.append(self._parse_region(scope))
        values = [scope.use(tok, t) for tok, t in zip(operands, types, strict=False)]
        if regions:
            op = op_class(name)(values, results, attrs, succs, regions, [None] * len(results))
        else:
            op = create_op(name, values, results, attrs, succs, [None] * len(results))
        block.append(op)
        for tok, result in zip(result_toks, op.results, strict=False):
            scope.define(tok, result)
        return op

    def _parse_region(self, scope: FuncScope) -> Region:
        """``{ ^bb0(%a: T, ...): ops }``: one block; its label is local to the region."""
        self.punct("{")
        self.expect("BLOCK", what="a region block label")
        block = Block()
        if self.accept_punct("("):
            for arg_tok, t in self.comma_list(self._param, ")"):
                scope.define(arg_tok, block.add_arg(t))
            self.punct(")")
        self.punct(":")
        while not self.accept_punct("}"):
            if self.at("BLOCK"):
                raise self.error("op regions have one block")
            if self.at("EOF"):
                raise self.error("expected '}' at the end of the region")
            self.parse_op(scope, block)
        return Region([block])

    def _operand_toks(self) -> list[Token]:
        return self.comma_list(lambda: self.expect("VALUE")) if self.at("VALUE") else []

    def _generic(self, scope: FuncScope, name: str, nres: int, attrs: dict[str, Any] | None = None):
        start = self.peek()
        operands = self._operand_toks()
        attrs = {**(attrs or {}), **(self.attr_dict() if self.at("PUNCT", "{") else {})}
        self.punct(":")
        ins, outs = self._signature(OPS[name], len(operands), nres)
        if len(ins) != len(operands) or len(outs) != nres:
            raise self.error(f"'{name}' has {len(operands)} operands and {nres} results but its "
                             f"type lists {len(ins)} and {len(outs)}", start)
        return operands, ins, outs, attrs, []

    def _signature(self, cls: type[Operation], nops: int, nres: int):
        if self.at("PUNCT", "("):
            ins = self.type_group()
            self.expect("ARROW", what="'->'")
            return ins, self.type_group()
        t = self.parse_type()
        if self.accept("ARROW"):
            return [t], self.type_group()
        if nops == 0:
            return [], [t] * nres
        return [t] * nops, cls.short_form_results(t, nres)

    def _constant(self, scope: FuncScope, name: str, nres: int):
        value = self.attr_value()
        attrs = {"value": value, **(self.attr_dict() if self.at("PUNCT", "{") else {})}
        self.punct(":")
        t = self.parse_type()
        dtype = None if isinstance(t, IndexType) else t.dtype
        if dtype is not None and dtype.is_float and isinstance(value, int) and \
                not isinstance(value, bool):
            attrs["value"] = float(value)
        return [], [], [t] * nres, attrs, []

    def _compare(self, scope: FuncScope, name: str, nres: int):
        pred = self.expect("IDENT", what="a comparison predicate").text
        self.punct(",")
        return self._generic(scope, name, nres, {"predicate": pred})

    def _successor(self, scope: FuncScope) -> tuple[Block, list[Value]]:
        block = scope.block(self.expect("BLOCK", what="a block"))
        if not self.accept_punct("("):
            return block, []
        toks = self._operand_toks()
        self.punct(":")
        types = self.comma_list(self.parse_type)
        self.punct(")")
        if len(types) != len(toks):
            raise self.error(f"{len(toks)} block operands but {len(types)} types")
        return block, [scope.use(tok, t) for tok, t in zip(toks, types, strict=False)]

    def _trailing_attrs(self) -> dict[str, Any]:
        return self.attr_dict() if self.at("PUNCT", "{") else {}

    def _branch(self, scope: FuncScope, name: str, nres: int):
        succ = self._successor(scope)
        return [], [], [], self._trailing_attrs(), [succ]

    def _cond_branch(self, scope: FuncScope, name: str, nres: int):
        cond = self.expect("VALUE", what="a condition")
        self.punct(",")
        t = self._successor(scope)
        self.punct(",")
        f = self._successor(scope)
        return [cond], [I1], [], self._trailing_attrs(), [t, f]

    def _return(self, scope: FuncScope, name: str, nres: int):
        operands = self._operand_toks()
        attrs = self._trailing_attrs()
        types = []
        if operands:
            self.punct(":")
            types = self.comma_list(self.parse_type)
        if len(types) != len(operands):
            raise self.error(f"return of {len(operands)} values lists {len(types)} types")
        return operands, types, [], attrs, []

    def _call(self, scope: FuncScope, name: str, nres: int):
        callee = self.expect("SYMBOL", what="a callee").text[1:]
        self.punct("(")
        operands = self._operand_toks()
        self.punct(")")
        attrs = {"callee": callee, **self._trailing_attrs()}
        self.punct(":")
        start = self.peek()
        self.punct("(")
        ins = self.comma_list(self.parse_type, ")")
        self.punct(")")
        self.expect("ARROW", what="'->'")
        outs = self.type_group()
        if len(ins) != len(operands) or len(outs) != nres:
            raise self.error(f"call with {len(operands)} arguments and {nres} results has type "
                             f"with {len(ins)} and {len(outs)}", start)
        return operands, ins, outs, attrs, []


_CUSTOM: dict[str, Callable[..., Any]] = {
    "arith.constant": Parser._constant,
    **{name: Parser._compare for name in CMP_OPS},
    "cf.br": Parser._branch,
    "cf.cond_br": Parser._cond_branch,
    "func.return": Parser._return,
    "func.call": Parser._call,
    "tensor.yield": Parser._return,
}


def parse_module(text: str, filename: str = "<ir>") -> ModuleOp:
    """Parse IR text (one or more ``func``s) into a module; raises WiaIRError."""
    return Parser(text, filename).parse_module()


def parse_func(text: str, filename: str = "<ir>") -> FuncOp:
    """Parse text holding exactly one function."""
    module = parse_module(text, filename)
    if len(module) != 1:
        raise Parser(text, filename).error(f"expected one function, found {len(module)}")
    return module.remove(module.funcs[0].name)
