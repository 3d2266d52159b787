"""Helper kernels compiled once per process and linked by symbol: the thread pool
(parallel.py) and the gemm and conv drivers.

The packed gemm (gemm.py; also its variant on a B packed once, ``gemm_packed``, and
that packing, ``gemm_prepack``) and the implicit-GEMM convolution (conv.py) are the
same LLVM code in every kernel that uses them (they depend only on dtype, the
gemm config and the conv stride), and they are most of the code LLVM would
optimize and compile per kernel. So a kernel module only *declares* them
(``declare``) under a symbol naming those parameters; the first use in a process
builds that helper's own module, optimizes it at -O3, compiles it and loads it
into the engine (``ensure_loaded``), after which every kernel object that
references the symbol links against it.

The thread pool (``POOL_SPEC``) is a helper too, one per process (its globals are
the pool's state), but it is loaded on demand: modules never link against it.
They call it through ``parallel.SLOT_SYMBOL``, a pointer cell owned by this module
(registered with LLVM at import, so it always resolves), and when the cell is
still null through ``parallel.LOAD_SYMBOL``, a ctypes callback that loads the
pool (``ensure_pool``) and fills the cell; a null answer runs the region serially.
So a process that never runs a parallel region never compiles the pool, and no
object can fail to link for want of it.

The native call helper (fastcall.py, ``call_helper``) is one too: its code
depends only on the object layout it was built for, which its symbol names.

Invariants:
- A symbol determines its code: ``wia.lib.<kind>.<dtype>.<config label>[.s<sh>x<sw>]``
  (``wia.lib.pool.parallel_for`` for the pool, whose spec records ``MAX_THREADS``;
  the threads per region are the cell ``LIMIT_SYMBOL``, threads.py's ``LIMIT``).
- Every object that references a library symbol lists its ``spec`` in
  ``Layout.libraries``; loading such an object (also from the disk cache in a
  fresh process) calls ``ensure_loaded`` first, so no symbol is unresolved.
- Ahead-of-time outputs (``wiac -o x.o``) are self-contained: ``link_into``
  copies the helpers' definitions into the module before code generation.
- Threads: ``_LOADED`` is a ``cache.OnceTable``: a helper is loaded by one thread
  while the others that need it wait for that one, and no lock is held while it
  is obtained (``cached_object`` may wait for the compile cache, which may be
  loading a kernel that needs another helper: issue 17's deadlock was this
  module's lock held across that wait). ``ensure_pool`` is also called from
  native code (the LOAD_SYMBOL callback, GIL released until it runs).
"""

from __future__ import annotations

import ctypes
import functools
import json
import threading
from dataclasses import asdict
from typing import Any

import llvmlite.binding as llvm
from llvmlite import ir

from ...dtypes import DType
from ...runtime.cache import OnceTable
from .fastcall import C_API, METH_FASTCALL, ObjectLayout, call_ir, probe
from .gemm_config import GemmConfig, current_config
from .parallel import LIMIT_SYMBOL, LOAD_SYMBOL, POOL_SYMBOL, SLOT_SYMBOL, pool_glue, pool_module
from .threads import LIMIT, MAX_THREADS
from .types import I1, I64, PREPACK_TYPE, PTR

GEMM_TYPE = ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR] + [I64] * 6 + [I1])
_TYPES = {"gemm": GEMM_TYPE, "gemm_packed": GEMM_TYPE, "gemm_prepack": PREPACK_TYPE}
CONV_TYPE = ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR] + [I64] * 8)
#: symbol -> address of every helper loaded into this process's engine
_LOADED = OnceTable()
_ENGINE_LOCK = threading.Lock()
#: [whether glibc was tuned] once the engine exists (allocator.keep_freed_memory)
_MALLOC_TUNED: list[bool] = []

Spec = dict[str, Any]
#: The thread pool's spec (its code depends on its bound; the count per region is
#: read at run time from LIMIT_SYMBOL).
POOL_SPEC: Spec = {"kind": "pool", "max_threads": MAX_THREADS}


def call_spec(layout: ObjectLayout) -> Spec:
    """The spec of the native call helper (fastcall.py) for this object layout."""
    return {"kind": "call", "layout": asdict(layout)}


def symbol(spec: Spec) -> str:
    if spec["kind"] == "pool":
        return POOL_SYMBOL
    if spec["kind"] == "call":
        return f"wia.lib.call.{ObjectLayout(**spec['layout']).label()}"
    cfg = GemmConfig(**spec["config"])
    name = f"wia.lib.{spec['kind']}.{spec['dtype']}.{cfg.label()}"
    if spec["kind"] == "conv":
        sh, sw = spec["stride"]
        name += f".s{sh}x{sw}"
    return name


def declare(mod: ir.Module, specs: list[Spec], kind: str, dtype: DType,
            stride: tuple[int, int] | None = None) -> ir.Function:
    """An external declaration of the helper in ``mod``; its spec is added to ``specs``."""
    spec: Spec = {"kind": kind, "dtype": dtype.value, "config": current_config().as_dict()}
    if stride is not None:
        spec["stride"] = [int(stride[0]), int(stride[1])]
    name = symbol(spec)
    if spec not in specs:
        specs.append(spec)
    fn = mod.globals.get(name)
    if fn is None:
        fn = ir.Function(mod, _TYPES.get(kind, CONV_TYPE), name)
    return fn


def library_ir(spec: Spec) -> str:
    """LLVM IR text of one helper, exported under ``symbol(spec)``."""
    from .conv import ConvBuilder
    from .gemm import GemmBuilder, use_config
    from .target import host
    mod = ir.Module(name=symbol(spec))
    mod.triple = host().triple
    if spec["kind"] == "pool":
        pool_module(mod, symbol(spec))
        return str(mod)
    if spec["kind"] == "call":
        call_ir(mod, symbol(spec), ObjectLayout(**spec["layout"]))
        return str(mod)
    dtype = DType(spec["dtype"])
    with use_config(GemmConfig(**spec["config"])):
        if spec["kind"] == "gemm":
            fn = GemmBuilder(mod, dtype).driver(symbol(spec))
        elif spec["kind"] == "gemm_packed":
            fn = GemmBuilder(mod, dtype).driver(symbol(spec), prepacked=True)
        elif spec["kind"] == "gemm_prepack":
            fn = GemmBuilder(mod, dtype).prepack(symbol(spec))
        else:
            fn = ConvBuilder(mod, dtype, tuple(spec["stride"])).driver(symbol(spec))
    fn.linkage = "external"
    return str(mod)


def _optimized(spec: Spec) -> llvm.ModuleRef:
    from .target import optimize, parse_and_verify
    mod = parse_and_verify(library_ir(spec))
    optimize(mod, 3)
    return mod


def jit_engine() -> Any:
    """The process's engine (target.py), created by one thread only: ``engine()`` is a
    plain ``functools.cache``, and two threads creating it at once would each get
    an engine of their own (one of them soon collected, with the code loaded in it)."""
    from .allocator import keep_freed_memory
    from .target import engine

    with _ENGINE_LOCK:
        if not _MALLOC_TUNED:
            _MALLOC_TUNED.append(keep_freed_memory())
        return engine()


def ensure_loaded(specs: list[Spec]) -> None:
    """Compile and load every helper of ``specs`` not yet in this process's engine."""
    for spec in specs:
        name = symbol(spec)
        if name not in _LOADED:
            _LOADED.get(name, functools.partial(_load, spec, name))


def _load(spec: Spec, name: str) -> int:
    """Load one helper (this thread holds its flight in ``_LOADED``; no lock)."""
    from ...runtime.cache import cached_object

    eng = jit_engine()

    # A helper's code depends only on its spec (and the CPU and compiler
    # version, which the cache key adds): a warm process loads it from the
    # compile cache instead of optimizing and compiling it again (~0.5 s).
    def build() -> bytes:
        return eng.emit_jit_object(_optimized(spec))  # type: ignore[no-any-return]
    obj = cached_object(name, json.dumps(spec, sort_keys=True), build)
    address: int = eng.add_object(obj, name)
    llvm.add_symbol(name, address)
    return address


def loaded_address(name: str) -> int | None:
    """The address of the helper ``name`` when it is loaded in this process."""
    return _LOADED.peek(name)  # type: ignore[no-any-return]


#: The pool's ``parallel_for`` once loaded (null before): modules read it at SLOT_SYMBOL.
_SLOT = ctypes.c_void_p(0)


def ensure_pool() -> int:
    """Load the thread pool (parallel.py) into this process; its ``parallel_for``."""
    ensure_loaded([POOL_SPEC])
    address = _LOADED.peek(POOL_SYMBOL)
    _SLOT.value = address
    return address


def _load_pool() -> int:
    """The LOAD_SYMBOL callback (native code calls it with the GIL released): the
    pool's address, or 0 (the caller then runs its region serially)."""
    try:
        return ensure_pool()
    except Exception:  # noqa: BLE001 - must not unwind into native code
        return 0


pool_address = ensure_pool
_LOADER = ctypes.CFUNCTYPE(ctypes.c_void_p)(_load_pool)
llvm.add_symbol(SLOT_SYMBOL, ctypes.addressof(_SLOT))
llvm.add_symbol(LOAD_SYMBOL, ctypes.cast(_LOADER, ctypes.c_void_p).value or 0)
llvm.add_symbol(LIMIT_SYMBOL, ctypes.addressof(LIMIT))


class _MethodDef(ctypes.Structure):
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p),
                ("ml_flags", ctypes.c_int), ("ml_doc", ctypes.c_char_p)]


_METHOD_DEFS: list[_MethodDef] = []  # kept alive: a builtin points at its definition


@functools.cache
def call_helper() -> Any:
    """The native call helper (fastcall.py) as a Python builtin ``wia_call(slots, args,
    outs)``, loaded on first use; None when this interpreter's object layout could
    not be verified."""
    layout = probe()
    if layout is None:
        return None
    for name, api in C_API.items():  # bound by name, so the object itself can be cached
        llvm.add_symbol(name, ctypes.cast(getattr(ctypes.pythonapi, api), ctypes.c_void_p).value or 0)
    spec = call_spec(layout)
    ensure_loaded([spec])
    method = _MethodDef(b"wia_call", _LOADED.peek(symbol(spec)), METH_FASTCALL, None)
    _METHOD_DEFS.append(method)
    new = ctypes.pythonapi.PyCFunction_NewEx
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.py_object, ctypes.py_object]
    return new(ctypes.addressof(method), None, None)


def link_into(mod: llvm.ModuleRef, specs: list[Spec]) -> None:
    """Copy the helpers' definitions into ``mod`` (for self-contained AOT output),
    and the pool's when anything in it runs a parallel region (with a slot that
    points at it from the start: no loader outside this process)."""
    for spec in specs:
        mod.link_in(_optimized(spec))
    if any(g.name == SLOT_SYMBOL and g.is_declaration for g in mod.global_variables):
        from .target import parse_and_verify
        mod.link_in(_optimized(POOL_SPEC))
        glue = ir.Module(name="wia.lib.pool.glue")
        glue.triple = mod.triple
        pool_glue(glue)
        mod.link_in(parse_and_verify(str(glue)))


__all__ = ["POOL_SPEC", "call_helper", "declare", "ensure_loaded", "ensure_pool", "jit_engine", "library_ir", "link_into",
           "loaded_address", "pool_address", "symbol"]
