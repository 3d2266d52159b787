"""Packed f16x2/bf16x2 math in the 128-bit elementwise loop (issue 22, ``kernels/packed``).

Two lanes share one b32: add/sub/mul are ``{add,sub,mul}.rn.f16x2`` (bf16: ``.bf16x2``
on sm_90, ``fma.rn.bf16x2`` by 1.0 / -1.0 / -0.0 on sm_80), neg/abs sign-bit ops,
max/min/relu ``.NaN`` forms, a comparison a ``set...u32.f16x2`` mask applied by
``lop3``; other ops run per lane in f32 and are rounded once by ``cvt.rn.f16x2.f32``.
Every result must be bit-identical to the interpreter (each op rounded to the dtype,
never a contracted fma), on NaN, +-inf, +-0, subnormals and overflowing sums too.
"""

from __future__ import annotations

import numpy as np
import pytest

from wiadsl.backends.ptx.emit import emit_ptx
from wiadsl.backends.ptx.executor import PlanRun
from wiadsl.backends.ptx.simbackend import SimDevice
from wiadsl.ir.interpreter import run_func
from wiadsl.ir.numerics import round_bf16
from wiadsl.testing.filecheck import filecheck

from .helpers import assemble, corpus_module, spills

N = 69  # 8 groups of 8 through the vector loop and a tail of 5
#: T is the 16-bit dtype; every kernel is named k
SOURCES = {
    "arith": "kernel k(input a: T[N], input b: T[N], output y: T[N]) { y = (a + b) * a - b; }",
    "signs": "kernel k(input a: T[N], input b: T[N], output y: T[N]) { y = abs(a) * -b; }",
    "minmax": "kernel k(input a: T[N], input b: T[N], output y: T[N]) "
              "{ y = max(a, b) - relu(min(a, b)); }",
    "select": "kernel k(input a: T[N], input b: T[N], output y: T[N]) "
              "{ y = where(a < b, a * b, b); }",
    "logic": "kernel k(input a: T[N], input b: T[N], output y: T[N]) "
             "{ y = where(a >= b && !(a == b * a), a, -b); }",
    "f32_cond": "kernel k(input a: T[N], input b: T[N], input c: f32[N], output y: T[N]) "
                "{ y = where(c > 0.5, a, b); }",
    "scalar": "kernel k(input a: T[N], input s: T, output y: T[N]) { y = a * s + 1.5; }",
    "exp": "kernel k(input a: T[N], input b: T[N], output y: T[N]) { y = exp(a) / (b + 2.0); }",
    "casts": "kernel k(input a: f32[N], input h: T[N], output y: T[N], output z: f32[N]) "
             "{ y = cast(a, T) + h; z = cast(h, f32) * a; }",
    "f16_bf16": "kernel k(input a: f16[N], input h: bf16[N], output y: bf16[N]) "
                "{ y = cast(a, bf16) * h; }",
}
#: kernels whose max/min of zeros of both signs may differ in the zero's sign: NumPy's
#: float16 maximum(-0, +0) is -0, its float32 one (the f32 and bf16 paths) +0
SIGNLESS_ZERO = {"minmax"}
SPECIAL = {
    "f16": [np.nan, np.inf, -np.inf, 0.0, -0.0, 65504.0, -65504.0, 2.0 ** -24, -2.0 ** -24,
            3.0e-5, 2.0 ** -14, 6.1e-5, 1.0, -1.0, 0.5, 60000.0, 1e-3, -7.25],
    "bf16": [np.nan, np.inf, -np.inf, 0.0, -0.0, 3.38e38, -3.38e38, 9.2e-41, -9.2e-41,
             1.1e-38, 1.0, -1.0, 0.5, 2.5e38, 1e-3, -7.25, 1e30, 1.2e-38],
}
RNG = np.random.default_rng(22)


def case(name: str, dtype: str, arch: str, n: int | None = N) -> tuple[object, str, dict]:
    module = corpus_module(SOURCES[name].replace("T", dtype))
    shapes = None if n is None else {a.name_hint: (n,) for a in module["k"].args
                                     if getattr(a.type, "rank", 0) == 1}
    text, plan = emit_ptx(module, "k", arch, shapes)
    return module, text, plan


def inputs(module, dtype: str) -> list[np.ndarray | np.generic]:
    """Specials against specials (shuffled, so each meets many others) and random values."""
    out: list[np.ndarray | np.generic] = []
    for a in module["k"].args:
        dt = a.type.dtype
        if getattr(a.type, "rank", 0) == 0:
            out.append(np.dtype(dt.numpy).type(1.375))
            continue
        special = np.array(SPECIAL["bf16" if str(dt) == "bf16" else "f16"] * 3, np.float64)
        x = np.concatenate([RNG.permutation(special), RNG.standard_normal(N) * 8])[:N]
        x = x.astype(np.float32)
        out.append(round_bf16(x) if str(dt) == "bf16" else x.astype(dt.numpy))
    return out


def vector_loop(text: str) -> str:
    """The body of the 128-bit loop."""
    return text[text.index("$L_vec_1:"):text.index("bra.uni $L_vec_1")]


def same_bits(got, want, signed_zero: bool) -> None:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan], want[~nan])
    if signed_zero:
        np.testing.assert_array_equal(np.signbit(got[~nan]), np.signbit(want[~nan]))


RUNS = [(name, "f16", "sm_80") for name in SOURCES if name != "f16_bf16"]
RUNS += [(name, "bf16", arch) for name in SOURCES for arch in ("sm_80", "sm_90")
         if name != "f16_bf16" or arch == "sm_80"]


@pytest.mark.parametrize("name,dtype,arch", RUNS)
def test_values_are_the_interpreters_bit_for_bit(name: str, dtype: str, arch: str) -> None:
    module, text, plan = case(name, dtype, arch)
    assert plan["kernels"] and "elementwise(v8)" in [
        s["kind"] for b in plan["blocks"] for s in b["steps"] if s["op"] == "launch"]
    args = inputs(module, dtype)
    with np.errstate(all="ignore"):
        want = run_func(module, "k", args)
    got = PlanRun(plan, SimDevice(text)).run(args)
    for g, w in zip(got, want, strict=True):
        same_bits(g, w, name not in SIGNLESS_ZERO)


def test_f16_ops_are_packed_and_never_contracted() -> None:
    _, text, _ = case("arith", "f16", "sm_90")
    filecheck(text, """
    CHECK: $L_vec_1:
    CHECK: ld.global.v4.b32 {%r9, %r10, %r11, %r12}
    CHECK: ld.global.v4.b32 {%r13, %r14, %r15, %r16}
    CHECK-NEXT: add.rn.f16x2 %r17, %r9, %r13;
    CHECK-NEXT: mul.rn.f16x2 %r18, %r17, %r9;
    CHECK-NEXT: sub.rn.f16x2 %r19, %r18, %r13;
    CHECK-NOT: cvt
    CHECK: st.global.v4.b32 [{{%rd[0-9]+}}], {%r19, %r22, %r25, %r28};
    CHECK: bra.uni $L_vec_1
    """)
    loop = vector_loop(text)
    assert "fma" not in loop and "f32" not in loop


@pytest.mark.parametrize("arch,ops", [("sm_80", ["fma.rn.bf16x2"] * 3),
                                      ("sm_90", ["add.rn.bf16x2", "mul.rn.bf16x2",
                                                 "sub.rn.bf16x2"])])
def test_bf16_arithmetic_by_target(arch: str, ops: list[str]) -> None:
    _, text, _ = case("arith", "bf16", arch)
    loop = vector_loop(text)
    assert [line.split()[0] for line in loop.splitlines()
            if "bf16x2" in line][:3] == ops, loop


def test_comparisons_are_masks_applied_by_lop3() -> None:
    """where(a >= b && !(a == b * a), a, -b): two masks, combined bitwise, one lop3."""
    _, text, _ = case("logic", "f16", "sm_80")
    filecheck(text, """
    CHECK: $L_vec_1:
    CHECK: ld.global.v4.b32 {%r9,
    CHECK: ld.global.v4.b32 {%r13,
    CHECK-NEXT: xor.b32 %r17, %r13, -2147450880;
    CHECK-NEXT: set.ge.u32.f16x2 %r19, %r9, %r13;
    CHECK-NEXT: mul.rn.f16x2 %r21, %r13, %r9;
    CHECK-NEXT: set.eq.u32.f16x2 %r20, %r9, %r21;
    CHECK-NEXT: not.b32 %r22, %r20;
    CHECK-NEXT: and.b32 %r23, %r19, %r22;
    CHECK-NEXT: lop3.b32 %r18, %r9, %r17, %r23, 0xE4;
    CHECK-NOT: selp
    CHECK: bra.uni $L_vec_1
    """)


def test_unpacked_ops_are_rounded_once_by_packing() -> None:
    """exp and div run per lane in f32; the two results become one f16x2 by one cvt."""
    _, text, _ = case("exp", "f16", "sm_80")
    loop = vector_loop(text)
    assert loop.count("cvt.rn.f16x2.f32") == 2 * 4  # exp's and the quotient's, 4 words
    assert "cvt.rn.f16.f32" not in loop  # no per-lane round trip


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("name", ["arith", "logic", "scalar", "casts", "exp"])
def test_assembles_without_spills(ptxas: str, name: str, dtype: str, arch: str) -> None:
    _, text, _ = case(name, dtype, arch, None)
    rc, log = assemble(ptxas, text, arch)
    assert rc == 0, log
    assert spills(log) and not any(spills(log).values()), log


def test_sm75_keeps_the_per_lane_path(ptxas: str) -> None:
    """Below sm_80 (no cvt.rn.f16x2.f32, no max.NaN.f16x2) the lanes stay unpacked."""
    _, text, _ = case("arith", "f16", "sm_75", None)
    assert "f16x2" not in text
    assert assemble(ptxas, text, "sm_75")[0] == 0
