"""WIADSL_ISA: CPU code built for a lower ISA level of the host (target.py), so one
machine runs the code paths of the other hosts. Each level is checked in a fresh
process (``host()`` is read once per process), on the features the level leaves,
the instructions the code uses and the results against NumPy."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from wiadsl.backends.llvm.qgemm_vnni import vnni_bits
from wiadsl.backends.llvm.target import ISA_LEVELS, host, restrict_features

FEATURES = "+avx,+avx2,+avx512f,+avx512bw,+avx512vl,+avx512vnni,+avxvnni,+fma,-amx-tile,+sse4.2"

CHILD = r"""
import json, subprocess, sys, numpy as np, wiadsl
from wiadsl.backends.llvm.target import host
from wiadsl.backends.llvm.qgemm_vnni import vnni_bits
src = '''kernel f(input a: f32[N], input b: f32[N], output c: f32[N]) { c = relu(a * b + 1.0); }
kernel q(input a: i8[M, K], input b: i8[K, N], output y: i32[M, N]) { y = cast(a, i32) @ cast(b, i32); }'''
mod = wiadsl.jit(src)
rng = np.random.default_rng(0)
a, b = rng.standard_normal(1000).astype(np.float32), rng.standard_normal(1000).astype(np.float32)
qa = rng.integers(-128, 128, (33, 129)).astype(np.int8)
qb = rng.integers(-128, 128, (129, 19)).astype(np.int8)
ok = bool(np.allclose(mod.f(a, b), np.maximum(a * b + np.float32(1), 0), rtol=1e-6, atol=1e-6) and
          np.array_equal(mod.q(qa, qb), qa.astype(np.int32) @ qb.astype(np.int32)))
asm = subprocess.run([sys.executable, "-m", "wiadsl", "-", "--kernel", "f", "-D", "N=1000",
                      "--emit", "asm", "-O2"], input=src, capture_output=True, text=True,
                     check=True).stdout
h = host()
print(json.dumps({"bits": h.vector_bits, "vnni": vnni_bits(h.features), "ok": ok,
                  "zmm": "zmm" in asm}))
"""


def test_restricting_turns_off_the_features_above_the_level():
    avx2 = restrict_features(FEATURES, "avx2").split(",")
    assert avx2 == ["+avx", "+avx2", "-avx512f", "-avx512bw", "-avx512vl", "-avx512vnni",
                    "-avxvnni", "+fma", "-amx-tile", "+sse4.2"]
    assert vnni_bits(",".join(avx2)) == 0
    avx512 = restrict_features(FEATURES, "avx512")
    assert "+avx512f" in avx512.split(",") and vnni_bits(avx512) == 0


def _child(level: str, tmp_path) -> subprocess.CompletedProcess:
    env = {**os.environ, "WIADSL_ISA": level, "WIADSL_CACHE_DIR": str(tmp_path / level)}
    return subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                          env=env, timeout=300)


@pytest.mark.skipif("+avx2" not in host().features.split(","), reason="needs an AVX2 host")
@pytest.mark.parametrize("level", sorted(ISA_LEVELS))
def test_a_level_builds_and_runs_that_hosts_code(level, tmp_path):
    if level == "avx512" and not host().avx512:
        pytest.skip("needs an AVX-512 host")
    done = _child(level, tmp_path)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.splitlines()[-1])
    assert got["ok"]
    assert got["vnni"] == 0
    assert got["bits"] == (256 if level == "avx2" else 512)
    assert got["zmm"] == (level == "avx512")


@pytest.mark.parametrize("level, message", [
    ("sse9", "WIADSL_ISA='sse9' is not an ISA level; use one of avx2, avx512 or native"),
])
def test_an_unknown_level_is_a_usage_error(level, message, tmp_path):
    done = _child(level, tmp_path)
    assert done.returncode != 0
    assert message in done.stderr
