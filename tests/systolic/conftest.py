"""Shared helpers: run a kernel on the systolic target and on the reference interpreter."""

from __future__ import annotations

import numpy as np
import pytest

import wiadsl


def both(src: str, kernel: str, *args: object, **options: object) -> tuple[object, object, dict]:
    """(systolic result, interpreter result, systolic stats) of one call."""
    sys_k = wiadsl.jit(src, kernel, target="systolic", **options)
    ref_k = wiadsl.jit(src, kernel, target="interp")
    out = sys_k(*args)
    return out, ref_k(*args), dict(sys_k.stats)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)
