"""Fusion with dynamic extents: only provably equal extents are matched.

Each program is run in the interpreter before and after ``fuse`` on inputs where
an operand's dynamic extent is 1 at run time (so the unfused program broadcasts
it up), and on inputs where the extents agree."""

from __future__ import annotations

import numpy as np
import pytest

from wiadsl.ir import parse_module, print_module, run_func
from wiadsl.passes import Remark, optimize
from wiadsl.passes.extents import Extents, fits

T = "tensor<?x?xf32>"

REDUCE_EPILOGUE = f"""func @g(%x: {T}, %c: {T}) -> (tensor<?x1xf32>, {T}) attributes {{kernel}} {{
^entry:
  %s = tensor.reduce_sum %x {{axes = [1], keepdims}} : {T} -> tensor<?x1xf32>
  %d = tensor.div %x, %s : ({T}, tensor<?x1xf32>) -> {T}
  %e = tensor.mul %d, %c : {T}
  return %s, %e : tensor<?x1xf32>, {T}
}}"""

MATMUL_BIAS = f"""func @g(%x: {T}, %w: {T}, %b: tensor<?xf32>) -> {T} attributes {{kernel}} {{
^entry:
  %h = tensor.matmul %x, %w : {T}
  %y = tensor.add %h, %b : ({T}, tensor<?xf32>) -> {T}
  %r = tensor.relu %y : {T}
  return %r : {T}
}}"""


def agree(text: str, args: list[np.ndarray], pipeline: str = "fuse") -> tuple[str, list[Remark]]:
    """Run ``text`` before and after ``pipeline``; assert equal results; the IR after."""
    before = run_func(parse_module(text), "g", args)
    module = parse_module(text)
    remarks: list[Remark] = []
    optimize(module, pipeline=pipeline, remarks=remarks)
    after = run_func(module, "g", args)
    for a, b in zip(before, after, strict=True):
        assert np.shape(a) == np.shape(b)
        np.testing.assert_allclose(b, a, rtol=1e-6)
    return print_module(module), remarks


def rand(*shape: int) -> np.ndarray:
    return np.random.default_rng(sum(shape)).uniform(0.5, 2.0, shape).astype(np.float32)


@pytest.mark.parametrize("xshape", [(3, 1), (3, 5)])
def test_reduce_epilogue_operand_of_unknown_extent_is_not_fused(xshape) -> None:
    # x's row extent is 1 at run time while c's is 5: the unfused program
    # broadcasts d up; a fused_reduce over broadcast(x, c) would sum 5 copies.
    out, remarks = agree(REDUCE_EPILOGUE, [rand(*xshape), rand(3, 5)])
    assert "tensor.fused_reduce" in out  # x / s still fuses (same value as the row)
    assert "tensor.mul" in out           # ... but d * c does not
    assert any("%c" in r.message and "may not match" in r.message for r in remarks)


def test_reduce_epilogue_fuses_when_arg_dims_prove_equality() -> None:
    text = REDUCE_EPILOGUE.replace("attributes {kernel}",
                                   'attributes {kernel, arg_dims = [["M", "N"], ["M", "N"]]}')
    out, _ = agree(text, [rand(3, 5), rand(3, 5)])
    assert "tensor.mul" not in out and out.count("tensor.fused_reduce") == 1


def test_reduce_epilogue_fuses_when_extents_come_from_the_same_dim() -> None:
    text = f"""func @g(%x: {T}, %k: f32) -> {T} attributes {{kernel}} {{
^entry:
  %n0 = tensor.dim %x {{axis = 0}} : {T} -> index
  %n1 = tensor.dim %x {{axis = 1}} : {T} -> index
  %c = tensor.full %k, %n0, %n1 : (f32, index, index) -> {T}
  %s = tensor.reduce_sum %x {{axes = [1], keepdims}} : {T} -> tensor<?x1xf32>
  %d = tensor.div %x, %s : ({T}, tensor<?x1xf32>) -> {T}
  %e = tensor.mul %d, %c : {T}
  return %e : {T}
}}"""
    out, _ = agree(text, [rand(3, 1), np.float32(2.0)])
    assert "tensor.mul" not in out and "tensor.fused_reduce" in out


def test_matmul_bias_of_unknown_extent_is_not_fused() -> None:
    # w has one column at run time and b five: the unfused add broadcasts the
    # product up to [2, 5]; a fused_matmul cannot grow its product.
    out, remarks = agree(MATMUL_BIAS, [rand(2, 3), rand(3, 1), rand(5)])
    assert "tensor.fused_matmul" not in out and "tensor.matmul" in out
    assert 'kernel = "add_relu_fused"' in out  # the add and relu still fuse with each other
    assert any("%b" in r.message and "may not broadcast" in r.message for r in remarks)


def test_matmul_bias_fuses_with_arg_dims_and_static_shapes() -> None:
    named = MATMUL_BIAS.replace("attributes {kernel}",
                                'attributes {kernel, arg_dims = [["M", "K"], ["K", "N"], ["N"]]}')
    out, _ = agree(named, [rand(2, 3), rand(3, 5), rand(5)])
    assert 'kernel = "matmul_bias_relu_fused"' in out
    static = MATMUL_BIAS.replace("%w: tensor<?x?xf32>", "%w: tensor<?x5xf32>").replace(
        "%h = tensor.matmul %x, %w : tensor<?x?xf32>",
        "%h = tensor.matmul %x, %w : (tensor<?x?xf32>, tensor<?x5xf32>) -> tensor<?x5xf32>").replace(
        f"({T}, tensor<?xf32>) -> {T}", "(tensor<?x5xf32>, tensor<5xf32>) -> tensor<?x5xf32>").replace(
        "%b: tensor<?xf32>", "%b: tensor<5xf32>").replace(
        "%r = tensor.relu %y : tensor<?x?xf32>", "%r = tensor.relu %y : tensor<?x5xf32>").replace(
        "return %r : tensor<?x?xf32>", "return %r : tensor<?x5xf32>").replace(
        "-> tensor<?x?xf32> attributes", "-> tensor<?x5xf32> attributes")
    out, _ = agree(static, [rand(2, 3), rand(3, 5), rand(5)])
    assert 'kernel = "matmul_bias_relu_fused"' in out


def test_declarative_pattern_respects_unknown_extents() -> None:
    out, _ = agree(MATMUL_BIAS, [rand(2, 3), rand(3, 1), rand(5)], "patterns")
    assert "matmul_bias_relu_fused" not in out


def test_extents_analysis() -> None:
    m = parse_module(f"""func @g(%x: {T}, %y: tensor<?x1xf32>, %w: {T}) -> {T} attributes {{kernel}} {{
^entry:
  %a = tensor.add %x, %y : ({T}, tensor<?x1xf32>) -> {T}
  %t = tensor.transpose %a {{perm = [1, 0]}} : {T} -> {T}
  %p = tensor.matmul %x, %w : {T}
  %q = tensor.add %p, %x : {T}
  return %q : {T}
}}""")
    ops = {op.result.name_hint: op.result for op in m["g"].entry.ops if op.results}
    x, y, w = m["g"].args
    ext = Extents()
    ex, ey = ext.of(x), ext.of(y)
    assert ex[0] != ey[0]                      # two parameters: unrelated
    assert ext.of(ops["a"]) == (("opaque", ops["a"], 0), ex[1])  # x0 vs y0: unknown; y1 = 1
    assert ext.of(ops["t"]) == tuple(reversed(ext.of(ops["a"])))
    assert ext.of(ops["p"]) == (ex[0], ext.of(w)[1])
    assert fits((1, ex[1]), ex) and not fits(ey, ex) and fits((), ex)
    assert not fits((ex[0], ex[1], 1), ex)
