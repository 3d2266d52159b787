"""The ``fold-pool-padding`` pass: a max pool of a ``-inf``-padded copy becomes a max
pool with ``padding`` of the input itself (IR text); the function's values are kept
(interpreter, before vs after, NaN included) and near misses are left alone."""

from __future__ import annotations

import numpy as np
import pytest

from wiadsl.frontend.compile import compile_to_ir
from wiadsl.ir import print_module, run_func, verify
from wiadsl.passes import Remark, optimize
from wiadsl.testing.filecheck import filecheck

PRE = "inline,canonicalize,sccp,simplify-cfg,cse,licm,canonicalize,dce"


def padded_pool(c: int, h: int, w: int, k: int, s: int, pads: tuple[int, int, int, int],
                dtype: str = "f32", fill: str = "(-(1.0 / 0.0))") -> str:
    """A padded max pool as the ONNX importer writes it (pads: top, left, bottom, right)."""
    pt, pl, pb, pr = pads
    hp, wp = h + pt + pb, w + pl + pr
    ho, wo = (hp - k) // s + 1, (wp - k) // s + 1
    return f"""kernel pool(input x: {dtype}[N, {c}, {h}, {w}], output y: {dtype}[N, {c}, {ho}, {wo}]) {{
    p = full([N, {c}, {hp}, {wp}], {fill}, {dtype});
    p[:, :, {pt}:{pt + h}, {pl}:{pl + w}] = x;
    y = max_pool(p, kernel={k}, stride={s});
}}"""


def _run_both(text: str, shape: tuple[int, ...], dtype: str) -> tuple[str, np.ndarray, np.ndarray, list[Remark]]:
    x = np.random.default_rng(0).standard_normal(shape).astype(np.dtype(dtype.replace("f", "float")))
    x.flat[::7] = np.nan  # a NaN still wins the maximum
    before = compile_to_ir(text)
    want = run_func(before, "pool", [x])[0]
    after = compile_to_ir(text)
    remarks: list[Remark] = []
    optimize(after, pipeline=PRE + ",fold-pool-padding,dce", remarks=remarks)
    verify(after)
    return print_module(after), want, run_func(after, "pool", [x])[0], remarks


@pytest.mark.parametrize("c,h,w,k,s,pads,dtype", [
    (3, 7, 33, 3, 2, (1, 1, 1, 1), "f32"),   # ResNet's stem pool, odd sizes
    (1, 1, 1, 3, 1, (1, 1, 1, 1), "f32"),    # one pixel: every window mostly padding
    (2, 9, 9, 3, 2, (0, 0, 1, 1), "f32"),    # end padding only (ceil_mode)
    (2, 8, 8, 2, 2, (1, 0, 0, 1), "f64"),    # asymmetric
    (4, 6, 5, 3, 3, (2, 2, 2, 2), "f16"),    # stride 3, a window reaching 2 past
])
def test_padded_copy_becomes_the_pools_padding(c, h, w, k, s, pads, dtype) -> None:
    text, want, got, remarks = _run_both(padded_pool(c, h, w, k, s, pads, dtype), (2, c, h, w), dtype)
    filecheck(text, f"""
    CHECK: tensor.max_pool %x {{kernel = [{k}, {k}], stride = [{s}, {s}], padding = [{pads[0]}, {pads[1]}, {pads[2]}, {pads[3]}]}}
    CHECK-NOT: tensor.full
    CHECK-NOT: tensor.insert_slice
    """)
    assert any("max pool reads its input in place" in r.message for r in remarks)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("text", [
    padded_pool(2, 5, 5, 3, 2, (1, 1, 1, 1), fill="0.0"),   # zeros take part in a maximum
    padded_pool(2, 5, 5, 2, 1, (2, 2, 0, 0)),               # a window wholly in the band
])
def test_near_misses_are_left_alone(text: str) -> None:
    out, want, got, _ = _run_both(text, (1, 2, 5, 5), "f32")
    filecheck(out, """
    CHECK: tensor.full
    CHECK: tensor.insert_slice
    CHECK: tensor.max_pool {{%[0-9a-z_]+}} {kernel = {{\\[[0-9, ]+\\]}}, stride = {{\\[[0-9, ]+\\]}}}
    """)
    np.testing.assert_array_equal(got, want)
