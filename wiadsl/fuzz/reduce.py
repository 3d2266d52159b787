"""A reducer: greedy delta debugging on the AST of a failing program.

``reduce_case(case, still_fails)`` tries smaller variants of the program, coarse
to fine, and keeps the first one for which ``still_fails`` holds, until no
variant does (a 1-minimal program for these edits) or the budget runs out:
1. drop a helper ``func`` or an output (its parameter and its assignments);
2. drop a statement, or replace an ``if``/``for``/``while`` by its body;
3. replace a compound expression by one of its operands, drop a keyword argument.

Invariants: the kernel, its name and its inputs' names are kept, so the inputs
(derived from the declaration and the seed, genprog.make_inputs) stay the same for
the parameters that remain; variants the checker rejects simply fail the
predicate (``still_fails`` must compile the program and return False on a
WiaError of the frontend).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from ..frontend import ast
from ..records import fields, is_record, replace
from .genprog import FuzzCase, make_inputs

Path = tuple[tuple[str, int | None], ...]
_COMPOUND = (ast.If, ast.For, ast.While)


def walk(node: object, path: Path = ()) -> Iterator[tuple[Path, object]]:
    """Every AST node under ``node`` with its path (field name, tuple index)."""
    yield path, node
    for f in fields(node):
        if f.name == "span":
            continue
        value = getattr(node, f.name)
        if is_record(value):
            yield from walk(value, path + ((f.name, None),))
        elif isinstance(value, tuple):
            for i, x in enumerate(value):
                if is_record(x):
                    yield from walk(x, path + ((f.name, i),))


def replace_at(node: object, path: Path, new: object) -> object:
    """``node`` with the node at ``path`` replaced by ``new`` (a new tree)."""
    if not path:
        return new
    (name, index), rest = path[0], path[1:]
    child = getattr(node, name)
    if index is None:
        return replace(node, **{name: replace_at(child, rest, new)})  # type: ignore[type-var]
    items = list(child)
    items[index] = replace_at(items[index], rest, new)
    return replace(node, **{name: tuple(items)})  # type: ignore[type-var]


def _edit(p: ast.Program, path: Path, new: object) -> ast.Program:
    """``replace_at`` on a program: ``path`` is never empty here, so the root stays a program."""
    out = replace_at(p, path, new)
    if not isinstance(out, ast.Program):
        raise TypeError(f"replacing at {path!r} did not keep the program root")
    return out


def _drop_output(p: ast.Program, kernel: ast.Kernel, out: str) -> ast.Program:
    params = tuple(x for x in kernel.params if x.name != out)
    body = _without_target(kernel.body, out)
    k = replace(kernel, params=params, body=body)
    return replace(p, decls=tuple(k if d is kernel else d for d in p.decls))


def _without_target(b: ast.Block, target: str) -> ast.Block:
    return replace(b, stmts=tuple(s for s in b.stmts if getattr(s, "target", None) != target))


def variants(p: ast.Program, kernel: str) -> Iterator[ast.Program]:
    """Smaller programs, coarsest edits first."""
    k = next(d for d in p.kernels if d.name == kernel)
    for d in p.decls:
        if d is not k:
            yield replace(p, decls=tuple(x for x in p.decls if x is not d))
    outs = [x.name for x in k.params if x.direction == "output"]
    if len(outs) > 1:
        for o in outs:
            yield _drop_output(p, k, o)
    nodes = list(walk(p))
    for path, node in nodes:
        if isinstance(node, ast.Block):
            for i, s in enumerate(node.stmts):
                before, after = node.stmts[:i], node.stmts[i + 1:]
                yield _edit(p, path, replace(node, stmts=before + after))
                if isinstance(s, _COMPOUND):
                    bodies = [s.then_body, s.else_body] if isinstance(s, ast.If) else [s.body]
                    for b in bodies:
                        if b is not None:
                            new = replace(node, stmts=before + b.stmts + after)
                            yield _edit(p, path, new)
    for path, node in nodes:
        for child in _children(node):
            yield _edit(p, path, child)
        if isinstance(node, ast.Call) and node.keywords:
            for kw in node.keywords:
                kws = tuple(x for x in node.keywords if x is not kw)
                yield _edit(p, path, replace(node, keywords=kws))


def _children(node: object) -> list[ast.Expr]:
    if isinstance(node, ast.BinOp):
        return [node.lhs, node.rhs]
    if isinstance(node, ast.UnaryOp):
        return [node.operand]
    if isinstance(node, ast.Call):
        return list(node.args)
    if isinstance(node, ast.Index):
        return [node.base]
    return []


def reduce_case(case: FuzzCase, still_fails: Callable[[FuzzCase], bool],
                budget_s: float = 120.0, max_tries: int = 400) -> FuzzCase:
    """The smallest variant of ``case`` found for which ``still_fails`` holds."""
    deadline = time.monotonic() + budget_s
    tries = 0
    best = case
    progress = True
    while progress and tries < max_tries and time.monotonic() < deadline:
        progress = False
        for program in variants(best.program, best.kernel):
            if tries >= max_tries or time.monotonic() >= deadline:
                break
            tries += 1
            candidate = FuzzCase(best.seed, program, best.kernel, best.dims,
                                 make_inputs(program, best.kernel, best.dims, best.seed))
            if still_fails(candidate):
                best, progress = candidate, True
                break
    return best


def reproducer_text(case: FuzzCase, target: str, detail: str) -> str:
    """The reproducer file: a header saying how to run it, then the source."""
    dims = ", ".join(f"{k}={v}" for k, v in sorted(case.dims.items()))
    first = detail.splitlines()[0] if detail else ""
    return (f"// fuzz reproducer: seed={case.seed} target={target} dims: {dims}\n"
            f"// inputs: wiadsl.fuzz.genprog.make_inputs(program, '{case.kernel}', dims, seed)\n"
            f"// failure: {first[:300]}\n{case.source}")
