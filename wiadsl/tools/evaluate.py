"""What the REPL does with a line that is not a ``:command``.

| input | meaning |
| --- | --- |
| ``kernel ...``, ``func ...``, ``const ...``, ``import ...`` | declare (``Session.define``) |
| ``NAME = randn(d0, d1, ...)`` / ``rand(...)`` | a random f32 array (``dtype=f64`` to change) |
| ``NAME = EXPR``, ``NAME += EXPR`` | evaluate and bind |
| ``KERNEL(args)``, ``a, b = KERNEL(args)`` | call a session kernel on session values |
| ``EXPR`` | evaluate and print |

An expression runs as a generated kernel: the session values it names become
typed inputs (weak Python scalars become ``const``\\ s, so they stay weak), its
result type comes from the frontend's checker (``exprtype``), and the kernel runs
through ``wiadsl.jit`` on the session's target. Nothing is evaluated in Python
except ``randn``/``rand``, which the language does not have: inside an expression
each is drawn first and enters the kernel as an input (``expand_random``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..diagnostics import WiaError, WiaTypeError, WiaUsageError
from ..dtypes import DTYPE_NAMES, DType, from_numpy
from ..frontend import ast
from .numfmt import format_array, format_value, type_of
from .session import EVAL_KERNEL, EVAL_OUTPUT, LineMap, Session, is_weak, value_type

_DECL = re.compile(r"\s*(kernel|func|const|import)\b")
_ASSIGN = re.compile(r"\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*([-+*/]?)=(?!=)(.*)\Z", re.S)
_CALL = re.compile(r"\s*([A-Za-z_]\w*)\s*\((.*)\)\s*\Z", re.S)
_RANDOM = re.compile(r"\s*(randn|rand)\s*\((.*)\)\s*\Z", re.S)
_RANDOM_CALL = re.compile(r"(?<![\w.])(randn|rand)\s*\(")
_NAME = re.compile(r"[A-Za-z_]\w*")


@dataclass(frozen=True)
class Program:
    """A generated program that evaluates one expression."""

    text: str
    lines: LineMap
    inputs: dict[str, Any]  # the session values it takes, in parameter order


def strip_statement(text: str) -> str:
    """The text without surrounding blanks and trailing ``;``\\ s."""
    text = text.strip()
    while text.endswith(";"):
        text = text[:-1].rstrip()
    return text


def split_args(text: str) -> list[str]:
    """Split at top-level commas (brackets nest)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts] if text.strip() else []


def _balanced_call(body: str) -> bool:
    """True when ``NAME(body)`` is one call (the parentheses do not close early)."""
    depth = 0
    for ch in body:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


def eval_program(session: Session, expr: str, label: str, out_type: str = "tensor") -> Program:
    """The session's declarations plus a kernel ``__wia_eval`` computing ``expr``."""
    used = [n for n in dict.fromkeys(_NAME.findall(expr)) if n in session.values]
    weak = [n for n in used if is_weak(session.values[n])]
    strong = [n for n in used if n not in weak]
    params = [f"input {n}: {value_type(session.values[n])}" for n in strong]
    params.append(f"output {EVAL_OUTPUT}: {out_type}")
    consts = "".join(f"const {n} = {_literal(session.values[n])};\n" for n in weak)
    end = "\n;" if "//" in expr else ";"
    head = f"{consts}kernel {EVAL_KERNEL}({', '.join(params)}) {{ {EVAL_OUTPUT} =\n"
    text, lines = session.program(head + expr + end + "\n}", label)
    last = lines.spans[-1]
    rel, col, typed = _typed_at(session, label, expr)
    skip = head.count("\n")
    lines.spans[-1] = last._replace(start=last.start + skip, n=last.n - skip, rel=rel, col=col,
                                    typed=typed)
    return Program(text, lines, {n: session.values[n] for n in strong})


def _typed_at(session: Session, label: str, expr: str) -> tuple[int, int, str | None]:
    """Where ``expr`` starts in the input ``label`` as typed: (line, columns to shift,
    the typed text); (1, 0, None) when it is not there verbatim (``A += 1`` runs
    ``A + (1)``), and the caret then points into the expression as run."""
    typed = session.typed.get(label)
    at = typed.find(expr) if typed is not None and expr else -1
    if typed is None or at < 0:
        return 1, 0, None
    return typed.count("\n", 0, at) + 1, at - (typed.rfind("\n", 0, at) + 1), typed


def _literal(value: bool | int | float) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, int) else repr(float(value))


def expression_program(session: Session, expr: str, label: str) -> tuple[Program, bool]:
    """``eval_program`` with the output typed by the checker (so the jit can compile it),
    and whether the result is weak (made only of literals and weak values)."""
    expanded, drawn = expand_random(session, expr)
    session.values.update(drawn)  # the draws are inputs of this program only
    try:
        return _expression_program(session, expanded, label)
    finally:
        for name in drawn:
            session.values.pop(name, None)


def _expression_program(session: Session, expr: str, label: str) -> tuple[Program, bool]:
    from ..frontend.loader import load_program
    from .exprtype import expression_type

    probe = eval_program(session, expr, label)
    try:
        loaded = load_program(probe.text, session.filename)
        kernel = next(d for d in loaded.main.decls
                      if isinstance(d, ast.Kernel) and d.name == EVAL_KERNEL)
        stmt = kernel.body.stmts[0]
        if not isinstance(stmt, ast.Assign) or len(kernel.body.stmts) != 1:
            raise WiaUsageError(f"not an expression: {expr}")
        types = {n: (_dtype(v), np.shape(v)) for n, v in probe.inputs.items()}
        t = expression_type(loaded, stmt.value, types)
    except WiaError as err:
        raise session.fail(err, probe.lines) from None
    return eval_program(session, expr, label, str(t.strong())), t.weak


def _dtype(value: object) -> DType:
    found = from_numpy(np.asarray(value).dtype)
    assert found is not None, "session values have language dtypes (value_type checks)"
    return found


def evaluate(session: Session, expr: str, label: str, target: str | None = None) -> Any:
    """The value of ``expr`` over the session's values (a weak scalar stays a Python scalar)."""
    prog, weak = expression_program(session, expr, label)
    fn = session.module(prog.text, prog.lines, target).kernels[EVAL_KERNEL]
    try:
        result = fn(**prog.inputs)
    except WiaError as err:
        raise session.fail(err, prog.lines) from None
    session.last = ("expr", expr)
    if weak and np.ndim(result) == 0:
        return np.asarray(result).item()
    return result


def expand_random(session: Session, expr: str) -> tuple[str, dict[str, np.ndarray]]:
    """``expr`` with each ``randn(...)`` / ``rand(...)`` drawn now and replaced by a
    reserved name (``__wia_rand0``), and those values: the language has no random
    numbers, the session does (unless it declares a func of that name)."""
    if "randn" in session.chunks or "rand" in session.chunks:
        return expr, {}
    parts: list[str] = []
    drawn: dict[str, np.ndarray] = {}
    pos = 0
    while (m := _RANDOM_CALL.search(expr, pos)) is not None:
        close = _closing_paren(expr, m.end())
        if close < 0:  # unbalanced: the checker reports it
            break
        name = f"__wia_rand{len(drawn)}"
        drawn[name] = random_value(session, m.group(1), expr[m.end():close])
        parts.append(expr[pos:m.start()] + name)
        pos = close + 1
    parts.append(expr[pos:])
    return "".join(parts), drawn


def _closing_paren(text: str, start: int) -> int:
    """The index of the ')' that closes a '(' just before ``start``; -1 if none."""
    depth = 1
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i
    return -1


def random_value(session: Session, kind: str, args_text: str) -> np.ndarray:
    """``randn(64, 64)`` / ``rand(3, dtype=f64)``: random arrays (default f32)."""
    dims: list[int] = []
    dtype = DTYPE_NAMES["f32"]
    for arg in split_args(args_text):
        key, sep, value = arg.partition("=")
        if sep:
            if key.strip() != "dtype" or value.strip() not in DTYPE_NAMES:
                raise WiaUsageError(f"{kind}: expected extents and dtype=f32|f64|..., "
                                    f"got '{arg}'")
            dtype = DTYPE_NAMES[value.strip()]
            continue
        extent = session.values.get(arg, arg)
        try:
            dims.append(int(str(extent), 10))
        except ValueError:
            raise WiaUsageError(f"{kind}: extents must be integers, got '{arg}'") from None
    if not dtype.is_float:
        raise WiaUsageError(f"{kind}: dtype must be a float type, got {dtype}")
    draw = session.rng.standard_normal if kind == "randn" else session.rng.random
    return np.asarray(draw(tuple(dims))).astype(dtype.numpy)


def kernel_arguments(session: Session, args_text: str, label: str
                     ) -> tuple[list[Any], dict[str, Any]]:
    """The values of ``a, b=EXPR, ...`` (a call's arguments): positional and by keyword."""
    pos: list[Any] = []
    kw: dict[str, Any] = {}
    for arg in split_args(args_text):
        m = re.fullmatch(r"([A-Za-z_]\w*)\s*=(?!=)\s*(.+)", arg, re.S)
        key, expr = (m.group(1), m.group(2)) if m else (None, arg)
        value = session.values[expr] if expr in session.values else \
            evaluate(session, expr, label)
        if key is None:
            pos.append(value)
        else:
            kw[key] = value
    return pos, kw


def bind_arguments(session: Session, name: str, pos: list[Any], kw: dict[str, Any]
                   ) -> tuple[dict[str, int], dict[str, tuple[DType, tuple[int, ...]]]]:
    """The dims and the (dtype, shape) of each input of calling kernel ``name`` so:
    what a listing of the kernel compiles for. A bad call is an error."""
    from ..runtime.binding import bind_call

    fn = session.kernel(name)
    try:
        bound = bind_call(fn.signature, tuple(pos), kw)
    except WiaError as err:
        raise session.fail(err, session.program()[1]) from None
    return dict(bound.dims), {p: (_dtype(a), a.shape) for p, a in bound.inputs.items()}


def call_kernel(session: Session, name: str, args_text: str, label: str) -> tuple:
    """Call session kernel ``name``; its outputs as a tuple (in declaration order)."""
    fn = session.kernel(name)
    pos, kw = kernel_arguments(session, args_text, label)
    text, lines = session.program()
    try:
        result = fn(*pos, **kw)
    except WiaError as err:
        raise session.fail(err, lines) from None
    session.call_dims[name], session.call_inputs[name] = bind_arguments(session, name, pos, kw)
    session.last = ("kernel", name)
    return result if isinstance(result, tuple) else (result,)


def execute(session: Session, text: str, label: str) -> str:
    """Run one input (see the table above); the text to show for it."""
    session.typed = {label: text}
    if _DECL.match(text):
        return "\n".join(session.define(text, label))
    stmt = strip_statement(text)
    if not stmt:
        return ""
    assign = _ASSIGN.match(stmt)
    if assign:
        bound = _assign(session, assign, label)
        return "\n".join(f"{name}: {type_of(value)}" for name, value in bound)
    call = _CALL.match(stmt)
    if call and call.group(1) in session.kernels and _balanced_call(call.group(2)):
        outputs = call_kernel(session, call.group(1), call.group(2), label)
        session.values["_"] = outputs[-1]
        sig = session.kernel(call.group(1)).signature
        return "".join(format_value(p.name, v) for p, v in zip(sig.outputs, outputs)).rstrip()
    value = evaluate(session, stmt, label)
    session.values["_"] = value
    return f"{type_of(value)}\n{format_array(value)}"


def _assign(session: Session, m: re.Match, label: str) -> list[tuple[str, Any]]:
    targets = [t.strip() for t in m.group(1).split(",")]
    op, rhs = m.group(2), m.group(3).strip()
    for t in targets:
        session.check_value_name(t)
    if op:
        if len(targets) != 1 or targets[0] not in session.values:
            raise WiaUsageError(f"'{m.group(1).strip()} {op}=' needs an existing value")
        rhs = f"{targets[0]} {op} ({rhs})"
    call = _CALL.match(rhs)
    random = _RANDOM.match(rhs)
    if call and call.group(1) in session.kernels and _balanced_call(call.group(2)):
        values = call_kernel(session, call.group(1), call.group(2), label)
    elif random and random.group(1) not in session.chunks and _balanced_call(random.group(2)):
        values = (random_value(session, random.group(1), random.group(2)),)
    else:
        values = (evaluate(session, rhs, label),)
    if len(values) != len(targets):
        raise WiaTypeError(f"{len(targets)} name(s) on the left, but {len(values)} value(s) "
                           "on the right")
    for t, v in zip(targets, values):
        session.values[t] = v
    return [(t, v) for t, v in zip(targets, values)]
