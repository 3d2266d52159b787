"""TMA loads (cp.async.bulk.tensor): box layout, out-of-bounds zero fill, the swizzle
patterns, tensor map validation, transaction bytes and ordering (hand-written sm_90a PTX)."""

from __future__ import annotations

import numpy as np
import pytest

from wiadsl.backends.ptx.sim import (
    PtxSimError,
    SimRaceError,
    TensorMap,
    TensorMapArg,
    launch,
    tensormap,
)

from .hopper_kernels import swizzled, tma_kernel

TILE = 8192
#: swizzle mode (CUtensorMapSwizzle) -> its span in bytes
SPAN = {0: 0, 1: 32, 2: 64, 3: 128}


def _box(x: np.ndarray, coords: tuple[int, ...], box: tuple[int, ...]) -> np.ndarray:
    """The box of ``x`` (NumPy axes outermost first; coords/box innermost first), 0 outside."""
    out = np.zeros(box[::-1], x.dtype)
    src = [slice(max(c, 0), min(c + b, d)) for c, b, d in zip(coords[::-1], box[::-1], x.shape)]
    dst = [slice(s.start - c, s.stop - c) for s, c in zip(src, coords[::-1])]
    if all(s.stop > s.start for s in src):
        out[tuple(dst)] = x[tuple(src)]
    return out


def _run(tm: TensorMap, x: np.ndarray, coords: tuple[int, ...], nbytes: int | None = None,
         text: str | None = None, **opts) -> np.ndarray:
    out = np.zeros(TILE // 4, np.uint32)
    ptx = text or tma_kernel(tm.rank)
    args = [TensorMapArg(x, tm), out, tm.box_bytes if nbytes is None else nbytes, *coords]
    # the kernel copies the whole tile, past the box: bytes never written are read too
    launch(ptx, "tma", 1, 64, args, check_uninitialized_shared=False, **opts)
    return out.view(np.uint8)


@pytest.mark.parametrize("mode, box0", [(0, 64), (1, 16), (2, 32), (3, 64)])
def test_2d_box_with_edges_and_swizzle(mode: int, box0: int) -> None:
    rng = np.random.default_rng(mode)
    x = rng.standard_normal((50, 104)).astype(np.float16)   # row stride 208 bytes
    tm = TensorMap(0, 2, (104, 50), (208,), (box0, 16), swizzle=mode)
    coords = (104 - box0 // 2, 40)                          # past both edges
    got = _run(tm, x, coords)
    want = swizzled(np.frombuffer(_box(x, coords, tm.box).tobytes(), np.uint8), SPAN[mode])
    np.testing.assert_array_equal(got[:tm.box_bytes], want)


def test_negative_coordinates_fill_zeros() -> None:
    x = np.arange(1, 33 * 16 + 1, dtype=np.float32).reshape(33, 16)
    tm = TensorMap(0, 4, (16, 33), (64,), (8, 8))
    got = _run(tm, x, (-3, -5)).view(np.float32)[:64].reshape(8, 8)
    np.testing.assert_array_equal(got, _box(x, (-3, -5), (8, 8)))
    assert (got[:5] == 0).all() and (got[:, :3] == 0).all() and got[5, 3] == x[0, 0]


def test_3d_box() -> None:
    x = np.arange(3 * 5 * 8, dtype=np.float32).reshape(3, 5, 8) + 1
    tm = TensorMap(0, 4, (8, 5, 3), (32, 160), (8, 4, 2))
    got = _run(tm, x, (0, 3, 2)).view(np.float32)[:64].reshape(2, 4, 8)
    np.testing.assert_array_equal(got, _box(x, (0, 3, 2), (8, 4, 2)))


@pytest.mark.parametrize("delta", [-16, 16])
def test_tx_bytes_must_match_the_box(delta: int) -> None:
    """expect_tx of other than the box's bytes never completes the phase."""
    x = np.zeros((16, 64), np.float16)
    tm = TensorMap(0, 2, (64, 16), (128,), (64, 16), swizzle=3)
    with pytest.raises(PtxSimError, match="deadlock: threads wait for an mbarrier phase"):
        _run(tm, x, (0, 0), nbytes=tm.box_bytes + delta)


def test_missing_fence_mbarrier_init_is_an_error() -> None:
    x = np.zeros((16, 64), np.float16)
    tm = TensorMap(0, 2, (64, 16), (128,), (64, 16))
    with pytest.raises(PtxSimError, match="no fence.mbarrier_init or fence.proxy.async"):
        _run(tm, x, (0, 0), text=tma_kernel(2, fence=False))


def test_reading_before_the_phase_completes_is_a_race() -> None:
    x = np.ones((16, 64), np.float16)
    tm = TensorMap(0, 2, (64, 16), (128,), (64, 16), swizzle=3)
    lines = tma_kernel(2).splitlines()
    text = "\n".join(ln for ln in lines if "try_wait" not in ln and "@!%p2 bra $L_wait" not in ln)
    with pytest.raises(SimRaceError, match="read-after-write race on shared 'tile'") as err:
        _run(tm, x, (0, 0), text=text)
    assert "cp.async.bulk.tensor" in err.value.races[0].earlier.instr


def test_destination_must_hold_the_whole_swizzle_pattern() -> None:
    x = np.zeros((8, 64), np.float16)
    tm = TensorMap(0, 2, (64, 8), (128,), (64, 8), swizzle=3)
    text = tma_kernel(2).replace("mov.u32 %r3, tile;", "mov.u32 %r3, tile;\n    add.u32 %r3, %r3, 128;")
    with pytest.raises(PtxSimError, match="not 1024-byte aligned"):
        _run(tm, x, (0, 0), text=text)


@pytest.mark.parametrize("change, message", [
    (dict(strides=(200,)), "multiple of 16"),
    (dict(box=(64, 300)), "box dim 1 = 300"),
    (dict(box=(4, 16)), "not a multiple of 16"),
    (dict(swizzle=2), "exceeds the 64-byte swizzle span"),
])
def test_invalid_tensor_maps_are_rejected(change: dict, message: str) -> None:
    base = dict(address=0, elem_bytes=2, dims=(104, 50), strides=(208,), box=(64, 16), swizzle=3)
    with pytest.raises(ValueError, match=message):
        tensormap.validate(TensorMap(**{**base, **change}))


def test_encoding_round_trips() -> None:
    tm = TensorMap(1 << 40, 2, (104, 50, 1 << 32), (208, 208 * 50), (64, 16, 2), (1, 1, 1), 3, 6)
    assert tensormap.decode(tensormap.encode(tm)) == tm
    with pytest.raises(ValueError, match="not a simulator tensor map"):
        tensormap.decode(bytes(128))
