"""``target="cpu"``: the jit's Backend, compiling per shape and calling through ctypes.

Invariants:
- ``specialize_shapes`` is True: the jit keys compiled kernels by every extent,
  so one ``CpuKernel`` serves one shape tuple; it compiles on its first ``run``
  (the backend protocol gives ``compile`` no shapes) and checks the shapes of
  every later call against it (bad input never reaches native code).
- The argument path per call (``CpuKernel.try_run``, the jit's fast path): check each
  argument against the specialization (exact ndarray type, dtype, shape, C-contiguous,
  aligned; anything else returns None and the caller goes the general, checking
  way), write its data pointer (``ctypes.c_char.from_buffer``, the cheapest route
  measured; ``__array_interface__`` for read-only arrays) into a packed i64
  argument array taken from a per-kernel pool (so concurrent calls never share
  one), and call the entry through ctypes (GIL released).
- Results come back as pointers owned by the caller (runtime.py): small ones are
  copied into fresh NumPy arrays and freed, large ones are wrapped without a copy
  and freed when the array is collected. A result that is an input is copied.
  Once a small result's shape is known, later calls pass a fresh array for it
  and the entry copies the result there natively (no ctypes memmove/free).
- Threads: a kernel compiles once (``_compile`` under the kernel's own lock, which
  is only ever taken first: nothing that runs under it calls back into a kernel);
  calls run concurrently (the argument arrays come from the pool).
- Compiles go through the compile cache (``wiadsl.runtime.cache``): the key is
  taken from the unoptimized IR, so a hit skips the tensor passes, lowering and
  LLVM; the gemm config is the explicit ``config``, else the autotuner's best
  for this (kernel, shapes, dtypes, CPU), else the default.
"""

from __future__ import annotations

import ctypes
import math
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ...diagnostics import SourceFile, Span, WiaRuntimeError, WiaUsageError
from ...runtime import source_cache
from ...runtime.binding import check_distinct_buffers
from ...runtime.cache import get_or_compile
from ...runtime.cache_key import KeyParts, cpu_key_parts
from ...runtime.cache_log import Stages
from .gemm_config import GemmConfig, default_config
from .layout import Layout
from .library import ensure_loaded, jit_engine

if TYPE_CHECKING:
    from ...ir.module import ModuleOp
    from ...runtime.signature import KernelSignature

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


class OutSlot:
    """One tensor result's copy-out pair (runtime.py) and the buffer shape for it.

    ``shape`` is None until the first call shows the result is small (below
    ``WRAP_BYTES``); from then on every call passes a fresh ``np.empty(shape)``.
    """

    __slots__ = ("slot", "dtype", "shape", "extents", "nbytes")

    def __init__(self, slot: int, dtype: np.dtype):
        self.slot = slot  #: the destination pointer's slot; the byte count follows it
        self.dtype = dtype
        self.shape: tuple[int, ...] | None = None
        self.extents: list[int] = []  #: ``list(shape)``: what the result slots must hold
        self.nbytes = 0

    def learn(self, shape: tuple[int, ...]) -> None:
        # ``shape`` last: a call in another thread that sees it sees the rest
        self.nbytes = math.prod(shape) * self.dtype.itemsize
        self.extents = list(shape)
        self.shape = shape


@dataclass
class Native:
    """A compiled entry point and the argument arrays of this kernel's calls."""

    fn: Any
    messages: list[tuple[str, Any]]  #: (message, source span or None) per error code
    n_slots: int  #: i64 slots of an argument array: inputs, result slots, copy-out pairs
    n_inputs: int
    compile_ms: float
    in_dtypes: list[np.dtype]
    #: per result: (first slot, rank or -1 for a scalar, NumPy dtype)
    plan: list[tuple[int, int, np.dtype]]
    #: per tensor result, in order
    outs: list[OutSlot] = field(default_factory=list)
    #: per input: (slot, dtype, shape, has elements): exactly what a call passes
    specs: tuple[tuple[int, np.dtype, tuple[int, ...], bool], ...] = ()
    #: argument arrays not in use, each with its address: a call takes one and puts
    #: it back, so calls from several threads (the GIL is released while native code
    #: runs) never share one
    pool: list[tuple[Any, int]] = field(default_factory=list)

    def new_args(self) -> tuple[Any, int]:
        args = (ctypes.c_int64 * self.n_slots)()
        return args, ctypes.addressof(args)


def _load(obj: bytes, meta: dict[str, Any]) -> Loaded:
    layout = Layout.from_dict(meta["layout"])
    ensure_loaded(layout.libraries)  # the gemm/conv helpers the object links against
    return Loaded(_ENTRY(jit_engine().add_object(obj, layout.symbol)), layout)


@dataclass(frozen=True)
class SourceLevel:
    """What the source-level cache (runtime/source_cache.py) needs to find this
    kernel's specializations without its IR: the source key, the kernel's output
    names and the texts of its source files (for the spans of runtime errors)."""

    key: str
    outputs: tuple[str, ...]
    files: dict[str, str]

    def sources(self) -> dict[str, SourceFile]:
        return {name: SourceFile(name, text) for name, text in self.files.items()}


@dataclass
class CpuKernel:
    """One kernel on the CPU; ``passes=False`` when ``module`` is already optimized.

    ``module`` may be None with ``lazy_ir`` (and ``source_level``) given: the IR is
    then made only if the source-level cache has no entry for a call's shapes."""

    module: ModuleOp | None
    kernel: str
    level: int = 3
    stats: dict[str, Any] = field(default_factory=dict)
    config: GemmConfig | None = None
    passes: bool = True
    #: extra loop-level passes after the default ones (``loop_pipeline`` option)
    loop_pipeline: str = ""
    lazy_ir: Any = None  #: () -> ModuleOp, when ``module`` is None
    source_level: SourceLevel | None = None
    _native: Native | None = None
    _shapes: tuple[tuple[int, ...], ...] | None = None
    #: one thread compiles this kernel (the tensor passes rewrite ``module`` in place)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False,
                                  compare=False)

    def run(self, inputs: Sequence[np.ndarray]) -> Sequence[object]:
        return self.run_into(inputs, ())

    def run_into(self, inputs: Sequence[np.ndarray],
                 buffers: Sequence[np.ndarray | None]) -> Sequence[object]:
        """``run``, computing results in the caller's ``buffers`` (one per result, None
        for none) where it can: such a result comes back as the buffer itself. Two
        results cannot share a buffer: a WiaCallError names both (as ``bind_call``)."""
        if buffers:
            self._check_buffers(buffers)
        native = self._native
        if native is None:
            native = self._compile(tuple(a.shape for a in inputs), [a.dtype for a in inputs])
        results = self.try_run(inputs, buffers)
        return results if results is not None else self._run_checked(native, inputs, buffers)

    def try_run(self, args: Sequence[object],
                buffers: Sequence[np.ndarray | None] = ()) -> list[object] | None:
        """Run on ``args`` when each is exactly what this specialization was compiled
        for -- an ndarray (not a subclass) of its dtype and shape, C-contiguous and
        aligned -- and return the results; else return None, having run nothing.

        The per-call fast path (the jit's call plans use it): a few checks and a
        pointer write per argument, a fresh buffer per small result, one ctypes call.
        ``buffers`` (see ``run_into``) replace the fresh ones where ``_usable`` says.
        """
        native = self._native
        if native is None or len(args) != native.n_inputs:
            return None
        pool = native.pool
        try:
            slots, address = pool.pop()
        except IndexError:  # the first call, or calls running in other threads
            slots, address = native.new_args()
        try:
            for a, (i, dtype, shape, direct) in zip(args, native.specs):
                if type(a) is not np.ndarray or a.dtype != dtype or a.shape != shape:
                    return None
                flags = a.flags
                if direct and flags.carray:  # C-contiguous, aligned, writable, not empty
                    slots[i] = _ADDRESSOF(_FROM_BUFFER(a))
                elif flags.c_contiguous and flags.aligned:  # read-only or empty
                    slots[i] = a.__array_interface__["data"][0]
                else:
                    return None
            pre: list[np.ndarray | None] = []
            given = _usable(native, args, buffers) if buffers else {}
            for j, dst in enumerate(native.outs):  # a fresh buffer per small tensor result
                buffer = given.get(j)
                if buffer is not None:  # the caller's: computed in place or copied there
                    slots[dst.slot] = _ADDRESSOF(_FROM_BUFFER(buffer))
                    slots[dst.slot + 1] = buffer.nbytes
                    pre.append(buffer)
                    continue
                if dst.shape is None:
                    slots[dst.slot] = 0  # none: the result comes back as it is
                    pre.append(None)
                    continue
                array = np.empty(dst.shape, dst.dtype)
                slots[dst.slot] = _ADDRESSOF(_FROM_BUFFER(array)) if dst.nbytes else data_pointer(array)
                slots[dst.slot + 1] = dst.nbytes
                pre.append(array)
            rc = native.fn(address)
            if rc != 0:
                message, loc = native.messages[rc - 1]
                raise WiaRuntimeError(message, loc)
            out: list[object] = []
            j = 0
            for k, rank, dtype in native.plan:
                if rank < 0:
                    out.append(_scalar(slots[k], dtype))
                    continue
                buffer, dst = pre[j], native.outs[j]
                # copied out natively, with the extents it was allocated for
                extents = dst.extents if j not in given else list(given[j].shape)
                if (buffer is None or slots[k] != slots[dst.slot]
                        or slots[k + 1:k + 1 + rank] != extents):
                    return self._results(native, slots, pre)
                out.append(buffer)
                j += 1
            return out
        finally:
            pool.append((slots, address))

    @property
    def ir(self) -> ModuleOp:
        """The kernel's (unoptimized) IR, made on first need when given lazily."""
        if self.module is None:
            self.module = self.lazy_ir()
        assert self.module is not None
        return self.module

    def _output_names(self) -> list[str]:
        if self.source_level is not None:
            return list(self.source_level.outputs)
        func = self.ir.get(self.kernel)
        return list(func.attributes.get("outputs", ())) if func is not None else []

    def _check_buffers(self, buffers: Sequence[np.ndarray | None]) -> None:
        names = self._output_names()
        seen: dict[str, np.ndarray | None] = {}
        for j, buffer in enumerate(buffers):
            if isinstance(buffer, np.ndarray):
                name = names[j] if j < len(names) else f"result {j}"
                check_distinct_buffers(seen, name, buffer)
                seen[name] = buffer

    def _run_checked(self, native: Native, inputs: Sequence[np.ndarray],
                     buffers: Sequence[np.ndarray | None] = ()) -> list[object]:
        """``run`` for inputs ``try_run`` did not take: a WiaUsageError says what is wrong."""
        shapes = tuple(a.shape for a in inputs)
        if shapes != self._shapes:
            raise WiaUsageError(f"kernel '{self.kernel}' was compiled for shapes {self._shapes}, "
                                f"called with {shapes}")
        for i, a in enumerate(inputs):
            if (not isinstance(a, np.ndarray) or not a.flags.c_contiguous
                    or not a.flags.aligned or a.dtype != native.in_dtypes[i]):
                got = a.dtype if isinstance(a, np.ndarray) else type(a).__name__
                raise WiaUsageError(f"kernel '{self.kernel}': input {i} must be a C-contiguous, "
                                    f"aligned {native.in_dtypes[i]} array, got {got}")
        # Each input is a C-contiguous, aligned array of the compiled dtype and shape
        # (of an ndarray subclass, say): ``try_run`` takes it as a plain ndarray view.
        results = self.try_run([np.asarray(a) for a in inputs], buffers)
        assert results is not None, "try_run takes what _run_checked lets through"
        return results

    def _compile(self, shapes: tuple[tuple[int, ...], ...], dtypes: list[np.dtype]) -> Native:
        """Compile (or load) this kernel for ``shapes``, once: a thread that finds
        another one compiling it waits for that one and uses its result."""
        with self._lock:
            if self._native is not None:
                return self._native
            jit_engine()  # created by one thread, before any compile asks for it
            return self._compile_locked(shapes, dtypes)

    def _compile_locked(self, shapes: tuple[tuple[int, ...], ...], dtypes: list[np.dtype]) -> Native:
        stages = Stages()
        with stages.stage("key"):
            spec = self._spec_key(shapes, dtypes)
            known = source_cache.load_spec(spec) if spec is not None else None
            found = _stored_spec(known) if known is not None else None
            if found is None:
                parts, config = self._ir_key(shapes, dtypes)
            else:
                parts, config = found
            symbol = f"wia_entry_{parts.digest()[:32]}"

        def compile_fn(st: Stages) -> tuple[bytes, dict[str, Any]]:
            from .compile import compile_object

            obj, layout = compile_object(self.ir, self.kernel, shapes, self.level, symbol,
                                         config, st, passes=self.passes,
                                         loop_pipeline=self.loop_pipeline)
            return obj, {"layout": layout.as_dict()}
        loaded, record = get_or_compile(parts, compile_fn, _load, stages)
        if spec is not None and found is None:
            source_cache.store_spec(spec, {"parts": parts.components(),
                                           "config": None if config is None else config.as_dict()})
        layout = loaded.layout
        n_in = len(layout.in_dtypes)
        plan = [(int(k), int(rank), np.dtype(dt)) for k, rank, dt in layout.results]
        first = n_in + max(1, sum(1 + max(rank, 0) for _, rank, _ in plan))
        outs = [OutSlot(first + 2 * j, dt) for j, (_, _, dt) in enumerate(p for p in plan if p[1] >= 0)]
        in_dtypes = [np.dtype(d) for d in layout.in_dtypes]
        specs = tuple((i, dt, shape, math.prod(shape) > 0)
                      for i, (dt, shape) in enumerate(zip(in_dtypes, shapes, strict=True)))
        sources = self.source_level.sources() if self.source_level is not None \
            else module_sources(self.ir)
        self._native = Native(loaded.fn, layout.errors(sources), layout.n_slots, n_in,
                              record["ms"], in_dtypes, plan, outs, specs)
        self._shapes = shapes
        self.stats = {"compile_ms": record["ms"], "shapes": shapes, "cache": record["source"]}
        return self._native

    def _ir_key(self, shapes: tuple[tuple[int, ...], ...], dtypes: list[np.dtype]
                ) -> tuple[KeyParts, GemmConfig | None]:
        """The key from the IR (the slow path: the IR is made if it was lazy)."""
        config = self.config or _tuned(self.ir, self.kernel, shapes, dtypes)
        pipeline = _pipeline(self.level) if self.passes else "none"
        if self.loop_pipeline:  # different loop passes: a different entry
            pipeline += f" | loop: {self.loop_pipeline}"
        parts = cpu_key_parts(self.ir, self.kernel, shapes, dtypes, self.level, pipeline,
                              (config or default_config()).label())
        return parts, config

    def _spec_key(self, shapes: tuple[tuple[int, ...], ...], dtypes: list[np.dtype]) -> str | None:
        """The source-level key of this specialization (None: no source-level cache)."""
        if self.source_level is None or self.config is not None:
            return None
        from ...tune.records import records_fingerprint

        return source_cache.spec_key(self.source_level.key, self.kernel, shapes, dtypes,
                                     records_fingerprint())

    def _results(self, native: Native, slots: Any, pre: list[np.ndarray | None]) -> list[object]:
        owned: dict[int, np.ndarray] = {}
        in_ptrs = slots[:native.n_inputs]
        out: list[object] = []
        j = 0
        for k, rank, dtype in native.plan:
            if rank < 0:
                out.append(_scalar(slots[k], dtype))
                continue
            ptr = slots[k]
            shape = tuple(slots[k + 1:k + 1 + rank])
            array = pre[j] if pre else None
            if array is not None and ptr == slots[native.outs[j].slot]:  # copied out natively
                out.append(array if array.shape == shape else array.reshape(shape))
            else:
                result = _tensor(ptr, shape, dtype, owned, ptr in in_ptrs)
                if result.nbytes < WRAP_BYTES:
                    native.outs[j].learn(shape)
                out.append(result)
            j += 1
        return out


def _usable(native: Native, inputs: Sequence[object],
            buffers: Sequence[np.ndarray | None]) -> dict[int, np.ndarray]:
    """Tensor result index -> the caller's buffer for it, for the buffers native code
    may write: a writable, C-contiguous, aligned, non-empty plain ndarray of the
    result's dtype that overlaps no input and no other such buffer (computing a
    result in an input's memory would overwrite data the kernel still reads)."""
    usable: dict[int, np.ndarray] = {}
    j = 0
    for (_, rank, dtype), buffer in zip(native.plan, buffers, strict=False):
        if rank < 0:
            continue
        if (type(buffer) is np.ndarray and buffer.dtype == dtype and buffer.flags.carray
                and buffer.size and not any(np.may_share_memory(buffer, other)
                                            for other in (*inputs, *usable.values()))):
            usable[j] = buffer
        j += 1
    return usable


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

    def cache_host(self) -> str:
        """The host's part of a source-level cache key: its triple, CPU and features."""
        from .target import host

        h = host()
        return f"{h.triple} {h.cpu} {h.features}"

    def compile_lazily(self, lazy_ir: Any, kernel: str, options: dict[str, Any], key: str,
                       signature: KernelSignature, files: dict[str, str]) -> CpuKernel:
        """``compile`` for a kernel whose IR ``lazy_ir()`` makes only when the
        source-level cache misses (``key``: runtime/source_cache.py)."""
        compiled = self.compile(None, kernel, options)
        compiled.lazy_ir = lazy_ir
        compiled.source_level = SourceLevel(key, tuple(p.name for p in signature.outputs), files)
        return compiled

    def compile(self, module: ModuleOp | None, kernel: str, options: dict[str, Any]) -> CpuKernel:
        """A kernel that compiles (or loads from the cache) on its first run; the tensor
        passes run then too, so a cache hit skips them."""
        unknown = set(options) - {"opt_level", "gemm_config", "loop_pipeline"}
        if unknown:
            raise WiaUsageError(f"target 'cpu' takes the options opt_level, gemm_config and "
                                f"loop_pipeline, got {', '.join(sorted(unknown))}")
        level = int(options.get("opt_level", 3))
        if level not in range(4):
            _pipeline(level)  # the passes' own error for a bad level, at compile time
        loop_pipeline = options.get("loop_pipeline") or ""
        if not isinstance(loop_pipeline, str):
            raise WiaUsageError(f"option 'loop_pipeline' of target 'cpu' must be a pipeline text "
                                f"like 'unroll{{factor=4}}', got {loop_pipeline!r}")
        if loop_pipeline:  # bad pass names or options fail here too
            from ...loops.passes import parse_loop_pipeline

            parse_loop_pipeline(loop_pipeline)
        return CpuKernel(module, kernel, level, config=options.get("gemm_config"),
                         loop_pipeline=loop_pipeline)


def _stored_spec(data: dict[str, Any]) -> tuple[KeyParts, GemmConfig | None] | None:
    """A source-level entry's key parts and gemm config (None: damaged, a miss)."""
    try:
        parts = KeyParts.from_components(data["parts"])
        config = None if data["config"] is None else GemmConfig(**data["config"])
    except (KeyError, TypeError, ValueError):
        return None
    return parts, config


def module_sources(module: ModuleOp) -> dict[str, SourceFile]:
    """File name -> source of every span in ``module``."""
    return {op.loc.source.name: op.loc.source for f in module.funcs for op in f.walk()
            if isinstance(getattr(op, "loc", None), Span)}


def _pipeline(level: int) -> str:
    from ...passes import default_pipeline

    return default_pipeline(level)


def _tuned(module: ModuleOp, kernel: str, shapes: Sequence[tuple[int, ...]],
           dtypes: Sequence[np.dtype]) -> GemmConfig | None:
    """The autotuner's best config for this specialization, when one was measured."""
    from ...tune.records import tuned_config

    return tuned_config(module, kernel, shapes, dtypes)


BACKEND = CpuBackend()
