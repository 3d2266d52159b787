"""wgmma.mma_async from shared-memory descriptors: every canonical layout and swizzle, the
accumulator fragment, the dtypes, chaining, and the rules around async results and fences
(hand-written sm_90a PTX; shared-memory images built here from the layouts' definitions)."""

from __future__ import annotations

import numpy as np
import pytest

from wiadsl.backends.ptx.sim import PtxSimError, SimRaceError, launch
from wiadsl.backends.ptx.sim.ptxtypes import f32_to_bf16

from .hopper_kernels import swizzled, wgmma_kernel

IMAGE = 8192
ESIZE = {"f16": 2, "bf16": 2, "tf32": 4, "s8": 1}
KDIM = {"f16": 16, "bf16": 16, "tf32": 8, "s8": 32}
#: swizzle span -> descriptor field (ISA: 1 128B, 2 64B, 3 32B); the row patterns are
#: ``hopper_kernels.swizzled``'s
DESC_SWIZZLE = {0: 0, 32: 3, 64: 2, 128: 1}


def _place(m: np.ndarray, layout: str, esize: int) -> tuple[np.ndarray, int]:
    """Shared-memory image of operand ``m`` [MN rows, K] (raw element bytes, uint8 [.., esize])
    and its descriptor without the start address. ``layout``: ``K`` or ``MN`` major plus the
    swizzle span (``K128``, ``MN0``...)."""
    major, span = ("MN", int(layout[2:])) if layout.startswith("MN") else ("K", int(layout[1:]))
    rows, kdim = m.shape[:2]
    per = 16 // esize                                   # elements per 16-byte unit
    img = np.zeros(IMAGE, np.uint8)
    lbo = sbo = 0
    for r in range(rows):
        for k in range(kdim):
            if major == "K" and not span:               # 8x16B core matrices, K pairs LBO apart
                lbo, sbo = 128, 256
                off = (r // 8) * sbo + (k // per) * lbo + (r % 8) * 16 + (k % per) * esize
            elif major == "K":                          # rows of `span` bytes, 8-row blocks
                sbo = 8 * span
                off = (r // 8) * sbo + (r % 8) * span + k * esize
            elif not span:                              # 8 k-rows x 16B (8 MN elements) cores
                lbo, sbo = 1024, 128
                off = (r // per) * sbo + (k // 8) * lbo + (k % 8) * 16 + (r % per) * esize
            else:                                       # k-rows of `span` bytes of MN
                wide = span // esize                    # MN elements per row
                lbo, sbo = 8 * span * 2, 8 * span
                off = (r // wide) * lbo + (k // 8) * sbo + (k % 8) * span + (r % wide) * esize
            img[off:off + esize] = m[r, k]
    desc = (lbo >> 4) << 16 | (sbo >> 4) << 32 | DESC_SWIZZLE[span] << 62
    return swizzled(img, span), desc


def _raw(x: np.ndarray, dtype: str) -> np.ndarray:
    """Element bytes [..., esize] of ``x`` stored as ``dtype``."""
    if dtype == "f16":
        b = x.astype(np.float16)
    elif dtype == "bf16":
        b = f32_to_bf16(x.astype(np.float32))
    elif dtype == "tf32":
        b = x.astype(np.float32)
    else:
        b = x.astype(np.int8)
    return b.view(np.uint8).reshape(*x.shape, ESIZE[dtype])


def _fragment(out: np.ndarray, n: int, acc: str) -> np.ndarray:
    """D [64, n] from out[thread][register] by the ISA's m64nNk16 accumulator figure."""
    if acc == "f16":
        vals = out.view(np.float16).reshape(128, n // 2).astype(np.float64)
    elif acc == "s32":
        vals = out.view(np.int32).reshape(128, n // 2).astype(np.float64)
    else:
        vals = out.view(np.float32).reshape(128, n // 2).astype(np.float64)
    d = np.full((64, n), np.nan)
    for t in range(128):
        warp, lane = divmod(t, 32)
        for i in range(n // 2):
            row = 16 * warp + lane // 4 + 8 * ((i // 2) % 2)
            col = 8 * (i // 4) + 2 * (lane % 4) + i % 2
            d[row, col] = vals[t, i]
    return d


def _mma(dtype: str, n: int, acc: str, la: str, lb: str, seed: int = 0, **kernel):
    rng = np.random.default_rng(seed)
    k = KDIM[dtype]
    a = rng.integers(-4, 5, (64, k)).astype(np.float64)
    b = rng.integers(-4, 5, (n, k)).astype(np.float64)   # B as N x K (columns of B)
    if dtype == "tf32":   # low mantissa bits that tf32 ignores
        a += 2.0 ** -15 * np.sign(a)
    ia, da = _place(_raw(a, dtype), la, ESIZE[dtype])
    ib, db = _place(_raw(b, dtype), lb, ESIZE[dtype])
    ta, tb = int(la.startswith("MN")), int(lb.startswith("MN"))
    nregs = n // 4 if acc == "f16" else n // 2
    out = np.zeros(128 * nregs, np.uint32)
    text = wgmma_kernel(n, dtype, acc, trans_a=ta, trans_b=tb, **kernel)
    stats = launch(text, "mma", 1, 128, [ia, ib, np.uint64(da), np.uint64(db), out])
    if dtype == "tf32":
        a = np.trunc(a)   # 1 + 2^-15 * x keeps only the high 10 mantissa bits: x
    return _fragment(out, n, acc), a @ b.T, stats


@pytest.mark.parametrize("dtype, n, acc, la, lb", [
    ("f16", 16, "f32", "K128", "K128"),
    ("f16", 16, "f32", "K0", "K0"),
    ("f16", 16, "f32", "K64", "K32"),
    ("f16", 16, "f32", "K128", "MN128"),
    ("f16", 16, "f32", "MN0", "MN64"),
    ("f16", 16, "f16", "K128", "K128"),
    ("bf16", 24, "f32", "MN32", "MN0"),
    ("tf32", 8, "f32", "K128", "K64"),
    ("s8", 16, "s32", "K128", "K0"),
])
def test_layouts_and_dtypes(dtype: str, n: int, acc: str, la: str, lb: str) -> None:
    got, want, stats = _mma(dtype, n, acc, la, lb)
    np.testing.assert_array_equal(got, want)
    assert stats.races == ()


def test_chained_wgmma_accumulates_in_flight() -> None:
    got, want, _ = _mma("f16", 16, "f32", "K128", "MN128", chain=True)
    np.testing.assert_array_equal(got, 2 * want)


def test_reading_the_accumulator_before_wait_group_is_an_error() -> None:
    with pytest.raises(PtxSimError, match="read while the wgmma.mma_async writing it is in flight"):
        _mma("f16", 16, "f32", "K128", "K128", wait=False)


def test_wgmma_without_wgmma_fence_is_an_error() -> None:
    with pytest.raises(PtxSimError, match="without a wgmma.fence"):
        _mma("f16", 16, "f32", "K128", "K128", wgmma_fence=False)


def test_generic_writes_need_fence_proxy_async() -> None:
    with pytest.raises(SimRaceError, match="async-after-generic-write race on shared 'sa'") as err:
        _mma("f16", 16, "f32", "K128", "K128", proxy_fence=False)
    race = err.value.races[0]
    assert "st.shared.u32" in race.earlier.instr and "wgmma.mma_async" in race.later.instr


@pytest.mark.parametrize("bits, message", [(1 << 49, "base offset 1"), (1 << 47, "reserved bits")])
def test_unsupported_descriptor_bits_are_errors(bits: int, message: str) -> None:
    ia = np.zeros(IMAGE, np.uint8)
    out = np.zeros(128 * 8, np.uint32)
    with pytest.raises(PtxSimError, match=message):
        launch(wgmma_kernel(16), "mma", 1, 128,
               [ia, ia.copy(), np.uint64(1 << 62 | bits | 64 << 32), np.uint64(1 << 62 | 64 << 32),
                out])


def test_wgmma_needs_a_whole_warpgroup() -> None:
    ia = np.zeros(IMAGE, np.uint8)
    with pytest.raises(PtxSimError, match="all 128 threads of the warpgroup"):
        launch(wgmma_kernel(16), "mma", 1, 64,
               [ia, ia.copy(), np.uint64(0), np.uint64(0), np.zeros(128 * 8, np.uint32)])


def _two_groups(text: str, wait: str) -> str:
    """The chained kernel with a commit between its two wgmmas and ``wait`` as the wait."""
    first = text.index("wgmma.mma_async")
    second = text.index("wgmma.mma_async", first + 1)
    text = text[:second] + "wgmma.commit_group.sync.aligned;\n    " + text[second:]
    return text.replace("wgmma.wait_group.sync.aligned 0;", wait)


def test_wait_group_keeps_the_newest_groups_in_flight() -> None:
    text = wgmma_kernel(16, chain=True)
    with pytest.raises(PtxSimError, match="in flight"):
        _two_groups_run(_two_groups(text, "wgmma.wait_group.sync.aligned 1;"))
    got, want = _two_groups_run(_two_groups(text, "wgmma.wait_group.sync.aligned 1;\n"
                                                  "    wgmma.wait_group.sync.aligned 0;"))
    np.testing.assert_array_equal(got, 2 * want)


def _two_groups_run(text: str) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    a, b = rng.integers(-4, 5, (64, 16)), rng.integers(-4, 5, (16, 16))
    ia, da = _place(_raw(a, "f16"), "K128", 2)
    ib, db = _place(_raw(b, "f16"), "K128", 2)
    out = np.zeros(128 * 8, np.uint32)
    launch(text, "mma", 1, 128, [ia, ib, np.uint64(da), np.uint64(db), out])
    return _fragment(out, 16, "f32"), (a @ b.T).astype(np.float64)


@pytest.mark.parametrize("wait_first", [True, False])
def test_overwriting_an_operand_needs_the_wait(wait_first: bool) -> None:
    """The wgmma reads its operands until wait_group retires it: a store to them before
    that is a write-after-read race with the wgmma."""
    text = wgmma_kernel(16)
    store = "mov.u32 %r6, sb;\n    setp.eq.u32 %p3, %r1, 0;\n    @%p3 st.shared.u32 [%r6], %r5;\n    "
    anchor = "mul.wide.u32 %rd8" if wait_first else "wgmma.wait_group"
    text = text.replace(anchor, store + anchor)
    if wait_first:
        _two_groups_run(text)
        return
    with pytest.raises(SimRaceError, match="write-after-read race on shared 'sb'") as err:
        _two_groups_run(text)
    assert "wgmma.mma_async" in err.value.races[0].earlier.instr


def test_descriptor_fields_and_addresses() -> None:
    """A K-major 128B-swizzle descriptor decoded, and one element's address by hand: row 9
    is row 1 of the second 8-row block (SBO 1024 on), k 10 is chunk 1 byte 4, and chunk 1
    of pattern row 1 is stored as chunk 1 ^ 1 = 0."""
    from wiadsl.backends.ptx.sim.ops_wgmma import decode_descriptor, operand_addresses

    desc = (1024 >> 4) | 1 << 16 | (1024 >> 4) << 32 | 1 << 62
    assert decode_descriptor(desc) == (1024, 16, 1024, 0, 1)
    addr = operand_addresses(desc, 64, 16, 2, trans=False)
    assert addr[9, 10] == 1024 + 1024 + 128 + 0 * 16 + 4
    assert addr[0, 0] == 1024 and addr[0, 8] == 1024 + 16 and addr[1, 0] == 1024 + 128 + 16


def test_imm_scale_negates_a() -> None:
    got, want, _ = _mma("f16", 16, "f32", "K128", "MN128", scale_a=-1)
    np.testing.assert_array_equal(got, -want)
