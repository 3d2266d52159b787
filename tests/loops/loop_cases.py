"""Small kernels and helpers shared by the loop-transformation tests (unroll, tile,
split-accumulators, pipeline-loads): lower a kernel to loop IR, run a loop pipeline
with verification after every pass, and compare the interpreter before and after
(and against NumPy)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np
import pytest

from wiadsl.diagnostics import WiaRuntimeError
from wiadsl.dtypes import DType
from wiadsl.frontend.compile import compile_source
from wiadsl.ir import parse_module, print_module, run_func
from wiadsl.ir.module import FuncOp, ModuleOp
from wiadsl.ir.types import INDEX, TensorType
from wiadsl.loops import lower_module
from wiadsl.loops.builder import LoopBuilder
from wiadsl.loops.passes import parse_loop_pipeline
from wiadsl.passes import optimize
from wiadsl.passes.base import PassManager


def reduce_1d(op: str, dtype: str = "f32") -> str:
    return f"""
func @f(%x: tensor<?x{dtype}>) -> {dtype} attributes {{kernel, outputs = ["s"]}} {{
^entry:
  %s = tensor.reduce_{op} %x {{axes = [0]}} : tensor<?x{dtype}> -> {dtype}
  return %s : {dtype}
}}
"""


SUM = reduce_1d("sum")

ROWSUM = """
func @f(%x: tensor<?x?xf32>) -> tensor<?xf32> attributes {kernel, outputs = ["y"]} {
^entry:
  %s = tensor.reduce_sum %x {axes = [1]} : tensor<?x?xf32> -> tensor<?xf32>
  return %s : tensor<?xf32>
}
"""

SOFTMAX = """
func @f(%x: tensor<?x?xf32>) -> tensor<?x?xf32> attributes {kernel, outputs = ["y"]} {
^entry:
  %m = tensor.reduce_max %x {axes = [1], keepdims} : tensor<?x?xf32> -> tensor<?x1xf32>
  %d = tensor.sub %x, %m : (tensor<?x?xf32>, tensor<?x1xf32>) -> tensor<?x?xf32>
  %e = tensor.exp %d : tensor<?x?xf32>
  %s = tensor.reduce_sum %e {axes = [1], keepdims} : tensor<?x?xf32> -> tensor<?x1xf32>
  %y = tensor.div %e, %s : (tensor<?x?xf32>, tensor<?x1xf32>) -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}
"""

RELU = """
func @f(%x: tensor<?xf32>) -> tensor<?xf32> attributes {kernel, outputs = ["y"]} {
^entry:
  %y = tensor.relu %x : tensor<?xf32>
  return %y : tensor<?xf32>
}
"""

TRANSPOSE = """
func @f(%x: tensor<?x?xf32>) -> tensor<?x?xf32> attributes {kernel, outputs = ["y"]} {
^entry:
  %t = tensor.transpose %x {perm = [1, 0]} : tensor<?x?xf32> -> tensor<?x?xf32>
  %y = tensor.exp %t : tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}
"""

IMATMUL = """
func @f(%a: tensor<?x?xi32>, %b: tensor<?x?xi32>) -> tensor<?x?xi32> attributes {kernel, outputs = ["c"]} {
^entry:
  %c = tensor.matmul %a, %b : (tensor<?x?xi32>, tensor<?x?xi32>) -> tensor<?x?xi32>
  return %c : tensor<?x?xi32>
}
"""

#: A user ``for`` loop (the frontend's: an i64 induction variable, the exit reading
#: the header's iteration value directly) carrying a float.
DOT_SOURCE = """
kernel f(input a: f32[N], input b: f32[N], output s: f32) {
    acc = 0.0;
    for i in range(N) { acc = acc + a[i] * b[i]; }
    s = acc;
}
"""


def tensor_ir(source: str) -> ModuleOp:
    """Frontend source -> optimized tensor IR of kernel ``f`` (as ``jit`` runs it)."""
    module = compile_source(source, "<test>").lower_kernel("f", {})
    optimize(module, 3)
    return module


def loop_ir(src: str | ModuleOp, shapes: Sequence[tuple[int, ...]] | None = None) -> ModuleOp:
    """Loop IR of ``@f`` from tensor IR text or frontend source (``shapes``: static
    parameter extents, None: dynamic); a ``ModuleOp`` is loop IR already and is copied."""
    if isinstance(src, ModuleOp):
        return parse_module(print_module(src))
    module = tensor_ir(src) if src.lstrip().startswith("kernel") else parse_module(src)
    return lower_module(module, None if shapes is None else {"f": list(shapes)})


def transform(src: str | ModuleOp, pipeline: str, shapes: Sequence[tuple[int, ...]] | None = None
              ) -> tuple[ModuleOp, ModuleOp, dict[str, dict[str, int]]]:
    """(loop IR before, after ``pipeline`` verified after every pass, pass statistics)."""
    module = loop_ir(src, shapes)
    before = parse_module(print_module(module))
    pm = PassManager(parse_loop_pipeline(pipeline), verify_each=True)
    pm.run(module)
    return before, module, pm.statistics()


def inputs_for(src: str, n: int, m: int = 5, seed: int = 0) -> list[np.ndarray]:
    """Random inputs for the kernels above: ``n`` is the extent the loops reduce over."""
    rng = np.random.default_rng(seed + n)
    if src is IMATMUL:
        return [rng.integers(-9, 10, (m, n)).astype(np.int32), rng.integers(-9, 10, (n, 3)).astype(np.int32)]
    if src in (ROWSUM, SOFTMAX, TRANSPOSE):
        return [rng.standard_normal((m, n)).astype(np.float32)]
    if src is DOT_SOURCE:
        return [rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)]
    return [rng.standard_normal(n).astype(np.float32)]


def numpy_ref(src: str, args: list[np.ndarray]) -> object:
    x = args[0]
    if x.size == 0 and src is SOFTMAX:
        return None  # a max over an empty row: an error (check_runs_alike compares it)
    if src is IMATMUL:
        return x @ args[1]
    if src is ROWSUM:
        return x.sum(axis=1)
    if src is SOFTMAX:
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    if src is TRANSPOSE:
        return np.exp(x.T)
    if src is RELU:
        return np.maximum(x, 0)
    if src is DOT_SOURCE:
        return np.dot(x.astype(np.float64), args[1].astype(np.float64))
    return x.sum()


def check_runs_alike(before: ModuleOp, after: ModuleOp, args: list[np.ndarray], exact: bool = True,
                     ref: object = None) -> None:
    """The interpreter gives the same results on ``before`` and ``after`` (bit for bit,
    or to float rounding), and NumPy's reference to float tolerance."""
    try:
        want = run_func(before, "f", args)
    except WiaRuntimeError as e:  # e.g. a max over no elements: the same error after
        with pytest.raises(WiaRuntimeError, match=re.escape(str(e))):
            run_func(after, "f", args)
        return
    got = run_func(after, "f", args)
    for w, g in zip(want, got, strict=True):
        if exact:
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    if ref is not None:
        np.testing.assert_allclose(np.asarray(got[0], np.float64), np.asarray(ref, np.float64),
                                   rtol=1e-4, atol=1e-4)


def custom_loop_ir(fn: Callable[[LoopBuilder, list], None], params: Sequence[TensorType],
                   results: Sequence[TensorType] = ()) -> ModuleOp:
    """A kernel ``@f`` built with ``LoopBuilder``: ``fn(lb, args)`` emits the body and
    returns; the function returns ``lb``'s values stored in ``lb.results``."""
    func = FuncOp("f", list(params), list(results), [f"p{i}" for i in range(len(params))],
                  {"kernel": True, "outputs": [f"r{i}" for i in range(len(results))]})
    lb = LoopBuilder(func, func.entry)
    lb.results = []  # type: ignore[attr-defined]
    fn(lb, list(func.args))
    lb.b.ret(lb.results)  # type: ignore[attr-defined]
    return ModuleOp([func])


F32_VEC = TensorType(DType.F32, (None,))
__all__ = ["DOT_SOURCE", "F32_VEC", "IMATMUL", "INDEX", "RELU", "ROWSUM", "SOFTMAX", "SUM", "TRANSPOSE",
           "check_runs_alike", "custom_loop_ir", "inputs_for", "loop_ir", "numpy_ref", "reduce_1d",
           "tensor_ir", "transform"]
