"""The flash-attention kernels are race-free, and each of their barriers and waits is needed.

As ``test_races``: each kernel is emitted from WIA source, run intact under lockstep
and a warp-interleaved schedule (no race, NumPy values), then once per ``bar.sync`` /
``cp.async.wait_group`` line with that one line deleted: every deletion must raise
``SimRaceError`` naming both PTX lines. Shapes give three key tiles (a stage is
refilled after it was read) and head dims whose Q chunks cross warps.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from wiadsl.backends.ptx.emit import emit_ptx
from wiadsl.backends.ptx.executor import PlanRun
from wiadsl.backends.ptx.sim import SimRaceError
from wiadsl.frontend.compile import compile_to_ir

from .test_races import OptDevice, _sync_lines, _without

RNG = np.random.default_rng(23)
SRC = ("import nn;\nkernel k(input q: {t}[T, D], input k: {t}[S, D], input v: {t}[S, E], "
       "output o: {t}[T, E]) {{ o = nn.{fn}(q, k, v); }}")

#: name -> (dtype, fn, T, S, D, E, kernel kind prefix, sync lines)
CASES = {
    # cp.async chunks for Q, K and V; 64-key tiles
    "mma_async": ("f16", "attention", 9, 129, 64, 16, "attention(flash,mma,64)", 7),
    # odd head dims: plain element copies, barriers only
    "mma_element": ("f16", "causal_attention", 70, 129, 20, 12, "attention(flash,mma,64)", 3),
    # f32 chunks of 4 floats; 32-key tiles
    "fma_async": ("f32", "attention", 9, 65, 32, 16, "attention(flash,fma,32)", 7),
    "fma_element": ("f32", "attention", 9, 65, 18, 10, "attention(flash,fma,32)", 3),
}


def _inputs(name: str) -> list[np.ndarray]:
    dt, _, t, s, d, e, _, _ = CASES[name]
    dtype = np.float16 if dt == "f16" else np.float32
    return [RNG.standard_normal(sh).astype(dtype) for sh in ((t, d), (s, d), (s, e))]


INPUTS = {name: _inputs(name) for name in CASES}


def _oracle(name: str) -> np.ndarray:
    q, k, v = (x.astype(np.float64) for x in INPUTS[name])
    s = q @ k.T / np.sqrt(q.shape[1])
    if CASES[name][1].startswith("causal"):
        s = np.where(np.arange(k.shape[0]) <= np.arange(q.shape[0])[:, None], s, -np.inf)
    e = np.exp(s - s.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True) @ v


@functools.cache
def _emit(name: str) -> tuple[str, dict]:
    dt, fn, *_ = CASES[name]
    shapes = {n: x.shape for n, x in zip("qkv", INPUTS[name], strict=True)}
    return emit_ptx(compile_to_ir(SRC.format(t=dt, fn=fn), name), "k", "sm_80", shapes)


def _run(text: str, plan: dict, name: str, **opts) -> tuple[np.ndarray, OptDevice]:
    dev = OptDevice(text, **opts)
    (out,) = PlanRun(plan, dev).run(INPUTS[name])
    return out, dev


@pytest.mark.parametrize("schedule", ["lockstep", "reverse"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_intact_flash_kernel_is_race_free_and_matches_numpy(name: str, schedule: str) -> None:
    text, plan = _emit(name)
    assert [k["kind"] for k in plan["kernels"]] == [CASES[name][6]]
    assert len(_sync_lines(text)) == CASES[name][7]
    got, dev = _run(text, plan, name, schedule=schedule)
    tol = 3e-3 if CASES[name][0] == "f16" else 2e-5
    np.testing.assert_allclose(np.asarray(got, np.float64), _oracle(name), rtol=tol, atol=tol)
    assert dev.found == []


@pytest.mark.parametrize("name,k", [(n, k) for n in sorted(CASES) for k in range(CASES[n][7])],
                         ids=lambda v: str(v))
def test_deleting_any_flash_sync_is_reported_as_race(name: str, k: int) -> None:
    text, plan = _emit(name)
    i = _sync_lines(text)[k]
    edited = _without(text, i)
    with pytest.raises(SimRaceError) as err:
        _run(edited, plan, name)
    race = err.value.races[0]
    lines = edited.splitlines()
    for side in (race.earlier, race.later):
        assert side.line is not None and side.instr.split()[0] in lines[side.line - 1], str(race)
