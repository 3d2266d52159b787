"""A kernel's fused kernels as separately runnable units, with their real inputs.

``specialize(kernel, args)`` gives the kernel's unoptimized IR for a call's
arguments (as the jit would build it) and the checked inputs; ``optimized(...)``
runs the CPU backend's tensor passes on a copy. ``trace`` runs the optimized IR
in the reference interpreter and records, for each top-level op of the kernel
function (a fused kernel, a matmul, a pool ...), the values it read and wrote.
``extract`` turns one such op into a one-op module whose function takes the
op's operands as parameters, so it can be compiled and timed on its own.

Invariants: tracing never changes the module; ``extract`` clones (the traced
module keeps its ops); ops that only re-label data (``VIEW_OPS``) are not units.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..diagnostics import WiaUsageError
from ..dtypes import from_numpy
from ..ir.builder import Builder
from ..ir.copying import clone_op, copy_module
from ..ir.core import Operation, Value
from ..ir.interpreter import Interpreter, convert_arg
from ..ir.module import FuncOp, ModuleOp
from ..ir.types import TensorType
from ..runtime.binding import bind_call

#: Ops that move no data through a kernel of their own (views and constants).
VIEW_OPS = frozenset({"tensor.reshape", "tensor.dim", "tensor.constant", "func.return", "cf.br",
                      "cf.cond_br"})


@dataclass
class TracedOp:
    """One top-level op as it ran: its operand values and result values."""

    op: Operation
    inputs: list[Any]
    outputs: list[Any]

    @property
    def is_unit(self) -> bool:
        """A fused kernel worth timing: it makes a tensor and is not a view."""
        return (self.op.name not in VIEW_OPS and not self.op.name.startswith("arith.")
                and any(isinstance(r.type, TensorType) for r in self.op.results))

    @property
    def label(self) -> str:
        tag = self.op.attributes.get("kernel")
        return str(tag) if isinstance(tag, str) else self.op.name.removeprefix("tensor.")


def specialize(kernel: Any, args: Sequence[object]) -> tuple[ModuleOp, list[np.ndarray]]:
    """The unoptimized IR of ``kernel`` (a KernelFunction) for ``args``, and the inputs.
    A kernel that binds some of its inputs itself (an imported model's weights) adds
    them (``full_arguments``), so ``args`` are what a call of it takes."""
    sig = kernel.signature
    full = getattr(kernel, "full_arguments", None)
    bound = bind_call(sig, full(tuple(args)) if full is not None else tuple(args), {})
    inputs = [np.asarray(v) for v in bound.inputs.values()]
    params = sig.inputs
    generic = {params[i].name: (from_numpy(inputs[i].dtype), inputs[i].ndim)
               for i in sig.generic_inputs}
    return kernel.ir_for(generic), inputs


def optimized(module: ModuleOp, level: int = 3) -> ModuleOp:
    """A copy of ``module`` after the CPU backend's tensor passes."""
    from ..backends.llvm.compile import tensor_passes

    return tensor_passes(copy_module(module), level)


class _Tracer(Interpreter):
    def __init__(self, module: ModuleOp, func: FuncOp):
        super().__init__(module)
        self.top = {id(b) for b in func.blocks}
        self.seen: list[TracedOp] = []

    def execute(self, op: Operation, values: list[Any]) -> list[Any]:
        results = super().execute(op, values)
        if op.parent is not None and id(op.parent) in self.top:
            self.seen.append(TracedOp(op, list(values), list(results)))
        return results


def trace(module: ModuleOp, kernel: str, inputs: Sequence[np.ndarray]) -> list[TracedOp]:
    """Every top-level op of ``kernel`` in execution order (loops repeat entries)."""
    func = module[kernel]
    tracer = _Tracer(module, func)
    tracer.call(func, [convert_arg(func, i, a) for i, a in enumerate(inputs)])
    return tracer.seen


def extract(traced: TracedOp, name: str) -> tuple[ModuleOp, list[np.ndarray]]:
    """A module whose function ``name`` runs just ``traced.op``, and its inputs."""
    op = traced.op
    if op.name == "func.call":
        raise WiaUsageError("calls are inlined at -O3; a remaining call is not profiled")
    params: list[Value] = []
    values: list[np.ndarray] = []
    for v, value in zip(op.operands, traced.inputs, strict=True):
        if all(v is not p for p in params):
            params.append(v)
            values.append(np.ascontiguousarray(np.asarray(value)))
    func = FuncOp(name, [p.type for p in params], [r.type for r in op.results],
                  attributes={"kernel": True, "outputs": [f"r{i}" for i in range(len(op.results))]})
    mapping: dict[int, Value] = {id(p): a for p, a in zip(params, func.args, strict=True)}
    copy = clone_op(op, mapping)
    func.entry.append(copy)
    Builder(func.entry).ret(list(copy.results))
    return ModuleOp([func]), values
