"""Name resolution: module symbol tables, block-scoped environments, the call graph.

Invariants:
- A ``ModuleScope`` holds each top-level name once; duplicates, and names that
  clash with builtins or dtype names, are reported when it is built.
- An ``Env`` is the state at one program point: names bound on every path that
  reaches it (``bound``), names bound on some paths only (``maybe``, with a
  description of a path that misses them), and whether every path has returned.
  ``merge`` joins two incoming paths (LANGUAGE.md §5: a name is visible after an
  ``if`` or a loop only when bound on every path).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ..diagnostics import WiaError, WiaNameError
from ..dtypes import DTYPE_NAMES
from ..records import field, record
from . import ast
from .builtins import BUILTINS, Operand
from .loader import MAIN_MODULE, LoadedProgram
from .typerules import RuleError, join


@record
class ModuleScope:
    """The top-level names of one module (the main file is ``MAIN_MODULE``)."""

    name: str
    program: ast.Program
    imports: dict[str, ast.Import] = field(default_factory=dict)
    kernels: dict[str, ast.Kernel] = field(default_factory=dict)
    funcs: dict[str, ast.Func] = field(default_factory=dict)
    consts: dict[str, ast.Const] = field(default_factory=dict)

    def qualify(self, name: str) -> str:
        """``nn.gelu`` for module functions, plain ``f`` in the main file."""
        return name if self.name == MAIN_MODULE else f"{self.name}.{name}"

    def value_names(self) -> list[str]:
        return [*self.consts]


def _declare(scope: ModuleScope, decl: ast.Decl, errors: list[WiaError]) -> None:
    name = decl.module if isinstance(decl, ast.Import) else decl.name
    if isinstance(decl, ast.Import):
        if name in scope.imports:
            errors.append(WiaNameError(f"module '{name}' is imported twice", decl.span))
        else:
            scope.imports[name] = decl
        return
    tables: dict[type, dict] = {ast.Kernel: scope.kernels, ast.Func: scope.funcs,
                                ast.Const: scope.consts}
    previous = scope.kernels.get(name) or scope.funcs.get(name) or scope.consts.get(name)
    if previous is not None:
        errors.append(WiaNameError(f"duplicate declaration of '{name}' (first declared at "
                                   f"line {previous.span.line})", decl.span))
    elif name in BUILTINS and isinstance(decl, ast.Func):
        # Only funcs clash: kernels are never called, and consts are never called.
        errors.append(WiaNameError(f"'{name}' is a builtin and cannot be redeclared", decl.span))
    elif name in DTYPE_NAMES:
        errors.append(WiaNameError(f"'{name}' is a dtype name and cannot be declared", decl.span))
    else:
        tables[type(decl)][name] = decl


def build_scopes(loaded: LoadedProgram, errors: list[WiaError]) -> dict[str, ModuleScope]:
    """One scope per module, duplicates reported into ``errors``."""
    scopes: dict[str, ModuleScope] = {}
    for name in loaded.module_names:
        scope = ModuleScope(name, loaded.program(name))
        for decl in scope.program.decls:
            _declare(scope, decl, errors)
        scopes[name] = scope
    return scopes


# ------------------------------------------------------------------ environments


@record
class Env:
    """The names visible at one program point (see the module docstring)."""

    bound: dict[str, Operand] = field(default_factory=dict)
    maybe: dict[str, str] = field(default_factory=dict)
    returned: bool = False

    def copy(self) -> Env:
        return Env(dict(self.bound), dict(self.maybe), self.returned)

    def bind(self, name: str, value: Operand) -> None:
        self.bound[name] = value
        self.maybe.pop(name, None)


def _and(first: str, rest: str | None) -> str:
    return first if not rest else f"{first} and {rest}"


JoinError = Callable[[str, str], None]


def merge(a: Env, b: Env, via_a: str, via_b: str, on_error: JoinError) -> Env:
    """The state after two paths meet; ``via_*`` describe how each path got here.

    A path that returned contributes nothing. ``on_error(name, message)`` reports a
    name whose types on the two paths do not join.
    """
    if a.returned != b.returned:
        return (b if a.returned else a).copy()
    out = Env(returned=a.returned)
    for name in a.bound.keys() | b.bound.keys() | a.maybe.keys() | b.maybe.keys():
        if name in a.bound and name in b.bound:
            out.bound[name] = _join_operands(name, a.bound[name], b.bound[name], on_error)
        elif name not in a.bound:
            out.maybe[name] = _and(via_a, a.maybe.get(name))
        else:
            out.maybe[name] = _and(via_b, b.maybe.get(name))
    return out


def _join_operands(name: str, x: Operand, y: Operand, on_error: JoinError) -> Operand:
    try:
        t = join(x.type, y.type)
    except RuleError as e:
        on_error(name, f"'{name}' is {e.message}")
        t = x.type
    static = x.static if x.static == y.static and type(x.static) is type(y.static) else None
    return Operand(t, static, name)


# ------------------------------------------------------------------ AST walking


def iter_nodes(node: object) -> Iterator[object]:
    """Every AST node below ``node`` (itself included), depth first."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, tuple):
            stack.extend(reversed(n))
            continue
        names = ast.child_fields(type(n))
        if names is None:
            continue
        yield n
        stack.extend(getattr(n, name) for name in names)


def assigned_names(block: ast.Block) -> set[str]:
    """Names any statement in ``block`` (nested blocks included) binds."""
    kinds = (ast.Assign, ast.AugAssign, ast.SliceAssign)
    names = {n.target for n in iter_nodes(block) if isinstance(n, kinds)}
    return names | {n.var for n in iter_nodes(block) if isinstance(n, ast.For)}


# ------------------------------------------------------------------ recursion


FuncKey = tuple[str, str]


def _callees(scope: ModuleScope, func: ast.Func,
             scopes: dict[str, ModuleScope]) -> Iterator[tuple[FuncKey, ast.Call]]:
    for node in iter_nodes(func.body):
        if not isinstance(node, ast.Call):
            continue
        module = scope.name if node.module is None else node.module
        if node.module is not None and node.module not in scope.imports:
            continue
        target = scopes.get(module)
        if target is not None and node.name in target.funcs:
            yield (module, node.name), node


def find_recursion(scopes: dict[str, ModuleScope], errors: list[WiaError]) -> set[FuncKey]:
    """Report each call cycle once (at the call that closes it); return the funcs on cycles."""
    state: dict[FuncKey, str] = {}
    on_cycle: set[FuncKey] = set()

    def name(key: FuncKey) -> str:
        return scopes[key[0]].qualify(key[1])

    def visit(key: FuncKey, path: list[FuncKey]) -> None:
        state[key] = "active"
        scope = scopes[key[0]]
        for callee, call in _callees(scope, scope.funcs[key[1]], scopes):
            if state.get(callee) == "active":
                cycle = path[path.index(callee):] + [callee]
                on_cycle.update(cycle)
                errors.append(WiaNameError("recursion is not allowed: "
                                           + " -> ".join(name(k) for k in cycle), call.span))
            elif callee not in state:
                visit(callee, path + [callee])
        state[key] = "done"

    for scope in scopes.values():
        for fname in scope.funcs:
            if (scope.name, fname) not in state:
                visit((scope.name, fname), [(scope.name, fname)])
    return on_cycle
