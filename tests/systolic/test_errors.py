"""Bad options and bad requests fail with WiaError subclasses and clear messages;
ops the array cannot run fall back to the host and say so."""

from __future__ import annotations

import numpy as np
import pytest

import wiadsl
from wiadsl.backends.systolic import emit_sasm, format_stats
from wiadsl.diagnostics import WiaUsageError

MM = "kernel mm(input A: f32[M, K], input B: f32[K, N], output C: f32[M, N]) { C = A @ B; }"


@pytest.mark.parametrize("options, message", [
    ({"array": (0, 8)}, "at least 1x1"),
    ({"array": 8}, "pair of integers"),
    ({"dataflow": "rs"}, "dataflow must be one of ws, os, is"),
    ({"timing": "fast"}, "timing must be one of"),
    ({"bandwidth": 3}, "unknown systolic option 'bandwidth'"),
    ({"dma_bw": "wide"}, "bad value"),
    ({"spad": 0}, "must be positive"),
])
def test_bad_options(options, message):
    k = wiadsl.jit(MM, "mm", target="systolic", **options)
    with pytest.raises(WiaUsageError, match=message):
        k(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32))


def test_memories_too_small():
    k = wiadsl.jit(MM, "mm", target="systolic", array=(8, 8), spad=64, acc=64)
    with pytest.raises(WiaUsageError, match="does not fit the memories"):
        k(np.ones((9, 9), np.float32), np.ones((9, 9), np.float32))


def test_emit_sasm_needs_every_shape():
    ir = wiadsl.jit(MM, "mm").ir_for()
    with pytest.raises(WiaUsageError, match="shape of tensor parameter 'B'"):
        emit_sasm(ir, "mm", shapes={"A": (2, 2)})
    with pytest.raises(WiaUsageError, match="does not match"):
        emit_sasm(ir, "mm", shapes={"A": (2, 2, 2), "B": (2, 2)})
    with pytest.raises(WiaUsageError, match="no function named 'nope'"):
        emit_sasm(ir, "nope", shapes={})


HOST = """
kernel f64mm(input A: f64[M, K], input B: f64[K, N], output C: f64[M, N]) { C = A @ B; }
kernel norm(input x: f32[N], output y: f32[N]) {
    s = reduce_sum(x * x);
    if s > 1.0 { y = x / sqrt(s); } else { y = x; }
}
"""


def test_host_fallback_is_reported():
    k = wiadsl.jit(HOST, "f64mm", target="systolic", array=(8, 8))
    a = np.arange(6.0).reshape(2, 3)
    assert np.array_equal(k(a, a.T), a @ a.T)
    assert k.stats["host_ops"] == ["tensor.matmul"] and k.stats["cycles"] == 0
    assert "on the host         tensor.matmul" in format_stats(k.stats)


def test_control_flow_and_vector_sections():
    k = wiadsl.jit(HOST, "norm", target="systolic", array=(8, 8))
    ref = wiadsl.jit(HOST, "norm", target="interp")
    for x in (np.full(33, 0.1, np.float32), np.arange(33, dtype=np.float32)):
        np.testing.assert_allclose(k(x), ref(x), rtol=1e-6)
    assert k.stats["sections"]["vector"] == 2  # x * x summed in one section; x / sqrt(s)
    assert "tensor.reduce_sum" not in k.stats["host_ops"]
    assert "arith.sqrt" in k.stats["host_ops"]  # scalar math stays on the host
