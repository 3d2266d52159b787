"""Hand-written PTX used by the tests (every module here is also checked with ptxas)."""

from __future__ import annotations

HEADER = ".version 8.0\n.target sm_80\n.address_size 64\n"

FEATURES = HEADER + r"""
// module-scope variables with initializers, dynamic shared memory
.global .align 4 .u32 gtable[4] = {1, 2, 3, 4};
.const .align 4 .f32 cscale = 0f40000000;  /* 2.0 */
.extern .shared .align 16 .b8 dyn[];

.visible .entry feat(
    .param .u64 feat_x,
    .param .u64 feat_y,
    .param .u32 feat_n
)
.maxntid 64, 1, 1
{
    .reg .pred %p<3>;
    .reg .b32 %r<12>;
    .reg .f32 %f<12>;
    .reg .b64 %rd<14>;
    .reg .f64 %fd<4>;
    .local .align 8 .b8 depot[16];

    ld.param.u64 %rd1, [feat_x];
    ld.param.u64 %rd2, [feat_y];
    ld.param.u32 %r1, [feat_n];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ntid.x;
    setp.lt.u32 %p1, %r2, %r1;
    mul.wide.u32 %rd3, %r2, 4;
    add.s64 %rd4, %rd1, %rd3;
    @%p1 ld.global.nc.f32 %f1, [%rd4];
    @!%p1 mov.f32 %f1, 0f00000000;
    add.f32 %f2, %f1, %f1;
    // each thread writes {x, 2x} to dyn[8*tid]
    mul.lo.u32 %r4, %r2, 8;
    mov.u32 %r5, dyn;
    add.u32 %r6, %r5, %r4;
    st.shared.v2.f32 [%r6], {%f1, %f2};
    bar.sync 0;
    add.u32 %r7, %r2, 1;
    rem.u32 %r7, %r7, %r3;
    mul.lo.u32 %r8, %r7, 8;
    add.u32 %r8, %r8, %r5;
    ld.shared.v2.f32 {%f3, %f4}, [%r8];
    ld.shared.f32 %f11, [dyn+4];            // 2 * x[0], symbol+offset address
    sub.f32 %f11, %f11, %f11;
    add.f32 %f3, %f3, %f11;
    ld.const.f32 %f5, [cscale];
    mul.f32 %f6, %f4, %f5;
    add.f32 %f7, %f3, %f6;
    {
        .reg .b32 %t;
        .reg .b64 %g;
        and.b32 %t, %r2, 3;
        mul.wide.u32 %g, %t, 4;
        mov.u64 %rd5, gtable;
        add.s64 %rd5, %rd5, %g;
        ld.global.u32 %r9, [%rd5];
    }
    {
        .reg .f32 %t;        /* same name, another type: renamed per scope */
        cvt.rn.f32.u32 %t, %r9;
        add.f32 %f8, %f7, %t;
    }
    // local-memory round trip through a generic pointer
    mov.u64 %rd6, depot;
    cvta.local.u64 %rd7, %rd6;
    cvt.rn.f64.u32 %fd1, %r2;
    mul.f64 %fd2, %fd1, 0d3FE0000000000000;  // 0.5
    st.f64 [%rd7+8], %fd2;
    ld.local.f64 %fd3, [%rd6+8];
    cvt.rn.f32.f64 %f9, %fd3;
    add.f32 %f10, %f8, %f9;
    @!%p1 bra $L_done;
    add.s64 %rd8, %rd2, %rd3;
    st.global.f32 [%rd8], %f10;
$L_done:
    ret;
}
"""

# elementwise template: d = BODY(a, b) for i < n; one kernel per instruction case
ELEMENTWISE = r"""
.visible .entry {name}(.param .u64 pa, .param .u64 pb, .param .u64 pd, .param .u32 pn)
{{
    .reg .pred %p, %q;
    .reg .{areg} %a, %b;
    .reg .{dreg} %d;
    .reg .b32 %i, %n, %t1;
    .reg .b64 %ra, %rb, %rd, %o;
    ld.param.u64 %ra, [pa];
    ld.param.u64 %rb, [pb];
    ld.param.u64 %rd, [pd];
    ld.param.u32 %n, [pn];
    mov.u32 %i, %tid.x;
    setp.ge.u32 %p, %i, %n;
    @%p bra $L_end;
    cvta.to.global.u64 %ra, %ra;
    mul.wide.u32 %o, %i, {asize};
    add.s64 %ra, %ra, %o;
    add.s64 %rb, %rb, %o;
    ld.global.{aty} %a, [%ra];
    ld.global.{aty} %b, [%rb];
    {body}
    mul.wide.u32 %o, %i, {dsize};
    add.s64 %rd, %rd, %o;
    st.global.{dty} [%rd], %d;
$L_end:
    ret;
}}
"""

# Race and cp.async semantics (test_race_semantics.py).  ``pairs``: thread t stores t to
# cell[t], optionally syncs, then reads cell[t ^ x]; ``clobber``: thread t stores t to
# cell[t & 31] (threads t and t + 32 write one word); ``async_groups``: two commit groups,
# read after ``wait_group 1`` (first landed, second still in flight) and after ``wait_all``;
# ``bytes4``: thread t stores byte t to byte t // 32 of word t % 32 (four warps fill each
# word), then reads the whole word after a barrier.
RACES = HEADER + r"""
.visible .entry pairs(.param .u64 pr_y, .param .u32 pr_xor, .param .u32 pr_sync)
{
    .reg .pred %p<2>;
    .reg .b32 %r<10>;
    .reg .b64 %rd<4>;
    .shared .align 4 .b32 cell[64];
    ld.param.u64 %rd1, [pr_y];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u32 %r1, [pr_xor];
    ld.param.u32 %r2, [pr_sync];
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, cell;
    shl.b32 %r5, %r3, 2;
    add.u32 %r6, %r4, %r5;
    st.shared.u32 [%r6], %r3;
    setp.eq.u32 %p1, %r2, 0;
    @%p1 bra $L_nosync;
    bar.sync 0;
$L_nosync:
    xor.b32 %r7, %r3, %r1;
    shl.b32 %r7, %r7, 2;
    add.u32 %r7, %r4, %r7;
    ld.shared.u32 %r8, [%r7];
    mul.wide.u32 %rd2, %r3, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r8;
    ret;
}

.visible .entry clobber(.param .u64 cl_y)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    .shared .align 4 .b32 cell[32];
    ld.param.u64 %rd1, [cl_y];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    and.b32 %r2, %r1, 31;
    shl.b32 %r2, %r2, 2;
    mov.u32 %r3, cell;
    add.u32 %r3, %r3, %r2;
    st.shared.u32 [%r3], %r1;
    bar.sync 0;
    ld.shared.u32 %r4, [%r3];
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r4;
    ret;
}

.visible .entry bytes4(.param .u64 by_y)
{
    .reg .b32 %r<10>;
    .reg .b64 %rd<4>;
    .shared .align 4 .b8 cell[128];
    ld.param.u64 %rd1, [by_y];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    and.b32 %r2, %r1, 31;
    shl.b32 %r3, %r2, 2;
    shr.u32 %r4, %r1, 5;
    add.u32 %r5, %r3, %r4;
    mov.u32 %r6, cell;
    add.u32 %r7, %r6, %r5;
    st.shared.u8 [%r7], %r1;
    bar.sync 0;
    add.u32 %r8, %r6, %r3;
    ld.shared.u32 %r9, [%r8];
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r9;
    ret;
}

.visible .entry async_groups(.param .u64 ag_src, .param .u64 ag_y)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    .reg .f32 %f<4>;
    .shared .align 16 .b8 buf0[512];
    .shared .align 16 .b8 buf1[512];
    ld.param.u64 %rd1, [ag_src];
    ld.param.u64 %rd2, [ag_y];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    mov.u32 %r1, %tid.x;
    shl.b32 %r2, %r1, 4;
    mov.u32 %r3, buf0;
    add.u32 %r3, %r3, %r2;
    mov.u32 %r4, buf1;
    add.u32 %r4, %r4, %r2;
    mov.f32 %f1, 0fBF800000;
    st.shared.f32 [%r4], %f1;
    cvt.u64.u32 %rd3, %r2;
    add.s64 %rd4, %rd1, %rd3;
    cp.async.ca.shared.global [%r3], [%rd4], 16;
    cp.async.commit_group;
    add.s64 %rd5, %rd4, 512;
    cp.async.cg.shared.global [%r4], [%rd5], 16;
    cp.async.commit_group;
    cp.async.wait_group 1;
    ld.shared.f32 %f2, [%r3];
    ld.shared.f32 %f3, [%r4];
    add.s64 %rd6, %rd2, %rd3;
    st.global.f32 [%rd6], %f2;
    st.global.f32 [%rd6+4], %f3;
    cp.async.wait_all;
    ld.shared.f32 %f3, [%r4];
    st.global.f32 [%rd6+8], %f3;
    ret;
}
"""
