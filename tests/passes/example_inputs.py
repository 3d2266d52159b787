"""Random, consistently-shaped inputs for the kernels of an example program."""

from __future__ import annotations

import numpy as np

from wiadsl.frontend import ast
from wiadsl.frontend.compile import compile_source
from wiadsl.ir.module import FuncOp
from wiadsl.ir.types import TensorType

EXTENTS = (3, 5, 7, 4, 6, 2)


def kernel_dims(text: str, filename: str) -> dict[str, list[tuple[int | str, ...] | None]]:
    """Per kernel: the source shape of each input parameter (None: scalar or generic)."""
    out: dict[str, list] = {}
    for k in compile_source(text, filename).kernels:
        shapes = []
        for p in k.params:
            if p.direction != "input":
                continue
            t = p.type
            shapes.append(tuple(d.value for d in t.dims) if isinstance(t, ast.TensorType) else None)
        out[k.name] = shapes
    return out


def make_inputs(func: FuncOp, dims: list | None, rng: np.random.Generator) -> list:
    names: dict[str, int] = {}
    args = []
    for i, a in enumerate(func.args):
        t = a.type
        src = dims[i] if dims is not None and i < len(dims) else None
        if isinstance(t, TensorType):
            shape = []
            for j, d in enumerate(t.shape):
                s = src[j] if src is not None and j < len(src) else None
                if d is not None:
                    shape.append(d)
                elif isinstance(s, str):
                    shape.append(names.setdefault(s, EXTENTS[len(names) % len(EXTENTS)]))
                else:
                    shape.append(EXTENTS[j % 3])
            shape = tuple(shape)
        else:
            shape = ()
        dt = t.dtype.numpy if hasattr(t, "dtype") else np.dtype(np.int64)
        if dt.kind == "f":
            v = rng.standard_normal(shape)
            v = np.abs(v) + 0.5 if not shape else v
        elif dt.kind == "b":
            v = rng.random(shape) > 0.5
        else:
            v = rng.integers(1, 4, shape)
        v = np.asarray(v).astype(dt)
        args.append(v if shape else v[()])
    return args
