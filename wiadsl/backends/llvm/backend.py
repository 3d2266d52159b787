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
  Once a small result's shape is known, later calls pass a fresh array for it
  and the entry copies the result there natively (no ctypes memmove/free).
- Compiles go through the compile cache (``wiadsl.runtime.cache``): the key is
  taken from the unoptimized IR, so a hit skips the tensor passes, lowering and
  LLVM; the gemm config is the explicit ``config``, else the autotuner's best
  for this (kernel, shapes, dtypes, CPU), else the default.
"""

from __future__ import annotations

import ctypes
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...diagnostics import WiaRuntimeError, WiaUsageError
from ...ir.module import ModuleOp
from ...runtime.cache import get_or_compile
from ...runtime.cache_key import cpu_key_parts
from ...runtime.cache_log import Stages
from .compile import Layout, compile_object
from .gemm import GemmConfig, default_config
from .library import ensure_loaded
from .target import engine

_LIBC = ctypes.CDLL(None)
_FREE = _LIBC.free
_FREE.argtypes = [ctypes.c_void_p]
_ENTRY = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)
WRAP_BYTES = 1 << 16  # results at least this large are wrapped, not copied
_ADDRESSOF, _FROM_BUFFER = ctypes.addressof, ctypes.c_char.from_buffer


def data_pointer(a: np.ndarray) -> int:
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(a))
    except (TypeError, ValueError):  # read-only or empty: the slower, general route
        return a.__array_interface__["data"][0]


@dataclass(frozen=True)
class Loaded:
    """A compiled entry point in this process (shared by every kernel with its key)."""

    fn: Any
    layout: Layout


@dataclass
class Native:
    """A compiled entry point and this kernel's own argument array."""

    fn: Any
    messages: list[tuple[str, Any]]  #: (message, source span or None) per error code
    args: Any  # ctypes array of int64: inputs, then result slots
    n_inputs: int
    compile_ms: float
    in_dtypes: list[np.dtype]
    #: per result: (first slot, rank or -1 for a scalar, NumPy dtype)
    plan: list[tuple[int, int, np.dtype]]
    #: per tensor result: [copy-out slot, expected shape or None, NumPy dtype] (runtime.py):
    #: the shape is learned from the first call when the result is small
    outs: list[list[Any]] = field(default_factory=list)


def _load(obj: bytes, meta: dict[str, Any]) -> Loaded:
    layout = Layout.from_dict(meta["layout"])
    ensure_loaded(layout.libraries)  # the gemm/conv helpers the object links against
    return Loaded(_ENTRY(engine().add_object(obj, layout.symbol)), layout)


@dataclass
class CpuKernel:
    """One kernel on the CPU; ``passes=False`` when ``module`` is already optimized."""

    module: ModuleOp
    kernel: str
    level: int = 3
    stats: dict[str, Any] = field(default_factory=dict)
    config: GemmConfig | None = None
    passes: bool = True
    _native: Native | None = None
    _shapes: tuple[tuple[int, ...], ...] | None = None

    def run(self, inputs: Sequence[np.ndarray]) -> Sequence[object]:
        shapes = tuple(a.shape for a in inputs)
        native = self._native
        if native is None:
            native = self._compile(shapes, [a.dtype for a in inputs])
        elif shapes != self._shapes:
            raise WiaUsageError(f"kernel '{self.kernel}' was compiled for shapes {self._shapes}, "
                                f"called with {shapes}")
        args = native.args
        for i, a in enumerate(inputs):
            if not a.flags.c_contiguous or a.dtype != native.in_dtypes[i]:
                raise WiaUsageError(f"kernel '{self.kernel}': input {i} must be a C-contiguous "
                                    f"{native.in_dtypes[i]} array, got {a.dtype}")
            try:  # data_pointer's fast route, inlined (per-call overhead)
                args[i] = _ADDRESSOF(_FROM_BUFFER(a))
            except (TypeError, ValueError):
                args[i] = data_pointer(a)
        pre: list[np.ndarray | None] = []
        for slot, shape, dtype in native.outs:  # buffers for the native copy-out
            if shape is None:
                pre.append(None)
                continue
            array = np.empty(shape, dtype)
            args[slot] = _ADDRESSOF(_FROM_BUFFER(array)) if array.nbytes else data_pointer(array)
            args[slot + 1] = array.nbytes
            pre.append(array)
        rc = native.fn(ctypes.addressof(args))
        if rc != 0:
            message, loc = native.messages[rc - 1]
            raise WiaRuntimeError(message, loc)
        return self._results(native, pre)

    def _compile(self, shapes: tuple[tuple[int, ...], ...], dtypes: list[np.dtype]) -> Native:
        stages = Stages()
        with stages.stage("key"):
            config = self.config or _tuned(self.module, self.kernel, shapes, dtypes)
            pipeline = _pipeline(self.level) if self.passes else "none"
            parts = cpu_key_parts(self.module, self.kernel, shapes, dtypes, self.level, pipeline,
                                  (config or default_config()).label())
            symbol = f"wia_entry_{parts.digest()[:32]}"

        def compile_fn(st: Stages) -> tuple[bytes, dict[str, Any]]:
            obj, layout = compile_object(self.module, self.kernel, shapes, self.level, symbol,
                                         config, st, passes=self.passes)
            return obj, {"layout": layout.as_dict()}
        loaded, record = get_or_compile(parts, compile_fn, _load, stages)
        layout = loaded.layout
        n_in = len(layout.in_dtypes)
        args = (ctypes.c_int64 * layout.n_slots)()
        plan = [(int(k), int(rank), np.dtype(dt)) for k, rank, dt in layout.results]
        first = n_in + max(1, sum(1 + max(rank, 0) for _, rank, _ in plan))
        outs = [[first + 2 * j, None, dt] for j, (_, _, dt) in enumerate(p for p in plan if p[1] >= 0)]
        self._native = Native(loaded.fn, layout.errors(self.module), args, n_in, record["ms"],
                              [np.dtype(d) for d in layout.in_dtypes], plan, outs)
        self._shapes = shapes
        self.stats = {"compile_ms": record["ms"], "shapes": shapes, "cache": record["source"]}
        return self._native

    def _results(self, native: Native, pre: list[np.ndarray | None]) -> list[object]:
        args = native.args
        owned: dict[int, np.ndarray] = {}
        in_ptrs = args[:native.n_inputs]
        out: list[object] = []
        j = 0
        for k, rank, dtype in native.plan:
            if rank < 0:
                out.append(_scalar(args[k], dtype))
                continue
            ptr = args[k]
            shape = tuple(args[k + 1:k + 1 + rank])
            array = pre[j] if pre else None
            if array is not None and ptr == args[native.outs[j][0]]:  # copied out natively
                out.append(array if array.shape == shape else array.reshape(shape))
            else:
                result = _tensor(ptr, shape, dtype, owned, ptr in in_ptrs)
                if result.nbytes < WRAP_BYTES:
                    native.outs[j][1] = shape
                out.append(result)
            j += 1
        return out


def _tensor(ptr: int, shape: tuple[int, ...], dtype: np.dtype, owned: dict[int, np.ndarray],
            is_input: bool) -> np.ndarray:
    """The result array at ``ptr``: taken over (copied and freed, or wrapped and
    freed on collection); copied without freeing when it is an input; a copy of the
    first array when an earlier result had the same buffer (fuzz seed 7000217)."""
    count = 1
    for d in shape:
        count *= d
    nbytes = count * dtype.itemsize
    if ptr in owned:  # the same buffer returned twice: it is already taken over (freed)
        return owned[ptr].reshape(-1)[:count].reshape(shape).copy()
    if is_input:
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


def _scalar(slot: int, dtype: np.dtype) -> object:
    """A scalar result from its i64 slot (stored there with its own type, little-endian)."""
    raw = np.array([slot], dtype=np.int64)
    return raw.view(np.uint8)[:dtype.itemsize].view(dtype)[0]


class CpuBackend:
    """The llvmlite CPU JIT (the default target)."""

    name = "cpu"
    specialize_shapes = True

    def compile(self, module: ModuleOp, kernel: str, options: dict[str, Any]) -> CpuKernel:
        """A kernel that compiles (or loads from the cache) on its first run; the tensor
        passes run then too, so a cache hit skips them."""
        unknown = set(options) - {"opt_level", "gemm_config"}
        if unknown:
            raise WiaUsageError(f"target 'cpu' takes the options opt_level and gemm_config, "
                                f"got {', '.join(sorted(unknown))}")
        level = int(options.get("opt_level", 3))
        _pipeline(level)  # a bad level fails here, at compile time
        return CpuKernel(module, kernel, level, config=options.get("gemm_config"))


def _pipeline(level: int) -> str:
    from ...passes import default_pipeline

    return default_pipeline(level)


def _tuned(module: ModuleOp, kernel: str, shapes: Sequence[tuple[int, ...]],
           dtypes: Sequence[np.dtype]) -> GemmConfig | None:
    """The autotuner's best config for this specialization, when one was measured."""
    from ...tune.records import tuned_config

    return tuned_config(module, kernel, shapes, dtypes)


BACKEND = CpuBackend()
