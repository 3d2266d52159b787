"""The simulator catches races in emitted kernels (issue 22).

Each kernel is emitted from WIA source through the normal emitter (not a frozen
copy), run intact under lockstep and a warp-interleaved schedule (no race, NumPy
values), then once per ``bar.sync`` / ``cp.async.wait_group`` line with that one
line deleted: every deletion must be reported as a ``SimRaceError``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest

from wiadsl.backends.ptx.emit import emit_ptx
from wiadsl.backends.ptx.executor import PlanRun
from wiadsl.backends.ptx.sim import SCHEDULES, Race, SimRaceError, launch
from wiadsl.backends.ptx.simbackend import SimDevice
from wiadsl.frontend.compile import compile_to_ir

RNG = np.random.default_rng(22)


@dataclass
class OptDevice(SimDevice):
    """A simulator device that launches with a schedule and race mode, keeping the races."""

    schedule: str = "lockstep"
    races: str = "raise"
    check_init: bool = True
    found: list[Race] = field(default_factory=list)

    def launch(self, kernel, grid, block, args, shared_bytes) -> None:
        stats = launch(self.ptx, kernel, grid, block, args, shared_bytes, schedule=self.schedule,
                       races=self.races, check_uninitialized_shared=self.check_init)
        self.found += stats.races


def _f16(*shape):
    return RNG.standard_normal(shape).astype(np.float16)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _i8(*shape):
    return RNG.integers(-128, 128, shape).astype(np.int8)


def _tf32(x):
    """f32 rounded to tf32 as ``cvt.rna.tf32.f32`` does (10 mantissa bits, ties away)."""
    return ((x.view(np.uint32) + 0x1000) & 0xFFFFE000).view(np.float32)


def _softmax(a):
    e = np.exp(a - a.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _conv3x3(x, w):
    win = np.lib.stride_tricks.sliding_window_view(np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))),
                                                   (3, 3), axis=(2, 3))
    return np.einsum("nchwij,ocij->nohw", win.astype(np.float64), w.astype(np.float64))


def _layer_norm(a, g, b):
    m = a.mean(axis=1, keepdims=True)
    return (a - m) / np.sqrt(a.var(axis=1, keepdims=True) + 1e-5) * g + b


@dataclass(frozen=True)
class Case:
    """A kernel ``k`` of ``source``, its inputs (static shapes), the NumPy oracle."""

    source: str
    inputs: tuple
    oracle: Callable[..., np.ndarray]
    tol: float = 2e-5
    #: emitted with the inputs' shapes (else every extent symbolic: ``wiac -o`` without -D)
    static: bool = True
    allow_tf32: bool = False


MM = "kernel k(input a: {t}[M, K], input b: {t}[K, N], output y: {t}[M, N]) {{ y = a @ b; }}"
NN = "import nn;\nkernel k({args}) {{ y = {expr}; }}"
CASES = {
    # The tensor-core GEMM (kernels/mma.py). Static multiples of 8: cp.async, ldmatrix,
    # mma.sync, 64x64 tiles with 4 stages; 5 k tiles of 32, so stages are refilled while
    # other warps may still read them, and the last tile read (stage 0) is where the
    # epilogue stages the accumulators
    "matmul_f16_cp_async": Case(MM.format(t="f16"), (_f16(64, 160), _f16(160, 64)),
                                lambda a, b: a.astype(np.float32) @ b.astype(np.float32), 2e-3),
    # odd extents: predicated 2-byte loads instead of cp.async
    "matmul_f16_odd": Case(MM.format(t="f16"), (_f16(33, 140), _f16(140, 17)),
                           lambda a, b: a.astype(np.float32) @ b.astype(np.float32), 2e-3),
    # symbolic shapes: 128x128 tiles, 3 stages, the 16-byte path chosen at run time
    # (K % 8 == 0), 4 k tiles; the epilogue stages the tile in two passes (two more syncs)
    "matmul_f16_symbolic": Case(MM.format(t="f16"), (_f16(40, 128), _f16(128, 72)),
                                lambda a, b: a.astype(np.float32) @ b.astype(np.float32), 2e-3,
                                static=False),
    "matmul_i8": Case("kernel k(input a: i8[M, K], input b: i8[N, K], output y: i32[M, N]) "
                      "{ y = cast(a, i32) @ cast(transpose(b), i32); }",
                      (_i8(24, 320), _i8(40, 320)),
                      lambda a, b: a.astype(np.int64) @ b.T.astype(np.int64), 0),
    "matmul_tf32": Case(MM.format(t="f32"), (_f32(20, 80), _f32(80, 24)),
                        lambda a, b: _tf32(a).astype(np.float64) @ _tf32(b), 1e-5,
                        allow_tf32=True),
    "matmul_f32": Case(MM.format(t="f32"), (_f32(33, 40), _f32(40, 20)), lambda a, b: a @ b, 1e-4),
    "softmax": Case(NN.format(args="input a: f32[M, N], output y: f32[M, N]", expr="nn.softmax(a)"),
                    (_f32(2, 40),), _softmax),
    "layer_norm": Case(NN.format(args="input a: f32[M, N], input g: f32[N], input b: f32[N], "
                                      "output y: f32[M, N]", expr="nn.layer_norm(a, g, b)"),
                       (_f32(2, 40), _f32(40), _f32(40)), _layer_norm, 1e-4),
    "row_sum": Case("kernel k(input a: f32[M, N], output y: f32[M]) { y = reduce_sum(a, axis=1); }",
                    (_f32(3, 40),), lambda a: a.sum(axis=1), 1e-4),
    "argmax_rows": Case("kernel k(input a: f32[M, N], output i: i64[M]) { i = argmax(a, axis=1); }",
                        (_f32(3, 40),), lambda a: a.argmax(axis=1), 0),
    "conv_f32": Case("kernel k(input x: f32[1, 3, H, W], input w: f32[4, 3, 3, 3], "
                     "output y: f32[1, 4, H, W]) { y = conv2d(x, w, padding=1); }",
                     (_f32(1, 3, 6, 7), _f32(4, 3, 3, 3)), _conv3x3, 1e-4),
    "full_sum_grid": Case("kernel k(input a: f32[N], output y: f32) { y = reduce_sum(a); }",
                          (_f32(9000),), lambda a: a.sum(dtype=np.float64), 1e-3),
}


@functools.cache
def _emit(name: str) -> tuple[str, dict]:
    case = CASES[name]
    func = compile_to_ir(case.source, name)
    params = [a.name_hint for a in func["k"].args]
    shapes = {p: x.shape for p, x in zip(params, case.inputs, strict=True)} if case.static else None
    return emit_ptx(func, "k", "sm_80", shapes, allow_tf32=case.allow_tf32)


def _run(text: str, plan: dict, name: str, **opts) -> tuple[list, OptDevice]:
    dev = OptDevice(text, **opts)
    out = PlanRun(plan, dev).run(list(CASES[name].inputs))
    return list(out), dev


def _sync_lines(text: str) -> list[int]:
    """Indices of the lines that are one ``bar.sync`` or ``cp.async.wait_group``."""
    return [i for i, line in enumerate(text.splitlines())
            if line.strip().startswith(("bar.sync", "cp.async.wait_group"))]


def _without(text: str, i: int) -> str:
    lines = text.splitlines()
    return "\n".join(lines[:i] + lines[i + 1:]) + "\n"


@pytest.mark.parametrize("schedule", ["lockstep", "reverse"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_intact_kernel_is_race_free_and_matches_numpy(name: str, schedule: str) -> None:
    text, plan = _emit(name)
    assert _sync_lines(text), "kernel has no barrier: nothing to test"
    (got,), dev = _run(text, plan, name, schedule=schedule)
    case = CASES[name]
    want = case.oracle(*case.inputs)
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=case.tol, atol=case.tol)
    assert dev.found == []


#: Barriers whose deletion is race-free (index among the kernel's sync lines).  In the block
#: reduction the emitter writes (partials -> bar A -> warp 0 folds red_val[t] -> bar B ->
#: thread 0 writes red_val[0] -> bar C -> all read it -> bar D), B orders thread 0's read of
#: red_val[0] before its own write: no other thread touches that word, so B is redundant;
#: D and the row-loop barrier both separate the last red_val read from the next write, so
#: either one alone suffices (and the grid reduction's D is followed by no shared access).
#: Each entry is checked: race-free and NumPy-correct under every schedule.
REDUNDANT = {
    "softmax": {1, 5, 7, 8},
    "layer_norm": {1, 5, 7, 8},
    "row_sum": {1, 3, 4},
    "argmax_rows": {1, 3, 4},
    "full_sum_grid": {1, 3, 5, 7},
}


def _deletions() -> list[tuple[str, int]]:
    return [(name, k) for name in sorted(CASES) for k in range(len(_sync_lines(_emit(name)[0])))]


@pytest.mark.parametrize("name,k", [d for d in _deletions() if d[1] not in REDUNDANT.get(d[0], ())],
                         ids=lambda v: str(v))
def test_deleting_one_sync_is_reported_as_race(name: str, k: int) -> None:
    text, plan = _emit(name)
    i = _sync_lines(text)[k]
    with pytest.raises(SimRaceError) as err:
        _run(_without(text, i), plan, name)
    race = err.value.races[0]
    lines = _without(text, i).splitlines()
    for side in (race.earlier, race.later):  # both sides name their PTX line and instruction
        assert side.line is not None and side.instr.split()[0] in lines[side.line - 1], str(race)


@pytest.mark.parametrize("name,k", [d for d in _deletions() if d[1] in REDUNDANT.get(d[0], ())],
                         ids=lambda v: str(v))
def test_redundant_barrier_deletion_is_race_free(name: str, k: int) -> None:
    text, plan = _emit(name)
    edited = _without(text, _sync_lines(text)[k])
    case = CASES[name]
    for schedule in SCHEDULES:
        (got,), dev = _run(edited, plan, name, schedule=schedule, races="collect")
        assert dev.found == [], (schedule, [str(r) for r in dev.found])
        np.testing.assert_allclose(np.asarray(got, np.float64), case.oracle(*case.inputs),
                                   rtol=case.tol, atol=case.tol)


def test_f16_matmul_without_any_sync_is_caught() -> None:
    """Issue 22's example: with every bar.sync and wait_group deleted the old simulator
    still gave exact results; now the copies never land (wrong values) and it is a race."""
    name = "matmul_f16_cp_async"
    text, plan = _emit(name)
    keep = [line for k, line in enumerate(text.splitlines()) if k not in set(_sync_lines(text))]
    stripped = "\n".join(keep) + "\n"
    with pytest.raises(SimRaceError, match="read-before-async-wait"):
        _run(stripped, plan, name)
    case = CASES[name]
    for schedule in ("lockstep", "forward"):
        (got,), _ = _run(stripped, plan, name, schedule=schedule, races="off", check_init=False)
        assert not np.allclose(got.astype(np.float32), case.oracle(*case.inputs), atol=0.1)
