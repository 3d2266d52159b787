"""``target="cpu"``: the jit's Backend, compiling per shape pattern and calling through ctypes.

Invariants:
- ``specialize_shapes`` is False: one ``CpuKernel`` serves every input shape of a
  specialization (the dtypes and ranks of its ``tensor`` parameters). It makes one
  ``Native`` entry per concrete shape it sees, each on code the shape policy
  (shape_policy.py) picks: static code compiled for that shape, or shape-generic
  code (extents read at run time) compiled once and shared. A Native checks the
  shape of every call against its own (bad input never reaches native code).
- The steady-state call (``Native.fast_call``, the jit's ``CallPlan.fast``): one
  native call (fastcall.py) checks the arguments, passes their data pointers and
  computes the outputs into arrays Python made for them; whatever it does not
  take goes the way below.
- The argument path per call (``Native.try_run``, the jit's plan call): check each
  argument against the entry's shape (exact ndarray type, dtype, shape, C-contiguous,
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
- Threads: each code compiles once (``_native_for`` under the kernel's own lock, which
  is only ever taken first: nothing that runs under it calls back into a kernel);
  calls run concurrently (the argument arrays come from the pool). With the
  ``tiered`` option a worker thread takes that lock to compile a shape, and waits
  under it only for the first interpreted call at that shape, which never takes it.
- Compiles go through the compile cache (``wiadsl.cache``): the key is
  taken from the unoptimized IR, so a hit skips the tensor passes, lowering and
  LLVM; the gemm config is the explicit ``config``, else the autotuner's best
  for this (kernel, shapes, dtypes, CPU), else the default.
"""

from __future__ import annotations

import ctypes
import math
import os
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ...cache.entries import get_or_compile, is_cached
from ...cache.key import KeyParts
from ...cache.log import Stages
from ...cache.sources import load_spec, spec_key, store_spec
from ...diagnostics import SourceFile, Span, WiaRuntimeError, WiaUsageError
from ...records import field, record
from ..contract import NOT_RUN, check_distinct_buffers
from .fastcall import MISS, UNDELIVERED
from .gemm_config import GemmConfig, default_config
from .keys import cpu_key_parts, cpu_text, target_text
from .layout import Layout
from .library import ensure_loaded, load_object
from .shape_policy import Pattern, ShapePolicy, Shapes, check_policy
from .threads import THREADS

if TYPE_CHECKING:
    from ...ir.module import ModuleOp
    from ...signature import KernelSignature
    from .tiered import TierUp

_LIBC = ctypes.CDLL(None)
_FREE = _LIBC.free
_FREE.argtypes = [ctypes.c_void_p]
_ENTRY = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)
WRAP_BYTES = 1 << 16  # results at least this large are wrapped, not copied
#: entries a kernel keeps for the shapes it saw (each a few small arrays; code is shared)
MAX_NATIVES = 256
_ADDRESSOF, _FROM_BUFFER = ctypes.addressof, ctypes.c_char.from_buffer


def data_pointer(a: np.ndarray) -> int:
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(a))
    except (TypeError, ValueError):  # read-only or empty: the slower, general route
        return a.__array_interface__["data"][0]


@record(frozen=True)
class Loaded:
    """A compiled entry point in this process (shared by every kernel with its key)."""

    fn: Any
    layout: Layout


class OutSlot:
    """One tensor result's copy-out pair (runtime.py) and the buffer shape for it.

    ``shape`` is None until the first call shows the result is small (below
    ``WRAP_BYTES``) or computed in the caller's buffer (``Layout.in_place``: never
    copied, whatever its size); from then on every call passes a fresh
    ``np.empty(shape)``.
    """

    __slots__ = ("slot", "dtype", "shape", "extents", "nbytes", "in_place")

    def __init__(self, slot: int, dtype: np.dtype, in_place: bool = False):
        self.slot = slot  #: the destination pointer's slot; the byte count follows it
        self.dtype = dtype
        self.in_place = in_place  #: computed in the given buffer (no copy at any size)
        self.shape: tuple[int, ...] | None = None
        self.extents: list[int] = []  #: ``list(shape)``: what the result slots must hold
        self.nbytes = 0

    def learn(self, shape: tuple[int, ...]) -> None:
        # ``shape`` last: a call in another thread that sees it sees the rest
        self.nbytes = math.prod(shape) * self.dtype.itemsize
        self.extents = list(shape)
        self.shape = shape

    def delivered(self, shape: tuple[int, ...]) -> None:
        """The result came out in a buffer (the caller's, on a first call): learn its
        shape by the same rule as a result's (small, or computed in place)."""
        if self.shape is None and (self.in_place or
                                   math.prod(shape) * self.dtype.itemsize < WRAP_BYTES):
            self.learn(shape)


@record
class Native:
    """A compiled entry point at one input shape, and the argument arrays of its calls."""

    fn: Any
    messages: list[tuple[str, Any]]  #: (message, source span or None) per error code
    n_slots: int  #: i64 slots of an argument array (runtime.py's entry ABI)
    n_inputs: int
    in_dtypes: list[np.dtype]
    #: per result: (first slot, rank or -1 for a scalar, NumPy dtype)
    plan: list[tuple[int, int, np.dtype]]
    #: per tensor result, in order
    outs: list[OutSlot] = field(default_factory=list)
    #: per input: (slot, dtype, shape, has elements): exactly what a call passes
    specs: tuple[tuple[int, np.dtype, tuple[int, ...], bool], ...] = ()
    #: (slot, extent) per run-time extent of shape-generic code (and the state's
    #: address): the same on every call at this shape, so each argument array holds
    #: them from its creation
    extents: tuple[tuple[int, int], ...] = ()
    stats: dict[str, Any] = field(default_factory=dict)
    #: argument arrays not in use, each with its address: a call takes one and puts
    #: it back, so calls from several threads (the GIL is released while native code
    #: runs) never share one
    pool: list[tuple[Any, int]] = field(default_factory=list)
    #: the state of this entry's code (``EntryState``), its address in the last slot
    #: of every argument array
    state: EntryState | None = None

    def __post_init__(self) -> None:
        if self.state is not None:
            self.extents += ((self.n_slots - 1, self.state.address),)

    def new_args(self) -> tuple[Any, int]:
        args = (ctypes.c_int64 * self.n_slots)()
        for slot, extent in self.extents:
            args[slot] = extent
        return args, ctypes.addressof(args)

    def try_run(self, args: Sequence[object],
                buffers: Sequence[np.ndarray | None] = ()) -> list[object] | None:
        """Run on ``args`` when each is exactly what this entry was set up for -- an
        ndarray (not a subclass) of its dtype and shape, C-contiguous and aligned --
        and return the results; else return None, having run nothing.

        The per-call fast path (the jit's call plans use it): a few checks and a
        pointer write per argument, a fresh buffer per small result, one ctypes call.
        ``buffers`` (see ``CpuKernel.run_into``) replace the fresh ones where
        ``_usable`` says.
        """
        if len(args) != self.n_inputs:
            return None
        pool = self.pool
        try:
            slots, address = pool.pop()
        except IndexError:  # the first call, or calls running in other threads
            slots, address = self.new_args()
        try:
            for a, (i, dtype, shape, direct) in zip(args, self.specs):
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
            given = _usable(self, args, buffers) if buffers else {}
            for j, dst in enumerate(self.outs):  # a fresh buffer per small tensor result
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
            rc = self.fn(address)
            if rc != 0:
                message, loc = self.messages[rc - 1]
                raise WiaRuntimeError(message, loc)
            out: list[object] = []
            j = 0
            for k, rank, dtype in self.plan:
                if rank < 0:
                    out.append(_scalar(slots[k], dtype))
                    continue
                buffer, dst = pre[j], self.outs[j]
                # copied out natively, with the extents it was allocated for
                extents = dst.extents if j not in given else list(given[j].shape)
                if (buffer is None or slots[k] != slots[dst.slot]
                        or slots[k + 1:k + 1 + rank] != extents):
                    return self._results(slots, pre)
                dst.delivered(tuple(extents))
                out.append(buffer)
                j += 1
            return out
        finally:
            pool.append((slots, address))

    def fast_call(self, delivered: Sequence[tuple[np.dtype, tuple[int, ...]]]) -> Any:
        """The whole steady-state call in the native helper (fastcall.py): a function
        of a call's argument tuple that returns what the jit delivers (the output, or
        a tuple of them; a rank-0 one as a NumPy scalar), or ``NOT_RUN`` for arguments
        this entry does not take. Its optional second argument gives an output buffer
        (or None) per output, which the caller has checked (exactly the output's dtype
        and shape, writable, C-contiguous, overlapping no input nor each other): the
        result is delivered in it. None when there can be none: a result whose buffer
        this entry does not know yet (one of ``WRAP_BYTES`` or more is handed over,
        not copied), a scalar result, or other ``delivered`` outputs. (An interpreter
        whose object layout cannot be verified has no helper: the call is NOT_RUN.)"""
        from .library import call_helper

        shapes = [(o.shape, o.dtype) for o in self.outs]
        if (any(rank < 0 for _, rank, _ in self.plan) or any(s is None for s, _ in shapes)
                or [(np.dtype(d), tuple(s)) for d, s in delivered] != [(d, s) for s, d in shapes]):
            return None
        template, offset = self._fast_header()
        pool: list[Any] = []  # argument arrays not in use (one per concurrent call)
        take, give, empty, count = pool.pop, pool.append, np.empty, len(template)
        # the helper, loaded by the first repeated call (a process that calls a kernel
        # once never builds it); False once there is none, or after UNDELIVERED
        state: list[Any] = [None]

        def helper_or_false() -> Any:
            if state[0] is None:
                state[0] = call_helper() or False
            return state[0]

        def failed(rc: int, slots: Any, outs: tuple[np.ndarray, ...]) -> object:
            if rc == MISS:
                return NOT_RUN
            if rc == UNDELIVERED:  # a result of another shape: hand it over, and then
                view = (ctypes.c_int64 * self.n_slots).from_buffer(slots, 8 * offset)
                self._results(view, list(outs))  # (taken over and dropped)
                state[0] = False  # the checking way from now on (kernels are pure)
                return NOT_RUN
            message, loc = self.messages[rc - 1]
            raise WiaRuntimeError(message, loc)

        def slots_array() -> Any:
            try:
                return take()
            except IndexError:  # the first call, or calls running in other threads
                return (ctypes.c_int64 * count)(*template)

        if len(shapes) == 1:  # the common case, with nothing more than it needs
            ((shape, dtype),) = shapes
            scalar = not shape

            # No nested calls, no try/finally on the way that succeeds: this is most of
            # a small kernel's call (a 4-element add's fell 300 -> 250 ns)
            def fast_one(args: tuple[object, ...], buffers: Sequence[Any] = ()) -> object:
                helper = state[0] or helper_or_false()
                if not helper:
                    return NOT_RUN
                try:
                    slots = take()
                except IndexError:  # the first call, or calls running in other threads
                    slots = (ctypes.c_int64 * count)(*template)
                given = buffers[0] if buffers else None
                out = empty(shape, dtype) if given is None else given
                rc = helper(slots, args, (out,))
                if rc:
                    try:
                        return failed(rc, slots, (out,))
                    finally:
                        give(slots)
                give(slots)
                return out[()] if scalar and given is None else out
            return fast_one

        def fast(args: tuple[object, ...], buffers: Sequence[Any] = ()) -> object:
            helper = state[0] or helper_or_false()
            if not helper:
                return NOT_RUN
            slots = slots_array()
            given = list(buffers) or [None] * len(shapes)
            outs = tuple([empty(shape, dtype) if g is None else g
                          for (shape, dtype), g in zip(shapes, given, strict=True)])
            rc = helper(slots, args, outs)
            try:
                if rc == 0:
                    return tuple([o if o.ndim or g is not None else o[()]
                                  for o, g in zip(outs, given, strict=True)])
                return failed(rc, slots, outs)
            finally:
                give(slots)
        return fast

    def _fast_header(self) -> tuple[list[int], int]:
        """The helper's argument array, as words: header (fastcall.py), then this entry's
        slots with everything that is the same on every call filled in; and the word
        offset of those slots."""
        words = [ctypes.cast(self.fn, ctypes.c_void_p).value or 0, self.n_inputs, len(self.outs),
                 id(np.ndarray), 0]
        for slot, dtype, shape, _ in self.specs:
            words += [slot, id(dtype), len(shape), *shape]
        tensors = [(k, rank) for k, rank, _ in self.plan if rank >= 0]
        for dst, (k, rank) in zip(self.outs, tensors, strict=True):
            words += [dst.slot, k, rank, *dst.extents]
        offset = words[4] = len(words)
        slots = [0] * self.n_slots
        for slot, extent in self.extents:
            slots[slot] = extent
        for dst in self.outs:
            slots[dst.slot + 1] = dst.nbytes
        return words + slots, offset

    def _results(self, slots: Any, pre: list[np.ndarray | None]) -> list[object]:
        owned: dict[int, np.ndarray] = {}
        in_ptrs = slots[:self.n_inputs]
        out: list[object] = []
        j = 0
        for k, rank, dtype in self.plan:
            if rank < 0:
                out.append(_scalar(slots[k], dtype))
                continue
            ptr = slots[k]
            shape = tuple(slots[k + 1:k + 1 + rank])
            array = pre[j] if pre else None
            if array is not None and ptr == slots[self.outs[j].slot]:  # copied out natively
                out.append(array if array.shape == shape else array.reshape(shape))
                self.outs[j].delivered(shape)
            else:
                result = _tensor(ptr, shape, dtype, owned, ptr in in_ptrs)
                if result.nbytes < WRAP_BYTES or self.outs[j].in_place:
                    self.outs[j].learn(shape)
                out.append(result)
            j += 1
        return out


@record(frozen=True)
class Code:
    """Loaded code for one pattern (shape_policy.py) and how it was obtained."""

    loaded: Loaded
    pattern: Pattern
    compile_ms: float
    source: str  #: the compile cache's word: "compiled", "disk" or "memory"
    messages: list[tuple[str, Any]]  #: (message, source span or None) per error code
    #: the entries' state, when the layout has one (``EntryState``)
    state: EntryState | None = None

    def native_at(self, shapes: Shapes, fresh: bool) -> Native:
        """An entry for calls at ``shapes`` (which this code's pattern serves);
        ``fresh``: this code was just obtained for it (else its stats say "memory")."""
        layout = self.loaded.layout
        n_in = len(layout.in_dtypes)
        plan = [(int(k), int(rank), np.dtype(dt)) for k, rank, dt in layout.results]
        first = n_in + max(1, sum(1 + max(rank, 0) for _, rank, _ in plan))
        outs = [OutSlot(first + 2 * j, dt, j in layout.in_place)
                for j, (_, _, dt) in enumerate(p for p in plan if p[1] >= 0)]
        in_dtypes = [np.dtype(d) for d in layout.in_dtypes]
        specs = tuple((i, dt, shape, math.prod(shape) > 0)
                      for i, (dt, shape) in enumerate(zip(in_dtypes, shapes, strict=True)))
        base = layout.n_slots - len(layout.dynamic) - (1 if layout.state else 0)
        extents = tuple((base + j, shapes[i][axis]) for j, (i, axis) in enumerate(layout.dynamic))
        generic = any(d is None for s in self.pattern for d in s)
        stats = {"compile_ms": self.compile_ms if fresh else 0.0, "shapes": shapes,
                 "cache": self.source if fresh else "memory",
                 "code": "generic" if generic else "static", "pattern": self.pattern,
                 "batch_slices": layout.slices}
        return Native(self.loaded.fn, self.messages, layout.n_slots, n_in, in_dtypes, plan, outs, specs,
                      extents, stats, state=self.state)


class EntryState:
    """The cells of an entry's state (prepacked.py: data derived from the frozen
    inputs, such as a packed weight matrix). One per code of one kernel: the entries
    of every shape that code serves share it (the same weights, packed once), another
    kernel with other weights has its own. Freed with the code and the last entry
    that uses it."""

    def __init__(self, cells: int):
        self.cells = (ctypes.c_int64 * cells)()
        self.address = ctypes.addressof(self.cells)
        weakref.finalize(self, _free_cells, self.cells)


def _free_cells(cells: Any) -> None:
    """Free the buffers a state holds (allocated by C's ``aligned_alloc``, so freed by
    C's ``free``)."""
    for address in cells:
        if address:
            _FREE(ctypes.c_void_p(address))


def _load(obj: bytes, meta: dict[str, Any]) -> Loaded:
    """Load a cache entry: its objects (compile.py's parts, stored one after another,
    ``meta["objects"]`` their sizes), the entry's first in the entry and loaded last."""
    layout = Layout.from_dict(meta["layout"])
    ensure_loaded(layout.libraries)  # the gemm/conv helpers the objects link against
    objects, at = [], 0
    for size in meta.get("objects", [len(obj)]):
        objects.append(obj[at:at + size])
        at += size
    for part in objects[1:]:  # what the entry's object calls: linked first
        load_object(part, None)
    return Loaded(_ENTRY(load_object(objects[0], layout.symbol)), layout)


@record(frozen=True)
class SourceLevel:
    """What the source-level cache (cache/sources.py) needs to find this
    kernel's specializations without its IR: the source key, the kernel's output
    names and the texts of its source files (for the spans of runtime errors)."""

    key: str
    outputs: tuple[str, ...]
    files: dict[str, str]

    def sources(self) -> dict[str, SourceFile]:
        return {name: SourceFile(name, text) for name, text in self.files.items()}


@record
class CpuKernel:
    """One kernel on the CPU, at every input shape; ``passes=False`` when ``module``
    is already optimized.

    Each new input shape gets a ``Native`` on code that ``shape_policy`` chooses:
    compiled for it, or shared (shape-generic code compiled once for many shapes).
    ``module`` may be None with ``lazy_ir`` (and ``source_level``) given: the IR is
    then made only if the source-level cache has no entry for a compile."""

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
    #: ``auto``, ``static`` or ``generic`` (shape_policy.py; the ``shapes`` option)
    shapes: str = "auto"
    #: positions of the inputs whose contents never change between calls (the
    #: ``frozen`` option: an imported model's weights): data derived from them, such
    #: as a gemm's packed B, is made by the first call and kept (prepacked.py)
    frozen: frozenset[int] = frozenset()
    #: the ``tiered`` option: a shape whose code is not cached runs on the interpreter
    #: until its compile (in the background) is done (tiered.py)
    tiered: bool = False
    #: an entry per input shape seen, most recent last (at most ``MAX_NATIVES``)
    _natives: dict[Shapes, Native] = field(default_factory=dict, init=False, repr=False)
    _code: dict[Pattern, Code] = field(default_factory=dict, init=False, repr=False)
    _policy: ShapePolicy = field(init=False, repr=False)
    #: one thread compiles this kernel (the tensor passes rewrite ``module`` in place)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False,
                                  compare=False)
    _tiers: dict[Shapes, TierUp] = field(default_factory=dict, init=False, repr=False)
    _tiers_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False,
                                        compare=False)

    def __post_init__(self) -> None:
        self._policy = ShapePolicy(check_policy(self.shapes))

    @property
    def compiles(self) -> int:
        """How many distinct codes this kernel has (compiled or loaded)."""
        return len(self._code)

    def run(self, inputs: Sequence[np.ndarray]) -> Sequence[object]:
        return self.run_into(inputs, ())

    def run_into(self, inputs: Sequence[np.ndarray],
                 buffers: Sequence[np.ndarray | None]) -> Sequence[object]:
        """``run``, computing results in the caller's ``buffers`` (one per result, None
        for none) where it can: such a result comes back as the buffer itself. Two
        results cannot share a buffer: a WiaCallError names both (as ``bind_call``)."""
        if buffers:
            self._check_buffers(buffers)
        shapes = tuple(a.shape for a in inputs)
        native = self._natives.get(shapes)
        if native is None and self.tiered:
            interpreted = self._interpret_while_compiling(shapes, inputs)
            if interpreted is not None:
                return interpreted
        native = native or self._native_for(shapes, [a.dtype for a in inputs])
        self.stats = native.stats
        results = native.try_run(inputs, buffers)
        return results if results is not None else self._run_checked(native, inputs, buffers)

    def call_for(self, shapes: Shapes) -> Any:
        """The fast call (``Native.try_run``) for inputs of ``shapes``, once it exists."""
        native = self._natives.get(shapes)
        return None if native is None else native.try_run

    def fast_for(self, shapes: Shapes, delivered: Sequence[tuple[np.dtype, tuple[int, ...]]]) -> Any:
        """``Native.fast_call`` of the entry for ``shapes`` (None: there is none)."""
        native = self._natives.get(shapes)
        return None if native is None else native.fast_call(delivered)

    def try_run(self, args: Sequence[object],
                buffers: Sequence[np.ndarray | None] = ()) -> list[object] | None:
        """``Native.try_run`` of the entry for ``args``' shapes; None when there is none."""
        try:
            native = self._natives.get(tuple([a.shape for a in args]))  # type: ignore[attr-defined]
        except AttributeError:  # not arrays
            return None
        return None if native is None else native.try_run(args, buffers)

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
        for i, a in enumerate(inputs):
            if (not isinstance(a, np.ndarray) or not a.flags.c_contiguous
                    or not a.flags.aligned or a.dtype != native.in_dtypes[i]):
                got = a.dtype if isinstance(a, np.ndarray) else type(a).__name__
                raise WiaUsageError(f"kernel '{self.kernel}': input {i} must be a C-contiguous, "
                                    f"aligned {native.in_dtypes[i]} array, got {got}")
        # Each input is a C-contiguous, aligned array of the compiled dtype and shape
        # (of an ndarray subclass, say): ``try_run`` takes it as a plain ndarray view.
        results = native.try_run([np.asarray(a) for a in inputs], buffers)
        assert results is not None, "try_run takes what _run_checked lets through"
        return results

    def _interpret_while_compiling(self, shapes: Shapes,
                                   inputs: Sequence[np.ndarray]) -> list[object] | None:
        """The results of the interpreter while ``shapes``' code compiles in the
        background (started by the first call at these shapes); None when native code
        is there or was found cached (the caller then takes the native way)."""
        # (the ``tiered`` option only: not on a warm start's path)
        from .tiered import MAX_STEPS, TierUp

        with self._tiers_lock:
            tier = self._tiers.get(shapes)
            if tier is None:
                _TIERED_KERNELS[id(self)] = self
                dtypes = [a.dtype for a in inputs]
                tier = self._tiers[shapes] = TierUp.start(
                    lambda on_miss: self._compile_in_background(shapes, dtypes, on_miss),
                    self.kernel)
        if not tier.interpreting:
            if tier.error is not None:
                with self._tiers_lock:  # the next call tries again
                    if self._tiers.get(shapes) is tier:
                        del self._tiers[shapes]
                raise tier.error
            return None
        from ...ir.interpreter import StepLimitReached, run_func

        try:
            results = run_func(self.ir, self.kernel, list(inputs), max_steps=MAX_STEPS)
        except StepLimitReached:  # a long scalar loop: the native code comes sooner
            tier.interpret = False
            return None
        finally:
            tier.go.set()
        self.stats = {"tier": "interpreter"}
        return results

    def _compile_in_background(self, shapes: Shapes, dtypes: list[np.dtype],
                               on_miss: Callable[[], None]) -> None:
        """A tier's work: the entry for ``shapes``; then the tier is forgotten (a
        failed one stays, for the next call to raise its error)."""
        self._native_for(shapes, dtypes, on_miss)
        with self._tiers_lock:
            self._tiers.pop(shapes, None)

    def wait_compiled(self) -> None:
        """Wait for the background compiles of the ``tiered`` option."""
        with self._tiers_lock:
            tiers = list(self._tiers.values())
        for tier in tiers:
            tier.join()

    def _native_for(self, shapes: Shapes, dtypes: list[np.dtype],
                    on_miss: Callable[[], None] | None = None) -> Native:
        """The entry for calls at ``shapes``, made once: on code compiled (or loaded)
        for the pattern the policy gives, or on code that pattern already has. A
        thread that finds another one compiling waits for it and uses its result.
        ``on_miss`` runs before a compile (the code is not cached: tiered.py)."""
        with self._lock:
            native = self._natives.get(shapes)
            if native is not None:
                return native
            pattern = self._policy.pattern_for(shapes)
            code = self._code.get(pattern)
            fresh = code is None
            if code is None:
                code = self._code[pattern] = self._compile_locked(pattern, dtypes, on_miss)
            native = code.native_at(shapes, fresh)
            if len(self._natives) >= MAX_NATIVES:  # many shapes: forget the oldest entry
                del self._natives[next(iter(self._natives))]
            self._natives[shapes] = native
            return native

    def _errors(self, layout: Layout) -> list[tuple[str, Any]]:
        """The runtime error messages of ``layout`` with their source spans (rebuilt
        once per code, from this kernel's source files)."""
        sources = self.source_level.sources() if self.source_level is not None \
            else module_sources(self.ir)
        return layout.errors(sources)

    def _compile_locked(self, pattern: Pattern, dtypes: list[np.dtype],
                        on_miss: Callable[[], None] | None = None) -> Code:
        stages = Stages()
        with stages.stage("key"):
            spec = self._spec_key(pattern, dtypes)
            known = load_spec(spec) if spec is not None else None
            found = _stored_spec(known) if known is not None else None
        if on_miss is not None and spec is not None and known is None:
            # nothing was ever stored for this source and shape: a compile, whose IR
            # key (the IR's text hashed) need not delay the interpreted call
            with stages.stage("waited"):  # the stage says why this compile took longer
                on_miss()
            on_miss = None
        with stages.stage("key"):
            parts, config = self._ir_key(pattern, dtypes) if found is None else found
            symbol = f"wia_entry_{parts.digest()[:32]}"
        if on_miss is not None and not is_cached(parts):
            with stages.stage("waited"):
                on_miss()

        def compile_fn(st: Stages) -> tuple[bytes, dict[str, Any]]:
            from ...ir.copying import copy_module
            from .compile import compile_object

            # the tensor passes rewrite their module: a copy, so the next pattern's key
            # is taken from the same IR as in a new process
            module = copy_module(self.ir) if self.passes else self.ir
            objects, layout = compile_object(module, self.kernel, pattern, self.level, symbol,
                                             config, st, passes=self.passes,
                                             loop_pipeline=self.loop_pipeline, frozen=self.frozen)
            return b"".join(objects), {"layout": layout.as_dict(),
                                       "objects": [len(o) for o in objects]}
        loaded, record = get_or_compile(parts, compile_fn, _load, stages)
        if spec is not None and found is None:
            store_spec(spec, {"parts": parts.components(),
                                           "config": None if config is None else config.as_dict()})
        state = EntryState(loaded.layout.state) if loaded.layout.state else None
        return Code(loaded, pattern, record["ms"], record["source"], self._errors(loaded.layout),
                    state)

    def _ir_key(self, pattern: Pattern, dtypes: list[np.dtype]
                ) -> tuple[KeyParts, GemmConfig | None]:
        """The key from the IR (the slow path: the IR is made if it was lazy)."""
        config = self.config or _tuned(self.ir, self.kernel, pattern, dtypes)
        from .compile import cpu_loop_pipeline

        pipeline = _pipeline(self.level) if self.passes else "none"
        # the default loop passes depend on the host's last-level cache (stream-stores)
        pipeline += f" | loops: {cpu_loop_pipeline()}"
        if self.loop_pipeline:  # different loop passes: a different entry
            pipeline += f" | loop: {self.loop_pipeline}"
        if self.frozen:  # an entry with a state
            pipeline += f" | frozen: {sorted(self.frozen)}"
        # the threads a batch is cut for (compile.batch_split) and loops are chunked for
        pipeline += f" | threads: {THREADS}"
        parts = cpu_key_parts(self.ir, self.kernel, pattern, dtypes, self.level, pipeline,
                              (config or default_config()).label())
        return parts, config

    def _spec_key(self, pattern: Pattern, dtypes: list[np.dtype]) -> str | None:
        """The source-level key of this pattern (None: no source-level cache)."""
        if self.source_level is None or self.config is not None:
            return None
        from ...tune.records import records_fingerprint

        return spec_key(self.source_level.key, self.kernel, pattern, dtypes,
                                     records_fingerprint())


#: the kernels that started a background compile (``tiered``): a forked child resets them
#: (by id: a record compares by value, so it has no hash)
_TIERED_KERNELS: weakref.WeakValueDictionary[int, CpuKernel] = weakref.WeakValueDictionary()


def _after_fork_in_child() -> None:
    """The parent's compile threads do not exist in a forked child: a kernel lock one
    of them held would never be released, and their tiers never finish. Fresh locks,
    no tiers (the child's calls start their own)."""
    for kernel in list(_TIERED_KERNELS.values()):
        kernel._lock = threading.Lock()
        kernel._tiers_lock = threading.Lock()
        kernel._tiers.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


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
    #: takes the ``frozen`` option (load_onnx passes its weights' positions)
    takes_frozen_inputs = True
    #: options that change when code runs, not what it is: not part of cache keys
    run_options = frozenset({"tiered"})
    specialize_shapes = False  # one CpuKernel serves every shape (shape_policy.py)

    def cache_host(self) -> str:
        """The host's part of a source-level cache key: the triple and toolchain, the
        CPU and its features (keys.py)."""
        return f"{target_text()} {cpu_text()}"

    def compile_lazily(self, lazy_ir: Any, kernel: str, options: dict[str, Any], key: str,
                       signature: KernelSignature, files: dict[str, str]) -> CpuKernel:
        """``compile`` for a kernel whose IR ``lazy_ir()`` makes only when the
        source-level cache misses (``key``: cache/sources.py)."""
        compiled = self.compile(None, kernel, options)
        compiled.lazy_ir = lazy_ir
        compiled.source_level = SourceLevel(key, tuple(p.name for p in signature.outputs), files)
        return compiled

    def compile(self, module: ModuleOp | None, kernel: str, options: dict[str, Any]) -> CpuKernel:
        """A kernel that compiles (or loads from the cache) on its first run; the tensor
        passes run then too, so a cache hit skips them."""
        unknown = set(options) - {"opt_level", "gemm_config", "loop_pipeline", "shapes", "frozen",
                                  "tiered"}
        if unknown:
            raise WiaUsageError(f"target 'cpu' takes the options opt_level, gemm_config, "
                                f"loop_pipeline, shapes, frozen and tiered, got "
                                f"{', '.join(sorted(unknown))}")
        tiered = options.get("tiered", False)
        if not isinstance(tiered, bool):
            raise WiaUsageError(f"option 'tiered' of target 'cpu' must be True or False, "
                                f"got {tiered!r}")
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
                         loop_pipeline=loop_pipeline, shapes=check_policy(options.get("shapes", "auto")),
                         frozen=_frozen_positions(options.get("frozen", ())), tiered=tiered)


def _frozen_positions(value: object) -> frozenset[int]:
    """The ``frozen`` option: input positions (0-based) whose contents never change."""
    if not isinstance(value, (list, tuple, set, frozenset)) or not all(
            isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in value):
        raise WiaUsageError(f"option 'frozen' of target 'cpu' must be the positions of inputs "
                            f"that never change between calls, like (1, 2), got {value!r}")
    return frozenset(value)


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
    from .compile import cpu_pipeline

    return cpu_pipeline(level)


def _tuned(module: ModuleOp, kernel: str, shapes: Sequence[tuple[int, ...]],
           dtypes: Sequence[np.dtype]) -> GemmConfig | None:
    """The autotuner's best config for this specialization, when one was measured."""
    from ...tune.records import tuned_config

    return tuned_config(module, kernel, shapes, dtypes)


BACKEND = CpuBackend()
