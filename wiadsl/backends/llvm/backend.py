"""``target="cpu"``: the jit's Backend, compiling per shape and calling through ctypes.

Invariants:
- ``specialize_shapes`` is True: the jit keys compiled kernels by every extent,
  so one ``CpuKernel`` serves one shape tuple; it compiles on its first ``run``
  (the backend protocol gives ``compile`` no shapes) and checks the shapes of
  every later call against it (bad input never reaches native code).
- The argument path per call: the packed i64 argument array is allocated once;
  a call writes each input's data pointer (read via ``ctypes.c_char.from_buffer``,
  the cheapest route measured) and calls the entry through ctypes (GIL released).
- Results come back as pointers owned by the caller (runtime.py): small ones are
  copied into fresh NumPy arrays and freed, large ones are wrapped without a copy
  and freed when the array is collected. A result that is an input is copied.
"""

from __future__ import annotations

import ctypes
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...diagnostics import WiaRuntimeError, WiaUsageError
from ...ir.module import ModuleOp
from ...ir.types import IRType, ScalarType, TensorType
from .codegen import slot_count
from .compile import LoweredKernel, build, lower_kernel
from .target import engine

_LIBC = ctypes.CDLL(None)
_FREE = _LIBC.free
_FREE.argtypes = [ctypes.c_void_p]
_ENTRY = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)
WRAP_BYTES = 1 << 16  # results at least this large are wrapped, not copied


def data_pointer(a: np.ndarray) -> int:
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(a))
    except (TypeError, ValueError):  # read-only or empty: the slower, general route
        return a.__array_interface__["data"][0]


@dataclass
class Native:
    """A compiled entry point and the layout of its argument array."""

    fn: Any
    lowered: LoweredKernel
    args: Any  # ctypes array of int64: inputs, then result slots
    n_inputs: int
    compile_ms: float
    in_dtypes: list[np.dtype]
    #: per result: (first slot, rank or -1 for a scalar, NumPy dtype)
    plan: list[tuple[int, int, np.dtype]]


@dataclass
class CpuKernel:
    module: ModuleOp
    kernel: str
    level: int = 3
    stats: dict[str, Any] = field(default_factory=dict)
    _native: Native | None = None
    _shapes: tuple[tuple[int, ...], ...] | None = None

    def run(self, inputs: Sequence[np.ndarray]) -> Sequence[object]:
        shapes = tuple(a.shape for a in inputs)
        native = self._native
        if native is None:
            native = self._compile(shapes)
        elif shapes != self._shapes:
            raise WiaUsageError(f"kernel '{self.kernel}' was compiled for shapes {self._shapes}, "
                                f"called with {shapes}")
        args = native.args
        for i, a in enumerate(inputs):
            if not a.flags.c_contiguous or a.dtype != native.in_dtypes[i]:
                raise WiaUsageError(f"kernel '{self.kernel}': input {i} must be a C-contiguous "
                                    f"{native.in_dtypes[i]} array, got {a.dtype}")
            args[i] = data_pointer(a)
        rc = native.fn(ctypes.addressof(args))
        if rc != 0:
            message, loc = native.lowered.messages[rc - 1]
            raise WiaRuntimeError(message, loc)
        return self._results(native)

    def _compile(self, shapes: tuple[tuple[int, ...], ...]) -> Native:
        start = time.perf_counter()
        lowered = lower_kernel(self.module, self.kernel, shapes)
        mod = build(lowered, self.level)
        address = engine().add(mod, "wia_entry")
        fn = _ENTRY(address)
        n_in = len(lowered.param_types)
        args = (ctypes.c_int64 * (n_in + max(1, lowered.result_slots)))()
        ms = (time.perf_counter() - start) * 1e3
        in_dtypes = [np.dtype(_storage(t)) for t in lowered.param_types]
        plan, k = [], n_in
        for t in lowered.result_types:
            plan.append((k, t.rank if isinstance(t, TensorType) else -1, np.dtype(_storage(t))))
            k += slot_count(t)
        self._native = Native(fn, lowered, args, n_in, ms, in_dtypes, plan)
        self._shapes = shapes
        self.stats = {"compile_ms": ms, "shapes": shapes}
        return self._native

    def _results(self, native: Native) -> list[object]:
        args = native.args
        owned: dict[int, np.ndarray] = {}
        in_ptrs = args[:native.n_inputs]
        out: list[object] = []
        for k, rank, dtype in native.plan:
            if rank < 0:
                out.append(_scalar(args[k], dtype))
                continue
            ptr = args[k]
            shape = tuple(args[k + 1:k + 1 + rank])
            out.append(_tensor(ptr, shape, dtype, owned, ptr in in_ptrs))
        return out


def _tensor(ptr: int, shape: tuple[int, ...], dtype: np.dtype, owned: dict[int, np.ndarray],
            is_input: bool) -> np.ndarray:
    """The result array at ``ptr``: taken over (copied and freed, or wrapped and
    freed on collection); copied without freeing when it is an input or seen before."""
    count = 1
    for d in shape:
        count *= d
    nbytes = count * dtype.itemsize
    if ptr in owned or is_input:
        array = np.empty(shape, dtype)
        if nbytes:
            ctypes.memmove(data_pointer(array), ptr, nbytes)
        return array
    if nbytes >= WRAP_BYTES:
        raw = (ctypes.c_char * nbytes).from_address(ptr)
        array = np.frombuffer(raw, dtype=dtype).reshape(shape)
        weakref.finalize(raw, _FREE, ptr)
    else:
        array = np.empty(shape, dtype)
        if nbytes:
            ctypes.memmove(data_pointer(array), ptr, nbytes)
        _FREE(ptr)
    owned[ptr] = array
    return array


def _storage(t: IRType) -> np.dtype:
    return np.dtype(np.int64) if not isinstance(t, (ScalarType, TensorType)) else t.dtype.numpy


def _scalar(slot: int, dtype: np.dtype) -> object:
    """A scalar result from its i64 slot (stored there with its own type, little-endian)."""
    raw = np.array([slot], dtype=np.int64)
    return raw.view(np.uint8)[:dtype.itemsize].view(dtype)[0]


class CpuBackend:
    """The llvmlite CPU JIT (the default target)."""

    name = "cpu"
    specialize_shapes = True

    def compile(self, module: ModuleOp, kernel: str, options: dict[str, Any]) -> CpuKernel:
        unknown = set(options) - {"opt_level"}
        if unknown:
            raise WiaUsageError(f"target 'cpu' takes the option opt_level, got {', '.join(sorted(unknown))}")
        level = int(options.get("opt_level", 3))
        module = _optimized(module, level)
        return CpuKernel(module, kernel, level)


def _optimized(module: ModuleOp, level: int) -> ModuleOp:
    """The tensor-level passes (when the passes package provides them)."""
    try:
        from ...passes import optimize  # type: ignore[attr-defined]
    except ImportError:
        return module
    return optimize(module, level) or module


BACKEND = CpuBackend()
