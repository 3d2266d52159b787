"""Lowering of a checked program: kernels become IR entry functions, and each
generic ``func`` becomes one IR function per distinct argument typing.

Invariants:
- A func instance is keyed by (module, name, argument types, compile-time
  argument values). Arguments known at compile time (numbers, lists of numbers,
  defaults) are folded into the instance instead of passed, so
  ``nn.softmax(x, axis=1)`` sees a constant axis, as the checker did.
- A kernel's IR signature is its inputs, in order; its results are its outputs,
  in order (``attributes {kernel, outputs = [...]}``); symbolic dims are read
  from the first input that declares them. A ``tensor`` output (unless typed by
  ``generic``) takes the type of the value the body assigns to it, made strong.
"""

from __future__ import annotations

from ..diagnostics import Span, WiaTypeError, WiaUsageError
from ..dtypes import DType
from ..ir.builder import Builder
from ..ir.core import Value
from ..ir.module import FuncOp, ModuleOp
from ..records import record
from . import ast
from .builtins import ALL_AXES, Sym
from .loader import MAIN_MODULE
from .lower import BodyLowerer
from .lower_values import TypedValue, ir_type
from .typecheck import CheckedProgram
from .typerules import UNKNOWN, ValueType

#: The dtype and rank of each ``tensor`` parameter of a specialization.
GenericTypes = dict[str, tuple[DType, int]]


@record(frozen=True)
class FuncInstance:
    func: FuncOp
    passed: tuple[int, ...]  # which call arguments become IR arguments
    result: ValueType


def _folds(tv: TypedValue) -> bool:
    """Whether an argument is folded into the instance rather than passed: numbers
    and (nested) lists of numbers, which ``axis=`` or ``perm`` may need constant, and
    ``none``, which has no run-time value."""
    if tv.static is ALL_AXES:
        return True
    if isinstance(tv.static, tuple):
        return _numbers(tv.static)
    return isinstance(tv.static, (bool, int, float)) and tv.type.is_scalar


def _numbers(static: object) -> bool:
    if isinstance(static, tuple):
        return all(_numbers(x) for x in static)
    return isinstance(static, (bool, int, float))


class ProgramLowerer:
    """Builds one ``ModuleOp`` from kernels of a checked program."""

    def __init__(self, checked: CheckedProgram):
        self.checked = checked
        self.consts = checked.consts
        self.module = ModuleOp()
        self._instances: dict[tuple, FuncInstance] = {}

    # ---------------------------------------------------------------- kernels

    def kernel_types(self, name: str, generic: GenericTypes
                     ) -> list[tuple[str, str, ValueType | None]]:
        """(name, direction, type) per parameter, ``tensor`` ones from ``generic``; a
        ``tensor`` output not in ``generic`` is None: the body's value fixes its type."""
        typing = self.checked.kernels[name]
        out: list[tuple[str, str, ValueType | None]] = []
        for p in typing.params:
            t = p.type
            if t is UNKNOWN and p.direction == "output" and p.name not in generic:
                out.append((p.name, p.direction, None))  # typed by what the body assigns
                continue
            if t is UNKNOWN:
                if p.name not in generic:
                    raise WiaUsageError(
                        f"kernel '{name}' takes 'tensor' parameter '{p.name}': its dtype and "
                        "rank are fixed at call time; give them to compile it ahead of time")
                dtype, rank = generic[p.name]
                t = ValueType(dtype, (None,) * rank)
            assert isinstance(t, ValueType)
            out.append((p.name, p.direction, t))
        return out

    def lower_kernel(self, name: str, generic: GenericTypes | None = None) -> FuncOp:
        typing = self.checked.kernels[name]
        params = self.kernel_types(name, generic or {})
        inputs = [(n, t) for n, d, t in params if d == "input" and t is not None]
        outputs = [(n, t) for n, d, t in params if d == "output"]
        func = FuncOp(name, [ir_type(t) for _, t in inputs], [],
                      [n for n, _ in inputs],
                      {"kernel": True, "outputs": [n for n, _ in outputs],
                       # the dim name of each input axis ("" when static): lets fusion
                       # prove that two dynamic extents are the same dim
                       "arg_dims": [[d if isinstance(d, str) else "" for d in t.shape]
                                    for _, t in inputs]})
        self.module.add(func)
        dims: dict[str, tuple[Value, int]] = {}
        for arg, (_, t) in zip(func.args, inputs, strict=True):
            for axis, d in enumerate(t.shape):
                if isinstance(d, str):
                    dims.setdefault(d, (arg, axis))
        body = BodyLowerer(self, MAIN_MODULE, func, dims)
        env = {n: TypedValue(arg, t) for arg, (n, t) in zip(func.args, inputs, strict=True)}
        env = body.block_stmts(typing.kernel.body, env)
        block = body.block
        assert block is not None, "kernels have no return statement"
        types = [t if t is not None else _strong(env[n].type) for n, t in outputs]
        results = [body._coerce_at_end(block, env[n], t)
                   for (n, _), t in zip(outputs, types, strict=True)]
        func.result_types = tuple(ir_type(t) for t in types)
        Builder.at_end(block).ret(results)
        _drop_dead_literals(func)
        return func

    # ------------------------------------------------------------------ funcs

    def call_func(self, b: Builder, module: str, name: str, args: list[TypedValue],
                  span: Span) -> TypedValue:
        scope = self.checked.scopes[module]
        func = scope.funcs.get(name)
        if func is None:
            raise WiaTypeError(f"unknown func '{scope.qualify(name)}'", span)
        key = (module, name, tuple((a.type, a.static if _folds(a) else
                                    (a.static.name if isinstance(a.static, Sym) else None))
                                   for a in args))
        if key not in self._instances:
            self._instances[key] = self._instantiate(module, func, args)
        inst = self._instances[key]
        result = b.call(inst.func, [args[i].value for i in inst.passed])[0]
        return TypedValue(result, inst.result)

    def _instantiate(self, module: str, func: ast.Func, args: list[TypedValue]) -> FuncInstance:
        passed = tuple(i for i, a in enumerate(args) if not _folds(a))
        base = self.checked.scopes[module].qualify(func.name)
        symbol, n = base, 1
        while symbol in self.module:
            symbol, n = f"{base}.{n}", n + 1
        ir_func = FuncOp(symbol, [ir_type(args[i].type) for i in passed], [],
                         [func.params[i].name for i in passed])
        self.module.add(ir_func)
        body = BodyLowerer(self, module, ir_func)
        env: dict[str, TypedValue] = {}
        ir_args = iter(ir_func.args)
        for i, (param, a) in enumerate(zip(func.params, args, strict=True)):
            if i in passed:
                static = a.static if isinstance(a.static, Sym) else None
                env[param.name] = TypedValue(next(ir_args), a.type, static)
            elif a.static is ALL_AXES:
                env[param.name] = a
            else:
                env[param.name] = body.em.constant(a.static, a.type)
        body.block_stmts(func.body, env)
        if not body.returns:
            raise WiaTypeError(f"func '{base}' does not return a value", func.span)
        result = body._join_types(f"the result of '{base}'",
                                  [r.value.type for r in body.returns], func.span)
        for r in body.returns:
            Builder.at_end(r.block).ret([body._coerce_at_end(r.block, r.value, result)])
        ir_func.result_types = (ir_type(result),)
        _drop_dead_literals(ir_func)
        return FuncInstance(ir_func, passed, result)


def _strong(t: ValueType) -> ValueType:
    """The type a ``tensor`` output takes from its value: weakness ends at the call."""
    return ValueType(t.dtype, t.shape)


def _drop_dead_literals(func: FuncOp) -> None:
    """Erase constants nothing reads.

    A literal is emitted when it is evaluated, before the lowering knows the dtype
    it meets (``x * 2.0`` re-makes ``2.0`` as f32) or whether it folds away; the
    leftovers would only clutter ``--emit ir``. Constants are pure, so this is safe.
    """
    for op in list(func.walk()):
        if op.name in ("arith.constant", "tensor.constant") and not op.results[0].uses:
            op.erase()


def lower_program(checked: CheckedProgram, kernel: str | None = None,
                  generic: GenericTypes | None = None) -> ModuleOp:
    """The IR of one kernel (or of every kernel of the main file)."""
    lowerer = ProgramLowerer(checked)
    names = [kernel] if kernel is not None else list(checked.kernels)
    for name in names:
        if name not in checked.kernels:
            known = ", ".join(checked.kernels) or "none"
            raise WiaUsageError(f"no kernel named '{name}'; kernels: {known}")
        lowerer.lower_kernel(name, generic)
    return lowerer.module
