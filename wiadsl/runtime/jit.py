"""``wiadsl.jit``: compile WIA DSL source and call its kernels on NumPy arrays.

A ``Module`` has one ``KernelFunction`` attribute per kernel. A call checks its
arguments (``binding``), specializes the kernel to the dtypes and ranks of its
``tensor`` parameters (compiled once per specialization), runs it on the chosen
backend, and checks and returns the outputs in declaration order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeAlias, overload

import numpy as np

from ..diagnostics import WiaCallError, WiaRuntimeError, WiaUsageError
from ..dtypes import DType, from_numpy
from ..frontend.compile import CompiledSource, compile_source
from ..ir.module import ModuleOp
from .backend import Backend, CompiledKernel, get_backend
from .binding import BoundCall, bind_call
from .signature import KernelSignature, ParamSpec, signature_of

DEFAULT_TARGET = "cpu"

#: One output of a kernel call: an array, or a NumPy scalar for a rank-0 output.
KernelOutput: TypeAlias = np.ndarray | np.generic
#: What a kernel call returns: its one output, or a tuple of them in declaration order.
KernelResult: TypeAlias = KernelOutput | tuple[KernelOutput, ...]


@dataclass
class KernelFunction:
    """A callable kernel: ``f(*inputs, **inputs_or_output_buffers)``."""

    source: CompiledSource
    signature: KernelSignature
    backend: Backend
    options: dict[str, Any] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    _specializations: dict[tuple, CompiledKernel] = field(default_factory=dict, repr=False)

    @property
    def name(self) -> str:
        return self.signature.name

    def __call__(self, *args: object, **kwargs: object) -> KernelResult:
        sig = self.signature
        bound = bind_call(sig, args, kwargs)
        inputs = list(bound.inputs.values())  # declaration order
        compiled = self.compiled_for(inputs)
        results = compiled.run(inputs)
        self.stats = dict(compiled.stats)
        outputs = [self._deliver(p, r, bound) for p, r in zip(sig.outputs, results, strict=True)]
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def compiled_for(self, inputs: list[np.ndarray]) -> CompiledKernel:
        """The kernel compiled for this call's specialization (cached).

        A specialization is fixed by the dtype and rank of each ``tensor``
        parameter, and also by every extent when the backend compiles per shape.
        """
        generic_at = self.signature.generic_inputs
        if self.backend.specialize_shapes:
            key: tuple = tuple((a.dtype, a.shape) for a in inputs)
        else:
            key = tuple((inputs[i].dtype, inputs[i].ndim) for i in generic_at)
        compiled = self._specializations.get(key)
        if compiled is None:
            params = self.signature.inputs
            generic = {params[i].name: (from_numpy(inputs[i].dtype), inputs[i].ndim)
                       for i in generic_at}
            module = self.ir_for(generic)  # type: ignore[arg-type]
            compiled = self.backend.compile(module, self.name, self.options)
            self._specializations[key] = compiled
        return compiled

    def ir_for(self, generic: dict[str, tuple[DType, int]] | None = None) -> ModuleOp:
        """The verified IR of this kernel (``tensor`` params typed by ``generic``)."""
        return self.source.lower_kernel(self.name, generic or {})

    def _deliver(self, param: ParamSpec, result: object, bound: BoundCall) -> KernelOutput:
        array = result if isinstance(result, np.ndarray) else np.asarray(result)
        if param.dtype is not None and array.dtype != param.dtype.numpy:
            array = array.astype(param.dtype.numpy)
        self._check_output_shape(param, array.shape, bound)
        buffer = bound.out_buffers.get(param.name)
        if buffer is not None:
            if buffer.dtype != array.dtype and param.dtype is None:
                # a ``tensor`` output: its dtype is known only now, before any write
                raise WiaCallError(f"output '{param.name}': expected a buffer of "
                                   f"{array.dtype} (the dtype of the result), got a "
                                   f"{buffer.dtype} array")
            np.copyto(buffer, array)
            return buffer
        return array[()] if array.ndim == 0 else np.ascontiguousarray(array)

    def _check_output_shape(self, param: ParamSpec, shape: tuple[int, ...],
                            bound: BoundCall) -> None:
        if param.dims is None:
            return
        expected = tuple(bound.dims.get(d, n) if isinstance(d, str) else d
                         for d, n in zip(param.dims, shape))
        if len(shape) != len(param.dims) or shape != expected:
            raise WiaRuntimeError(
                f"kernel '{self.name}' produced output '{param.name}' of shape {shape}, "
                f"but it is declared {param.describe()} (dims {bound.dims})"
            )
        if bound.out_buffers.get(param.name) is not None:
            buf_shape = bound.out_buffers[param.name].shape  # type: ignore[union-attr]
            if buf_shape != shape:
                raise WiaRuntimeError(f"output '{param.name}': the buffer has shape "
                                      f"{buf_shape} but the result has shape {shape}")


class Module:
    """The kernels of one source file, one attribute each."""

    def __init__(self, kernels: dict[str, KernelFunction]):
        self._kernels = kernels
        for name, fn in kernels.items():
            setattr(self, name, fn)

    @property
    def kernels(self) -> dict[str, KernelFunction]:
        return dict(self._kernels)

    def __repr__(self) -> str:
        return f"<wiadsl.Module kernels={list(self._kernels)}>"


@overload
def jit(source: str, kernel: None = None, target: str = DEFAULT_TARGET,
        filename: str = "<string>", **options: Any) -> Module: ...


@overload
def jit(source: str, kernel: str, target: str = DEFAULT_TARGET,
        filename: str = "<string>", **options: Any) -> KernelFunction: ...


def jit(source: str, kernel: str | None = None, target: str = DEFAULT_TARGET,
        filename: str = "<string>", **options: Any) -> Module | KernelFunction:
    """Compile ``source``; return a Module, or the one kernel named ``kernel``.

    ``filename`` is used in diagnostics and to find imports next to the file;
    ``options`` go to the backend (e.g. ``array=(32, 32)`` for ``systolic``).
    """
    backend = get_backend(target)
    compiled = compile_source(source, filename)
    kernels = {k.name: KernelFunction(compiled, signature_of(k), backend, dict(options))
               for k in compiled.kernels}
    if kernel is None:
        return Module(kernels)
    if kernel not in kernels:
        known = ", ".join(kernels) or "none"
        raise WiaUsageError(f"no kernel named '{kernel}' in {filename}; kernels: {known}")
    return kernels[kernel]
