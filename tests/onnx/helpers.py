"""Shared by the ONNX tests: skip without the optional packages, run ONNX Runtime.

Test modules call ``require_onnx()`` first: where ``onnx`` or ``onnxruntime`` is
missing the whole module is skipped with that reason (they are the optional
``wiadsl[onnx]`` extra), never silently passed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest


def require_onnx() -> None:
    for name in ("onnx", "onnxruntime"):
        pytest.importorskip(name, reason=f"'{name}' is not installed (pip install 'wiadsl[onnx]')")


def ort_run(model: Any, feeds: dict[str, np.ndarray], optimize: bool = True) -> list[np.ndarray]:
    """ONNX Runtime's CPU provider on ``feeds`` (one thread: deterministic)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    if not optimize:
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def assert_close(got: Any, want: np.ndarray, rtol: float = 1e-4, atol: float = 1e-5) -> None:
    got = np.asarray(got)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
