"""Lowering of checked kernels and funcs to the SSA IR (AST -> ``ModuleOp``).

Control flow follows the Triton frontend's scheme, with block arguments in place
of phi nodes:
- ``if``: the condition ends the current block in ``cond_br``; each branch is
  lowered into its own blocks; names that differ between the incoming paths
  become arguments of the join block (values equal on every path need none).
- ``for`` / ``while``: a header block whose arguments are the loop-carried names
  (and the induction variable); it tests the condition and branches to the body
  or the exit. The header dominates the exit, so after the loop the names refer
  to the header's arguments directly.
- Join and header arguments take the variable's name (``^join(%y)``); blocks are
  named ``then``/``else``/``join``/``loop``/``body``/``exit``, numbered ``.1``,
  ``.2``... when repeated, and a loop's exit follows its body's blocks.
- Terminators are created last, once the join or header types are known, so
  edge values can be cast to them first (a weak literal meeting an f32, or a
  static extent meeting a dynamic one).

Loop-carried types are found by a small fixpoint: lower the body with the types
before the loop; if what the body yields joins to wider types, discard those
blocks and lower again with the joined types (``typerules.join`` only widens, so
this ends after at most a few rounds).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

import numpy as np

from ..diagnostics import Span, WiaNameError, WiaTypeError
from ..dtypes import DType
from ..ir.builder import Builder
from ..ir.core import Block, OpResult, Value
from ..ir.module import FuncOp
from ..records import record
from . import ast
from . import typerules as tr
from .builtins import ALL_AXES, BUILTINS, Sym
from .funcargs import bind_func_args
from .lower_expr import Env, ExprLowerer, rule_error
from .lower_values import Emitter, TypedValue, all_axes, ir_type
from .scope import assigned_names
from .typerules import ValueType

if TYPE_CHECKING:
    from .lower_module import ProgramLowerer


@record
class PendingReturn:
    """A ``return`` whose terminator waits until the func's result type is known."""

    block: Block
    value: TypedValue
    span: Span


class BodyLowerer:
    """Lowers the statements of one kernel or func instance into ``func``."""

    builtin_names = frozenset(BUILTINS)

    def __init__(self, program: ProgramLowerer, module: str, func: FuncOp,
                 dims: dict[str, tuple[Value, int]] | None = None):
        self.program = program
        self.module = module
        self.func = func
        self.em = Emitter(Builder.at_end(func.entry))
        self.exprs = ExprLowerer(self)
        self.block: Block | None = func.entry
        self.returns: list[PendingReturn] = []
        self._dim_sources = dims or {}
        self._dims: dict[str, TypedValue] = {}
        self._block_hints: dict[str, int] = {}
        #: dim names only outputs declare: no input gives their extent

    # ------------------------------------------------------------- names

    def lookup(self, name: str, span: Span, env: Env) -> TypedValue:
        """A name read: locals, then dims, then consts of this module."""
        if name in env:
            return env[name]
        if name in self._dim_sources:
            return self._dim(name)
        consts = self.program.consts.get(self.module, {})
        if name in consts:
            return self._const(consts[name])
        if name == "none":
            return all_axes()
        raise WiaNameError(f"unknown name '{name}'", span)

    def module_const(self, module: str, name: str, span: Span) -> TypedValue:
        consts = self.program.consts.get(module, {})
        if name not in consts:
            raise WiaNameError(f"module '{module}' has no const '{name}'", span)
        return self._const(consts[name])

    def _const(self, value: object) -> TypedValue:
        array = np.asarray(value)
        kind = {"b": 0, "i": 1, "u": 1, "f": 2}[array.dtype.kind]
        dtype = {0: DType.BOOL, 1: DType.I64, 2: DType.F64}[kind]
        static = array.item() if array.ndim == 0 else _nested(array)
        return self.em.constant(array if array.ndim else static,
                                ValueType(dtype, array.shape, True), static)

    def _dim(self, name: str) -> TypedValue:
        """A dim name as a weak i64, read once at the top of the entry block."""
        if name not in self._dims:
            source, axis = self._dim_sources[name]
            entry = self.func.entry
            b = Builder.before(entry.ops[0]) if entry.ops else Builder.at_end(entry)
            em = Emitter(b)
            extent = em.dim(source, axis)
            value = b.value("arith.cast", [extent], ir_type(ValueType(DType.I64)), name=name)
            self._dims[name] = TypedValue(value, ValueType(DType.I64, (), True), Sym(name))
        return self._dims[name]

    def static_value(self, e: ast.Expr, env: Env) -> object:
        """The compile-time value of ``e`` (numbers, nested tuples), or None."""
        if isinstance(e, ast.ArrayLit):
            items = [self.static_value(x, env) for x in e.elements]
            return None if any(i is None for i in items) else tuple(items)
        if isinstance(e, (ast.IntLit, ast.FloatLit, ast.BoolLit)):
            return e.value
        operands = [e.operand] if isinstance(e, ast.UnaryOp) else \
            [e.lhs, e.rhs] if isinstance(e, ast.BinOp) else []
        if operands and all(self.static_value(x, env) is not None for x in operands):
            # typed: folded in the result dtype (its constants are dropped if unread)
            return self.exprs.expr(e, env).static
        if isinstance(e, (ast.Name, ast.QualifiedName)):
            tv = self.exprs.expr(e, env)
            return None if isinstance(tv.static, Sym) else tv.static
        return None

    def call_func(self, e: ast.Call, env: Env) -> TypedValue:
        """A func call: arguments bound as the checker bound them, defaults made constants."""
        module = self.module if e.module is None else e.module
        scope = self.program.checked.scopes[module]
        func = scope.funcs.get(e.name)
        if func is None:
            raise WiaTypeError(f"unknown func '{scope.qualify(e.name)}'", e.span)
        bound, errors = bind_func_args(e, func, scope.qualify(e.name))
        if errors:
            raise errors[0]
        values = {id(a): self.exprs.expr(a, env) for a in (*e.args, *(k.value for k in e.keywords))}
        args: list[TypedValue] = []
        for p, a in zip(func.params, bound, strict=True):
            if a is not None:
                args.append(values[id(a)])
            else:
                default = self.program.checked.defaults[(module, func.name, p.name)]
                if default.static is ALL_AXES:
                    args.append(all_axes())
                    continue
                assert isinstance(default.type, ValueType), "a checked default has a type"
                args.append(self.em.constant(default.static, default.type, default.static))
        return self.program.call_func(self.em.b, module, e.name, args, e.span)

    # ------------------------------------------------------------- statements

    def block_stmts(self, body: ast.Block, env: Env) -> Env:
        """Lower ``body`` from the current block; statements after a return are dead."""
        for stmt in body.stmts:
            if self.block is None:
                break
            env = self.stmt(stmt, env)
        return env

    def stmt(self, s: ast.Stmt, env: Env) -> Env:
        handler = getattr(self, f"_{type(s).__name__.lower()}", None)
        if handler is None:
            raise WiaTypeError(f"cannot lower statement {type(s).__name__}", s.span)
        b = self.em.b
        outer, b.loc = b.loc, s.span
        try:
            return handler(s, env)
        finally:
            b.loc = outer

    def _assign(self, s: ast.Assign, env: Env) -> Env:
        tv = self.exprs.expr(s.value, env)
        _name(tv.value, s.target)
        return {**env, s.target: tv}

    def _augassign(self, s: ast.AugAssign, env: Env) -> Env:
        current = self.lookup(s.target, s.span, env)
        value = self.exprs.expr(s.value, env)
        try:
            result = self.exprs.binary(s.op, current, value)
        except tr.RuleError as err:
            raise rule_error(err, s.span) from None
        _name(result.value, s.target)
        return {**env, s.target: result}

    def _sliceassign(self, s: ast.SliceAssign, env: Env) -> Env:
        target = self.lookup(s.target, s.span, env)
        items, layout, operands = self.exprs.index_items(s.items, env)
        value = self.exprs.expr(s.value, env)
        try:
            from . import shaperules as sr

            result = sr.slice_update(target.type, items, value.type)
        except tr.RuleError as err:
            raise rule_error(err, s.span) from None
        assert isinstance(result, ValueType)
        value = self.em.cast(value, result.dtype)
        b = self.em.b
        if len(layout) == target.type.rank and all(x == "i" for x in layout) \
                and value.type.is_scalar:
            new = b.value("tensor.insert", [value.value, target.value, *operands],
                          ir_type(result))
        else:
            new = b.value("tensor.insert_slice", [value.value, target.value, *operands],
                          ir_type(result), {"layout": layout})
        _name(new, s.target)
        return {**env, s.target: TypedValue(new, result)}

    def _return(self, s: ast.Return, env: Env) -> Env:
        assert self.block is not None
        self.returns.append(PendingReturn(self.block, self.exprs.expr(s.value, env), s.span))
        self.block = None
        return env

    def _condition(self, cond: ast.Expr, env: Env) -> Value:
        c = self.exprs.expr(cond, env)
        if not c.type.is_scalar or c.type.dtype is not DType.BOOL:
            raise WiaTypeError(f"condition must be a scalar bool, got {c.type}", cond.span)
        return c.value

    # ------------------------------------------------------------------ if

    def _if(self, s: ast.If, env: Env) -> Env:
        cond = self._condition(s.cond, env)
        pre = self._current()
        then_block = self._new_block("then")
        then_env, then_end = self._lower_branch(then_block, s.then_body, env)
        if s.else_body is not None:
            else_block = self._new_block("else")
            else_env, else_end = self._lower_branch(else_block, s.else_body, env)
            incoming = [(then_end, then_env), (else_end, else_env)]
        else:
            else_block = None
            incoming = [(then_end, then_env), (pre, env)]
        live = [(blk, e) for blk, e in incoming if blk is not None]
        if not live:  # every path returned
            # without an else, ``pre`` falls through to the join and would be live
            assert else_block is not None
            with self._at_end(pre) as b:
                b.cond_br(cond, then_block, [], else_block, [])
            self.block = None
            return env
        join = self._new_block("join")
        joined, edge_values = self._join_env(join, live, s.span)
        false_args: list[Value] = []
        for (blk, _), values in zip(live, edge_values, strict=True):
            if blk is pre:  # no else: the false edge goes straight to the join
                false_args = values
            else:
                with self._at_end(blk) as b:
                    b.br(join, values)
        false_dest = else_block if else_block is not None else join
        with self._at_end(pre) as b:
            b.cond_br(cond, then_block, [], false_dest, false_args)
        self._move_to(join)
        return joined

    def _lower_branch(self, block: Block, body: ast.Block, env: Env
                      ) -> tuple[Env, Block | None]:
        self._move_to(block)
        out = self.block_stmts(body, dict(env))
        return out, self.block

    def _join_env(self, join: Block, live: list[tuple[Block, Env]], span: Span
                  ) -> tuple[Env, list[list[Value]]]:
        """The env after a join: names bound on every path; differing ones become
        block arguments of ``join``. Returns the env and each edge's values."""
        names = set.intersection(*(set(e) for _, e in live))
        joined: Env = {}
        edge_values: list[list[Value]] = [[] for _ in live]
        for name in sorted(names, key=lambda n: list(live[0][1]).index(n)
                           if n in live[0][1] else 0):
            tvs = [e[name] for _, e in live]
            if all(tv.value is tvs[0].value for tv in tvs):
                joined[name] = tvs[0]
                continue
            t = self._join_types(name, [tv.type for tv in tvs], span)
            arg = join.add_arg(ir_type(t), name)
            joined[name] = TypedValue(arg, t)
            for k, ((blk, _), tv) in enumerate(zip(live, tvs, strict=True)):
                _yield_name(tv.value, name)
                edge_values[k].append(self._coerce_at_end(blk, tv, t))
        return joined, edge_values

    @staticmethod
    def _join_types(name: str, types: Sequence[ValueType], span: Span) -> ValueType:
        t = types[0]
        try:
            for other in types[1:]:
                joined = tr.join(t, other)
                assert isinstance(joined, ValueType)
                t = joined
        except tr.RuleError as err:
            raise rule_error(tr.RuleError(f"'{name}' is {err.message}"), span) from None
        return t

    # --------------------------------------------------------------- loops

    def _for(self, s: ast.For, env: Env) -> Env:
        one = ast.IntLit(1, span=s.span)
        start = self._loop_int(s.start or ast.IntLit(0, span=s.span), env)
        stop = self._loop_int(s.stop, env)
        step = self._loop_int(s.step or one, env)
        if step.static == 0:
            raise WiaTypeError("range() step must not be zero", (s.step or s.stop).span)
        induction = TypedValue(start.value, ValueType(DType.I64, (), True))

        def header_cond(hdr_env: Env, i: TypedValue) -> Value:
            return self._range_test(i, stop, step)

        def advance(body_env: Env, i: TypedValue) -> TypedValue:
            return self.exprs.binary("+", i, step)

        return self._loop(s.body, env, s.span, header_cond, induction, s.var, advance)

    def _while(self, s: ast.While, env: Env) -> Env:
        return self._loop(s.body, env, s.span,
                          lambda hdr_env, _i: self._condition(s.cond, hdr_env),
                          None, None, None)

    def _loop_int(self, e: ast.Expr, env: Env) -> TypedValue:
        tv = self.exprs.expr(e, env)
        if not tv.type.is_scalar or not tv.type.dtype.is_int:
            raise WiaTypeError(f"range() takes integers, got {tv.type}", e.span)
        return self.em.cast(tv, DType.I64)

    def _range_test(self, i: TypedValue, stop: TypedValue, step: TypedValue) -> Value:
        if isinstance(step.static, int):
            return self.exprs.binary("<" if step.static > 0 else ">", i, stop).value
        zero = self.em.constant(0, ValueType(DType.I64, (), True))
        up = self.exprs.binary("&&", self.exprs.binary(">", step, zero),
                               self.exprs.binary("<", i, stop))
        down = self.exprs.binary("&&", self.exprs.binary("<", step, zero),
                                 self.exprs.binary(">", i, stop))
        return self.exprs.binary("||", up, down).value

    def _loop(self, body: ast.Block, env: Env, span: Span, header_cond, induction,
              var: str | None, advance) -> Env:
        """Shared shape of ``for`` and ``while`` (see the module docstring)."""
        pre = self._current()
        carried = [n for n in env if n in assigned_names(body) and n != var]
        types = {n: env[n].type for n in carried}
        while True:
            mark, hints = len(self.func.blocks), dict(self._block_hints)
            header = self._new_block("loop")
            i = TypedValue(header.add_arg(ir_type(induction.type), var), induction.type) \
                if induction is not None else None
            hdr_env = dict(env)
            for n in carried:
                hdr_env[n] = TypedValue(header.add_arg(ir_type(types[n]), n), types[n])
            self._move_to(header)
            cond = header_cond(hdr_env, i)
            body_block = self._new_block("body")
            exit_block = self._new_block("exit")
            with self._at_end(header) as b:
                b.cond_br(cond, body_block, [], exit_block, [])
            self._move_to(body_block)
            # a ``for`` loop has both a variable and an induction value, a ``while`` neither
            bound = {var: i} if var and i is not None else {}
            body_env = self.block_stmts(body, {**hdr_env, **bound})
            end = self.block
            widened = {n: self._join_types(n, [types[n], body_env[n].type], span)
                       for n in carried} if end is not None else types
            if all(ir_type(widened[n]) == ir_type(types[n]) and widened[n] == types[n]
                   for n in carried):
                break
            self._discard_blocks(mark)
            self._block_hints = hints  # the next round reuses the names
            types = widened
        for n in carried:
            _yield_name(env[n].value, n)
            if end is not None:
                _yield_name(body_env[n].value, n)
        # the exit block goes after the body's blocks, so the IR reads top to bottom
        self.func.body.remove_block(exit_block)
        self.func.body.add_block(exit_block)
        if end is not None:
            back = [advance(body_env, i).value] if i is not None else []
            back += [self._coerce_at_end(end, body_env[n], types[n]) for n in carried]
            with self._at_end(end) as b:
                b.br(header, back)
        entry_args = [induction.value] if induction is not None else []
        entry_args += [self._coerce_at_end(pre, env[n], types[n]) for n in carried]
        with self._at_end(pre) as b:
            b.br(header, entry_args)
        self._move_to(exit_block)
        return {**env, **{n: hdr_env[n] for n in carried}}

    def _discard_blocks(self, mark: int) -> None:
        """Drop the blocks created since ``mark`` (a failed fixpoint round)."""
        doomed = self.func.blocks[mark:]
        self.returns = [r for r in self.returns if r.block not in doomed]
        for block in reversed(doomed):
            for op in reversed(list(block.ops)):
                op.drop_all_references()
            self.func.body.remove_block(block)

    # ---------------------------------------------------------------- blocks

    def _current(self) -> Block:
        assert self.block is not None, "lowering into a terminated block"
        return self.block

    def _new_block(self, hint: str) -> Block:
        """A new block named ``hint``, ``hint.1``, ``hint.2``... (unique in the function,
        so the printer keeps every name: ``^loop.1`` rather than ``^bb3``)."""
        n = self._block_hints.get(hint, 0)
        self._block_hints[hint] = n + 1
        return self.func.add_block((), None, f"{hint}.{n}" if n else hint)

    def _move_to(self, block: Block) -> None:
        self.block = block
        self.em.b.set_insertion_point_to_end(block)

    def _coerce_at_end(self, block: Block, tv: TypedValue, t: ValueType) -> Value:
        """``tv`` as type ``t``, with any cast emitted at the end of ``block``."""
        with self._at_end(block):
            return self.em.coerce_to(tv, t)

    @contextmanager
    def _at_end(self, block: Block) -> Iterator[Builder]:
        """The builder at the end of ``block`` (for terminators made last), then back."""
        saved = self.em.b.block
        self.em.b.set_insertion_point_to_end(block)
        try:
            yield self.em.b
        finally:
            if saved is not None:
                self.em.b.set_insertion_point_to_end(saved)


def _name(value: Value, name: str) -> None:
    """Name an unnamed value after the variable it binds (``%norm`` rather than ``%1``)."""
    if value.name_hint is None:
        value.name_hint = name


def _yield_name(value: Value, name: str) -> None:
    """Let the join or header argument for ``name`` print as ``%name``: an op result
    flowing into it gives up that hint (it prints numbered). Block arguments keep
    theirs (a kernel parameter stays ``%x``)."""
    if isinstance(value, OpResult) and value.name_hint == name:
        value.name_hint = None


def _nested(array: np.ndarray) -> object:
    return tuple(_nested(x) for x in array) if array.ndim else array.item()
