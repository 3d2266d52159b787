"""Elementwise kernels use at most 1.2x the registers of nvcc -O3 (issue 22).

Each WIA kernel (f32/f16/bf16: add, a*b+a, relu(a*b+c), a row broadcast, a cast,
exp, sigmoid), emitted as ``wiac -o`` emits it (symbolic shapes, so 64-bit indices),
is assembled by ptxas beside a CUDA C reference doing the same work per thread
(``nvcc_reference``: same vector width, grid-stride loop and tail, same rounding),
compiled by ``nvcc -O3 -ptx``; ptxas -v's register counts are compared per target.
Skips where nvcc or ptxas is missing.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from wiadsl.backends.ptx.emit import emit_ptx

from . import nvcc_reference as ref
from .helpers import assemble, corpus_module, registers

ARCHS = ("sm_80", "sm_90")
LIMIT = 1.2


@functools.cache
def reference_registers(nvcc: str, ptxas: str, arch: str) -> dict[str, int]:
    with tempfile.TemporaryDirectory() as d:
        src, ptx = Path(d) / "ref.cu", Path(d) / "ref.ptx"
        src.write_text(ref.cuda_source())
        p = subprocess.run([nvcc, f"-arch={arch}", "-O3", "-ptx", str(src), "-o", str(ptx)],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        rc, log = assemble(ptxas, ptx.read_text(), arch)
    assert rc == 0, log
    return registers(log)


@pytest.fixture(scope="module")
def nvcc() -> str:
    path = shutil.which("nvcc")
    if path is None:
        pytest.skip("nvcc not found: no CUDA C references to compare registers with")
    return path


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype,op", ref.CASES)
def test_registers_within_1_2x_of_nvcc(nvcc: str, ptxas: str, dtype: str, op: str,
                                       arch: str) -> None:
    want = reference_registers(nvcc, ptxas, arch)[f"ref_{dtype}_{op}"]
    text, plan = emit_ptx(corpus_module(ref.wia_source(dtype, op)), "k", arch, None)
    assert len(plan["kernels"]) == 1
    rc, log = assemble(ptxas, text, arch)
    assert rc == 0, log
    (got,) = registers(log).values()
    assert got <= LIMIT * want, f"{dtype} {op} on {arch}: {got} registers, nvcc -O3 {want}"
