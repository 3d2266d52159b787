"""``wiadsl.jit``: compile WIA DSL source and call its kernels on NumPy arrays.

A ``Module`` has one ``KernelFunction`` attribute per kernel. A call checks its
arguments (``binding``), specializes the kernel to the dtypes and ranks of its
``tensor`` parameters (compiled once per specialization), runs it on the chosen
backend, and checks and returns the outputs in declaration order.

The fast path: when a backend's compiled kernel can check a call itself
(``try_run``: ``FastKernel`` in backend.py), a call that got through the checks
above leaves a ``CallPlan``, keyed by the shapes of its checked inputs. A later
positional call tries the last plan used, then the one for its argument shapes;
the plan's kernel takes the arguments only if each is an ndarray of exactly the
dtype and shape of those inputs, C-contiguous and aligned -- which ``bind_call``
would pass unchanged -- and anything else goes the checking way, which then
looks up the plan for what it made of the arguments (Python scalars as arrays,
strided views made dense). So a repeated call costs a dict lookup at most,
pointer writes and one native call, and no argument reaches native code unchecked.
A call that passes output buffers by keyword (``f(a, b, c=out)``) takes the same
plans when each buffer is a plain, C-contiguous, writable ndarray of exactly the
dtype and shape the plan delivers for that output; the result is computed in it
(or copied there when it overlaps an input), and any other buffer goes the
checking way, which says what is wrong with it.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, overload

import numpy as np

from ..backends.contract import NOT_RUN, Backend, CompiledKernel
from ..cache.sources import load_signatures, store_signatures
from ..diagnostics import WiaCallError, WiaNameError, WiaRuntimeError, WiaUsageError, a_or_an
from ..dtypes import DType, from_numpy
from ..records import field, record
from ..signature import KernelSignature, ParamSpec, signature_of
from .backend import get_backend
from .binding import BoundCall, bind_call

if TYPE_CHECKING:
    from ..frontend.compile import CompiledSource
    from ..ir.module import ModuleOp

DEFAULT_TARGET = "cpu"
#: call plans a kernel keeps (one per argument shapes seen; the backend's code is shared)
MAX_PLANS = 256

#: One output of a kernel call: an array, or a NumPy scalar for a rank-0 output.
KernelOutput: TypeAlias = np.ndarray | np.generic
#: What a kernel call returns: its one output, or a tuple of them in declaration order.
KernelResult: TypeAlias = KernelOutput | tuple[KernelOutput, ...]


@record(frozen=True)
class CallPlan:
    """A checked way to call one specialization again with the same kinds of arguments.

    ``call`` (the compiled kernel's ``try_run``) runs the arguments when each is an
    ndarray of the dtype and shape of the checked inputs of the call that made the
    plan, C-contiguous and aligned, and returns the raw results; else None, having
    run nothing.
    ``outputs`` holds what that call delivered per output, (dtype, shape): a raw
    result just like it is delivered as it is, anything else by ``_deliver``
    against ``bound``, the plan's own checked call (its dims, no output buffers).
    """

    #: ``call(args)`` or ``call(args, buffers)`` (a buffer, or None, per output)
    call: Callable[..., list[object] | None]
    outputs: tuple[tuple[np.dtype, tuple[int, ...]], ...]
    bound: BoundCall
    stats: dict[str, Any]
    #: the whole call, delivery included, when the backend has one (``FastKernel.fast_for``):
    #: ``fast(args)``, or ``fast(args, buffers)`` with checked output buffers
    fast: Callable[..., object] | None = None


def _shapes_key(args: tuple[object, ...]) -> tuple[tuple[int, ...], ...] | None:
    """The plan key of a positional call: every argument's shape (None: some has none)."""
    try:
        return tuple([a.shape for a in args])  # type: ignore[attr-defined]
    except AttributeError:  # a Python scalar, say: the checking way
        return None


@record
class KernelFunction:
    """A callable kernel: ``f(*inputs, **inputs_or_output_buffers)``.

    Each instance has its own ``__signature__`` (for ``inspect.signature`` and
    IDEs), a ``__doc__`` made from its declaration and a one-line repr: the
    dataclass repr would print the whole compiled source.
    """

    source: LazySource
    signature: KernelSignature
    backend: Backend
    options: dict[str, Any] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    #: the source-level cache key (cache/sources.py), when the backend can use one
    source_key: str | None = None
    _specializations: dict[tuple, CompiledKernel] = field(default_factory=dict, repr=False)
    #: call plans by argument shapes, and the last one used (see the module docstring)
    _plans: dict[tuple, CallPlan] = field(default_factory=dict, repr=False)
    _plan: CallPlan | None = field(default=None, repr=False)
    #: ``_plan.fast`` while the last call ran that plan (``stats`` is its stats), else None
    #: (OnnxKernel keeps a ``_fast`` of its own, and its own ``__call__``)
    _steady: Callable[..., object] | None = field(default=None, repr=False)
    #: (positional count, keywords as given) -> those keywords in declaration order,
    #: for calls whose keywords name exactly the remaining inputs (``_by_position``)
    _keyword_orders: dict[tuple[int, tuple[str, ...]], tuple[str, ...]] = field(
        default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.__signature__ = python_signature(self.signature)
        self.__doc__ = kernel_docstring(self.signature)

    @property
    def name(self) -> str:
        return self.signature.name

    def __repr__(self) -> str:
        return f"<wiadsl kernel {self.signature.describe()} target={self.backend.name}>"

    def _by_position(self, args: tuple[object, ...], kwargs: dict[str, object]
                     ) -> tuple[object, ...] | None:
        """The arguments of a call by keyword as one positional tuple, when a checked
        call with the same keywords has shown they name exactly the remaining inputs
        (so a steady-state call by keyword, as ``ort.InferenceSession.run`` users
        make, takes the plans' native way too)."""
        order = self._keyword_orders.get((len(args), tuple(kwargs)))
        return None if order is None else args + tuple([kwargs[k] for k in order])

    def _remember_keywords(self, inputs: Sequence[str], args: tuple[object, ...],
                           given: tuple[str, ...], names: tuple[str, ...]) -> None:
        """After a checked call: ``given`` keywords (meaning the input ``names``, in the
        same order) followed ``args`` positionally; remember their declaration order
        when they were exactly the inputs after the positional ones."""
        rest = tuple(inputs[len(args):])
        if not given or sorted(names) != sorted(rest) or len(self._keyword_orders) >= MAX_PLANS:
            return
        by_name = dict(zip(names, given, strict=True))
        self._keyword_orders[(len(args), given)] = tuple(by_name[n] for n in rest)

    def __call__(self, *args: object, **kwargs: object) -> KernelResult:
        # the steady state: the last call's plan again, checks and delivery in one native
        # call; nothing else on the way (this is most of a small kernel's call)
        fast, tried = self._steady, None
        if fast is not None and not kwargs:
            result = fast(args)
            if result is not NOT_RUN:
                return result  # type: ignore[return-value]
            tried = fast
        self._steady = None  # until this call shows which plan it ran
        result = self._call_by_plans(args, kwargs, tried)
        plan = self._plan
        self._steady = plan.fast if plan is not None and self.stats is plan.stats else None
        return result

    def _call_by_plans(self, args: tuple[object, ...], kwargs: dict[str, object],
                       tried: Callable[..., object] | None = None) -> KernelResult:
        """A call by the plans (the last one's fast call first, unless it is ``tried``
        already: ``__call__``'s, which did not take these arguments) or the checking way."""
        if kwargs:
            positional = self._by_position(args, kwargs)
            if positional is not None:
                args, kwargs = positional, {}
        if not kwargs:
            plan = self._plan
            fast = plan.fast if plan is not None else None
            if fast is not None and fast is not tried:  # checks and delivery in one native call
                result = fast(args)
                if result is not NOT_RUN:
                    self.stats = plan.stats  # type: ignore[union-attr]
                    return result  # type: ignore[return-value]
            result = self._from_plans(args, lambda p: self._planned(p, args, p is not plan or fast is None))
            if result is not NOT_RUN:
                return result  # type: ignore[return-value]
        else:
            buffers = self._output_buffers(kwargs)
            if buffers is not None:
                result = self._from_plans(args, lambda p: self._planned_into(p, args, buffers))
                if result is not NOT_RUN:
                    return result  # type: ignore[return-value]
        return self._call_checked(args, kwargs)

    def _from_plans(self, args: tuple[object, ...], run: Callable[[CallPlan], object]) -> object:
        """``run`` on the last plan used, then on the plan of these argument shapes
        (calls that alternate shapes), which becomes the last one; NOT_RUN when neither
        takes the call."""
        plan = self._plan
        result = run(plan) if plan is not None else NOT_RUN
        if result is NOT_RUN:
            key = _shapes_key(args)
            other = self._plans.get(key) if key is not None else None
            if other is not None and other is not plan:
                result = run(other)
                if result is not NOT_RUN:
                    self._plan = other
        return result

    def _output_buffers(self, kwargs: dict[str, object]) -> list[object] | None:
        """The keywords as one buffer (or None) per output, in declaration order, when
        they name outputs only; else None."""
        outputs = self.signature.outputs
        if len(kwargs) > len(outputs):
            return None
        buffers = [kwargs.get(p.name) for p in outputs]
        return buffers if sum(b is not None for b in buffers) == len(kwargs) else None

    def _planned_into(self, plan: CallPlan, args: tuple[object, ...],
                      buffers: list[object]) -> object:
        """``plan`` run on ``args`` with the caller's output ``buffers`` (None: a fresh
        result), delivered as the checking way would; NOT_RUN, having run nothing,
        for a buffer that is not exactly what the plan delivers there."""
        given: list[np.ndarray] = []
        for b, (dtype, shape) in zip(buffers, plan.outputs, strict=True):
            if b is None:
                continue
            if not (type(b) is np.ndarray and b.dtype == dtype and b.shape == shape
                    and b.flags.carray) or any(np.may_share_memory(b, g) for g in given):
                return NOT_RUN  # the checking way says what is wrong with it
            given.append(b)
        if plan.fast is not None and not any(
                type(a) is np.ndarray and np.may_share_memory(a, g) for a in args for g in given):
            result = plan.fast(args, buffers)  # the whole call in native code
            if result is not NOT_RUN:
                self.stats = plan.stats
                return result
        results = plan.call(args, buffers)
        if results is None:
            return NOT_RUN
        self.stats = plan.stats
        fresh = [r for r, b in zip(results, buffers, strict=True) if b is None]
        delivered = iter(self._deliver_all(plan, fresh, [b is None for b in buffers]))
        out: list[object] = []
        for r, b in zip(results, buffers, strict=True):
            if b is None:
                out.append(next(delivered))
                continue
            if r is not b:  # not computed in place (it overlaps an input): as _deliver does
                np.copyto(b, r)  # type: ignore[arg-type]
            out.append(b)
        return out[0] if len(out) == 1 else tuple(out)

    def _planned(self, plan: CallPlan, args: tuple[object, ...], try_fast: bool) -> object:
        """``plan`` run on ``args`` (its fast call first when ``try_fast``), delivered;
        NOT_RUN when it takes neither."""
        if try_fast and plan.fast is not None:
            result = plan.fast(args)
            if result is not NOT_RUN:
                self.stats = plan.stats
                return result
        results = plan.call(args)
        if results is None:
            return NOT_RUN
        self.stats = plan.stats
        return self._deliver_planned(plan, results)

    def _call_checked(self, args: tuple[object, ...], kwargs: dict[str, object]) -> KernelResult:
        """The general call: bind and check, specialize, run, check the outputs."""
        sig = self.signature
        bound = bind_call(sig, args, kwargs)
        inputs = list(bound.inputs.values())  # declaration order
        into_buffers = any(b is not None for b in bound.out_buffers.values())
        if not into_buffers:  # checked arrays (Python scalars made arrays, views made dense)
            self._remember_keywords([p.name for p in sig.inputs], args, tuple(kwargs), tuple(kwargs))
            plan = self._plans.get(tuple([a.shape for a in inputs]))
            results = plan.call(inputs) if plan is not None else None
            if results is not None:
                assert plan is not None
                self._plan = plan
                self.stats = plan.stats
                return self._deliver_planned(plan, results)
        compiled = self.compiled_for(inputs)
        run_into = getattr(compiled, "run_into", None)  # optional (backend.py: IntoKernel)
        if into_buffers and run_into is not None:
            raw = run_into(inputs, [bound.out_buffers.get(p.name) for p in sig.outputs])
        else:
            raw = compiled.run(inputs)
        self.stats = dict(compiled.stats)
        outputs = [self._deliver(p, r, bound) for p, r in zip(sig.outputs, raw, strict=True)]
        # a call into buffers plans the calls like it when every buffer got its result
        # computed in place: then each delivered output is the result as it came
        if all(b is None or r is b for r, b in zip(raw, bound.out_buffers.values(), strict=True)):
            self._make_plan(inputs, compiled, bound, outputs)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def _make_plan(self, inputs: list[np.ndarray], compiled: CompiledKernel, bound: BoundCall,
                   outputs: list[KernelOutput]) -> None:
        """Leave a plan for calls like this one. ``inputs`` are what ``bind_call`` made of
        the arguments, and it makes any ndarray of the same dtype and shape into
        itself (a fixed point): so the plan takes such arrays as they are."""
        call_for = getattr(compiled, "call_for", None)  # optional (backend.py: FastKernel)
        if call_for is None or any(type(a) is not np.ndarray for a in inputs):
            return
        shapes = tuple([a.shape for a in inputs])
        call = call_for(shapes)
        if call is None:
            return
        delivered = tuple((np.dtype(o.dtype), o.shape) for o in outputs)
        # the plan's bound call keeps the dims, not this call's arrays
        dims_only = BoundCall({}, dict.fromkeys(bound.out_buffers), dict(bound.dims),
                              dict(bound.dim_sources))
        fast_for = getattr(compiled, "fast_for", None)
        fast = fast_for(shapes, delivered) if fast_for is not None else None
        plan = CallPlan(call, delivered, dims_only, dict(self.stats), fast)
        if len(self._plans) >= MAX_PLANS:  # many shapes (shape-generic code): forget the oldest
            del self._plans[next(iter(self._plans))]
        self._plans[shapes] = self._plan = plan

    def _deliver_planned(self, plan: CallPlan, results: Sequence[object]) -> KernelResult:
        """The outputs of a planned call: ``_deliver``'s checks, done once for the plan."""
        outputs = plan.outputs
        if len(results) == 1:  # the common case, without the loop
            r = results[0]
            dtype, shape = outputs[0]
            if (type(r) is np.ndarray and r.dtype == dtype and r.shape == shape
                    and r.flags.c_contiguous):
                return r if shape else r[()]
        out = self._deliver_all(plan, results, [True] * len(outputs))
        return out[0] if len(out) == 1 else tuple(out)

    def _deliver_all(self, plan: CallPlan, results: Sequence[object],
                     which: list[bool]) -> list[KernelOutput]:
        """``results`` delivered as the outputs ``which`` marks, in order."""
        chosen = [(p, o) for p, o, w in zip(self.signature.outputs, plan.outputs, which,
                                            strict=True) if w]
        out: list[KernelOutput] = []
        for (param, (dtype, shape)), r in zip(chosen, results, strict=True):
            if (type(r) is np.ndarray and r.dtype == dtype and r.shape == shape
                    and r.flags.c_contiguous):
                out.append(r if shape else r[()])
            elif not shape and type(r) is dtype.type:  # a NumPy scalar, as delivered
                out.append(r)  # type: ignore[arg-type]
            else:
                out.append(self._deliver(param, r, plan.bound))
        return out

    def wait_compiled(self) -> None:
        """Wait until the code that calls so far asked for is compiled: with the CPU
        target's ``tiered`` option, compiles run in the background while calls are
        interpreted (backends/llvm/tiered.py); otherwise there is nothing to wait for."""
        for compiled in list(self._specializations.values()):
            wait = getattr(compiled, "wait_compiled", None)
            if wait is not None:
                wait()

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
            compile_lazily = getattr(self.backend, "compile_lazily", None)
            if self.source_key is not None and not generic and compile_lazily is not None:
                # the IR only if the source-level cache misses (the CPU backend's compile_lazily)
                compiled = compile_lazily(self.ir_for, self.name, self.options, self.source_key,
                                          self.signature, self.source.files)
            else:
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
            if array is buffer:  # the backend computed the result in it (run_into)
                return buffer
            if buffer.dtype != array.dtype and param.dtype is None:
                # a ``tensor`` output: its dtype is known only now, before any write
                raise WiaCallError(f"output '{param.name}': expected a buffer of "
                                   f"{array.dtype} (the dtype of the result), got "
                                   f"{a_or_an(str(buffer.dtype))} array")
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


def python_signature(sig: KernelSignature) -> inspect.Signature:
    """The kernel's call as Python sees it: inputs positional or by keyword, outputs
    keyword-only (optional buffers to write into); annotations are the declared types."""
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    params = [inspect.Parameter(p.name, kind, annotation=p.describe()) for p in sig.inputs]
    params += [inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY, default=None,
                                 annotation=p.describe()) for p in sig.outputs]
    outs = [p.describe() for p in sig.outputs]
    returns = outs[0] if len(outs) == 1 else f"tuple[{', '.join(outs)}]"
    return inspect.Signature(params, return_annotation=returns)


def kernel_docstring(sig: KernelSignature) -> str:
    """The declaration of the kernel, then how a call takes and returns its arrays."""
    params = ", ".join(f"{'output' if p.is_output else 'input'} {p.name}: {p.describe()}"
                       for p in sig.params)
    inputs = ", ".join(p.name for p in sig.inputs)
    outputs = [p.name for p in sig.outputs]
    returns = outputs[0] if len(outputs) == 1 else f"({', '.join(outputs)})"
    lines = [f"kernel {sig.name}({params})", "",
             f"Call {sig.name}({inputs}) -> {returns} with NumPy arrays or scalars.",
             "Outputs are returned in declaration order; pass "
             + ", ".join(f"{o}=buffer" for o in outputs)
             + " to write into your own array instead."]
    if sig.generic_inputs:
        lines.append("'tensor' parameters take any dtype and rank; each new combination "
                     "compiles once.")
    return "\n".join(lines)


class UnknownKernelError(WiaNameError, AttributeError):
    """``module.name`` for a name that is not a kernel of the module. An
    AttributeError too, so ``hasattr`` and ``getattr(m, n, default)`` keep working."""


def unknown_kernel_message(name: str, known: Sequence[str], where: str) -> str:
    """"no kernel named 'matmull' in f.wia; did you mean 'matmul'? (kernels: ...)"."""
    import difflib  # only for a name that is wrong (a warm start imports no more than it needs)

    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    listed = ", ".join(known) or "none"
    return f"no kernel named '{name}' in {where}{hint} (kernels: {listed})"


class Module:
    """The kernels of one source file, one attribute each."""

    def __init__(self, kernels: dict[str, KernelFunction], filename: str = "<string>"):
        self._kernels = kernels
        self._filename = filename
        for name, fn in kernels.items():
            setattr(self, name, fn)

    def __getattr__(self, name: str) -> KernelFunction:
        # Only called when normal lookup fails: a misspelled kernel, or a dunder
        # probe (copy, pickle, IPython) that must stay a plain AttributeError.
        if name.startswith("__") or name in ("_kernels", "_filename"):
            raise AttributeError(name)
        raise UnknownKernelError(unknown_kernel_message(name, list(self._kernels),
                                                        self._filename))

    @property
    def kernels(self) -> dict[str, KernelFunction]:
        return dict(self._kernels)

    def wait_compiled(self) -> None:
        """``KernelFunction.wait_compiled`` of every kernel."""
        for fn in self._kernels.values():
            fn.wait_compiled()

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
    _check_source_text(source)
    backend = get_backend(target)
    lazy = LazySource(source, filename)
    key = source_key_for(backend, lazy, target, options)
    signatures = load_signatures(key) if key is not None else None
    if signatures is None:  # a miss: parse and check now (errors are raised here)
        signatures = [signature_of(k) for k in lazy.compiled.kernels]
        if key is not None:
            store_signatures(key, signatures)
    kernels = {s.name: KernelFunction(lazy, s, backend, dict(options), source_key=key)
               for s in signatures}
    if kernel is None:
        return Module(kernels, filename)
    if kernel not in kernels:
        raise WiaUsageError(unknown_kernel_message(kernel, list(kernels), filename))
    return kernels[kernel]


class LazySource:
    """A source that parses and checks on first use: a hit in the source-level cache
    (cache/sources.py) builds the kernels from their stored signatures and never needs
    the frontend, unless a call misses there too."""

    def __init__(self, text: str, filename: str):
        self.text = text
        self.filename = filename
        self._compiled: CompiledSource | None = None

    @property
    def compiled(self) -> CompiledSource:
        if self._compiled is None:
            from ..frontend.compile import compile_source

            self._compiled = compile_source(self.text, self.filename)
        return self._compiled

    @functools.cached_property
    def imports(self) -> dict[str, str]:
        """Path -> text of every file the source may import (``import_closure``): the
        source-level key hashes them, and runtime errors' spans show them. Read once,
        not once per specialization."""
        from ..cache.sources import import_closure

        return import_closure(self.text, self.filename)

    @property
    def files(self) -> dict[str, str]:
        """Name -> text of the source and every file it may import."""
        return {self.filename: self.text, **self.imports}

    def lower_kernel(self, name: str, generic: Any = None) -> ModuleOp:
        return self.compiled.lower_kernel(name, generic)


def source_key_for(backend: Backend, source: LazySource, target: str,
                options: dict[str, Any]) -> str | None:
    """The source-level cache key, for a backend that takes one and with the disk
    cache on; else None."""
    host = getattr(backend, "cache_host", None)
    if host is None:
        return None
    from ..cache.entries import disk_enabled
    from ..cache.sources import source_key

    if not disk_enabled():
        return None
    run_options: frozenset[str] = getattr(backend, "run_options", frozenset())  # the same code
    code_options = {k: v for k, v in options.items() if k not in run_options}
    try:
        imports = source.imports
    except (OSError, UnicodeDecodeError):  # the frontend reports it (uncached)
        return None
    return source_key(source.text, source.filename, target, code_options, host(), imports)


def jit_file(path: str | os.PathLike[str], kernel: str | None = None,
             target: str = DEFAULT_TARGET, **options: Any) -> Module | KernelFunction:
    """``jit`` on the text of the file at ``path`` (UTF-8); imports resolve next to it."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise WiaUsageError(f"cannot read '{os.fspath(path)}': "
                            f"{exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise WiaUsageError(f"'{os.fspath(path)}' is not UTF-8 text (byte {exc.start}); "
                            "is it a WIA DSL source file?") from None
    return jit(text, kernel, target, os.fspath(path), **options)


def _check_source_text(source: object) -> None:
    """Refuse what is not source text before the tokenizer sees it: bytes, a Path,
    or a string that is a file name (every program has a kernel, so a '{')."""
    if isinstance(source, (bytes, bytearray)):
        raise WiaUsageError("wiadsl.jit takes the source as str, got bytes; decode it "
                            "first (wiadsl.jit(data.decode())) or use wiadsl.jit_file(path)")
    if isinstance(source, os.PathLike):
        raise WiaUsageError(f"wiadsl.jit takes the source text, got the path "
                            f"'{os.fspath(source)}'; use wiadsl.jit_file(path)")
    if not isinstance(source, str):
        raise WiaUsageError(f"wiadsl.jit takes the source text as str, got "
                            f"{type(source).__name__}")
    text = source.strip()
    if "{" not in text and "\n" not in text and (
            text.endswith((".wia", ".onnx")) or os.path.isfile(text)):
        raise WiaUsageError(f"wiadsl.jit takes the source text, not a file name: use "
                            f"wiadsl.jit_file('{text}') (or wiadsl.jit(open(path).read()))")
