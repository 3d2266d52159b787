"""Hand-written sm_90a PTX for the mbarrier, TMA and wgmma simulator tests (each is also
assembled with ptxas by ``test_hopper_ptxas``), and the shared-memory swizzle patterns the
TMA and wgmma tests build their expected images with (independent of the simulator's code)."""

from __future__ import annotations

import numpy as np

#: swizzle span in bytes -> the 16-byte chunk permutation of row r (rows of the span's
#: bytes), as CUTLASS draws the patterns: 128B XORs the chunk with r % 8, 64B with
#: (r / 2) % 4, 32B with (r / 4) % 2
SWIZZLE_ROWS = {32: lambda r: (r >> 2) & 1, 64: lambda r: (r >> 1) & 3, 128: lambda r: r & 7}


def swizzled(dense: np.ndarray, span: int) -> np.ndarray:
    """Bytes ``dense`` (uint8) as the swizzle of ``span`` bytes (0: none) lays them out."""
    if not span:
        return dense
    f = SWIZZLE_ROWS[span]
    out = np.zeros_like(dense)
    for o in range(0, len(dense), 16):
        r, c = divmod(o, span)
        q = r * span + 16 * ((c // 16) ^ f(r))
        out[q:q + 16] = dense[o:o + 16]
    return out


HEADER = ".version 8.0\n.target sm_90a\n.address_size 64\n"

# 64 threads: warp 0 writes buf[lane] = 3*lane + 1 and arrives on `bar` (count 32);
# warp 1 waits for phase 0 (unless sync == 0) and copies buf to out.
HANDOFF = HEADER + r"""
.visible .entry handoff(.param .u64 out, .param .u32 sync)
{
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<8>;
    .shared .align 8 .b64 bar;
    .shared .align 16 .b32 buf[32];
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r10, [sync];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, bar;
    mov.u32 %r3, buf;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $L_inited;
    mbarrier.init.shared::cta.b64 [%r2], 32;
$L_inited:
    bar.sync 0;
    setp.ge.u32 %p1, %r1, 32;
    @%p1 bra $L_consumer;
    shl.b32 %r4, %r1, 2;
    add.u32 %r5, %r3, %r4;
    mad.lo.u32 %r6, %r1, 3, 1;
    st.shared.u32 [%r5], %r6;
    mbarrier.arrive.shared::cta.b64 _, [%r2];
    bra.uni $L_done;
$L_consumer:
    setp.eq.u32 %p3, %r10, 0;
    @%p3 bra $L_read;
$L_wait:
    mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r2], 0;
    @!%p2 bra $L_wait;
$L_read:
    sub.u32 %r7, %r1, 32;
    shl.b32 %r8, %r7, 2;
    add.u32 %r9, %r3, %r8;
    ld.shared.u32 %r11, [%r9];
    mul.wide.u32 %rd2, %r7, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r11;
$L_done:
    ret;
}
"""

# One thread walks a barrier through its phases and records what test_wait sees:
# out[0..9] (see test_mbarrier_phases).
PHASES = HEADER + r"""
.visible .entry phases(.param .u64 out)
{
    .reg .pred %p<12>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<8>;
    .shared .align 8 .b64 bar;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, bar;
    mbarrier.init.shared::cta.b64 [%r1], 2;
    mbarrier.test_wait.parity.shared::cta.b64 %p1, [%r1], 0;
    mbarrier.arrive.expect_tx.shared::cta.b64 %rd2, [%r1], 64;
    mbarrier.test_wait.parity.shared::cta.b64 %p2, [%r1], 0;
    mbarrier.arrive.shared::cta.b64 %rd3, [%r1];
    mbarrier.test_wait.parity.shared::cta.b64 %p3, [%r1], 0;
    mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [%r1], 64;
    mbarrier.test_wait.parity.shared::cta.b64 %p4, [%r1], 0;
    mbarrier.test_wait.parity.shared::cta.b64 %p5, [%r1], 1;
    mbarrier.test_wait.shared::cta.b64 %p6, [%r1], %rd2;
    mbarrier.arrive.shared::cta.b64 %rd4, [%r1], 2;
    mbarrier.test_wait.parity.shared::cta.b64 %p7, [%r1], 1;
    mbarrier.test_wait.parity.shared::cta.b64 %p8, [%r1], 0;
    mbarrier.test_wait.shared::cta.b64 %p9, [%r1], %rd4;
    mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%r1], 16;
    mbarrier.arrive.shared::cta.b64 _, [%r1], 2;
    mbarrier.test_wait.parity.shared::cta.b64 %p10, [%r1], 0;
    selp.u32 %r2, 1, 0, %p1;
    st.global.u32 [%rd1], %r2;
    selp.u32 %r2, 1, 0, %p2;
    st.global.u32 [%rd1+4], %r2;
    selp.u32 %r2, 1, 0, %p3;
    st.global.u32 [%rd1+8], %r2;
    selp.u32 %r2, 1, 0, %p4;
    st.global.u32 [%rd1+12], %r2;
    selp.u32 %r2, 1, 0, %p5;
    st.global.u32 [%rd1+16], %r2;
    selp.u32 %r2, 1, 0, %p6;
    st.global.u32 [%rd1+20], %r2;
    selp.u32 %r2, 1, 0, %p7;
    st.global.u32 [%rd1+24], %r2;
    selp.u32 %r2, 1, 0, %p8;
    st.global.u32 [%rd1+28], %r2;
    selp.u32 %r2, 1, 0, %p9;
    st.global.u32 [%rd1+32], %r2;
    selp.u32 %r2, 1, 0, %p10;
    st.global.u32 [%rd1+36], %r2;
    ret;
}

// a count-1 barrier arrived on twice in one phase: an error
.visible .entry overarrive()
{
    .reg .b32 %r<4>;
    .shared .align 8 .b64 bar2;
    mov.u32 %r1, bar2;
    mbarrier.init.shared::cta.b64 [%r1], 1;
    mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%r1], 16;
    mbarrier.arrive.shared::cta.b64 _, [%r1];
    mbarrier.arrive.shared::cta.b64 _, [%r1];
    ret;
}

// a wait for a phase nobody completes: a deadlock error, not an endless loop
.visible .entry hang()
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .shared .align 8 .b64 bar3;
    mov.u32 %r1, bar3;
    mbarrier.init.shared::cta.b64 [%r1], 2;
    mbarrier.arrive.shared::cta.b64 _, [%r1];
$L_spin:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], 0;
    @!%p1 bra $L_spin;
    ret;
}

// arrive on a barrier never initialised
.visible .entry noinit()
{
    .reg .b32 %r<4>;
    .shared .align 8 .b64 bar4;
    mov.u32 %r1, bar4;
    mbarrier.arrive.shared::cta.b64 _, [%r1];
    ret;
}

// setmaxnreg on one warpgroup, then elect.sync among threads 68..127 (warp 2 from lane 4):
// out[t] = elected lane | is-leader << 8
.visible .entry elect(.param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    setmaxnreg.dec.sync.aligned.u32 40;
    setp.lt.u32 %p1, %r1, 68;
    @%p1 bra $L_skip;
    setp.lt.u32 %p1, %r1, 96;
    selp.u32 %r4, 0xfffffff0, 0xffffffff, %p1;
    elect.sync %r2|%p1, %r4;
    selp.u32 %r3, 256, 0, %p1;
    or.b32 %r2, %r2, %r3;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd2, %rd1, %rd2;
    st.global.u32 [%rd2], %r2;
$L_skip:
    ret;
}
"""


def tma_kernel(rank: int = 2, fence: bool = True, box_bytes_param: bool = True) -> str:
    """Thread 0 loads one box with TMA (coordinates c0.., rank ``rank``) into `tile`; all 64
    threads wait for the phase, then copy the raw 8 KiB of `tile` to out (as u32 words)."""
    coords = ", ".join(f"%r{20 + i}" for i in range(rank))
    params = ",\n    ".join(f".param .s32 c{i}" for i in range(rank))
    loads = "\n    ".join(f"ld.param.s32 %r{20 + i}, [c{i}];" for i in range(rank))
    return HEADER + f"""
.visible .entry tma(
    .param .align 64 .b8 tmap[128],
    .param .u64 out,
    .param .u32 nbytes,
    {params}
)
{{
    .reg .pred %p<4>;
    .reg .b32 %r<32>;
    .reg .b64 %rd<8>;
    .shared .align 8 .b64 bar;
    .shared .align 1024 .b8 tile[8192];
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u32 %r9, [nbytes];
    {loads}
    mov.b64 %rd2, tmap;
    cvta.param.u64 %rd2, %rd2;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, bar;
    mov.u32 %r3, tile;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $L_issued;
    mbarrier.init.shared::cta.b64 [%r2], 1;
    {"fence.mbarrier_init.release.cluster;" if fence else ""}
    mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r2], %r9;
    cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r3], [%rd2, {{{coords}}}], [%r2];
$L_issued:
    bar.sync 0;
$L_wait:
    mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r2], 0;
    @!%p2 bra $L_wait;
    mov.u32 %r4, 0;
$L_copy:
    shl.b32 %r5, %r4, 6;
    add.u32 %r5, %r5, %r1;
    shl.b32 %r6, %r5, 2;
    add.u32 %r7, %r3, %r6;
    ld.shared.u32 %r8, [%r7];
    mul.wide.u32 %rd3, %r5, 4;
    add.s64 %rd4, %rd1, %rd3;
    st.global.u32 [%rd4], %r8;
    add.u32 %r4, %r4, 1;
    setp.lt.u32 %p3, %r4, 32;
    @%p3 bra $L_copy;
    ret;
}}
"""


def wgmma_kernel(n: int, dtype: str = "f16", acc: str = "f32", trans_a: int = 0,
                 trans_b: int = 0, proxy_fence: bool = True, wgmma_fence: bool = True,
                 wait: bool = True, chain: bool = False, scale_a: int = 1) -> str:
    """One warpgroup: copy the A and B shared-memory images (``a``, ``b``: 8192 bytes each) to
    `sa`, `sb` with ld.global/st.shared, fence.proxy.async, bar.sync, one m64nNk
    wgmma.mma_async whose descriptors are ``da``/``db`` with the start address of `sa`/`sb`
    added (scale-d 0; ``chain``: a second one with scale-d 1), commit, wait 0, and store
    every accumulator register i of thread t to out[t][i]."""
    k = {"f16": 16, "bf16": 16, "tf32": 8, "s8": 32}[dtype]
    nregs = n // 4 if acc == "f16" else n // 2
    regs = ", ".join(f"%r{100 + i}" for i in range(nregs))
    tail = {"f16": f", {scale_a}, 1, {trans_a}, {trans_b}",
            "bf16": f", {scale_a}, 1, {trans_a}, {trans_b}", "tf32": f", {scale_a}, 1", "s8": ""}[dtype]
    mma = f"wgmma.mma_async.sync.aligned.m64n{n}k{k}.{acc}.{dtype}.{dtype}"
    second = f"{mma} {{{regs}}}, %rd5, %rd6, 1{tail};" if chain else ""
    stores = "\n    ".join(f"st.global.b32 [%rd9+{4 * i}], %r{100 + i};" for i in range(nregs))
    return HEADER + f"""
.visible .entry mma(
    .param .u64 a,
    .param .u64 b,
    .param .u64 da,
    .param .u64 db,
    .param .u64 out
)
.maxntid 128, 1, 1
{{
    .reg .pred %p<4>;
    .reg .b32 %r<{100 + nregs}>;
    .reg .b64 %rd<12>;
    .shared .align 1024 .b8 sa[8192];
    .shared .align 1024 .b8 sb[8192];
    ld.param.u64 %rd1, [a];
    ld.param.u64 %rd2, [b];
    ld.param.u64 %rd5, [da];
    ld.param.u64 %rd6, [db];
    ld.param.u64 %rd7, [out];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    cvta.to.global.u64 %rd7, %rd7;
    mov.u32 %r7, sa;
    shr.u32 %r7, %r7, 4;
    cvt.u64.u32 %rd10, %r7;
    or.b64 %rd5, %rd5, %rd10;
    mov.u32 %r7, sb;
    shr.u32 %r7, %r7, 4;
    cvt.u64.u32 %rd10, %r7;
    or.b64 %rd6, %rd6, %rd10;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, 0;
$L_copy:
    shl.b32 %r3, %r2, 7;
    add.u32 %r3, %r3, %r1;
    shl.b32 %r4, %r3, 2;
    cvt.u64.u32 %rd3, %r4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u32 %r5, [%rd4];
    mov.u32 %r6, sa;
    add.u32 %r6, %r6, %r4;
    st.shared.u32 [%r6], %r5;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.u32 %r5, [%rd4];
    mov.u32 %r6, sb;
    add.u32 %r6, %r6, %r4;
    st.shared.u32 [%r6], %r5;
    add.u32 %r2, %r2, 1;
    setp.lt.u32 %p1, %r2, 16;
    @%p1 bra $L_copy;
    {"fence.proxy.async.shared::cta;" if proxy_fence else ""}
    bar.sync 0;
    {"wgmma.fence.sync.aligned;" if wgmma_fence else ""}
    {mma} {{{regs}}}, %rd5, %rd6, 0{tail};
    {second}
    wgmma.commit_group.sync.aligned;
    {"wgmma.wait_group.sync.aligned 0;" if wait else ""}
    mul.wide.u32 %rd8, %r1, {4 * nregs};
    add.s64 %rd9, %rd7, %rd8;
    {stores}
    ret;
}}
"""


def all_modules() -> list[str]:
    """Every hand-written module (for the ptxas check)."""
    mods = [HANDOFF, PHASES, tma_kernel(2), tma_kernel(3)]
    for dtype, n, acc in (("f16", 16, "f32"), ("f16", 16, "f16"), ("bf16", 24, "f32"),
                          ("tf32", 8, "f32"), ("s8", 16, "s32")):
        mods.append(wgmma_kernel(n, dtype, acc, chain=True))
    mods.append(wgmma_kernel(16, "f16", trans_a=1, trans_b=1))
    return mods
