"""mbarrier phases, waits and ordering; elect.sync and setmaxnreg (hand-written sm_90a PTX)."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from wiadsl.backends.ptx.sim import SCHEDULES, PtxSimError, SimRaceError, launch

from .hopper_kernels import HANDOFF, PHASES, all_modules


def test_hopper_ptxas(ptxas, tmp_path) -> None:
    """Every hand-written sm_90a module of these tests is valid PTX."""
    for i, text in enumerate(all_modules()):
        src = tmp_path / f"m{i}.ptx"
        src.write_text(text)
        r = subprocess.run([ptxas, "--gpu-name", "sm_90a", str(src), "-o", str(tmp_path / "o.cubin")],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_arrive_then_wait_orders_warps(schedule: str) -> None:
    out = np.zeros(32, np.uint32)
    stats = launch(HANDOFF, "handoff", 1, 64, [out, 1], schedule=schedule)
    np.testing.assert_array_equal(out, 3 * np.arange(32) + 1)
    assert stats.races == ()


def test_reading_without_the_wait_is_a_race() -> None:
    out = np.zeros(32, np.uint32)
    with pytest.raises(SimRaceError, match="read-after-write race on shared 'buf'") as err:
        launch(HANDOFF, "handoff", 1, 64, [out, 0], schedule="lockstep")
    race = err.value.races[0]
    assert "st.shared.u32" in race.earlier.instr and "ld.shared.u32" in race.later.instr
    assert race.earlier.thread[0] < 32 <= race.later.thread[0]


def test_waiting_warp_runs_after_the_arrival_in_every_schedule() -> None:
    """The consumer warp reaches try_wait before the producer arrives (reverse order):
    it blocks instead of spinning, and the values are still right."""
    out = np.zeros(32, np.uint32)
    launch(HANDOFF, "handoff", 1, 64, [out, 1], schedule="reverse")
    np.testing.assert_array_equal(out, 3 * np.arange(32) + 1)


def test_mbarrier_phases() -> None:
    """Pending count and tx-count both gate a phase; parity and state waits (see PHASES)."""
    out = np.zeros(10, np.uint32)
    launch(PHASES, "phases", 1, 1, [out])
    np.testing.assert_array_equal(out, [0, 0, 0, 1, 0, 1, 1, 0, 1, 0])


def test_more_arrivals_than_expected_is_an_error() -> None:
    with pytest.raises(PtxSimError, match="more arrivals than mbarrier.init expected"):
        launch(PHASES, "overarrive", 1, 1, [])


def test_wait_for_a_phase_that_never_completes_is_a_deadlock() -> None:
    with pytest.raises(PtxSimError, match="deadlock: threads wait for an mbarrier phase"):
        launch(PHASES, "hang", 1, 32, [])


def test_use_before_init_is_an_error() -> None:
    with pytest.raises(PtxSimError, match="mbarrier used before mbarrier.init"):
        launch(PHASES, "noinit", 1, 1, [])


def test_use_not_ordered_after_init_is_an_error() -> None:
    """Without the bar.sync after thread 0's init, warp 1 may arrive on it first."""
    text = HANDOFF.replace("    bar.sync 0;\n", "")
    # (warp 1 arriving first, as under the reverse schedule, uses it before the init)
    with pytest.raises(PtxSimError, match="mbarrier.init is not ordered before|before mbarrier.init"):
        launch(text, "handoff", 1, 64, [np.zeros(32, np.uint32), 1])


def test_elect_and_setmaxnreg() -> None:
    out = np.zeros(128, np.uint32)
    launch(PHASES, "elect", 1, 128, [out])
    want = np.zeros(128, np.uint32)
    want[68:96] = 4
    want[96:] = 0
    want[68] |= 256
    want[96] |= 256
    np.testing.assert_array_equal(out, want)


def test_setmaxnreg_needs_the_whole_warpgroup() -> None:
    with pytest.raises(PtxSimError, match="setmaxnreg needs all 128 threads"):
        launch(PHASES, "elect", 1, 64, [np.zeros(128, np.uint32)])
