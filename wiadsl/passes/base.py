"""Passes, the pass registry, pipeline strings and the PassManager.

Invariants:
- A pass is a frozen dataclass with a ``name`` ClassVar; its options are its
  fields, so ``tile{sizes=32,32}`` is ``Tile(sizes=(32, 32))``. ``PASSES`` maps
  every registered name to its class; an unknown pass or option is a
  ``WiaUsageError`` that names it (never skipped).
- ``Pass.run`` mutates a module in place and leaves IR that verifies; the
  PassManager checks that after every pass when ``verify_each`` is set.
- Passes report what they did through the ``PassContext``: statistics
  (``ctx.count("ops fused", n)``) and optimization remarks (``ctx.remark``).
"""

from __future__ import annotations

import functools
import sys
import time
import typing
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import Any, ClassVar, TextIO

from ..diagnostics import WiaIRError, WiaUsageError
from ..ir.core import Operation
from ..ir.module import ModuleOp
from ..ir.printer import print_module
from ..ir.verifier import verify
from ..records import field, record
from ..records import fields as record_fields
from .remarks import Remark, op_location

PASSES: dict[str, type[Pass]] = {}


@record
class PassContext:
    """What passes report: per-pass statistic counters and remarks."""

    remarks: list[Remark] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)
    current: str = ""

    def count(self, what: str, n: int = 1) -> None:
        self.stats[what] = self.stats.get(what, 0) + n

    def remark(self, kind: str, message: str, op: Operation | None = None) -> None:
        self.remarks.append(Remark(kind, message, self.current, *op_location(op)))


@record(frozen=True)
class Pass(ABC):
    """Base of every pass. Subclasses set ``name`` and implement ``run``."""

    name: ClassVar[str] = ""

    @abstractmethod
    def run(self, module: ModuleOp, ctx: PassContext) -> None:
        """Transform ``module`` in place; count and remark through ``ctx``."""

    @classmethod
    def from_options(cls, options: dict[str, str]) -> Pass:
        """Build from ``key=value`` texts; each value is converted to its field's type."""
        if not options:  # most pipeline items: no fields to look up
            return cls()
        fields = {f.name: f for f in record_fields(cls)}
        hints = _field_types(cls)
        kwargs: dict[str, Any] = {}
        for key, text in options.items():
            if key not in fields:
                known = ", ".join(sorted(fields)) or "none"
                raise WiaUsageError(f"pass '{cls.name}' has no option '{key}' (options: {known})")
            kwargs[key] = convert_option(cls.name, key, text, hints[key])
        return cls(**kwargs)

    def spec(self) -> str:
        """The pipeline text that rebuilds this pass."""
        opts = []
        for f in record_fields(self):
            value = getattr(self, f.name)
            if value != f.default and (f.factory is None or value != f.factory()):
                shown = ",".join(map(str, value)) if isinstance(value, tuple) else str(value).lower() \
                    if isinstance(value, bool) else str(value)
                opts.append(f"{f.name}={shown}")
        return self.name + ("{" + ",".join(opts) + "}" if opts else "")


@functools.cache
def _field_types(cls: type[Pass]) -> dict[str, Any]:
    """A pass class's resolved field annotations (``typing.get_type_hints`` evaluates
    every annotation's text again on each call: ~0.3 ms, per pass of every compile's
    pipeline before it was kept)."""
    return typing.get_type_hints(cls)


def register_pass(cls: type[Pass]) -> type[Pass]:
    """Class decorator: add a pass to ``PASSES`` under ``cls.name``."""
    if not cls.name or cls.name in PASSES:
        raise ValueError(f"bad or duplicate pass name {cls.name!r}")
    PASSES[cls.name] = cls
    return cls


def convert_option(pass_name: str, key: str, text: str, hint: Any) -> Any:
    """``text`` as a value of the field type ``hint`` (int, float, bool, str, tuple[int, ...])."""
    def bad(what: str) -> WiaUsageError:
        return WiaUsageError(f"option '{key}' of pass '{pass_name}' must be {what}, got {text!r}")
    origin = typing.get_origin(hint)
    try:
        if hint is bool:
            if text.lower() not in ("true", "false", "1", "0"):
                raise bad("true or false")
            return text.lower() in ("true", "1")
        if hint is int:
            return int(text)
        if hint is float:
            return float(text)
        if hint is str:
            return text
        if origin is tuple:
            return tuple(int(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise bad(getattr(hint, "__name__", str(hint))) from None
    raise bad(str(hint))


def _split_top(text: str, sep: str = ",") -> list[str]:
    """Split at ``sep`` outside braces."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "{"
        depth -= ch == "}"
        if depth < 0:
            raise WiaUsageError(f"unbalanced '}}' in pipeline {text!r}")
        if ch == sep and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if depth:
        raise WiaUsageError(f"unbalanced '{{' in pipeline {text!r}")
    return [*parts, cur]


def parse_options(pass_name: str, text: str) -> dict[str, str]:
    """``a=1,sizes=32,32,b=x`` -> ``{a: 1, sizes: "32,32", b: x}`` (pieces without
    ``=`` continue the previous value, so lists need no brackets)."""
    out: dict[str, str] = {}
    last: str | None = None
    for piece in (p.strip() for p in text.split(",")):
        if not piece:
            continue
        if "=" in piece:
            key, value = (s.strip() for s in piece.split("=", 1))
            if not key:
                raise WiaUsageError(f"empty option name in '{pass_name}{{{text}}}'")
            out[key], last = value, key
        elif last is None:
            raise WiaUsageError(f"option '{piece}' of pass '{pass_name}' needs a value (key=value)")
        else:
            out[last] += "," + piece
    return out


def parse_pipeline(text: str) -> list[Pass]:
    """``'inline,canonicalize,fuse{max_bytes=65536}'`` -> pass instances."""
    from . import registry  # noqa: F401  (registers every pass)
    passes: list[Pass] = []
    for item in (s.strip() for s in _split_top(text)):
        if not item:
            continue
        name, _, rest = item.partition("{")
        name = name.strip()
        if rest and not rest.endswith("}"):
            raise WiaUsageError(f"pipeline item {item!r}: options must end with '}}'")
        cls = PASSES.get(name)
        if cls is None:
            known = ", ".join(sorted(PASSES))
            raise WiaUsageError(f"unknown pass '{name}' in pipeline (known passes: {known})")
        passes.append(cls.from_options(parse_options(name, rest[:-1]) if rest else {}))
    return passes


def count_ops(module: ModuleOp) -> int:
    return sum(len(b.ops) for f in module for b in f.blocks)


@record
class PassRecord:
    """One pass run: wall time, ops before/after, the pass's own statistics."""

    name: str
    seconds: float
    ops_before: int
    ops_after: int
    stats: dict[str, int]


class PassManager:
    """Runs passes in order, verifying after each, printing and timing on request."""

    def __init__(self, passes: Iterable[Pass] | str, verify_each: bool = True,
                 print_ir_after_all: bool = False, print_ir_after: Iterable[str] = (),
                 print_ir_after_change: bool = False, time_passes: bool = False,
                 stream: TextIO | None = None, remarks: list[Remark] | None = None):
        self.passes = parse_pipeline(passes) if isinstance(passes, str) else list(passes)
        self.verify_each = verify_each
        self.print_ir_after_all = print_ir_after_all
        self.print_ir_after = set(print_ir_after)
        from . import registry  # noqa: F401  (registers every pass)
        unknown = self.print_ir_after - set(PASSES)
        if unknown:
            raise WiaUsageError(f"print_ir_after names unknown pass(es): {', '.join(sorted(unknown))}")
        self.print_ir_after_change = print_ir_after_change
        self.time_passes = time_passes
        self.stream = stream if stream is not None else sys.stderr
        self.context = PassContext(remarks if remarks is not None else [])
        self.records: list[PassRecord] = []

    def run(self, module: ModuleOp) -> ModuleOp:
        for p in self.passes:
            self.run_one(p, module)
        if self.time_passes:
            self.stream.write(self.timing_report())
        return module

    def run_one(self, p: Pass, module: ModuleOp) -> None:
        before_text = print_module(module) if self.print_ir_after_change else ""
        before = count_ops(module)
        self.context.current, self.context.stats = p.name, {}
        start = time.perf_counter()
        p.run(module, self.context)
        elapsed = time.perf_counter() - start
        if self.verify_each:
            try:
                verify(module)
            except WiaIRError as e:
                raise WiaIRError(f"IR does not verify after pass '{p.spec()}':\n{e.message}") from None
        after = count_ops(module)
        self.records.append(PassRecord(p.name, elapsed, before, after, dict(self.context.stats)))
        text = None
        if self.print_ir_after_all or p.name in self.print_ir_after:
            text = print_module(module)
        elif self.print_ir_after_change:
            now = print_module(module)
            text = now if now != before_text else None
        if text is not None:
            self.stream.write(f"// -----// IR Dump After {p.spec()} //----- //\n{text}\n")

    def statistics(self) -> dict[str, dict[str, int]]:
        """Per pass (summed over runs): ops removed, plus the pass's own counters."""
        out: dict[str, dict[str, int]] = {}
        for r in self.records:
            s = out.setdefault(r.name, {})
            s["ops removed"] = s.get("ops removed", 0) + max(0, r.ops_before - r.ops_after)
            for k, v in r.stats.items():
                s[k] = s.get(k, 0) + v
        return out

    def timing_report(self) -> str:
        """A ``--time-passes`` table: wall time per pass run, percent, op counts."""
        total = sum(r.seconds for r in self.records) or 1e-12
        lines = ["===" + "-" * 66 + "===", "  Pass execution timing report",
                 "===" + "-" * 66 + "===",
                 f"  Total: {total * 1e3:.3f} ms",
                 f"  {'Wall (ms)':>10} {'%':>6}  {'ops in':>7} {'ops out':>7}  pass"]
        for r in self.records:
            extra = ", ".join(f"{k}: {v}" for k, v in sorted(r.stats.items()))
            lines.append(f"  {r.seconds * 1e3:10.3f} {100 * r.seconds / total:6.1f}  "
                         f"{r.ops_before:7d} {r.ops_after:7d}  {r.name}"
                         + (f"  ({extra})" if extra else ""))
        lines.append(f"  {total * 1e3:10.3f} {100.0:6.1f}  {'':7} {'':7}  Total")
        return "\n".join(lines) + "\n"


PIPELINES: dict[int, str] = {
    0: "",
    1: "inline,canonicalize,dce,simplify-cfg",
    2: "inline,canonicalize,sccp,simplify-cfg,cse,licm,canonicalize,dce,fuse,dce",
    3: "inline,canonicalize,sccp,simplify-cfg,cse,licm,bn-fold,canonicalize,cse,dce,"
       "patterns,fuse,cse,dce,plan-memory",
}


def default_pipeline(level: int) -> str:
    """The pipeline text of ``-O<level>`` (0..3)."""
    if level not in PIPELINES:
        raise WiaUsageError(f"optimization level must be 0..3, got {level}")
    return PIPELINES[level]


PassFactory = Callable[[], Pass]
