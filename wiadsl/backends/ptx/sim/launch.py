"""The public entry point: ``launch(ptx, kernel, grid, block, args, shared_bytes)``.

Arguments, in the kernel's parameter order:

* a NumPy array → a device buffer: its bytes are copied in, the kernel gets a
  global pointer to it (``.u64`` parameter), and after the launch the buffer is
  copied back **into the same array** (only if the kernel stored to it).  Passing
  one array twice aliases one buffer.  A read-only array (``writeable=False``)
  is a read-only buffer: a store to it is an error.
* a Python/NumPy scalar → the parameter's value, converted to its PTX type.
* ``bytes`` → the raw bytes of a ``.b8 name[N]`` (struct) parameter.
* a ``tensormap.TensorMapArg`` → a ``.b8 name[128]`` TMA tensor map: its array becomes a
  buffer (shared with a pointer argument passing the same array) and the parameter
  holds the simulator's encoding of the map with that buffer's address.

Options: ``schedule`` (``schedule.py``: ``lockstep`` or the warp-interleaved
``forward``/``reverse``/``rotate``) and ``races`` (``raise``: the first shared-memory
race is a ``SimRaceError``; ``collect``: races are listed in ``LaunchStats.races``;
``off``).  Their defaults come from the environment variables
``WIADSL_PTXSIM_SCHEDULE`` and ``WIADSL_PTXSIM_RACES`` (else ``lockstep``, ``raise``),
so a whole test suite can be rerun under another schedule.

Returns ``LaunchStats`` (instructions issued, thread-instructions, seconds, races).
Every failure is a ``PtxSimError``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from . import tensormap
from .ast import Module
from .errors import PtxSimError
from .exec import Counters, Executor
from .memory import BankedMemory, GlobalMemory
from .operands import imm_value
from .parser import parse_module
from .program import Program, compile_program
from .races import RACE_MODES, Race, RaceLog
from .schedule import SCHEDULES
from .state import Geometry, Wave
from .tensormap import TensorMapArg
from .tracker import MAX_MBARRIER_AGENTS, RaceTracker

#: Bytes of race stamps (``tracker.py``) kept at once for one wave of blocks.
STAMP_BYTES_PER_WAVE = 1 << 26


def stamp_bytes(prog: Program, bsize: int) -> int:
    """Race-stamp bytes of one block: per shared unit a write, a pending copy and one read
    per tracker component (warps, wgmma and TMA agents)."""
    warps = (bsize + 31) // 32
    comps = warps + ((warps + 3) // 4 if prog.wgmma else 0) + (MAX_MBARRIER_AGENTS if prog.tma else 0)
    return max(1, prog.shared_total // prog.shared_unit) * 8 * (2 + comps)


@dataclass(frozen=True)
class LaunchStats:
    """What a launch executed: steps, lane-instructions, wall time, races (``collect``)."""

    steps: int
    thread_instructions: int
    seconds: float
    races: tuple[Race, ...] = ()

    @property
    def thread_instructions_per_second(self) -> float:
        return self.thread_instructions / self.seconds if self.seconds else 0.0


@lru_cache(maxsize=64)
def _parse_cached(text: str) -> Module:
    return parse_module(text)


@lru_cache(maxsize=128)
def _program_cached(text: str, kernel: str, shared_bytes: int) -> Program:
    return compile_program(_parse_cached(text), kernel, shared_bytes)


def _dims(v, what: str) -> tuple[int, int, int]:
    t = (v,) if isinstance(v, int) else tuple(v)
    t = t + (1,) * (3 - len(t))
    if len(t) != 3 or any(not isinstance(x, (int, np.integer)) or x < 1 for x in t):
        raise PtxSimError(f"{what} must be 1 to 3 positive integers, got {v!r}")
    x, y, z = (int(d) for d in t)
    return x, y, z


def _param_bytes(prog: Program, args, glob: GlobalMemory, arrays: list) -> bytes:
    from .ast import Imm

    params = prog.kernel.params
    if len(args) != len(params):
        raise PtxSimError(f"kernel '{prog.kernel.name}' takes {len(params)} arguments, "
                          f"got {len(args)}")
    buf = bytearray(prog.param_total)
    seen: dict[int, int] = {}
    def buffer(a: np.ndarray, name: str) -> int:
        if id(a) not in seen:
            data = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
            seen[id(a)] = glob.add(f"arg{len(arrays)}:{name}", data, bool(a.flags.writeable))
            arrays.append((a, len(glob.regions) - 1))
        return seen[id(a)]

    for p, a in zip(params, args):
        off, size = prog.param_layout[p.name]
        if isinstance(a, TensorMapArg):
            if size != tensormap.SIZE:
                raise PtxSimError(f"parameter '{p.name}' ({size} bytes) cannot take a tensor map")
            try:
                raw = tensormap.encode(replace(a.fields, address=buffer(a.array, p.name) + a.offset))
            except ValueError as e:
                raise PtxSimError(f"parameter '{p.name}': {e}") from None
        elif isinstance(a, np.ndarray):
            if p.size != 8:
                raise PtxSimError(f"parameter '{p.name}' (.{p.type.name}) cannot take an array")
            raw = int(buffer(a, p.name)).to_bytes(8, "little")
        elif isinstance(a, (bytes, bytearray)):
            if len(a) != size:
                raise PtxSimError(f"parameter '{p.name}' needs {size} bytes, got {len(a)}")
            raw = bytes(a)
        elif isinstance(a, (int, float, np.integer, np.floating, bool)):
            kind = "float" if isinstance(a, (float, np.floating)) else "int"
            if kind == "float" and not p.type.is_float:
                raise PtxSimError(f"parameter '{p.name}' (.{p.type.name}) got float {a!r}")
            v = imm_value(None, Imm(kind, a.item() if hasattr(a, "item") else a, str(a)), p.type)
            raw = np.asarray(v).tobytes()
        else:
            raise PtxSimError(f"parameter '{p.name}': unsupported argument {type(a).__name__}")
        buf[off : off + len(raw)] = raw
    return bytes(buf)


def _option(value: str | None, env: str, default: str, allowed: tuple[str, ...]) -> str:
    v = value if value is not None else os.environ.get(env, default)
    if v not in allowed:
        raise PtxSimError(f"{'option' if value is not None else env} must be one of "
                          f"{', '.join(allowed)}, got {v!r}")
    return v


def launch(ptx: str, kernel: str, grid, block, args, shared_bytes: int = 0, *,
           check_uninitialized_shared: bool = True, max_steps: int = 5_000_000,
           max_wave_threads: int = 32768, schedule: str | None = None,
           races: str | None = None) -> LaunchStats:
    """Simulate ``kernel<<<grid, block, shared_bytes>>>(*args)`` (see the module docstring)."""
    t0 = time.perf_counter()
    sched = _option(schedule, "WIADSL_PTXSIM_SCHEDULE", "lockstep", SCHEDULES)
    mode = _option(races, "WIADSL_PTXSIM_RACES", "raise", RACE_MODES)
    g = Geometry(_dims(grid, "grid"), _dims(block, "block"))
    if g.bsize > 1024:
        raise PtxSimError(f"block of {g.bsize} threads exceeds 1024")
    prog = _program_cached(ptx, kernel, int(shared_bytes))
    glob = GlobalMemory()
    for v in prog.module.vars:
        if v.space in ("global", "const"):
            glob.add(v.name, v.init or bytes(v.size or 0), writable=v.space == "global")
    arrays: list = []
    params = _param_bytes(prog, list(args), glob, arrays)
    ex = Executor(kernel, prog.ops, max_steps, prog.slot_width)
    counters = Counters()
    log = RaceLog(kernel, [c.instr for c in prog.ops], g, mode) if mode != "off" else None
    per_wave = max(1, max_wave_threads // g.bsize)
    if log is not None and prog.shared_total:
        per_block = stamp_bytes(prog, g.bsize)
        per_wave = max(1, min(per_wave, STAMP_BYTES_PER_WAVE // per_block))
    for first in range(0, g.nblocks, per_wave):
        nb = min(per_wave, g.nblocks - first)
        w = _make_wave(prog, g, first, nb, glob, params, check_uninitialized_shared, log)
        ex.run(w, counters, sched)
    for arr, ri in arrays:
        reg = glob.regions[ri]
        if reg.written:
            flat = reg.data[: reg.size].view(arr.dtype).reshape(arr.shape)
            np.copyto(arr, flat)
    found = tuple(log.races) if log is not None else ()
    return LaunchStats(counters.steps, counters.thread_instrs, time.perf_counter() - t0, found)


def _make_wave(prog: Program, g: Geometry, first: int, nb: int, glob: GlobalMemory,
               params: bytes, track: bool, log: RaceLog | None) -> Wave:
    n = nb * g.bsize
    lanes = np.arange(n, dtype=np.int64)
    param = BankedMemory("param", prog.param_layout, prog.param_total, 1,
                         np.zeros(n, np.int64), False)
    param.data[0, : len(params)] = np.frombuffer(params, np.uint8)
    shared = BankedMemory("shared", prog.shared_layout, prog.shared_total, nb,
                          lanes // g.bsize, track)
    if log is not None and prog.shared_total:
        shared.tracker = RaceTracker(nb, shared.total, lanes % g.bsize, first, log,
                                     shared.variable_at, prog.shared_unit, g.bsize,
                                     warpgroup_agents=prog.wgmma, mbarrier_agents=prog.tma)
    local = BankedMemory("local", prog.local_layout, prog.local_total, n, lanes, False)
    w = Wave(g, first, nb, {**prog.kernel.regs}, glob, param, shared, local)
    w.set_smem_sizes(prog.dynamic_shared, prog.shared_total)
    return w
