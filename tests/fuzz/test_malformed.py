"""Malformed sources and bad calls raise only WiaError (never another exception, never
a dead process)."""

import random

import numpy as np
import pytest

import wiadsl
from wiadsl.fuzz.malformed import bad_sources, check_source, run_malformed


def test_malformed_run_has_no_findings() -> None:
    report = run_malformed(3, 14)
    assert report.sources == 14 and report.calls == 28
    assert report.ok, report.summary()


def test_every_kind_of_bad_source_is_generated() -> None:
    srcs = list(bad_sources(random.Random(0), 14))
    assert any(isinstance(s, bytes) for s in srcs)
    assert any(isinstance(s, str) and s.count("(") > 200 for s in srcs)
    assert any(isinstance(s, str) and "1e999" in s or "9" * 50 in str(s) for s in srcs)


@pytest.mark.parametrize("src", [
    "kernel k(input x: f32[9223372036854775807, 4], output y: f32) { y = reduce_sum(x); }",
    "kernel k(input x: f32, output y: f32) { y = x * " + "9" * 400 + "; }",
    "kernel k(input x: f32, output y: f32) { y = " + "(" * 3000 + "x" + ")" * 3000 + "; }",
    b"kernel k(input x: f32, output y: f32) { y = x; }\xff\xfe",
])
def test_known_hard_sources(src) -> None:
    assert check_source(src) is None


@pytest.mark.parametrize("target", ["interp", "cpu"])
@pytest.mark.parametrize("arg", [
    np.zeros((0, 3), np.float32), np.zeros((3, 2), np.float32).T, np.zeros(4, np.complex64),
    np.full((2, 3), np.nan, np.float32), "x", None, np.zeros((2, 3, 1), np.float32),
])
def test_bad_matmul_arguments(target: str, arg) -> None:
    src = "kernel k(input A: f32[M, K], input B: f32[K, N], output C: f32[M, N]) { C = A @ B; }"
    fn = wiadsl.jit(src, kernel="k", target=target)
    try:
        out = fn(arg, np.ones((3, 2), np.float32))
    except wiadsl.WiaError:
        return
    assert isinstance(out, np.ndarray)
