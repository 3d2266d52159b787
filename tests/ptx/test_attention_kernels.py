"""Attention is three kernels at every -O level: Q @ K^T (scaled), one softmax row
kernel, P @ V (issue 22; -O0 was five: the softmax's final divide became the first
matmul's epilogue, which has no reduction stages, so the max and the sum were row
kernels of their own, each recomputing the scores). Values against NumPy on ptxsim.

A fused (flash-attention) kernel that never stores the T x S scores is still open."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from wiadsl.runtime.jit import jit_file

ROOT = Path(__file__).resolve().parents[2]
RNG = np.random.default_rng(7)


def numpy_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    s = np.einsum("...td,...sd->...ts", q.astype(np.float64), k) / np.sqrt(q.shape[-1])
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v


@pytest.mark.parametrize("level", [0, 1, 2, 3])
@pytest.mark.parametrize("kernel,lead", [("attn", ()), ("attn_explicit", ()), ("attn_batched", (3,))])
def test_attention_is_three_kernels(kernel: str, lead: tuple[int, ...], level: int) -> None:
    q, k = (RNG.standard_normal((*lead, t, 16)).astype(np.float32) for t in (6, 9))
    v = RNG.standard_normal((*lead, 9, 8)).astype(np.float32)
    fn = jit_file(ROOT / "examples" / "attention.wia", kernel, target="ptxsim", opt_level=level)
    np.testing.assert_allclose(fn(q, k, v), numpy_attention(q, k, v), rtol=2e-5, atol=2e-6)
    assert fn.stats["kernels"] == 3, fn.stats
