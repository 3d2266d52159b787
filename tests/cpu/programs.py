"""Random inputs for any kernel signature, and the example programs, for backend tests."""

from __future__ import annotations

import pathlib

import numpy as np

from wiadsl.dtypes import DType
from wiadsl.signature import KernelSignature

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.wia"))


def random_value(rng: np.random.Generator, dtype: DType, shape: tuple[int, ...]) -> np.ndarray:
    if dtype is DType.BOOL:
        return rng.random(shape) < 0.5
    if dtype.is_int:
        return rng.integers(-5, 6, shape).astype(dtype.numpy)
    return (rng.standard_normal(shape)).astype(dtype.numpy)


def random_inputs(sig: KernelSignature, rng: np.random.Generator,
                  sizes: dict[str, int] | None = None) -> list[np.ndarray]:
    """One array per input: named dims share a random size (2..6 unless given);
    untyped ``tensor`` params get f32 matrices."""
    dims: dict[str, int] = dict(sizes or {})
    out = []
    for p in sig.inputs:
        if p.dims is None:
            out.append(random_value(rng, DType.F32, (3, 4)))
            continue
        shape = []
        for d in p.dims:
            if isinstance(d, str):
                dims.setdefault(d, int(rng.integers(2, 7)))
                shape.append(dims[d])
            else:
                shape.append(d)
        value = random_value(rng, p.dtype, tuple(shape))  # type: ignore[arg-type]
        if p.dtype is not None and p.dtype.is_float and "scale" in p.name.lower():
            value = np.abs(value) + np.asarray(0.5, value.dtype)
        out.append(value if shape else np.asarray(value))
    return out
