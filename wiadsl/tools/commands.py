"""The REPL's ``:commands``, one function each, in one table.

Commands that show code (``:ir``, ``:opt``, ``:passes``, ``:llvm``, ``:asm``,
``:ptx``, ``:sasm``) take a *subject*: a session kernel (``:ptx matmul M=64 K=64
N=64``; dims default to those of its last call), a kernel call (``:ir k(x)``: the
kernel as compiled for those arguments; a kernel with ``tensor`` parameters named
alone is listed for its last call), an expression (``:ir A @ B``), or nothing (the
last kernel defined or expression evaluated).

Invariant: a command returns the text to print, or raises a ``WiaError``; it never
prints by itself, so the REPL shows both the same way.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..diagnostics import WiaError, WiaUsageError
from ..dtypes import DType
from ..ir import print_module
from ..runtime.backend import TARGETS, get_backend
from .emit import EMITTERS, CompileJob
from .evaluate import EVAL_KERNEL, bind_arguments, expression_program, kernel_arguments
from .numfmt import type_of
from .pipeline import OptOptions, PassStep, find_step, optimize_ir, pass_steps, pipeline_passes
from .session import LineMap, Session, value_type
from .source import load_array
from .timing import latency_table, measure


class Quit(Exception):
    """Raised by ``:quit`` to end the session."""


@dataclass
class ReplState:
    """The session plus what commands remember between calls."""

    session: Session
    label: str = "<in1>"
    steps: list[PassStep] | None = None
    steps_of: str = ""


@dataclass(frozen=True)
class Subject:
    text: str
    lines: LineMap
    kernel: str
    dims: dict[str, int]
    title: str
    #: a kernel with 'tensor' parameters: the dtype and shape of each input it is
    #: listed for (its last call's, or those of ':ir k(x)'), else None
    inputs: dict[str, tuple[DType, tuple[int, ...]]] | None = None

    @property
    def generic(self) -> dict[str, tuple[DType, int]] | None:
        return None if self.inputs is None else {
            n: (dtype, len(shape)) for n, (dtype, shape) in self.inputs.items()}

    @property
    def input_shapes(self) -> dict[str, tuple[int, ...]] | None:
        return None if self.inputs is None else {n: sh for n, (_, sh) in self.inputs.items()}


_KERNEL_CALL = re.compile(r"([A-Za-z_]\w*)\s*\((.*)\)\s*\Z", re.S)


def subject(state: ReplState, arg: str) -> Subject:
    s = state.session
    arg = arg.strip()
    if not arg:
        if s.last is None:
            raise WiaUsageError("nothing to show yet: define a kernel or evaluate an "
                                "expression, or name one (:ir KERNEL, :ir EXPR)")
        kind, arg = s.last
        if kind == "expr":
            return _expr_subject(state, arg)
    call = _KERNEL_CALL.match(arg)
    if call and call.group(1) in s.kernels:  # ':ir k(x)': listed for these arguments
        return _call_subject(state, call.group(1), call.group(2))
    first, _, rest = arg.partition(" ")
    if first in s.kernels:
        dims = dict(s.call_dims.get(first, {}))
        for item in rest.split():
            name, sep, value = item.partition("=")
            if not sep or not value.isdigit():
                raise WiaUsageError(f"expected DIM=N after the kernel name, got '{item}'")
            dims[name] = int(value)
        text, lines = s.program()
        return Subject(text, lines, first, dims, f"kernel {first}", _generic_inputs(s, first))
    return _expr_subject(state, arg)


def _generic_inputs(s: Session, kernel: str) -> dict[str, tuple[DType, tuple[int, ...]]] | None:
    """For a kernel with 'tensor' parameters, its last call's inputs; an error that
    says what to do when it has not been called."""
    sig = s.kernel(kernel).signature
    generic = [sig.inputs[i].name for i in sig.generic_inputs]
    if not generic:
        return None
    if kernel not in s.call_inputs:
        raise WiaUsageError(
            f"kernel '{kernel}' takes 'tensor' parameter(s) {', '.join(generic)}, whose dtype "
            f"and rank come from a call: call it first, or name arguments to list it for "
            f"(:ir {kernel}(x, ...))")
    return s.call_inputs[kernel]


def _call_subject(state: ReplState, kernel: str, args_text: str) -> Subject:
    s = state.session
    pos, kw = kernel_arguments(s, args_text, state.label)
    dims, inputs = bind_arguments(s, kernel, pos, kw)
    text, lines = s.program()
    sig = s.kernel(kernel).signature
    generic = inputs if sig.generic_inputs else None
    return Subject(text, lines, kernel, dims, f"kernel {kernel}", generic)


def _expr_subject(state: ReplState, expr: str) -> Subject:
    prog, _ = expression_program(state.session, expr, state.label)
    return Subject(prog.text, prog.lines, EVAL_KERNEL, {}, expr)


def _lowered(state: ReplState, subj: Subject):
    from ..frontend.compile import compile_source, compile_to_ir

    try:
        if subj.generic is not None:
            return compile_source(subj.text, state.session.filename).lower_kernel(
                subj.kernel, subj.generic)
        return compile_to_ir(subj.text, state.session.filename, kernel=subj.kernel)
    except WiaError as err:
        raise state.session.fail(err, subj.lines) from None


def _opts(state: ReplState) -> OptOptions:
    return OptOptions(level=state.session.level)


def _steps(state: ReplState, arg: str) -> list[PassStep]:
    subj = subject(state, arg)
    steps = pass_steps(_lowered(state, subj), pipeline_passes(state.session.level))
    state.steps, state.steps_of = steps, subj.title
    return steps


def cmd_ir(state: ReplState, arg: str) -> str:
    m = re.fullmatch(r"after\s+(\S+)(?:\s+(.*))?", arg.strip(), re.S)
    if m:
        if state.steps is None or m.group(2):
            _steps(state, m.group(2) or "")
        assert state.steps is not None
        return find_step(state.steps, m.group(1)).after.rstrip()
    return print_module(_lowered(state, subject(state, arg))).rstrip()


def cmd_opt(state: ReplState, arg: str) -> str:
    return print_module(optimize_ir(_lowered(state, subject(state, arg)), _opts(state))).rstrip()


def cmd_passes(state: ReplState, arg: str) -> str:
    steps = _steps(state, arg)
    rows = [f"-O{state.session.level} pipeline for {state.steps_of}:"]
    for step in steps:
        before, after = _count_ops(step.before), _count_ops(step.after)
        mark = f"{before} -> {after} ops" if step.changed else "unchanged"
        rows.append(f"  {step.index + 1:2d}. {step.spec:<28} {mark}")
    rows.append("(:ir after PASS shows the IR after a pass; :diff PASS what it changed)")
    return "\n".join(rows)


def _count_ops(ir_text: str) -> int:
    return sum(1 for line in ir_text.splitlines()
               if line.startswith("  ") and not line.lstrip().startswith("^"))


def cmd_diff(state: ReplState, arg: str) -> str:
    name, _, rest = arg.strip().partition(" ")
    if not name:
        raise WiaUsageError("usage: :diff PASS [KERNEL|EXPR]")
    if state.steps is None or rest:
        _steps(state, rest)
    assert state.steps is not None
    step = find_step(state.steps, name)
    return step.diff().rstrip() or f"'{step.spec}' does not change the IR of {state.steps_of}"


def _backend(emitter: str) -> Callable[[ReplState, str], str]:
    def run(state: ReplState, arg: str) -> str:
        subj = subject(state, arg)
        job = CompileJob(subj.text, state.session.filename, subj.kernel, _opts(state), subj.dims,
                         generic=subj.generic, input_shapes=subj.input_shapes)
        try:
            main = EMITTERS[emitter].run(job).main
        except WiaError as err:
            raise state.session.fail(err, subj.lines) from None
        return main.rstrip() if isinstance(main, str) else f"<{len(main)} bytes>"
    run.__doc__ = EMITTERS[emitter].help
    return run


def cmd_time(state: ReplState, arg: str) -> str:
    if not arg.strip():
        raise WiaUsageError("usage: :time EXPR")
    s = state.session
    prog, _ = expression_program(s, arg.strip(), state.label)
    targets = list(dict.fromkeys([s.target, "interp"]))
    rows = []
    for target in targets:
        fn = s.module(prog.text, prog.lines, target).kernels[EVAL_KERNEL]
        label = f"{target} (eager)" if target == "interp" else f"{target} (compiled)"
        rows.append(measure(label, functools.partial(fn, **prog.inputs)))
    note = "" if len(rows) == 2 else (
        "\n(the session runs on the interpreter; ':target cpu' times compiled code against it)")
    return latency_table(rows) + note


def cmd_target(state: ReplState, arg: str) -> str:
    s = state.session
    if arg.strip():
        usable_backend(arg.strip())  # raises when unknown, not built, or no device
        s.target = arg.strip()
        return f"target: {s.target}"
    rows = []
    for name in TARGETS:
        try:
            usable_backend(name)
            status = "available"
        except WiaError as err:
            status = "not available (" + err.message.split(": ", 1)[-1] + ")"
        rows.append(f"  {'*' if name == s.target else ' '} {name:<9} {status}")
    return "targets (* = in use):\n" + "\n".join(rows)


def usable_backend(name: str) -> object:
    """The backend of target ``name`` if it can run here: built, and with its device
    when it needs one (``probe``: the cuda target imports without a GPU)."""
    backend = get_backend(name)
    probe = getattr(backend, "probe", None)
    if probe is not None:
        probe()
    return backend


def cmd_level(state: ReplState, arg: str) -> str:
    if arg.strip():
        if arg.strip() not in ("0", "1", "2", "3"):
            raise WiaUsageError(":O takes 0, 1, 2 or 3")
        state.session.level = int(arg)
        state.steps = None
    return f"optimization level: -O{state.session.level}"


def cmd_vars(state: ReplState, arg: str) -> str:
    values = state.session.values
    if not values:
        return "no values yet (try: A = randn(4, 4))"
    return "\n".join(f"  {n:<12} {type_of(v) if not isinstance(v, tuple) else 'tuple'}"
                     for n, v in values.items())


def cmd_decls(state: ReplState, arg: str) -> str:
    chunks = state.session.chunks.values()
    return "\n".join(f"  {c.kind:<7} {c.name}  ({c.label})" for c in chunks) or "no declarations"


def cmd_source(state: ReplState, arg: str) -> str:
    s = state.session
    if arg.strip():
        chunk = s.chunks.get(arg.strip()) or s.chunks.get(f"import {arg.strip()}")
        if chunk is None:
            raise WiaUsageError(f"no declaration named '{arg.strip()}'")
        return chunk.text
    return s.program()[0].rstrip() or "// empty session"


def cmd_del(state: ReplState, arg: str) -> str:
    if not arg.split():
        raise WiaUsageError("usage: :del NAME [NAME ...]")
    return "\n".join(state.session.forget(n) for n in arg.split())


def cmd_reset(state: ReplState, arg: str) -> str:
    state.session.reset()
    state.steps = None
    return "session cleared"


def cmd_load(state: ReplState, arg: str) -> str:
    parts = arg.split(None, 1)
    if len(parts) != 2:
        raise WiaUsageError("usage: :load NAME FILE.npy  (or FILE.npz:KEY)")
    name, path = parts
    state.session.check_value_name(name)
    value = load_array(path.strip())
    value_type(value)  # a dtype the language has, or an error
    state.session.values[name] = value
    return f"{name}: {type_of(value)}"


def cmd_save(state: ReplState, arg: str) -> str:
    parts = arg.split(None, 1)
    values = state.session.values
    if len(parts) == 1 and parts[0].endswith(".npz"):
        arrays = {n: np.asarray(v) for n, v in values.items() if not isinstance(v, tuple)}
        # NumPy's stub types **kwds so a key could be allow_pickle: mypy rejects any dict
        np.savez(parts[0], **arrays)  # type: ignore[arg-type]
        return f"saved {', '.join(arrays) or 'nothing'} to {parts[0]}"
    if len(parts) != 2:
        raise WiaUsageError("usage: :save NAME FILE.npy  (or :save FILE.npz for every value)")
    name, path = parts[0], parts[1].strip()
    if name not in values:
        raise WiaUsageError(f"no value named '{name}'")
    try:
        np.save(path, np.asarray(values[name]))
    except OSError as exc:
        raise WiaUsageError(f"cannot write '{path}': {exc.strerror}") from None
    return f"saved {name} to {path if path.endswith('.npy') else path + '.npy'}"


def cmd_help(state: ReplState, arg: str) -> str:
    if arg.strip():
        cmd = COMMANDS.get(arg.strip().lstrip(":"))
        if cmd is None:
            raise WiaUsageError(f"no command ':{arg.strip()}'")
        return f":{cmd.name} {cmd.args}\n  {cmd.help}"
    shown = [c for c in COMMANDS.values() if not c.alias]
    width = max(len(c.name + c.args) for c in shown) + 2
    return "\n".join([HELP_HEAD, *(f"  :{c.name + ' ' + c.args:<{width}} {c.help}"
                                   for c in shown)])


def cmd_quit(state: ReplState, arg: str) -> str:
    raise Quit


HELP_HEAD = """\
Type WIA DSL: declarations (kernel, func, const, import) span lines until their
braces balance; NAME = EXPR binds a value; EXPR prints one; KERNEL(args) calls a
kernel on session values. A = randn(64, 64) and rand(...) make random f32 arrays.
SUBJECT: a kernel (KERNEL DIM=N ...; dims default to its last call), an expression,
or nothing for the last kernel defined or expression evaluated.
Commands:"""


@dataclass(frozen=True)
class Command:
    name: str
    args: str
    help: str
    run: Callable[[ReplState, str], str]
    alias: bool = False


_SUBJ = "[SUBJECT]"
COMMANDS: dict[str, Command] = {c.name: c for c in [
    Command("help", "[CMD]", "this list, or one command's help", cmd_help),
    Command("vars", "", "the session's values and their types", cmd_vars),
    Command("decls", "", "the session's kernels, funcs, consts and imports", cmd_decls),
    Command("source", "[NAME]", "the session's source, or one declaration", cmd_source),
    Command("load", "NAME FILE.npy", "load a value from a NumPy file", cmd_load),
    Command("save", "NAME FILE.npy", "save a value (:save FILE.npz saves all)", cmd_save),
    Command("del", "NAME..", "forget values or declarations", cmd_del),
    Command("reset", "", "forget everything", cmd_reset),
    Command("ir", "[SUBJECT | after PASS]", "the IR as lowered, or after one pass", cmd_ir),
    Command("opt", _SUBJ, "the IR after the -O pipeline", cmd_opt),
    Command("passes", _SUBJ, "step through the pipeline: each pass and what it changed",
            cmd_passes),
    Command("diff", "PASS [SUBJECT]", "a unified diff of the IR around one pass", cmd_diff),
    Command("llvm", _SUBJ, "LLVM IR (CPU backend)", _backend("llvm")),
    Command("asm", _SUBJ, "host assembly (CPU backend)", _backend("asm")),
    Command("ptx", _SUBJ, "PTX (GPU backend)", _backend("ptx")),
    Command("sasm", _SUBJ, "systolic-array assembly (needs static dims)", _backend("sasm")),
    Command("time", "EXPR", "latency of EXPR (p50, p99): compiled vs the interpreter",
            cmd_time),
    Command("target", "[NAME]", "show the targets, or run on NAME from now on", cmd_target),
    Command("O", "[0-3]", "show or set the optimization level", cmd_level),
    Command("quit", "", "leave (also :q, :exit, Ctrl-D)", cmd_quit),
    Command("q", "", "leave", cmd_quit, alias=True),
    Command("exit", "", "leave", cmd_quit, alias=True),
]}


def run_command(state: ReplState, line: str) -> str:
    """Run ``:name args``; unknown commands are an error with a suggestion."""
    state.session.typed = {state.label: line}
    name, _, arg = line.strip()[1:].partition(" ")
    cmd = COMMANDS.get(name)
    if cmd is None:
        import difflib

        close = difflib.get_close_matches(name, list(COMMANDS), n=1)
        hint = f"; did you mean :{close[0]}?" if close else "; :help lists them"
        raise WiaUsageError(f"unknown command ':{name}'{hint}")
    return cmd.run(state, arg)


