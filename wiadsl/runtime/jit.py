"""``wiadsl.jit``: compile WIA DSL source and call its kernels on NumPy arrays.

A ``Module`` has one ``KernelFunction`` attribute per kernel. A call checks its
arguments (``binding``), specializes the kernel to the dtypes and ranks of its
``tensor`` parameters (compiled once per specialization), runs it on the chosen
backend, and checks and returns the outputs in declaration order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..diagnostics import WiaRuntimeError, WiaUsageError
from ..frontend.compile import CompiledSource, compile_source
from ..ir.module import ModuleOp
from .binding import BoundCall, bind_call
from .signature import KernelSignature, ParamSpec, signature_of

#: A backend runs the IR function ``name`` of a module on bound inputs and returns
#: the output values in declaration order.
Backend = Callable[[ModuleOp, str, list[np.ndarray]], Sequence[object]]


def _interp_backend(module: ModuleOp, name: str, args: list[np.ndarray]) -> Sequence[object]:
    from ..ir.interpreter import run_func

    return run_func(module, name, args)


BACKENDS: dict[str, Backend] = {"interp": _interp_backend}
DEFAULT_TARGET = "interp"


@dataclass
class KernelFunction:
    """A callable kernel: ``f(*inputs, **inputs_or_output_buffers)``."""

    source: CompiledSource
    signature: KernelSignature
    target: str
    _specializations: dict[tuple, ModuleOp] = field(default_factory=dict, repr=False)

    @property
    def name(self) -> str:
        return self.signature.name

    def __call__(self, *args: object, **kwargs: object) -> object:
        bound = bind_call(self.signature, args, kwargs)
        module = self.ir_for(bound)
        inputs = [bound.inputs[p.name] for p in self.signature.inputs]
        results = BACKENDS[self.target](module, self.name, inputs)
        outputs = [self._deliver(p, r, bound) for p, r in zip(self.signature.outputs, results)]
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def ir_for(self, bound: BoundCall) -> ModuleOp:
        """The IR specialized to this call's ``tensor`` parameters (cached)."""
        key = tuple((n, str(d), len(s)) for n, (d, s) in bound.input_types().items()
                    if self._is_generic(n))
        if key not in self._specializations:
            generic = {n: (d, len(s)) for n, (d, s) in bound.input_types().items()
                       if self._is_generic(n)}
            self._specializations[key] = self.source.lower_kernel(self.name, generic)
        return self._specializations[key]

    def _is_generic(self, name: str) -> bool:
        return any(p.name == name and p.dtype is None for p in self.signature.params)

    def _deliver(self, param: ParamSpec, result: object, bound: BoundCall) -> object:
        array = np.asarray(result)
        if param.dtype is not None:
            array = array.astype(param.dtype.numpy, copy=False)
        self._check_output_shape(param, array.shape, bound)
        buffer = bound.out_buffers.get(param.name)
        if buffer is not None:
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


def jit(source: str, kernel: str | None = None, target: str = DEFAULT_TARGET,
        filename: str = "<string>") -> Module | KernelFunction:
    """Compile ``source``; return a Module, or the one kernel named ``kernel``.

    ``filename`` is used in diagnostics and to find imports next to the file.
    """
    if target not in BACKENDS:
        raise WiaUsageError(f"unknown target '{target}'; available: {', '.join(BACKENDS)}")
    compiled = compile_source(source, filename)
    kernels = {k.name: KernelFunction(compiled, signature_of(k), target)
               for k in compiled.kernels}
    if kernel is None:
        return Module(kernels)
    if kernel not in kernels:
        known = ", ".join(kernels) or "none"
        raise WiaUsageError(f"no kernel named '{kernel}' in {filename}; kernels: {known}")
    return kernels[kernel]
