"""Race detection, warp schedules and cp.async groups on small hand-written kernels."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from wiadsl.backends.ptx.sim import SCHEDULES, PtxSimError, SimRaceError, launch, parse_module
from wiadsl.backends.ptx.sim.tracker import shared_unit

from .handwritten import RACES

LINES = RACES.splitlines()


def _line_of(text: str) -> int:
    """1-based line of the first PTX line containing ``text``."""
    return next(k for k, line in enumerate(LINES) if text in line) + 1


def _pairs(x: int, sync: int, **opts) -> tuple[np.ndarray, object]:
    y = np.zeros(64, np.uint32)
    stats = launch(RACES, "pairs", 1, 64, [y, x, sync], **opts)
    return y, stats


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_barrier_orders_warps(schedule: str) -> None:
    y, stats = _pairs(32, 1, schedule=schedule)
    np.testing.assert_array_equal(y, np.arange(64) ^ 32)
    assert stats.races == ()


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_lanes_of_one_warp_do_not_race(schedule: str) -> None:
    y, stats = _pairs(1, 0, schedule=schedule)  # partners t ^ 1 share a warp: lockstep
    np.testing.assert_array_equal(y, np.arange(64) ^ 1)


def test_missing_barrier_between_warps_is_a_race() -> None:
    with pytest.raises(SimRaceError, match="read-after-write race on shared 'cell'") as err:
        _pairs(32, 0, schedule="lockstep")
    (race,) = err.value.races
    assert race.earlier.line == _line_of("st.shared.u32 [%r6], %r3")
    assert race.later.line == _line_of("ld.shared.u32 %r8, [%r7]")
    assert race.earlier.thread[0] ^ 32 == race.later.thread[0]
    assert race.variable == "cell" and race.offset == 4 * race.earlier.thread[0]


@pytest.mark.parametrize("schedule", ["forward", "reverse", "rotate"])
def test_missing_barrier_seen_as_write_after_read_when_warps_interleave(schedule: str) -> None:
    """The first warp reads its partner's cell before the partner warp has run at all."""
    with pytest.raises(SimRaceError, match="write-after-read race on shared 'cell'") as err:
        _pairs(32, 0, schedule=schedule, check_uninitialized_shared=False)
    (race,) = err.value.races
    assert race.earlier.line == _line_of("ld.shared.u32 %r8, [%r7]")
    assert race.later.line == _line_of("st.shared.u32 [%r6], %r3")
    first_warp = 1 if schedule == "reverse" else 0
    assert race.earlier.thread[0] // 32 == first_warp and race.later.thread[0] // 32 != first_warp


def test_interleaving_changes_values_of_a_racy_kernel() -> None:
    """Lockstep hides the missing barrier (the old simulator's behaviour); warps do not."""
    want = np.arange(64) ^ 32
    y, _ = _pairs(32, 0, schedule="lockstep", races="off")
    np.testing.assert_array_equal(y, want)
    for schedule, first in (("forward", 0), ("reverse", 1)):
        y, _ = _pairs(32, 0, schedule=schedule, races="off", check_uninitialized_shared=False)
        early = np.arange(64) // 32 == first  # read the other warp's cells before they were set
        assert (y[early] == 0).all() and not np.array_equal(y, want), schedule
        np.testing.assert_array_equal(y[~early], want[~early])


@pytest.mark.parametrize("schedule", ["lockstep", "forward"])
def test_write_write_pair_is_a_race(schedule: str) -> None:
    y = np.zeros(64, np.uint32)
    with pytest.raises(SimRaceError, match="write-after-write race on shared 'cell'") as err:
        launch(RACES, "clobber", 1, 64, [y], schedule=schedule)
    race = err.value.races[0]
    line = _line_of("st.shared.u32 [%r3], %r1")
    assert race.earlier.line == race.later.line == line
    assert abs(race.earlier.thread[0] - race.later.thread[0]) == 32


def test_collect_mode_lists_races_and_keeps_running() -> None:
    y, stats = _pairs(32, 0, races="collect")
    np.testing.assert_array_equal(y, np.arange(64) ^ 32)  # lockstep: values unaffected
    assert len(stats.races) == 1 and stats.races[0].kind == "read-after-write"
    assert "no bar.sync between the write and the read" in str(stats.races[0])


def _async_groups(**opts):
    src = np.arange(256, dtype=np.float32)
    y = np.zeros(128, np.float32)
    stats = launch(RACES, "async_groups", 1, 32, [src, y], **opts)
    return src, y.reshape(32, 4), stats


def test_cp_async_lands_at_its_wait_group() -> None:
    src, y, stats = _async_groups(races="collect")
    np.testing.assert_array_equal(y[:, 0], src[0:128:4])      # group 0: retired by wait_group 1
    np.testing.assert_array_equal(y[:, 1], -1)                # group 1 in flight: old contents
    np.testing.assert_array_equal(y[:, 2], src[128:256:4])    # wait_all retired group 1
    (race,) = stats.races
    assert race.kind == "read-before-async-wait"
    assert race.earlier.line == _line_of("cp.async.cg.shared.global [%r4], [%rd5], 16;")
    assert race.later.line == _line_of("ld.shared.f32 %f3, [%r4];")
    assert race.earlier.thread == race.later.thread  # even the issuing thread must wait


def test_cp_async_read_before_wait_raises_by_default() -> None:
    with pytest.raises(SimRaceError, match="no cp.async.wait_group retired the copy"):
        _async_groups()


def test_byte_stores_of_four_warps_to_one_word_do_not_race() -> None:
    """Stamps are per byte here (the kernel stores bytes): adjacent bytes are independent."""
    kernels = parse_module(RACES).kernels
    assert shared_unit(kernels["bytes4"].instrs) == 1 and shared_unit(kernels["pairs"].instrs) == 4
    y = np.zeros(128, np.uint32)
    for schedule in ("lockstep", "rotate"):
        launch(RACES, "bytes4", 1, 128, [y], schedule=schedule)
        lane = np.arange(128, dtype=np.uint32) % 32
        np.testing.assert_array_equal(y, lane | (lane + 32) << 8 | (lane + 64) << 16 | (lane + 96) << 24)


def test_bad_options_are_errors() -> None:
    with pytest.raises(PtxSimError, match="option must be one of lockstep, forward"):
        _pairs(1, 0, schedule="sideways")
    with pytest.raises(PtxSimError, match="option must be one of raise, collect, off"):
        _pairs(1, 0, races="sometimes")


def test_race_kernels_assemble(ptxas, tmp_path) -> None:
    path = tmp_path / "races.ptx"
    path.write_text(RACES)
    r = subprocess.run([ptxas, "--gpu-name", "sm_80", str(path), "-o", str(tmp_path / "r.cubin")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
