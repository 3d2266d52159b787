"""This machine's measured peaks: an FMA probe and a bandwidth probe, cached.

The probes are small LLVM kernels built here (host vector width, the JIT's own
engine) and run on ``THREADS`` Python threads at once (ctypes releases the GIL),
the same thread count the gemm kernels use:
- FMA: 12 independent ``<W x float>`` ``llvm.fmuladd`` chains per thread, so the
  FMA pipes never wait on latency; FLOPs = 2 x W x 12 x iterations.
- bandwidth: a vector copy of 64 MiB per thread (bytes = read + written) and a
  vector sum of the same buffer (bytes = read); the roof is the faster one.

Invariant: a probe result is cached per (CPU name + features, threads) under
``v1/machine/`` in the cache folder; ``peaks(refresh=True)`` re-measures.
Each figure is the best of several runs (peaks, not typical values).
"""

from __future__ import annotations

import ctypes
import json
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import cache

import numpy as np
from llvmlite import ir

from ..backends.llvm.gemm import THREADS
from ..backends.llvm.loader import symbol_address
from ..backends.llvm.target import host, load_module, optimize, parse_and_verify
from ..cache import store as cache_store
from ..cache.key import sha256

F32, I64, PTR = ir.FloatType(), ir.IntType(64), ir.PointerType()
CHAINS = 12
FMA_ITERS = 2_000_000
BW_BYTES = 64 << 20


@dataclass(frozen=True)
class Peaks:
    gflops: float        #: FMA peak, all threads
    copy_gbs: float      #: copy bandwidth (read + write bytes)
    read_gbs: float      #: read bandwidth
    threads: int
    cpu: str

    @property
    def gbs(self) -> float:
        return max(self.copy_gbs, self.read_gbs)

    @property
    def ridge(self) -> float:
        """Arithmetic intensity (FLOP/byte) where the two roofs meet."""
        return self.gflops / self.gbs


def _probe_module(w: int) -> str:
    mod = ir.Module("wia_probes")
    vt = ir.VectorType(F32, w)
    fma = ir.Function(mod, ir.FunctionType(vt, [vt] * 3), f"llvm.fmuladd.v{w}f32")

    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [I64, PTR]), "wia_probe_fma")
    iters, out = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    x, y = ir.Constant(vt, [0.999999] * w), ir.Constant(vt, [1e-7] * w)
    entry, loop, done = b.block, fn.append_basic_block("loop"), fn.append_basic_block("done")
    b.branch(loop)
    b.position_at_end(loop)
    i = b.phi(I64)
    accs = [b.phi(vt) for _ in range(CHAINS)]
    i.add_incoming(ir.Constant(I64, 0), entry)
    for k, acc in enumerate(accs):
        acc.add_incoming(ir.Constant(vt, [float(k)] * w), entry)
    nexts = [b.call(fma, [acc, x, y]) for acc in accs]
    nxt = b.add(i, ir.Constant(I64, 1))
    i.add_incoming(nxt, loop)
    for acc, n in zip(accs, nexts, strict=True):
        acc.add_incoming(n, loop)
    b.cbranch(b.icmp_signed("<", nxt, iters), loop, done)
    b.position_at_end(done)
    total = nexts[0]
    for n in nexts[1:]:
        total = b.fadd(total, n)
    b.store(total, out, align=4)
    b.ret_void()

    for name, copy in (("wia_probe_copy", True), ("wia_probe_read", False)):
        fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR, PTR, I64]), name)
        src, dst, n = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        entry, loop, done = b.block, fn.append_basic_block("loop"), fn.append_basic_block("done")
        b.branch(loop)
        b.position_at_end(loop)
        i = b.phi(I64)
        acc = b.phi(vt)
        i.add_incoming(ir.Constant(I64, 0), entry)
        acc.add_incoming(ir.Constant(vt, [0.0] * w), entry)
        v = b.load(b.gep(src, [i], source_etype=F32), typ=vt, align=4)
        if copy:
            b.store(v, b.gep(dst, [i], source_etype=F32), align=4)
            acc_next = acc
        else:
            acc_next = b.fadd(acc, v)
        nxt = b.add(i, ir.Constant(I64, w))
        i.add_incoming(nxt, loop)
        acc.add_incoming(acc_next, loop)
        b.cbranch(b.icmp_signed("<", nxt, n), loop, done)
        b.position_at_end(done)
        if not copy:
            b.store(acc_next, dst, align=4)
        b.ret_void()
    return str(mod)


@cache
def _probes() -> dict[str, Callable[..., None]]:
    w = host().vector_bits // 32
    mod = parse_and_verify(_probe_module(w))
    optimize(mod, 2)
    fma_t = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p)
    mem_t = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
    fma = fma_t(load_module(mod, "wia_probe_fma"))
    return {"fma": fma, "copy": mem_t(symbol_address("wia_probe_copy")),
            "read": mem_t(symbol_address("wia_probe_read")), "w": w}  # type: ignore[dict-item]


def _parallel(threads: int, job: Callable[[int], None]) -> float:
    """Seconds for ``threads`` threads to run ``job(t)`` at once."""
    workers = [threading.Thread(target=job, args=(t,)) for t in range(threads)]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return time.perf_counter() - start


def measure(threads: int = THREADS, repeats: int = 5) -> Peaks:
    p = _probes()
    w = int(p["w"])  # type: ignore[call-overload]
    out = np.zeros((threads, 64), np.float32)
    fma_s = min(_parallel(threads, lambda t: p["fma"](FMA_ITERS, out[t].ctypes.data))
                for _ in range(repeats))
    gflops = threads * FMA_ITERS * CHAINS * w * 2 / fma_s / 1e9
    n = BW_BYTES // 4
    src = [np.ones(n, np.float32) for _ in range(threads)]
    dst = [np.zeros(n, np.float32) for _ in range(threads)]
    copy_s = min(_parallel(threads, lambda t: p["copy"](src[t].ctypes.data, dst[t].ctypes.data, n))
                 for _ in range(repeats))
    read_s = min(_parallel(threads, lambda t: p["read"](src[t].ctypes.data, out[t].ctypes.data, n))
                 for _ in range(repeats))
    return Peaks(gflops, threads * 2 * BW_BYTES / copy_s / 1e9, threads * BW_BYTES / read_s / 1e9,
                 threads, host().cpu)


def peaks(refresh: bool = False, threads: int = THREADS) -> Peaks:
    """The cached peaks of this machine (measured on first use, ~1 s)."""
    h = host()
    path = cache_store.root() / "machine" / f"{sha256(f'{h.cpu} {h.features} {threads}')[:24]}.json"
    if not refresh:
        try:
            return Peaks(**json.loads(path.read_bytes()))
        except (OSError, ValueError, TypeError):
            pass
    found = measure(threads)
    try:
        cache_store.atomic_write(path, json.dumps(asdict(found)).encode())
    except OSError:
        pass  # an unwritable cache only costs a re-measurement next time
    return found
