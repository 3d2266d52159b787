"""``noalias`` on outlined loops' buffer pointers (codegen.py ``mark_distinct_buffers``):
an outlined function's buffer argument gets it when every buffer argument's origin is
known and no other one shares it, at every call site; a function merged from two
loops on other buffers (two call sites, two origins per argument) gets none. LLVM
text, CHECK lines; the results of both against NumPy."""

from __future__ import annotations

import re

import numpy as np

import wiadsl
from tests.loops.test_merge_functions import outlined
from wiadsl.backends.llvm.codegen import ModuleEmitter
from wiadsl.backends.llvm.target import host
from wiadsl.testing.filecheck import filecheck


def _defines(module) -> dict[str, str]:
    text = str(ModuleEmitter(module, "m", host().triple).ll)
    return {m.group(1): m.group(0) for m in re.finditer(r'define internal i32 @"wia\.(f\.par\d+)"\(.*', text)}


def test_loops_on_buffers_of_their_own_take_noalias() -> None:
    _, module = outlined([(4, 8), (4, 8)], "parallelize{min_cost=0}")
    defines = _defines(module)
    assert sorted(defines) == ["f.par0", "f.par1"]
    for line in defines.values():
        # CHECK: the input's and the output's data pointers, not the arena or the results
        filecheck(line, """
        CHECK: (ptr %".1", i64 %".2", i64 %".3", ptr noalias %".4", i64 %".5", i64 %".6", ptr noalias %".7", i64 %".8", i64 %".9", ptr %".10")
        """)


def test_a_function_merged_from_loops_on_other_buffers_takes_none() -> None:
    _, module = outlined([(4, 8), (4, 8)])  # merged: called on (a, y) and on (b, z)
    (line,) = _defines(module).values()
    assert "noalias" not in line


def test_both_compute_what_numpy_does() -> None:
    src = ("kernel f(input a: f32[N], input b: f32[N], output y: f32[N], output z: f32[N]) "
           "{ y = relu(a) * 2.0; z = relu(b) + a; }")
    rng = np.random.default_rng(5)
    for n in (1, 7, 33, 129, 1 << 20):
        a, b = rng.standard_normal(n, np.float32), rng.standard_normal(n, np.float32)
        y, z = wiadsl.jit(src, "f")(a, b)
        np.testing.assert_allclose(y, np.maximum(a, 0) * 2, rtol=1e-6)
        np.testing.assert_allclose(z, np.maximum(b, 0) + a, rtol=1e-6)
