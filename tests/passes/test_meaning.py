"""Every pass preserves meaning: examples and generated programs run through the
reference interpreter before and after -O3 and after each pass alone."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from wiadsl.frontend.compile import compile_to_ir
from wiadsl.ir import parse_module, run_func
from wiadsl.passes import optimize

from .example_inputs import kernel_dims, make_inputs
from .program_gen import generate

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.wia"))
PIPELINES = ["-O1", "-O2", "-O3", "inline", "canonicalize", "sccp", "cse", "dce", "simplify-cfg",
             "licm", "bn-fold", "inline,fuse", "inline,canonicalize,fuse", "patterns", "plan-memory"]


def _optimize(module, pipeline: str) -> None:
    if pipeline.startswith("-O"):
        optimize(module, int(pipeline[2:]))
    else:
        optimize(module, pipeline=pipeline)


def _compare(before, after) -> None:
    for x, y in zip(before, after, strict=True):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.shape == y.shape
        if x.dtype.kind == "f":
            np.testing.assert_allclose(y, x, rtol=1e-5, atol=1e-6)
        else:
            np.testing.assert_array_equal(y, x)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_examples_agree(path: pathlib.Path) -> None:
    text = path.read_text()
    dims = kernel_dims(text, str(path))
    for pipeline in PIPELINES:
        module = compile_to_ir(text, str(path))
        kernels = [f.name for f in module if f.is_kernel]
        rng = np.random.default_rng(0)
        args = {k: make_inputs(module[k], dims.get(k), rng) for k in kernels}
        before = {k: run_func(module, k, args[k]) for k in kernels}
        _optimize(module, pipeline)
        for k in kernels:
            _compare(before[k], run_func(module, k, args[k]))


@pytest.mark.parametrize("seed", range(60))
def test_generated_programs_agree(seed: int) -> None:
    text, shapes = generate(seed)
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    before = run_func(parse_module(text), "g", args)
    for pipeline in ("-O3", "fuse", "canonicalize,cse,fuse", "plan-memory"):
        module = parse_module(text)
        _optimize(module, pipeline)
        _compare(before, run_func(module, "g", args))
