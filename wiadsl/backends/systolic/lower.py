"""Group + concrete operands -> one assembly section (declarations and tiled body).

``lower_group`` sees the actual operand arrays (so every extent is static), picks
the DRAM views of the product and of each epilogue operand, and asks ``tiling``
for the instruction stream. It returns None when the group cannot run as one
section with these shapes (an empty extent, or an epilogue operand that would
grow the result); the caller then runs the group's ops on the host. Row groups
(reductions, pools, re-layouts) lower in ``rowlower.py``.

Invariant: the section's ``in`` DRAM buffers are exactly the keys of
``Lowered.inputs`` and its single ``out`` buffer is ``Lowered.output``.
"""

from __future__ import annotations

from math import prod
from typing import Any

import numpy as np

from ...dtypes import DType
from ...ir.core import Value
from ...ir.ops_tensor import matmul_shape
from .config import ArrayConfig
from .epilogue import Epilogue, External
from .isa import Dram, Section, View
from .lowered import Lowered, Names, describe, invariance
from .plan import Group, dtype_of
from .rowgroup import RowGroup
from .rowlower import lower_rows
from .tiling import Gemm, emit_gemm, emit_vector
from .views import Relayout, perm_index


def _product(group: Group, a: np.ndarray, b: np.ndarray, names: Names
             ) -> tuple[Gemm, list[View], tuple[int, ...], str, tuple[int, int, int]] | None:
    """The GEMM of a product: its spec, views, IR result shape, view kind for the
    result and epilogue operands, and the 3-D result view shape."""
    lhs_n, rhs_n = names(group.lhs, group.lhs.name_hint), names(group.rhs, group.rhs.name_hint)  # type: ignore[union-attr]
    out_n = names(group.output, group.output.name_hint)
    dtype = dtype_of(group.lhs)  # type: ignore[arg-type]
    if group.product == "matmul":
        # a and b are arrays, so every extent is known (the filter only narrows the type)
        out_shape = tuple(int(d) for d in matmul_shape(a.shape, b.shape) if d is not None)
        a2 = a.shape if a.ndim > 1 else (1, *a.shape)
        b2 = b.shape if b.ndim > 1 else (*b.shape, 1)
        batch = tuple(np.broadcast_shapes(a2[:-2], b2[:-2]))
        (m, k), n, nb = a2[-2:], b2[-1], prod(batch)
        a_b, b_b = prod(a2[:-2]) > 1, prod(b2[:-2]) > 1
        # an operand without batch extents is one matrix that every batch reuses
        a_t = (*batch, m, k) if a_b else a.shape
        b_t = (*batch, k, n) if b_b else b.shape
        views = [View(f"{lhs_n}.l", "mat", lhs_n, (("target", a_t), ("shape", (nb if a_b else 1, m, k)))),
                 View(f"{rhs_n}.r", "mat", rhs_n, (("target", b_t), ("shape", (nb if b_b else 1, k, n)))),
                 View(f"{out_n}.o", "mat", out_n, (("target", out_shape), ("shape", (nb, m, n))))]
        gemm = Gemm(nb, m, k, n, views[0].name, views[1].name, views[2].name, a_b, b_b, dtype)  # type: ignore[arg-type]
        return gemm, views, out_shape, "mat", (nb, m, n)
    (sh, sw), (ph, pw) = group.attrs["stride"], group.attrs["padding"]
    n_, c, h, w = a.shape
    o, c2, kh, kw = b.shape
    ho, wo = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
    if c != c2 or ho < 1 or wo < 1:
        return None
    p, q = n_ * ho * wo, c * kh * kw
    views = [View(f"{lhs_n}.l", "im2col", lhs_n, (("kernel", (kh, kw)), ("stride", (sh, sw)),
                                                  ("padding", (ph, pw)), ("shape", (1, p, q)))),
             View(f"{rhs_n}.r", "convw", rhs_n, (("shape", (1, q, o)),)),
             View(f"{out_n}.o", "convout", out_n, (("target", (n_, o, ho, wo)), ("shape", (1, p, o))))]
    gemm = Gemm(1, p, q, o, views[0].name, views[1].name, views[2].name, False, False, dtype)  # type: ignore[arg-type]
    return gemm, views, (n_, o, ho, wo), "convout", (1, p, o)


def _relaid(x: np.ndarray, rel: Relayout | None) -> np.ndarray:
    if rel is None:
        return x
    return np.transpose(x, rel.ints) if rel.kind == "transpose" else x.reshape(rel.ints)


def _ext_view(name: str, kind: str, dram: str, rel: Relayout | None, source: tuple[int, ...],
              target: tuple[int, ...], shape: tuple[int, int, int]) -> View:
    """An epilogue operand's view: broadcast to the result (``kind``: mat or convout),
    through a ``perm`` view when it is read through a re-layout."""
    if rel is None:
        return View(name, kind, dram, (("target", target), ("shape", shape)))
    split, axes = rel.read(source)
    return View(name, "perm", dram, (("split", split), ("axes", axes), ("target", target),
                                     ("shape", shape)))


def _view_index(view: View, source: tuple[int, ...]) -> np.ndarray:
    """Flat source index of each element of an operand view [B, R, C]."""
    if view.kind == "perm":
        return perm_index(tuple(source), *(view.param(k) for k in ("split", "axes", "target",
                                                                    "shape")))
    idx = np.broadcast_to(np.arange(prod(source)).reshape(source), view.param("target"))
    if view.kind == "convout":
        idx = idx.transpose(0, 2, 3, 1)
    return idx.reshape(view.shape)


def lower_group(group: Group, config: ArrayConfig, env: dict[int, Any], name: str
                ) -> Lowered | None:
    """The section for ``group`` with operands from ``env`` (value id -> array)."""
    if isinstance(group, RowGroup):
        return lower_rows(group, config, env, name)
    names = Names()
    drams: list[Dram] = []
    views: list[View] = []
    inputs: dict[str, Value | np.ndarray] = {}

    def add_input(value: Value | np.ndarray, dtype: DType, hint: str | None) -> str:
        array = np.asarray(env[id(value)] if isinstance(value, Value) else value)
        dram = names(value, hint)
        if dram not in inputs:
            inputs[dram] = value
            drams.append(Dram(dram, dtype, tuple(array.shape), "in"))
        return dram

    sources = [np.asarray(env[id(v)] if isinstance(v, Value) else v) for v in group.externals]
    # what each external is after the re-layout it is read through (shapes only)
    ext_arrays = [_relaid(x, group.ext_relayouts.get(i)) for i, x in enumerate(sources)]
    if group.product is not None:
        a, b = np.asarray(env[id(group.lhs)]), np.asarray(env[id(group.rhs)])
        if 0 in a.shape or 0 in b.shape:
            return None
        add_input(group.lhs, dtype_of(group.lhs), group.lhs.name_hint)  # type: ignore[arg-type, union-attr]
        add_input(group.rhs, dtype_of(group.rhs), group.rhs.name_hint)  # type: ignore[arg-type, union-attr]
        made = _product(group, a, b, names)
        if made is None:
            return None
        gemm, pviews, out_shape, ext_kind, shape3 = made
        views += pviews
    else:
        try:
            out_shape = tuple(np.broadcast_shapes(*(x.shape for x in ext_arrays)))
        except ValueError:
            return None
        if not out_shape or 0 in out_shape:
            return None
        ext_kind, shape3 = "mat", (1, prod(out_shape[:-1]), out_shape[-1])
    try:
        if tuple(np.broadcast_shapes(out_shape, *(x.shape for x in ext_arrays))) != out_shape:
            return None
    except ValueError:
        return None
    externals = []
    for i, (value, dtype) in enumerate(zip(group.externals, group.ext_dtypes)):
        hint = value.name_hint if isinstance(value, Value) else None
        dram = add_input(value, dtype, hint or f"k{i}")
        view = _ext_view(f"{dram}.x{i}", ext_kind, dram, group.ext_relayouts.get(i),
                         tuple(sources[i].shape), out_shape, shape3)
        views.append(view)
        rows_inv, cols_inv = invariance(_view_index(view, sources[i].shape))
        externals.append(External(view.name, dtype, rows_inv, cols_inv))
    out_dtype = group.steps[-1].dtype if group.steps else group.product_dtype
    out = names(group.output, group.output.name_hint)
    rel = group.out_relayout
    final = rel.apply(out_shape) if rel is not None else out_shape
    drams.append(Dram(out, out_dtype, final, "out"))  # type: ignore[arg-type]
    epi = Epilogue(tuple(group.steps), tuple(externals), out_dtype)  # type: ignore[arg-type]
    if group.product is not None:
        buffers, body = emit_gemm(config, gemm, epi)
    else:
        if rel is not None:  # written through a perm view of the re-layout's result
            split, axes = rel.write(out_shape)
            views.append(View(f"{out}.o", "perm", out, (("split", split), ("axes", axes),
                                                        ("target", out_shape), ("shape", shape3))))
        else:
            views.append(View(f"{out}.o", "mat", out, (("target", out_shape), ("shape", shape3))))
        buffers, body = emit_vector(config, f"{out}.o", shape3, epi)
    section = Section(name, group.placement, describe(group), tuple(drams), tuple(views),
                      tuple(buffers), tuple(body))
    return Lowered(section, inputs, out)
