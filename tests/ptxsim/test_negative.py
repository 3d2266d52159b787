"""Kernels that misbehave must fail with a PtxSimError naming kernel, line, thread, address."""

from __future__ import annotations

import numpy as np
import pytest

from wiadsl.backends.ptx.sim import PtxSimError, launch
from wiadsl.diagnostics import WiaRuntimeError


def test_out_of_bounds_store(cuda_ptx):
    y = np.zeros(33, np.float32)
    with pytest.raises(PtxSimError) as e:
        launch(cuda_ptx, "oob_store", 2, 32, [y, 33])
    err = e.value
    assert isinstance(err, WiaRuntimeError)
    assert "out-of-bounds global store" in str(err) and "oob_store" in str(err)
    assert "st.global.f32" in str(err)
    assert "block (1, 0, 0) thread (1, 0, 0)" in str(err)
    assert err.address is not None and err.line is not None


def test_misaligned_vector_load(cuda_ptx):
    x, y = np.zeros(64, np.float32), np.zeros(8, np.float32)
    with pytest.raises(PtxSimError, match=r"misaligned global access of 16 bytes.*ld\.global"):
        launch(cuda_ptx, "misaligned_v4", 1, 8, [x, y])


def test_divergent_bar_sync(cuda_ptx):
    y = np.zeros(64, np.float32)
    # threads 16.. skip the barrier and read s[] unsynchronised: the race comes first
    with pytest.raises(PtxSimError, match="read-after-write race on shared"):
        launch(cuda_ptx, "divergent_bar", 1, 64, [y])
    with pytest.raises(PtxSimError, match="divergent barrier.*16 of 64 threads.*exited"):
        launch(cuda_ptx, "divergent_bar", 1, 64, [y], races="off")


def test_early_exit_before_barrier(cuda_ptx):
    y = np.zeros(64, np.float32)
    launch(cuda_ptx, "early_exit_bar", 1, 64, [y, 64])  # no thread exits: fine
    np.testing.assert_array_equal(y, 1)
    with pytest.raises(PtxSimError, match="divergent barrier"):
        launch(cuda_ptx, "early_exit_bar", 1, 64, [y, 40])


def test_uninitialized_shared_read(cuda_ptx):
    y = np.zeros(64, np.float32)
    with pytest.raises(PtxSimError, match="uninitialized shared memory"):
        launch(cuda_ptx, "uninit_shared", 1, 64, [y])
    launch(cuda_ptx, "uninit_shared", 1, 64, [y], check_uninitialized_shared=False)
    np.testing.assert_array_equal(y[:32], 1)


def test_shared_out_of_bounds(cuda_ptx):
    y = np.zeros(32, np.float32)
    launch(cuda_ptx, "shared_oob", 1, 32, [y, 0])
    with pytest.raises(PtxSimError, match=r"out-of-bounds shared load.*0 bytes past the end of variable .*size 128"):
        launch(cuda_ptx, "shared_oob", 1, 32, [y, 1])


def test_store_to_read_only_array(cuda_ptx):
    a = np.ones(8, np.float32)
    b = np.ones(8, np.float32)
    c = np.zeros(8, np.float32)
    c.flags.writeable = False
    with pytest.raises(PtxSimError, match="read-only buffer"):
        launch(cuda_ptx, "vadd", 1, 8, [a, b, c, 8])


def test_bad_launches(cuda_ptx):
    a = np.zeros(4, np.float32)
    with pytest.raises(PtxSimError, match="takes 4 arguments"):
        launch(cuda_ptx, "vadd", 1, 4, [a, a])
    with pytest.raises(PtxSimError, match="no .entry named 'nope'"):
        launch(cuda_ptx, "nope", 1, 4, [])
    with pytest.raises(PtxSimError, match="exceeds 1024"):
        launch(cuda_ptx, "vadd", 1, 2048, [a, a, a, 4])
    with pytest.raises(PtxSimError, match="cannot take an array"):
        launch(cuda_ptx, "vadd", 1, 4, [a, a, a, a])
