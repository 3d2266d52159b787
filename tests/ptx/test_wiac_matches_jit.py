"""``wiac -o x.ptx`` writes exactly what ``wiadsl.jit(..., target="cuda")`` runs (issue 22).

Both go through ``program.ptx_program`` (lowered IR -> the -O pipeline -> PTX and plan).
The cuda target needs a GPU only to load and launch, so the test replaces the driver
probe and asks the compiled specialization for its PTX (``ShapeSpecialized.specialize``):
the real jit path up to the device. wiac runs through its command-line entry point.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from wiadsl.backends.ptx import cuda
from wiadsl.diagnostics import WiaUsageError
from wiadsl.runtime.jit import jit, jit_file
from wiadsl.tools.cli import main as wiac

ROOT = Path(__file__).resolve().parents[2]
RNG = np.random.default_rng(20)
ROWS_SRC = """import nn;
kernel ln(input a: f32[M, N], input g: f32[N], input b: f32[N], output y: f32[M, N]) {
    y = nn.softmax(nn.layer_norm(a, g, b));
}
"""
MLP_SRC = """kernel mlp(input x: f32[B, I], input w: f32[I, H], input c: f32[H], output y: f32[B, H]) {
    y = relu(x @ w + c) * 0.5;
}
"""


@pytest.fixture
def no_gpu_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cuda target without a GPU: compile() probes the driver first; nothing else
    here touches it (launching would, and this test never launches)."""
    monkeypatch.setattr(cuda, "driver", lambda: None)


def wiac_ptx(tmp_path: Path, source: Path, level: int, dims: dict[str, int], arch: str,
             kernel: str | None = None) -> tuple[str, dict]:
    out = tmp_path / f"o{level}.ptx"
    argv = [str(source), f"-O{level}", "--arch", arch, "-o", str(out)]
    argv += [a for d, n in dims.items() for a in ("-D", f"{d}={n}")]
    argv += ["--kernel", kernel] if kernel else []
    assert wiac(argv) == 0
    return out.read_text(), json.loads(Path(f"{out}.json").read_text())


def jit_ptx(fn, inputs: list[np.ndarray]) -> tuple[str, dict]:
    planned = fn.compiled_for(inputs).specialize(inputs)
    return planned.ptx, json.loads(json.dumps(planned.plan, default=str))


CASES = [
    ("ln", ROWS_SRC, {"M": 5, "N": 33}, lambda: [RNG.standard_normal((5, 33)).astype(np.float32),
                                                 RNG.standard_normal(33).astype(np.float32),
                                                 RNG.standard_normal(33).astype(np.float32)]),
    ("mlp", MLP_SRC, {"B": 4, "I": 7, "H": 9}, lambda: [RNG.standard_normal((4, 7)).astype(np.float32),
                                                        RNG.standard_normal((7, 9)).astype(np.float32),
                                                        RNG.standard_normal(9).astype(np.float32)]),
]


@pytest.mark.parametrize("level", [0, 1, 2, 3])
@pytest.mark.parametrize("name,src,dims,make", CASES, ids=[c[0] for c in CASES])
def test_wiac_writes_what_the_cuda_target_runs(tmp_path: Path, no_gpu_driver: None, name: str,
                                               src: str, dims: dict[str, int], make,
                                               level: int) -> None:
    path = tmp_path / f"{name}.wia"
    path.write_text(src)
    inputs = make()
    fn = jit_file(path, name, target="cuda", arch="sm_90", opt_level=level)
    assert jit_ptx(fn, inputs) == wiac_ptx(tmp_path, path, level, dims, "sm_90")


def test_default_levels_agree(tmp_path: Path, no_gpu_driver: None) -> None:
    """No -O and no opt_level: both are -O2 (the rows then fuse into one kernel)."""
    path = tmp_path / "ln.wia"
    path.write_text(ROWS_SRC)
    inputs = CASES[0][3]()
    text, plan = jit_ptx(jit_file(path, "ln", target="cuda", arch="sm_80"), inputs)
    out = tmp_path / "d.ptx"
    assert wiac([str(path), "-D", "M=5", "-D", "N=33", "-o", str(out)]) == 0
    assert text == out.read_text()
    assert [k["kind"] for k in plan["kernels"]] == ["row(1-pass)"]


def test_one_kernel_of_an_example_file(tmp_path: Path, no_gpu_driver: None) -> None:
    """--kernel picks one kernel of a file of several: its module is the jit's."""
    path = ROOT / "examples" / "layernorm_softmax.wia"
    x = RNG.standard_normal((7, 33)).astype(np.float32)
    g, b = (RNG.standard_normal(33).astype(np.float32) for _ in range(2))
    fn = jit_file(path, "ln_log_softmax", target="cuda", arch="sm_80", opt_level=2)
    assert jit_ptx(fn, [x, g, b]) == wiac_ptx(tmp_path, path, 2, {"T": 7, "D": 33}, "sm_80",
                                              kernel="ln_log_softmax")


def test_the_level_reaches_the_device_code(no_gpu_driver: None) -> None:
    """opt_level is not ignored: -O0 computes exp(x) once per use, -O2's cse once."""
    src = "kernel k(input x: f32[N], output y: f32[N]) { y = exp(x) * 2.0 + exp(x); }"
    x = RNG.standard_normal(40).astype(np.float32)
    texts = {lvl: jit_ptx(jit(src, "k", target="cuda", arch="sm_80", opt_level=lvl), [x])[0]
             for lvl in (0, 2)}
    fmas = {lvl: text.count("fma.rn.f32") for lvl, text in texts.items()}  # exp's polynomial
    assert fmas[0] == 2 * fmas[2] > 0


@pytest.mark.parametrize("options,message", [
    ({"opt_level": 4}, "opt_level must be 0..3"),
    ({"opt_level": "2"}, "opt_level must be 0..3"),
    ({"arch": "sm_10"}, "unknown arch 'sm_10'"),
    ({"tile": 64}, "takes the options arch, opt_level, fast_math, allow_tf32, got tile"),
    ({"allow_tf32": 1}, "allow_tf32 must be True or False"),
])
def test_bad_target_options_are_usage_errors(options: dict, message: str) -> None:
    a = np.ones((2, 3), np.float32)
    for target in ("ptxsim", "cuda"):
        fn = jit(MLP_SRC.replace("mlp", "k"), "k", target=target, **options)
        with pytest.raises(WiaUsageError, match=message):
            fn(a, np.ones((3, 4), np.float32), np.ones(4, np.float32))


def test_fast_math_reaches_the_device_code(no_gpu_driver: None) -> None:
    """The jit option reaches emit_ptx: raw .ftz transcendentals only when asked."""
    src = "kernel k(input x: f32[N], output y: f32[N]) { y = exp(x); }"
    x = RNG.standard_normal(40).astype(np.float32)
    fast, exact = (jit_ptx(jit(src, "k", target="cuda", arch="sm_80", fast_math=f), [x])[0]
                   for f in (True, False))
    assert ".ftz" in fast and ".ftz" not in exact
