"""Elementwise kernels move 16-bit data 128 bits at a time and drop dead loops (issue 22).

f16/bf16 views load and store as ``v4.b32`` (8 halves, computed on as packed pairs
from sm_80, unpacked with ``mov.b32`` below);
a 4-byte view beside them takes two 16-byte accesses per group of 8. The scalar tail
loop is not emitted when the size is a static multiple of the group, nor the vector
loop when the size is below one group. Values are exact against the interpreter on
the simulator (the same f32 ops per element, only the memory access differs).
"""

from __future__ import annotations

import numpy as np
import pytest

from wiadsl.backends.ptx.emit import emit_ptx
from wiadsl.backends.ptx.executor import PlanRun
from wiadsl.backends.ptx.simbackend import SimDevice
from wiadsl.ir.interpreter import run_func
from wiadsl.testing.filecheck import filecheck

from .helpers import assemble, corpus_module, spills

RNG = np.random.default_rng(16)
SOURCES = {
    "f16": "kernel k(input a: f16[N], input b: f16[N], output y: f16[N]) { y = a * b + a; }",
    "bf16": "kernel k(input a: bf16[N], input b: bf16[N], output y: bf16[N]) { y = a * b - a; }",
    "mixed": "kernel k(input a: f16[N], input b: f32[N], output y: f32[N]) { y = cast(a, f32) * b; }",
    "f32": "kernel k(input a: f32[N], input b: f32[N], output y: f32[N]) { y = a * b + a; }",
}
LANES = {"f16": 8, "bf16": 8, "mixed": 8, "f32": 4}


def emitted(name: str, n: int | None, arch: str = "sm_80") -> tuple[str, dict]:
    shapes = None if n is None else {"a": (n,), "b": (n,)}
    return emit_ptx(corpus_module(SOURCES[name]), "k", arch, shapes)


@pytest.mark.parametrize("name,op", [("f16", "mul.rn.f16x2"), ("bf16", "fma.rn.bf16x2")])
def test_16_bit_views_move_128_bits_at_a_time(name: str, op: str) -> None:
    """Loaded words are computed on packed (``test_packed_halves``) and stored as they are."""
    text, plan = emitted(name, 4096)
    assert plan["kernels"][0]["kind"] == "elementwise(v8)"
    filecheck(text, f"""
    CHECK: .entry k_k1_ew
    CHECK: ld.global.v4.b32
    CHECK: ld.global.v4.b32
    CHECK: {op}
    CHECK: st.global.v4.b32
    CHECK-NOT: ld.global.b16
    CHECK-NOT: st.global.b16
    CHECK: ret;
    """)


def test_sm75_unpacks_16_bit_words() -> None:
    """Below sm_80 each lane is computed in f32: words are unpacked and packed again."""
    text, _ = emitted("f16", 4096, "sm_75")
    filecheck(text, """
    CHECK: ld.global.v4.b32
    CHECK-NEXT: mov.b32 {{{%h[0-9]+}}, {{%h[0-9]+}}}
    CHECK: mov.b32 {{%r[0-9]+}}, {{{%h[0-9]+}}, {{%h[0-9]+}}}
    CHECK: st.global.v4.b32
    """)


def test_four_byte_views_beside_16_bit_ones_take_two_accesses() -> None:
    text, _ = emitted("mixed", 4096)
    filecheck(text, """
    CHECK: ld.global.v4.b32
    CHECK: ld.global.v4.f32 {{.*}}, [{{%rd[0-9]+}}];
    CHECK-NEXT: ld.global.v4.f32 {{.*}}, [{{%rd[0-9]+}}+16];
    CHECK: st.global.v4.f32 [{{%rd[0-9]+}}],
    CHECK-NEXT: st.global.v4.f32 [{{%rd[0-9]+}}+16],
    CHECK-NOT: ld.global.f32
    """)


@pytest.mark.parametrize("name", list(SOURCES))
@pytest.mark.parametrize("n", [None, 3, 4096, 4100])
def test_loops_are_emitted_only_when_they_can_run(name: str, n: int | None) -> None:
    """The tail exists unless n is a static multiple of the group; the vector loop
    unless n is static and below one group."""
    text, _ = emitted(name, n)
    lanes = LANES[name]
    assert ("$L_elem" in text) == (n is None or n % lanes != 0), text
    assert ("$L_vec" in text) == (n is None or n >= lanes)


@pytest.mark.parametrize("name", list(SOURCES))
@pytest.mark.parametrize("n", [1, 7, 8, 64, 100, 1029])
def test_values_match_the_interpreter_exactly(name: str, n: int) -> None:
    module = corpus_module(SOURCES[name])
    args = [(RNG.standard_normal(n) * 4).astype(a.type.dtype.numpy) for a in module["k"].args]
    text, plan = emitted(name, n)
    (got,) = PlanRun(plan, SimDevice(text)).run(args)
    (want,) = run_func(module, "k", args)
    np.testing.assert_array_equal(np.asarray(got, np.float64), np.asarray(want, np.float64))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", list(SOURCES))
@pytest.mark.parametrize("n", [None, 4096, 4100])
def test_assembles_without_spills(ptxas: str, name: str, n: int | None, arch: str) -> None:
    text, _ = emitted(name, n, arch)
    rc, log = assemble(ptxas, text, arch)
    assert rc == 0, log
    assert spills(log) and not any(spills(log).values()), log
