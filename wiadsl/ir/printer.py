"""IR -> text, in the form of ARCHITECTURE.md; ``parse_module`` reads it back.

Invariants:
- print -> parse -> print is the identity on text.
- Names are per function: a value keeps its ``name_hint`` when it is a valid
  identifier not taken by an earlier value, else it gets the next number
  (``%0``, ``%1``...). Blocks likewise keep hints, else ``^bb<N>``.
- The type after ``:`` is one type ``T`` when every operand is ``T`` and the
  results are what the op's ``short_form_results(T)`` implies (for most ops: all
  ``T``), or ``T`` alone for an op without operands; else ``(T1, T2) -> R``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from .attributes import format_attr_dict, format_scalar
from .core import Block, Operation, Region, Value
from .module import FuncOp, ModuleOp
from .ops import CMP_OPS, SHORT_NAMES
from .types import IndexType, IRType

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


class Namer:
    """Assigns the printed names of one function's values and blocks."""

    def __init__(self, func: FuncOp):
        self.values: dict[int, str] = {}
        self.blocks: dict[int, str] = {}
        self._number_blocks(func.blocks)
        counter = 0
        taken: set[str] = set()
        for value in _values_in_order(func):
            hint = value.name_hint
            if hint and _IDENT.match(hint) and hint not in taken:
                taken.add(hint)
                self.values[id(value)] = hint
            else:
                self.values[id(value)] = str(counter)
                counter += 1

    def _number_blocks(self, blocks: Sequence[Block]) -> None:
        hinted: dict[int, str] = {}
        for b in blocks:
            hint = b.name_hint
            if hint and _IDENT.match(hint) and hint not in hinted.values():
                hinted[id(b)] = hint
        taken, counter = set(hinted.values()), 0
        for b in blocks:
            if id(b) not in hinted:
                while f"bb{counter}" in taken:
                    counter += 1
                hinted[id(b)] = f"bb{counter}"
                taken.add(f"bb{counter}")
        self.blocks = hinted

    def value(self, v: Value) -> str:
        # A value from outside the function (invalid IR) still prints, visibly.
        return "%" + self.values.get(id(v), f"<<unknown {v.name_hint or ''}>>")

    def block(self, b: Block) -> str:
        return "^" + self.blocks.get(id(b), "<<unknown block>>")


def _values_in_order(func: FuncOp) -> list[Value]:
    out: list[Value] = []
    _collect_values(func.blocks, out)
    return out


def _collect_values(blocks: Sequence[Block], out: list[Value]) -> None:
    # Values inside op regions (fused bodies) share the function's name space.
    for block in blocks:
        out.extend(block.args)
        for op in block.ops:
            out.extend(op.results)
            for region in op.regions:
                _collect_values(region.blocks, out)


def type_signature(op: Operation) -> str:
    """The text after ``:`` for a generic-form op."""
    ins, outs = list(op.operand_types), list(op.result_types)
    if ins and len(set(ins)) == 1 and outs == type(op).short_form_results(ins[0], len(outs)):
        return str(ins[0])
    if not ins and len(outs) == 1:
        return str(outs[0])
    return f"{_type_group(ins)} -> {_type_group(outs)}"


def _type_group(types: Sequence[IRType]) -> str:
    return str(types[0]) if len(types) == 1 else "(" + ", ".join(map(str, types)) + ")"


class FuncPrinter:
    """Prints one function; ``op_lines``/``block_lines`` map ops and block
    labels (by id) to their 0-based line, for error context."""

    def __init__(self, func: FuncOp):
        self.func = func
        self.names = Namer(func)
        self.lines: list[str] = []
        self.op_lines: dict[int, int] = {}
        self.block_lines: dict[int, int] = {}

    def run(self) -> list[str]:
        self.lines.append(self.header())
        for block in self.func.blocks:
            self.block_lines[id(block)] = len(self.lines)
            self.lines.append(self.label(block))
            for op in block.ops:
                self.op_lines[id(op)] = len(self.lines)
                self.lines.extend("  " + line for line in self.op_text(op).split("\n"))
        self.lines.append("}")
        return self.lines

    def header(self) -> str:
        f = self.func
        args = ", ".join(f"{self.names.value(a)}: {a.type}" for a in f.args)
        text = f"func @{f.name}({args})"
        if f.result_types:
            text += f" -> {_type_group(f.result_types)}"
        if f.attributes:
            text += f" attributes {format_attr_dict(f.attributes)}"
        return text + " {"

    def label(self, block: Block) -> str:
        is_entry = block is self.func.entry
        if is_entry or not block.args:
            return f"{self.names.block(block)}:"
        args = ", ".join(f"{self.names.value(a)}: {a.type}" for a in block.args)
        return f"{self.names.block(block)}({args}):"

    def operands(self, values: Sequence[Value]) -> str:
        return ", ".join(self.names.value(v) for v in values)

    def op_text(self, op: Operation) -> str:
        lhs = f"{self.operands(op.results)} = " if op.results else ""
        printer = _CUSTOM.get(op.name, FuncPrinter.generic)
        text = lhs + printer(self, op)
        for region in op.regions:
            text += " " + self.region_text(region)
        return text

    def region_text(self, region: Region) -> str:
        """``{`` then each block's label and ops (indented), then ``}``; block labels
        are scoped to the region (``^bb0``...)."""
        lines = ["{"]
        for i, block in enumerate(region.blocks):
            args = ", ".join(f"{self.names.value(a)}: {a.type}" for a in block.args)
            lines.append(f"^bb{i}({args}):" if block.args else f"^bb{i}:")
            for op in block.ops:
                lines.extend("  " + line for line in self.op_text(op).split("\n"))
        lines.append("}")
        return "\n".join(lines)

    def generic(self, op: Operation, skip: Sequence[str] = ()) -> str:
        parts = [op.name]
        if op.operands:
            parts.append(self.operands(op.operands))
        attrs = format_attr_dict({k: v for k, v in op.attributes.items() if k not in skip})
        if attrs:
            parts.append(attrs)
        return " ".join(parts) + " : " + type_signature(op)

    def successor(self, block: Block, args: Sequence[Value]) -> str:
        if not args:
            return self.names.block(block)
        types = ", ".join(str(a.type) for a in args)
        return f"{self.names.block(block)}({self.operands(args)} : {types})"

    def trailing_attrs(self, op: Operation, skip: Sequence[str] = ()) -> str:
        attrs = format_attr_dict({k: v for k, v in op.attributes.items() if k not in skip})
        return f" {attrs}" if attrs else ""

    # -------------------------------------------------------- custom forms

    def constant(self, op: Operation) -> str:
        t = op.result.type
        value = format_scalar(op.attributes.get("value"), None if isinstance(t, IndexType)
                              else t.dtype)
        return f"{op.name} {value}{self.trailing_attrs(op, ['value'])} : {t}"

    def compare(self, op: Operation) -> str:
        head = f"{op.name} {op.attributes.get('predicate')},"
        return head + self.generic(op, ["predicate"])[len(op.name):]

    def branch(self, op: Operation) -> str:
        (succ,) = op.successors
        return f"br {self.successor(succ.block, succ.args)}{self.trailing_attrs(op)}"

    def cond_branch(self, op: Operation) -> str:
        t, f = op.successors
        return (f"cond_br {self.operands(op.operands)}, {self.successor(t.block, t.args)}, "
                f"{self.successor(f.block, f.args)}{self.trailing_attrs(op)}")

    def ret(self, op: Operation) -> str:
        if not op.operands:
            return f"return{self.trailing_attrs(op)}"
        types = ", ".join(map(str, op.operand_types))
        return f"return {self.operands(op.operands)}{self.trailing_attrs(op)} : {types}"

    def yield_(self, op: Operation) -> str:
        return "yield" + self.ret(op)[len("return"):]

    def call(self, op: Operation) -> str:
        ins = "(" + ", ".join(map(str, op.operand_types)) + ")"
        outs = _type_group(op.result_types)
        return (f"func.call @{op.attributes.get('callee')}({self.operands(op.operands)})"
                f"{self.trailing_attrs(op, ['callee'])} : {ins} -> {outs}")


_CUSTOM: dict[str, Callable[[FuncPrinter, Operation], str]] = {
    "arith.constant": FuncPrinter.constant,
    **{name: FuncPrinter.compare for name in CMP_OPS},
    "cf.br": FuncPrinter.branch,
    "cf.cond_br": FuncPrinter.cond_branch,
    "func.return": FuncPrinter.ret,
    "func.call": FuncPrinter.call,
    "tensor.yield": FuncPrinter.yield_,
}
assert set(SHORT_NAMES) <= set(_CUSTOM)


def print_func(func: FuncOp) -> str:
    return "\n".join(FuncPrinter(func).run()) + "\n"


def print_module(module: ModuleOp) -> str:
    return "\n".join(print_func(f) for f in module)


def print_op(op: Operation) -> str:
    """One op's line, named within its function (or standalone, numbered)."""
    block = op.parent
    func = block.parent.parent if block is not None and block.parent is not None else None
    if isinstance(func, FuncOp):
        return FuncPrinter(func).op_text(op)
    printer = FuncPrinter(FuncOp("_", [], []))
    for i, v in enumerate([*op.all_operands, *op.results]):
        printer.names.values.setdefault(id(v), v.name_hint or f"v{i}")
    return printer.op_text(op)
