"""PTX backend tests: the ``gpu`` marker, ptxas discovery, and the ``ptxsim`` target.

Tests marked ``gpu`` run only where cuda-python finds a GPU, or on the simulator when
``WIADSL_GPU_TARGET=ptxsim`` (a dry run of them, ``helpers.GPU_TARGET``); the rest need
no GPU.
ptxas tests skip (saying why) where no ptxas is installed.
"""

from __future__ import annotations

import functools
import shutil

import pytest

from wiadsl.runtime.backend import TARGETS

# The registry file is owned elsewhere; the tests reach the simulator target through it.
TARGETS.setdefault("ptxsim", "wiadsl.backends.ptx.simbackend:BACKEND")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs an NVIDIA GPU and cuda-python (skipped elsewhere)")


@functools.cache
def gpu_available() -> bool:
    from .helpers import GPU_TARGET
    if GPU_TARGET == "ptxsim":
        return True
    try:
        from wiadsl.backends.ptx.cuda import driver
        driver()
        return True
    except Exception:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip = pytest.mark.skip(reason="no NVIDIA GPU with cuda-python on this machine")
    for item in items:
        if "gpu" in item.keywords and not gpu_available():
            item.add_marker(skip)


@pytest.fixture(scope="session")
def ptxas() -> str:
    path = shutil.which("ptxas") or (
        "/usr/local/cuda/bin/ptxas" if shutil.os.path.exists("/usr/local/cuda/bin/ptxas") else None)
    if path is None:
        pytest.skip("ptxas not found: PTX is emitted but not assembled here")
    return path
