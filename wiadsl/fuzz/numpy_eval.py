"""An independent oracle: the generated AST evaluated directly with NumPy.

It shares nothing with the frontend's checker, lowering, IR or interpreter
(only the AST node classes), so a frontend bug -- a wrong fold, a wrong
promotion, a wrong cast -- shows as a mismatch against the interpreter. The
dtype rules are npvalues', the operators npops', the builtins npbuiltins'.

Branches: an ``if`` or ``while`` condition computed by comparing inexact floats
that lie within rounding of each other (``Val.near``), or a value that has no
single right one (``Val.free``), is a choice point: either branch is right.
``evaluate_paths`` runs the program once per combination of choices (depth first,
at most ``MAX_PATHS``) and returns every outcome; the judge accepts a target that
matches any of them.

Invariants: a construct the evaluator does not cover raises ``Unsupported``
(reported by the fuzzer, never a silent pass); a run-time failure by the
language's rules raises ``RuntimeFailure``; loops stop after ``MAX_STEPS``
iterations (``Unsupported``: the program would not end in a fuzz run).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..frontend import ast
from . import npops
from .npbuiltins import DTYPE, LISTS, PARAMS, STATIC, TABLE
from .npvalues import (
    STORAGE,
    RuntimeFailure,
    Unsupported,
    Val,
    cast,
    convert,
    promote,
    store,
    weak_scalar,
)

MAX_PATHS = 8
MAX_STEPS = 10_000


@dataclass
class Choices:
    """The decisions at choice points: ``forced`` ones first, then the natural ones."""

    forced: list[bool] = field(default_factory=list)
    taken: list[bool] = field(default_factory=list)

    def decide(self, natural: bool) -> bool:
        k = len(self.taken)
        value = self.forced[k] if k < len(self.forced) else natural
        self.taken.append(value)
        return value


@dataclass
class PathOutcome:
    """One path's result: outputs, or the failure it raised."""

    values: list[np.ndarray] | None
    error: str = ""
    choices: int = 0
    #: per output, the elements with no single right value (npvalues ``Val.free``)
    free: list[np.ndarray | None] = field(default_factory=list)


class _Return(Exception):
    def __init__(self, value: Val):
        self.value = value


class Evaluator:
    """Evaluates one kernel of a program; ``precision`` is the working precision
    (the least precise float the program names), for the branch tolerance."""

    def __init__(self, program: ast.Program, precision: str | None, choices: Choices):
        self.program = program
        self.precision = precision
        self.choices = choices
        self.funcs = {f.name: f for f in program.funcs}
        self.consts: dict[str, ast.Expr] = {c.name: c.value for c in program.of_type(ast.Const)}
        self.dims: dict[str, int] = {}
        self.depth = 0
        self.free: list[np.ndarray | None] = []
        if program.of_type(ast.Import):
            raise Unsupported("imports (the stdlib is not evaluated)")

    # ------------------------------------------------------------ kernel

    def run(self, kernel: str, inputs: dict[str, np.ndarray],
            dims: dict[str, int] | None = None) -> list[np.ndarray]:
        """The outputs; dims come from the inputs' shapes (``dims`` only names the
        extents of dims that no input declares)."""
        k = next(d for d in self.program.kernels if d.name == kernel)
        env: dict[str, Val] = {}
        for p in k.params:
            if p.direction == "input":
                env[p.name] = self._input(p, inputs[p.name])
        for n, v in (dims or {}).items():
            self.dims.setdefault(n, v)
        self._block(k.body, env)
        outs = []
        for p in k.params:
            if p.direction == "output":
                if p.name not in env:
                    raise Unsupported(f"output {p.name} unassigned on this path")
                outs.append(self._output(p, env[p.name]))
        return outs

    def _input(self, p: ast.Param, array: np.ndarray) -> Val:
        t = p.type
        if isinstance(t, ast.AnyTensorType):
            raise Unsupported("'tensor' parameters")
        if isinstance(t, ast.TensorType):
            for d, n in zip(t.dims, array.shape, strict=True):
                if isinstance(d.value, str):
                    if self.dims.setdefault(d.value, n) != n:
                        raise RuntimeFailure(f"dim {d.value} bound to two extents")
        return Val(store(array, t.dtype), t.dtype)

    def _output(self, p: ast.Param, v: Val) -> np.ndarray:
        t = p.type
        assert isinstance(t, ast.ScalarType | ast.TensorType)
        if v.dtype != t.dtype:
            if not v.weak:
                raise Unsupported(f"output {p.name}: {v.dtype} for declared {t.dtype}")
            v = Val(convert(v, t.dtype), t.dtype, free=v.free)
        want = () if isinstance(t, ast.ScalarType) else tuple(
            self.dims[d.value] if isinstance(d.value, str) else d.value for d in t.dims)
        if v.shape != want:
            raise RuntimeFailure(f"output {p.name}: shape {v.shape}, declared {want}")
        self.free.append(None if v.free is None or v.free.shape != v.shape else v.free.copy())
        return v.data.copy()

    # ------------------------------------------------------------ statements

    def _block(self, b: ast.Block, env: dict[str, Val]) -> None:
        for s in b.stmts:
            self._stmt(s, env)

    def _stmt(self, s: ast.Stmt, env: dict[str, Val]) -> None:
        if isinstance(s, ast.Assign):
            env[s.target] = self.expr(s.value, env)
        elif isinstance(s, ast.AugAssign):
            env[s.target] = npops.binary(s.op, self._name(s.target, env), self.expr(s.value, env),
                                         self.precision)
        elif isinstance(s, ast.SliceAssign):
            env[s.target] = self._slice_assign(s, env)
        elif isinstance(s, ast.If):
            body = s.then_body if self._cond(s.cond, env) else s.else_body
            if body is not None:
                self._block(body, env)
        elif isinstance(s, ast.For):
            self._for(s, env)
        elif isinstance(s, ast.While):
            for _ in range(MAX_STEPS):
                if not self._cond(s.cond, env):
                    return
                self._block(s.body, env)
            raise Unsupported(f"a while loop ran {MAX_STEPS} iterations")
        elif isinstance(s, ast.Return):
            raise _Return(self.expr(s.value, env))
        else:
            raise Unsupported(f"statement {type(s).__name__}")

    def _cond(self, e: ast.Expr, env: dict[str, Val]) -> bool:
        c = self.expr(e, env)
        if c.dtype != "bool" or c.data.ndim != 0:
            raise Unsupported(f"a condition of {c.dtype}{list(c.shape)}")
        natural = bool(c.data)
        # either branch is right when the comparison was within rounding, or when it
        # compared a value with no single right one (``free``: a float reduction that
        # overflows in some order of its terms, so inf, -inf or NaN; seed 9400000000809
        # branched on the sum of inf and four -1.9e38: inf in one order, NaN in another)
        either = c.near or (c.free is not None and bool(np.any(c.free)))
        return self.choices.decide(natural) if either else natural

    def _for(self, s: ast.For, env: dict[str, Val]) -> None:
        bounds = [self._int(x, env) if x is not None else d
                  for x, d in ((s.start, 0), (s.stop, None), (s.step, 1))]
        start, stop, step = bounds
        if step == 0:
            raise RuntimeFailure("range step is zero")
        steps = range(start, stop, step)  # type: ignore[arg-type]
        if len(steps) > MAX_STEPS:
            raise Unsupported(f"a for loop of {len(steps)} iterations")
        for i in steps:
            env[s.var] = Val(np.asarray(i, np.int64), "i64", True)
            self._block(s.body, env)

    def _slice_assign(self, s: ast.SliceAssign, env: dict[str, Val]) -> Val:
        t = self._name(s.target, env)
        index = self._index_items(s.items, t.shape, env)
        v = self.expr(s.value, env)
        data = t.data.copy()
        region = data[index]
        try:
            src = np.broadcast_to(cast(v.data, t.dtype), np.shape(region))
        except ValueError:
            raise RuntimeFailure(f"cannot assign {v.shape} to a region {np.shape(region)}") \
                from None
        data[index] = src
        return Val(data, t.dtype, False, t.exact and v.exact)

    # ------------------------------------------------------------ expressions

    def expr(self, e: ast.Expr, env: dict[str, Val]) -> Val:
        if isinstance(e, ast.IntLit | ast.FloatLit | ast.BoolLit):
            return weak_scalar(e.value)
        if isinstance(e, ast.Name):
            return self._name(e.id, env)
        if isinstance(e, ast.UnaryOp):
            x = self.expr(e.operand, env)
            return npops.negate(x) if e.op == "-" else npops.logical_not(x)
        if isinstance(e, ast.BinOp):
            a, b = self.expr(e.lhs, env), self.expr(e.rhs, env)
            return npops.matmul(a, b) if e.op == "@" else npops.binary(e.op, a, b,
                                                                       self.precision)
        if isinstance(e, ast.ArrayLit):
            return self._array(e, env)
        if isinstance(e, ast.Index):
            base = self.expr(e.base, env)
            out = base.data[self._index_items(e.items, base.shape, env)]
            return Val(np.array(out), base.dtype, base.weak, base.exact)
        if isinstance(e, ast.Call):
            return self._call(e, env)
        raise Unsupported(f"expression {type(e).__name__}")

    def _name(self, n: str, env: dict[str, Val]) -> Val:
        if n in env:
            return env[n]
        if n in self.dims:
            return Val(np.asarray(self.dims[n], np.int64), "i64", True)
        if n in self.consts:
            return self.expr(self.consts[n], {})
        raise Unsupported(f"name '{n}' (unbound, or a dim only an output declares)")

    def _int(self, e: ast.Expr, env: dict[str, Val]) -> int:
        v = self.expr(e, env)
        if v.dtype not in ("i8", "i32", "i64") or v.data.ndim != 0:
            raise Unsupported(f"an index of {v.dtype}{list(v.shape)}")
        return int(v.data)

    def _index_items(self, items: tuple[ast.IndexItem, ...], shape: tuple[int, ...],
                     env: dict[str, Val]) -> tuple[Any, ...]:
        if len(items) > len(shape):
            raise Unsupported("too many indices (the checker rejects it)")
        out: list[Any] = []
        for axis, item in enumerate(items):
            if isinstance(item, ast.Slice):
                parts = [self._int(p, env) if p is not None else None
                         for p in (item.start, item.stop, item.step)]
                if parts[2] == 0:
                    raise RuntimeFailure("slice step is zero")
                out.append(slice(*parts))
            else:
                i = self._int(item, env)
                if not -shape[axis] <= i < shape[axis]:
                    raise RuntimeFailure(f"index {i} out of range for extent {shape[axis]}")
                out.append(i)
        return tuple(out)

    def _array(self, e: ast.ArrayLit, env: dict[str, Val]) -> Val:
        items = [self.expr(x, env) for x in e.elements]
        if not items:
            return Val(np.zeros(0), "f64", True)
        acc = items[0]
        dtype, weak = acc.dtype, acc.weak
        for x in items[1:]:
            if x.shape != acc.shape:
                raise Unsupported("a ragged array literal (the checker rejects it)")
            dtype, weak = promote(Val(acc.data, dtype, weak), x)
        data = np.stack([convert(x, dtype) for x in items])
        return Val(data, dtype, weak, all(x.exact for x in items))

    def _call(self, e: ast.Call, env: dict[str, Val]) -> Val:
        if e.module is not None:
            raise Unsupported(f"module call {e.module}.{e.name}")
        if e.name in self.funcs:
            return self._func(self.funcs[e.name], [self.expr(a, env) for a in e.args])
        if e.name not in TABLE:
            raise Unsupported(f"builtin '{e.name}'")
        names = PARAMS[e.name]
        given = dict(zip(names, e.args, strict=False)) | {k.name: k.value for k in e.keywords}
        args: dict[str, Any] = {}
        for p, node in given.items():
            if p in DTYPE:
                if not isinstance(node, ast.Name) or node.id not in STORAGE:
                    raise Unsupported(f"dtype argument {node!r}")
                args[p] = node.id
            elif p in LISTS:
                if not isinstance(node, ast.ArrayLit):
                    raise Unsupported(f"argument {p} of {e.name} is not a list")
                args[p] = [self.expr(x, env) for x in node.elements]
            elif p in STATIC:
                args[p] = self._static(node, env)
            else:
                args[p] = self.expr(node, env)
        return TABLE[e.name](**args)

    def _static(self, node: ast.Expr, env: dict[str, Val]) -> Any:
        if isinstance(node, ast.ArrayLit):
            return [self.expr(x, env).scalar() for x in node.elements]
        return self.expr(node, env).scalar()

    def _func(self, f: ast.Func, args: list[Val]) -> Val:
        if len(args) != len(f.params):
            raise Unsupported(f"func {f.name} called with {len(args)} arguments")
        self.depth += 1
        if self.depth > 50:
            raise Unsupported("recursion (the checker rejects it)")
        env = {p.name: a for p, a in zip(f.params, args, strict=True)}
        try:
            self._block(f.body, env)
        except _Return as r:
            return r.value
        finally:
            self.depth -= 1
        raise Unsupported(f"func {f.name} ended without a return")


def evaluate_paths(program: ast.Program, kernel: str, inputs: dict[str, np.ndarray],
                   precision: str | None = None, dims: dict[str, int] | None = None
                   ) -> list[PathOutcome]:
    """Every outcome the language allows, the natural path (no choice flipped) first.

    Raises ``Unsupported`` when any path uses something the evaluator does not cover.
    """
    outcomes: list[PathOutcome] = []
    pending: list[list[bool]] = [[]]
    while pending and len(outcomes) < MAX_PATHS:
        forced = pending.pop()
        choices = Choices(list(forced))
        try:
            ev = Evaluator(program, precision, choices)
            values = ev.run(kernel, inputs, dims)
            outcomes.append(PathOutcome(values, choices=len(choices.taken), free=ev.free))
        except RuntimeFailure as err:
            outcomes.append(PathOutcome(None, f"runtime failure: {err}", len(choices.taken)))
        taken = choices.taken
        pending += [taken[:i] + [not taken[i]] for i in range(len(forced), len(taken))]
    return outcomes
