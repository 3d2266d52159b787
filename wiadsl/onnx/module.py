"""An imported ONNX model as a ``wiadsl.jit``-style Module.

The imported kernel's parameters are the graph inputs followed by the weights
(``importer``). ``OnnxKernel`` is a ``KernelFunction`` whose public signature
holds only the graph inputs: a call checks those (by position, by DSL name or by
ONNX name), appends the weights — checked once, here — and runs the compiled
kernel. Results come back in graph-output order, as ``wiadsl.jit`` kernels return.
A positional call with arrays of the last checked call's dtypes and shapes is one
native call (the backend's ``fast_for``), as a ``wiadsl.jit`` kernel's. Graph inputs
and outputs of ONNX element types the kernel holds in another dtype (uint8 in i32,
``storage``) are converted at this boundary: callers pass and get the ONNX type.

Invariant: the weights are C-contiguous arrays of the declared dtypes and shapes,
in declaration order, so a backend gets exactly what the full signature promises;
and they never change after the import (the kernel is compiled with them frozen:
the CPU keeps its gemms' weights packed from the first call on).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backends.contract import NOT_RUN
from ..cache.sources import load_signatures, store_signatures
from ..diagnostics import WiaCallError
from ..records import field, record
from ..runtime.backend import get_backend
from ..runtime.binding import bind_call
from ..runtime.jit import (
    DEFAULT_TARGET,
    KernelFunction,
    KernelResult,
    LazySource,
    Module,
    kernel_docstring,
    python_signature,
    source_key_for,
)
from ..signature import KernelSignature, signature_of
from .imported import ImportedModel
from .storage import from_kernel, to_kernel


@record
class OnnxKernel(KernelFunction):
    """A kernel of an imported model: ``f(*graph_inputs)`` with the weights bound."""

    public: KernelSignature | None = None
    weights: tuple[np.ndarray, ...] = ()
    aliases: dict[str, str] = field(default_factory=dict)
    _by_shape: dict[tuple, Any] = field(default_factory=dict, repr=False)
    #: the native call of the last checked call's shapes (``FastKernel.fast_for``)
    _fast: Any = field(default=None, repr=False)
    #: DSL name -> the NumPy dtype callers use where it is not the kernel's (``storage``)
    boundary: dict[str, np.dtype] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.public is not None:  # describe the call as made: the weights are bound
            self.__signature__ = python_signature(self.public)
            self.__doc__ = kernel_docstring(self.public)

    def full_arguments(self, args: tuple[object, ...]) -> tuple[object, ...]:
        """``args`` for the full signature: the graph inputs of a call, then the weights
        (what ``wiadsl.profile`` and ``wiadsl.autotune`` bind)."""
        assert self.public is not None
        return args + self.weights if len(args) == len(self.public.inputs) else args

    def __call__(self, *args: object, **kwargs: object) -> KernelResult:
        if not self.boundary:  # every element type is the kernel's own
            return self._call(args, kwargs)
        args, kwargs = self._to_kernel(args, kwargs)
        results = self._call(args, kwargs)
        assert self.public is not None
        outs = [from_kernel(r, self.boundary[p.name]) if p.name in self.boundary else r
                for p, r in zip(self.public.outputs,
                                results if isinstance(results, tuple) else (results,))]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _to_kernel(self, args: tuple[object, ...], kwargs: dict[str, object]
                   ) -> tuple[tuple[object, ...], dict[str, object]]:
        """The arguments with those of held element types converted to the kernel's."""
        assert self.public is not None
        names = [p.name for p in self.public.inputs]
        converted = list(args)
        for i, value in enumerate(args[:len(names)]):
            converted[i] = self._argument(names[i], value)
        keywords = {}
        for key, value in kwargs.items():
            name = self.aliases.get(key, key)
            if name in self.boundary and name not in names:
                raise WiaCallError(f"output '{key}' is {self.boundary[name]}, which the "
                                   "kernel holds in another dtype: it cannot be written in "
                                   "place (leave out the output buffer)")
            keywords[key] = self._argument(name, value)
        return tuple(converted), keywords

    def _argument(self, name: str, value: object) -> object:
        wanted = self.boundary.get(name)
        if wanted is None:
            return value
        array = np.asarray(value)
        if array.dtype == wanted:
            return to_kernel(array, wanted)
        if wanted.kind == "V" and array.dtype.kind == "f":  # bfloat16 values in floats
            return value
        raise WiaCallError(f"argument '{name}': expected a {wanted} array (the model's "
                           f"element type), got {array.dtype}")

    def _call(self, args: tuple[object, ...], kwargs: dict[str, object]) -> KernelResult:
        if kwargs:  # by ONNX or DSL names, as sess.run(None, feeds) users call
            positional = self._by_position(args, kwargs)
            if positional is not None:
                args, kwargs = positional, {}
        if not kwargs and self._fast is not None:  # the steady state: one native call
            result = self._fast(args + self.weights)
            if result is not NOT_RUN:
                return result  # type: ignore[return-value]
        sig = self.public
        assert sig is not None
        given = tuple(kwargs)
        if kwargs:
            kwargs = {self.aliases.get(k, k): v for k, v in kwargs.items()}
        bound = bind_call(sig, args, kwargs)
        inputs = [*bound.inputs.values(), *self.weights]
        key = tuple((a.dtype, a.shape) for a in bound.inputs.values())
        compiled = self._by_shape.get(key)
        if compiled is None:
            compiled = self._by_shape[key] = self.compiled_for(inputs)
        results = compiled.run(inputs)
        self.stats = compiled.stats
        outputs = [self._deliver(p, r, bound) for p, r in zip(sig.outputs, results, strict=True)]
        fast_for = getattr(compiled, "fast_for", None)  # optional (runtime/backend.py)
        if fast_for is not None:  # the next call like this one takes the native way
            delivered = tuple((np.dtype(o.dtype), o.shape) for o in outputs)
            self._fast = fast_for(tuple(a.shape for a in inputs), delivered)
        if not any(b is not None for b in bound.out_buffers.values()):
            self._remember_keywords([p.name for p in sig.inputs], args, given, tuple(kwargs))
        return outputs[0] if len(outputs) == 1 else tuple(outputs)


class OnnxModule(Module):
    """The one kernel of an imported model; calling the module calls it."""

    def __init__(self, kernel: OnnxKernel, imported: ImportedModel):
        super().__init__({kernel.name: kernel})
        self.kernel = kernel
        self.imported = imported

    @property
    def source(self) -> str:
        """The WIA DSL text the model was imported as."""
        return self.imported.source

    @property
    def input_names(self) -> list[str]:
        return [onnx for onnx, _ in self.imported.inputs]

    @property
    def output_names(self) -> list[str]:
        return [onnx for onnx, _ in self.imported.outputs]

    def __call__(self, *args: object, **kwargs: object) -> KernelResult:
        return self.kernel(*args, **kwargs)

    def wait_compiled(self) -> None:
        """Wait for the background compile of ``tiered=True`` (see KernelFunction's)."""
        self.kernel.wait_compiled()

    def __repr__(self) -> str:
        return (f"<wiadsl.OnnxModule kernel={self.kernel.name} inputs={self.input_names} "
                f"outputs={self.output_names} weights={len(self.imported.weights)}>")


def compile_imported(imported: ImportedModel, target: str | None,
                     options: dict[str, Any]) -> OnnxModule:
    """Compile the imported source for ``target`` and bind its weights."""
    target = target or DEFAULT_TARGET
    backend = get_backend(target)
    source = LazySource(imported.source, f"<onnx:{imported.kernel}>")
    frozen = getattr(backend, "takes_frozen_inputs", False)
    # The source-level cache (as jit's): a model imported and compiled before builds
    # its kernel from the stored signature, without the frontend. The frozen
    # positions follow from the signature and the weights' names, so the names key it.
    key = source_key_for(backend, source, target,
                         {**options, "frozen_names": sorted(imported.weights)} if frozen else options)
    full = _signature(source, key)
    public = KernelSignature(full.name, tuple(p for p in full.params
                                              if p.name not in imported.weights))
    weights = tuple(np.ascontiguousarray(imported.weights[p.name]) for p in full.inputs
                    if p.name in imported.weights)
    aliases = {onnx: dsl for onnx, dsl in imported.inputs + imported.outputs if onnx != dsl}
    options = dict(options)
    if frozen:
        # the weights never change: the backend may derive data from them once (the
        # CPU packs each gemm's weight matrix on the first call, as ORT does at load)
        options["frozen"] = tuple(i for i, p in enumerate(full.inputs) if p.name in imported.weights)
    kernel = OnnxKernel(source, full, backend, options, source_key=key, public=public,
                        weights=weights, aliases=aliases, boundary=dict(imported.boundary))
    return OnnxModule(kernel, imported)


def _signature(source: LazySource, key: str | None) -> KernelSignature:
    """The imported kernel's signature: stored under ``key``, else from the source."""
    stored = load_signatures(key) if key is not None else None
    if stored is not None and len(stored) == 1:
        return stored[0]
    (decl,) = source.compiled.kernels
    found = signature_of(decl)
    if key is not None:
        store_signatures(key, [found])
    return found
