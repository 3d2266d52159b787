"""Every pass preserves meaning: examples and generated programs run through the
reference interpreter before and after -O3 and after each pass alone."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from wiadsl.frontend.compile import compile_to_ir
from wiadsl.ir import parse_module, run_func
from wiadsl.passes import PassManager, default_pipeline, optimize

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


def _check_each_pass(text: str, pipeline: str, args: list, before: list) -> None:
    """Run ``pipeline`` one pass at a time, comparing results after every pass."""
    module = parse_module(text)
    pm = PassManager(pipeline)
    for p in pm.passes:
        pm.run_one(p, module)
        try:
            _compare(before, run_func(module, "g", args))
        except AssertionError as e:
            raise AssertionError(f"results differ after pass '{p.spec()}' of {pipeline!r}:\n"
                                 f"{text}\n{e}") from None


@pytest.mark.parametrize("seed", range(200))
def test_generated_programs_agree(seed: int) -> None:
    """-O3 (checked after each pass) and fusion alone on the unoptimized program;
    every third seed has dynamic extents, some of them 1 at run time."""
    text, shapes = generate(seed)
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    before = run_func(parse_module(text), "g", args)
    _check_each_pass(text, default_pipeline(3), args, before)
    _check_each_pass(text, "fuse,plan-memory", args, before)
