"""A kernel's calling convention as the runtime sees it, derived from its declaration.

Invariant: ``params`` keeps declaration order; inputs are taken positionally in
that order (outputs only by keyword, as preallocated buffers).
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from .dtypes import DTYPE_NAMES, DType
from .records import record

if TYPE_CHECKING:
    from .frontend import ast


@record(frozen=True)
class ParamSpec:
    """One kernel parameter.

    ``dtype`` is None and ``dims`` is None for a ``tensor`` parameter (fixed at call
    time); ``dims`` is ``()`` for a scalar.
    """

    name: str
    is_output: bool
    dtype: DType | None
    dims: tuple[int | str, ...] | None

    def describe(self) -> str:
        """The declared type as written in source: ``f32[M, K]``, ``f32``, ``tensor``."""
        if self.dtype is None:
            return "tensor"
        if not self.dims:
            return str(self.dtype)
        return f"{self.dtype}[{', '.join(str(d) for d in self.dims)}]"


@record(frozen=True)
class KernelSignature:
    name: str
    params: tuple[ParamSpec, ...]

    # Cached: both sit on the path of every call.
    @cached_property
    def inputs(self) -> tuple[ParamSpec, ...]:
        return tuple(p for p in self.params if not p.is_output)

    @cached_property
    def outputs(self) -> tuple[ParamSpec, ...]:
        return tuple(p for p in self.params if p.is_output)

    @cached_property
    def generic_inputs(self) -> tuple[int, ...]:
        """Positions (among inputs) of the ``tensor`` parameters."""
        return tuple(i for i, p in enumerate(self.inputs) if p.dtype is None)

    def describe(self) -> str:
        args = ", ".join(f"{p.name}: {p.describe()}" for p in self.inputs)
        outs = ", ".join(f"{p.name}: {p.describe()}" for p in self.outputs)
        return f"{self.name}({args}) -> ({outs})"


def signature_of(kernel: ast.Kernel) -> KernelSignature:
    """The runtime signature of a parsed kernel declaration."""
    return KernelSignature(kernel.name, tuple(_param_spec(p) for p in kernel.params))


def _param_spec(param: ast.Param) -> ParamSpec:
    from .frontend import ast  # lazy: a warm start reads signatures from the cache

    declared = param.type
    is_output = param.direction == "output"
    if isinstance(declared, ast.AnyTensorType):
        return ParamSpec(param.name, is_output, None, None)
    if isinstance(declared, ast.ScalarType):
        return ParamSpec(param.name, is_output, DTYPE_NAMES[declared.dtype], ())
    dims = tuple(d.value for d in declared.dims)
    return ParamSpec(param.name, is_output, DTYPE_NAMES[declared.dtype], dims)
