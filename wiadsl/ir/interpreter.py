"""The reference interpreter: runs IR on NumPy values; the oracle for passes and backends.

Invariants:
- Each op's NumPy semantics live on the op (``Operation.evaluate``); this module
  only walks the CFG (blocks, ``br``/``cond_br``, ``return``, ``func.call``).
- Every computed value is checked against its static type (dtype and static
  extents) so a wrong IR type is caught where it happens, not downstream.
- Tensors are NumPy arrays of the dtype's storage; scalars are NumPy scalars
  (bf16 held as float32, rounded after every op; index as int64).
- Failures while running (bad index, bad reshape, ...) raise WiaRuntimeError
  naming the op; bad arguments raise WiaCallError.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..diagnostics import WiaCallError, WiaError, WiaRuntimeError
from .core import Block, Operation, Value
from .folding import evaluate_op
from .module import FuncOp, ModuleOp
from .numerics import finish, storage_dtype
from .types import IRType, TensorType, VectorType


class StepLimitReached(Exception):
    """``run_func``'s ``max_steps`` ops ran and the function had not returned."""


def run_func(module: ModuleOp | FuncOp, func_name: str | None, args: Sequence[Any],
             max_steps: int | None = None) -> list[Any]:
    """Run ``func_name`` of ``module`` (or the given FuncOp) on ``args``; returns
    its results as NumPy arrays / NumPy scalars. ``max_steps``: raise
    StepLimitReached after running that many ops (a caller that has a faster way,
    as the tiered CPU kernels do, gives up on a scalar loop that would take long)."""
    if isinstance(module, FuncOp):
        func = module
        module = func.parent or ModuleOp()
    else:
        func = module[func_name] if func_name is not None else module.funcs[0]
    if len(args) != len(func.args):
        raise WiaCallError(f"@{func.name} takes {len(func.args)} arguments, got {len(args)}")
    converted = [convert_arg(func, i, a) for i, a in enumerate(args)]
    return Interpreter(module, max_steps).call(func, converted)


def convert_arg(func: FuncOp, index: int, value: Any) -> Any:
    """An argument in the storage of parameter ``index``'s type, or WiaCallError."""
    param = func.args[index]
    t = param.type
    name = param.name_hint or str(index)
    array = np.asarray(value)
    if isinstance(t, TensorType):
        if array.ndim != t.rank or any(d is not None and d != n for d, n in zip(t.shape, array.shape, strict=False)):
            raise WiaCallError(f"argument {name} of @{func.name}: shape {array.shape} does not "
                               f"match {t}")
    elif array.ndim != 0:
        raise WiaCallError(f"argument {name} of @{func.name}: expected a scalar {t}, "
                           f"got shape {array.shape}")
    return finish(array, t)


def check_value(op: Operation, value: Any, t: IRType) -> None:
    """Fail when a computed value does not have the storage dtype and static shape of ``t``."""
    array = np.asarray(value)
    ok = array.dtype == storage_dtype(t)
    if isinstance(t, TensorType):
        ok = ok and array.ndim == t.rank and all(
            d is None or d == n for d, n in zip(t.shape, array.shape, strict=False))
    elif isinstance(t, VectorType):
        ok = ok and array.shape == (t.lanes,)
    else:
        ok = ok and array.ndim == 0
    if not ok:
        raise WiaRuntimeError(f"'{op.name}' produced {array.dtype}{list(array.shape)}, "
                              f"which does not match its type {t}")


class Interpreter:
    """Runs functions of one module; ``call`` is re-entrant (recursion allowed)."""

    def __init__(self, module: ModuleOp, max_steps: int | None = None):
        self.module = module
        self.steps_left = max_steps

    def call(self, func: FuncOp, args: list[Any]) -> list[Any]:
        env: dict[int, Any] = {}
        block: Block = func.entry
        incoming: list[Any] = args
        while True:
            for arg, value in zip(block.args, incoming, strict=False):
                env[id(arg)] = value
            outcome = self.run_block(block, env)
            if isinstance(outcome, list):
                return outcome
            block, incoming = outcome

    def run_block(self, block: Block, env: dict[int, Any]) -> list[Any] | tuple[Block, list[Any]]:
        """Run ``block``'s ops; the return values, or the next block and its arguments."""
        if self.steps_left is not None:  # counted per block: a loop's body at a time
            self.steps_left -= len(block.ops)
            if self.steps_left < 0:
                raise StepLimitReached(block.name_hint or "?")
        for op in block.ops:
            values = [read(env, v, op) for v in op.operands]
            if op.name == "func.return":
                return values
            if op.name in ("cf.br", "cf.cond_br"):
                index = 0 if op.name == "cf.br" or bool(values[0]) else 1
                succ = op.successors[index]
                return succ.block, [read(env, v, op) for v in succ.args]
            results = self.execute(op, values)
            for result, value in zip(op.results, results, strict=False):
                check_value(op, value, result.type)
                env[id(result)] = value
        raise WiaRuntimeError(f"block ^{block.name_hint or '?'} ended without a terminator")

    def execute(self, op: Operation, values: list[Any]) -> list[Any]:
        if op.name == "func.call":
            callee = self.module.get(op.attributes["callee"])
            if callee is None:
                raise WiaRuntimeError(f"'func.call' of unknown function @{op.attributes['callee']}")
            return self.call(callee, values)
        try:
            return evaluate_op(op, values)  # the folders' path too: folded == run time
        except WiaError as err:
            if err.span is None and op.loc is not None:  # point at the source line
                raise type(err)(err.message, op.loc) from None
            raise
        except (ValueError, IndexError, TypeError, ArithmeticError, MemoryError) as e:
            raise WiaRuntimeError(f"'{op.name}' failed: {e}", op.loc) from None


def read(env: dict[int, Any], value: Value, op: Operation) -> Any:
    try:
        return env[id(value)]
    except KeyError:
        raise WiaRuntimeError(f"'{op.name}' reads a value that was not computed "
                              f"(%{value.name_hint or '?'}); verify the IR first") from None
