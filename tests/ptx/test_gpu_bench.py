"""The prepared GPU benchmark runs end to end here, without a GPU.

``benchmarks/gpu_bench.py --sim``: every row compiled, run on the simulator through the
executor, checked against NumPy and timed by ``timing.py`` (the table and the JSON
written); ``--compile-only`` at the GPU sizes. The CuPy references run on a NumPy
stand-in for CuPy whose ``cublasGemmEx`` follows the cuBLAS definition (column-major
operands, ``op`` and leading dimensions as documented), so the row-major mapping of
``gpu_refs.gemm_ex`` is checked against that definition, not against itself.
``benchmarks/gpu.sh --sim`` runs its four steps on one test and one row.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    """benchmarks/gpu_bench.py, imported by path (that folder never goes on sys.path)."""
    if "wiadsl_gpu_bench" not in sys.modules:
        spec = importlib.util.spec_from_file_location("wiadsl_gpu_bench", BENCH / "gpu_bench.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["wiadsl_gpu_bench"] = module
        spec.loader.exec_module(module)
    return sys.modules["wiadsl_gpu_bench"]


def test_dry_run_on_the_simulator(bench, tmp_path, capsys) -> None:
    out = tmp_path / "bench.json"
    assert bench.main(["--sim", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "SIMULATOR DRY RUN" in text and "| benchmark | kernels (ours)" in text
    report = json.loads(out.read_text())
    rows = {r["name"]: r for r in report["rows"]}
    assert len(rows) == 15 and all(r["err"] <= r["tol"] and not r["error"] for r in rows.values())
    assert rows["matmul f16 256x256x128"]["kernels"] == ["matmul(wgmma)"]
    assert rows["matmul f16 256x256x128"]["target"] == "sm_90a"
    assert rows["matmul f16 128x128x128 (sm_80 kernel)"]["kernels"] == ["matmul(mma)"]
    assert rows["matmul i8 128x128x128 -> i32"]["kernels"] == ["matmul(wgmma)"]
    assert rows["matmul tf32 128x128x128"]["kernels"] == ["matmul(wgmma)"]
    assert rows["attention f16 128x128x64 causal"]["kernels"][0].startswith("attention(flash")
    assert rows["softmax f16 4x8192"]["kernels"] == ["row(1-pass)"]
    assert all(r["seconds"] > 0 and r["launches"] == 1 for r in rows.values())


def test_compile_only_at_gpu_sizes(bench, capsys) -> None:
    assert bench.main(["--compile-only", "--no-ptxas", "--rows", "f16 8192,i8,causal"]) == 0
    text = capsys.readouterr().out
    assert "matmul f16 8192x8192x8192: matmul(wgmma) (sm_90a)" in text
    assert "matmul i8 4096x4096x4096 -> i32: matmul(wgmma) (sm_90a)" in text
    assert "attention f16 4096x4096x64 causal: attention(flash,mma,64) (sm_90)" in text


def test_a_failing_check_is_reported(bench, monkeypatch, capsys) -> None:
    import gpu_rows

    row = gpu_rows.fused_row(1000)
    monkeypatch.setattr(gpu_rows, "rows", lambda sim, arch: [
        gpu_rows.Row(row.name, row.source, row.make, lambda xs, y: 0.5, row.tol, row.work,
                     row.unit, row.reference, row.shapes)])
    assert bench.main(["--sim"]) == 1
    text = capsys.readouterr().out
    assert "WRONG 5.0e-01 (tol 1e-06)" in text and "1 failed: relu(a*b+c) f32 1000" in text


# ---------------------------------------------------------------- references on a stand-in


class Dev(np.ndarray):
    """A 'device array': NumPy data with CuPy's ``get`` and ``data.ptr``."""

    def get(self) -> np.ndarray:
        return np.asarray(self).copy()

    @property
    def data(self):  # type: ignore[override]
        return type("Mem", (), {"ptr": self.__array_interface__["data"][0]})


def _dev(x) -> Dev:
    return np.ascontiguousarray(x).view(Dev)


#: cudaDataType -> NumPy storage
STORAGE = {0: np.float32, 3: np.int8, 10: np.int32, 14: np.uint16}


def gemm_ex(handle, transa, transb, m, n, k, alpha, a, atype, lda, b, btype, ldb, beta, c,
            ctype, ldc, compute, algo) -> None:
    """cublasGemmEx by its definition: C = alpha op(A) op(B) + beta C, column-major, with
    op(X)[i, l] = X[i + l * ld] (N) or X[l + i * ld] (T)."""
    def view(ptr, dtype, count):
        raw = np.ctypeslib.as_array((ctypes.c_uint8 * (count * np.dtype(dtype).itemsize))
                                    .from_address(ptr))
        x = raw.view(dtype)
        return (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64) \
            if dtype is np.uint16 else x.astype(np.float64)

    def op(ptr, t, dtype, ld, rows, cols):
        i, j = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
        idx = i + j * ld if t == 0 else j + i * ld
        return view(ptr, dtype, int(idx.max()) + 1)[idx]
    scalar = np.int32 if compute == 72 else np.float32
    al = np.ctypeslib.as_array((ctypes.c_uint8 * 4).from_address(alpha)).view(scalar)[0]
    be = np.ctypeslib.as_array((ctypes.c_uint8 * 4).from_address(beta)).view(scalar)[0]
    prod = op(a, transa, STORAGE[atype], lda, m, k) @ op(b, transb, STORAGE[btype], ldb, k, n)
    i, j = np.meshgrid(np.arange(m), np.arange(n), indexing="ij")
    out = np.ctypeslib.as_array((ctypes.c_uint8 * (int((i + j * ldc).max() + 1)
                                                    * np.dtype(STORAGE[ctype]).itemsize))
                                .from_address(c)).view(STORAGE[ctype])
    # cuBLAS reads C only when beta != 0 (the output may be np.empty's garbage: a NaN
    # there made this stand-in's result NaN, one suite run in many)
    result = al * prod + be * out[i + j * ldc] if be != 0 else al * prod
    if ctype == 14:  # bf16: round to nearest even
        bits = result.astype(np.float32).view(np.uint32)
        out[i + j * ldc] = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    else:
        out[i + j * ldc] = result.astype(STORAGE[ctype])


def fake_cupy(monkeypatch) -> ModuleType:
    """NumPy with CuPy's extra names, and a cuBLAS whose gemmEx is the definition above."""
    cp = ModuleType("cupy")
    for name in ("exp", "sqrt", "where", "inf", "float32", "copyto"):
        setattr(cp, name, getattr(np, name))
    cp.asarray = _dev
    cp.arange = lambda n: _dev(np.arange(n))
    cp.empty = lambda shape, dtype: _dev(np.empty(shape, dtype))
    cp.empty_like = lambda x: _dev(np.empty_like(x))
    cp.matmul = lambda a, b, out=None: np.matmul(a, b, out=out)

    def elementwise(params, outs, body, name):
        expr = body.split("=", 1)[1].strip().rstrip(";").replace("fmaxf", "maximum").replace("0.f", "0.0")
        return lambda a, b, c, y: np.copyto(y, eval(expr, {"maximum": np.maximum, "a": a, "b": b, "c": c}))
    cp.ElementwiseKernel = elementwise
    cuda, device = ModuleType("cupy.cuda"), ModuleType("cupy.cuda.device")
    device.get_cublas_handle = lambda: 1
    cuda.device = device
    cp.cuda = cuda
    libs = ModuleType("cupy_backends.cuda.libs")
    cublas = ModuleType("cupy_backends.cuda.libs.cublas")
    cublas.gemmEx = gemm_ex
    libs.cublas = cublas
    for name, mod in [("cupy", cp), ("cupy.cuda", cuda), ("cupy.cuda.device", device),
                      ("cupy_backends", ModuleType("cupy_backends")),
                      ("cupy_backends.cuda", ModuleType("cupy_backends.cuda")),
                      ("cupy_backends.cuda.libs", libs), ("cupy_backends.cuda.libs.cublas", cublas)]:
        monkeypatch.setitem(sys.modules, name, mod)
    return cp


@pytest.mark.parametrize("row_args", [("f16", 33, 40, 24), ("bf16", 33, 40, 24), ("f32", 7, 5, 9),
                                      ("tf32", 33, 40, 24), ("i8", 33, 40, 24)])
def test_gemm_references_follow_the_cublas_definition(bench, monkeypatch, row_args) -> None:
    import gpu_refs
    import gpu_rows

    cp = fake_cupy(monkeypatch)
    row = gpu_rows.matmul_row(*row_args)
    xs = row.make(np.random.default_rng(4))
    ref = gpu_refs.REFERENCES[row.reference](cp, xs)
    ref.step()
    tol = 1e-6 if row_args[0] in ("f32", "tf32") else row.tol  # the stand-in computes in f64
    assert row.check(xs, np.asarray(ref.out.get())) <= tol


@pytest.mark.parametrize("make", [
    lambda r: r.row_kernel("softmax", "f32", 5, 33), lambda r: r.row_kernel("layer_norm", "f16", 5, 33),
    lambda r: r.fused_row(1000), lambda r: r.attention_row(33, 16, False),
    lambda r: r.attention_row(33, 16, True), lambda r: r.attention_row(9, 16, True, heads=2)])
def test_other_references_compute_the_row(bench, monkeypatch, make) -> None:
    import gpu_refs
    import gpu_rows

    cp = fake_cupy(monkeypatch)
    row = make(gpu_rows)
    xs = row.make(np.random.default_rng(5))
    ref = gpu_refs.REFERENCES[row.reference](cp, xs)
    ref.step()
    assert row.check(xs, np.asarray(ref.out.get())) <= max(row.tol, 1e-6)


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None,
                    reason="needs bash and timeout")
def test_gpu_sh_dry_run_steps_and_summary() -> None:
    """gpu.sh --sim with one test and one row: each step runs under its limit and reports."""
    env = {**os.environ, "WIADSL_GPU_TESTS_K": "test_matmul_large_on_gpu"}
    p = subprocess.run(["bash", str(BENCH / "gpu.sh"), "--sim", "--rows", "i8", "--no-ptxas"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    summary = p.stdout[p.stdout.index("== gpu.sh summary (SIMULATOR DRY RUN"):]
    for step in ("setup", "compile", "tests", "bench"):
        assert re.search(rf"^   {step}: ok \(\d+ s\)$", summary, re.M), summary
    assert "1 passed" in p.stdout and "gpu_bench: 1 rows ok, 0 failed" in p.stdout
    assert summary.rstrip().endswith("gpu.sh: exit 0")
