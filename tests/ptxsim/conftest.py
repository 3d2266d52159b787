"""Fixtures: CUDA C test kernels compiled to PTX once per session with nvcc."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from .cuda_kernels import CUDA_SOURCE

NVCC_FLAGS = ["-arch=sm_80", "-ptx", "-O3"]


@pytest.fixture(scope="session")
def cuda_ptx(tmp_path_factory) -> str:
    """PTX text of every kernel in ``cuda_kernels.CUDA_SOURCE`` (one nvcc run per session)."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found on PATH: the CUDA C test kernels cannot be compiled to PTX")
    d = tmp_path_factory.mktemp("ptxsim")
    src, out = d / "kernels.cu", d / "kernels.ptx"
    src.write_text(CUDA_SOURCE)
    r = subprocess.run([nvcc, *NVCC_FLAGS, str(src), "-o", str(out)], capture_output=True,
                       text=True, timeout=300)
    if r.returncode != 0:
        pytest.fail(f"nvcc failed:\n{r.stderr}")
    return out.read_text()


@pytest.fixture(scope="session")
def ptxas():
    """Path of ptxas, or skip (used to check that hand-written test PTX is valid PTX)."""
    p = shutil.which("ptxas")
    if p is None:
        pytest.skip("ptxas not found on PATH: cannot validate hand-written PTX")
    return p
