"""IR verification: structure, CFG edges, dominance, op invariants, signatures.

``verify(module_or_func)`` raises the first problem as a ``WiaIRError`` whose
message names the op (or block) and shows the function's text with the
offending line marked ``-->``. Checks, in order, per function:
1. every block is non-empty and ends in exactly one terminator, which is last;
   ops' parent links are consistent;
2. every successor is a block of the same function other than the entry, and
   the values passed match its arguments in number and type;
3. each op's own ``verify()``;
4. ``func.return`` matches the signature; ``func.call`` matches its callee
   (when the module is known);
5. every operand is defined in the function and dominates its use.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..diagnostics import WiaIRError
from .core import Block, Operation
from .dominance import DominanceInfo
from .module import FuncOp, ModuleOp
from .printer import FuncPrinter, Namer

_CONTEXT_LINES = 6


def verify(target: ModuleOp | FuncOp) -> None:
    """Verify a module (every function, calls checked against callees) or one function."""
    if isinstance(target, ModuleOp):
        for func in target:
            FuncVerifier(func, target).run()
    else:
        FuncVerifier(target, target.parent).run()


class FuncVerifier:
    """Checks one function; ``module`` (optional) resolves call targets."""

    def __init__(self, func: FuncOp, module: ModuleOp | None):
        self.func = func
        self.module = module
        self._printer: FuncPrinter | None = None
        self._names: Namer | None = None

    def run(self) -> None:
        blocks = self.func.blocks
        if not blocks:
            raise WiaIRError(f"function @{self.func.name} has no blocks")
        for block in blocks:
            self.check_structure(block)
        for block in blocks:
            self.check_edges(block)
        for op in self.func.walk():
            self.check_op(op)
        self.check_dominance()

    # ------------------------------------------------------------ errors

    def fail(self, message: str, op: Operation | None = None, block: Block | None = None) -> WiaIRError:
        """An error whose message ends with the function text, offending line marked."""
        printer = self._printer or FuncPrinter(self.func)
        if self._printer is None:
            printer.run()
            self._printer = printer
        line = printer.op_lines.get(id(op)) if op is not None else None
        if line is None and block is not None:
            line = printer.block_lines.get(id(block))
        return WiaIRError(f"{message}\n{render_context(printer.lines, line, self.func.name)}")

    def op_fail(self, op: Operation, message: str) -> WiaIRError:
        return self.fail(f"'{op.name}' op {message}", op=op)

    def block_name(self, block: Block) -> str:
        # Naming walks the whole function: only for an error message, and once.
        if self._names is None:
            self._names = (self._printer or FuncPrinter(self.func)).names
        return self._names.block(block)

    # ------------------------------------------------------------- checks

    def check_structure(self, block: Block) -> None:
        if not block.ops:
            raise self.fail(f"block {self.block_name(block)} is empty: it needs a terminator",
                            block=block)
        for i, op in enumerate(block.ops):
            if op.parent is not block:
                raise self.op_fail(op, "has a wrong parent block link")
            if op.is_terminator and i != len(block.ops) - 1:
                raise self.op_fail(op, "is a terminator but not the last op of its block")
        last = block.ops[-1]
        if not last.is_terminator:
            raise self.fail(f"block {self.block_name(block)} does not end with a terminator "
                            f"(missing terminator after '{last.name}')", op=last)

    def check_edges(self, block: Block) -> None:
        term = block.ops[-1]
        for succ in term.successors:
            target = succ.block
            if target.parent is not self.func.body:
                raise self.op_fail(term, "branches to a block outside this function")
            if target is self.func.entry:
                raise self.op_fail(term, "branches to the entry block")
            if len(succ.args) != len(target.args):
                raise self.op_fail(term, f"passes {len(succ.args)} values to "
                                         f"{self.block_name(target)}, which takes {len(target.args)}")
            for i, (value, arg) in enumerate(zip(succ.args, target.args, strict=False)):
                if value.type != arg.type:
                    raise self.op_fail(term, f"passes {value.type} as argument {i} of "
                                             f"{self.block_name(target)}, which is {arg.type}")

    def check_op(self, op: Operation) -> None:
        try:
            op.verify()
        except WiaIRError as e:
            raise self.fail(e.message, op=op) from None
        if op.name == "func.return":
            self.check_types(op, "returns", op.operand_types, self.func.result_types,
                             f"the signature of @{self.func.name}")
        elif op.name == "func.call" and self.module is not None:
            callee = self.module.get(op.attributes["callee"])
            if callee is None:
                raise self.op_fail(op, f"calls unknown function @{op.attributes['callee']}")
            what = f"@{callee.name}'s signature"
            self.check_types(op, "passes", op.operand_types, callee.arg_types, what)
            self.check_types(op, "expects results", op.result_types, callee.result_types, what)

    def check_types(self, op: Operation, verb: str, got: Sequence[object],
                    want: Sequence[object], what: str) -> None:
        if tuple(got) != tuple(want):
            shown = lambda ts: "(" + ", ".join(map(str, ts)) + ")"  # noqa: E731
            raise self.op_fail(op, f"{verb} {shown(got)} but {what} has {shown(want)}")

    def check_dominance(self) -> None:
        dom = DominanceInfo(self.func)
        for op in self.func.walk():
            for value in op.all_operands:
                if not dom.value_dominates(value, op):
                    names = (self._printer or FuncPrinter(self.func)).names
                    raise self.op_fail(op, f"operand {names.value(value)} does not "
                                           f"dominate this use")


def render_context(lines: list[str], mark: int | None, func_name: str) -> str:
    """The function's lines (a window around ``mark``), ``mark`` prefixed ``-->``."""
    lo, hi = 0, len(lines)
    if mark is not None and len(lines) > 2 * _CONTEXT_LINES + 1:
        lo, hi = max(0, mark - _CONTEXT_LINES), min(len(lines), mark + _CONTEXT_LINES + 1)
    out = [f"  in function @{func_name}:"]
    if lo > 0:
        out.append("      ...")
    out += [("  --> " if i == mark else "      ") + lines[i] for i in range(lo, hi)]
    if hi < len(lines):
        out.append("      ...")
    return "\n".join(out)
