"""Each component of the key changes the key, and ``cache why`` names it."""

from __future__ import annotations

import numpy as np

import wiadsl
from wiadsl import records
from wiadsl.backends.llvm.backend import CpuKernel
from wiadsl.backends.llvm.gemm import GemmConfig, default_config
from wiadsl.backends.llvm.keys import cpu_key_parts
from wiadsl.cache.cli import cache_info, cache_why
from wiadsl.cache.key import compiler_version, diff_components
from wiadsl.dtypes import DType
from wiadsl.ir.parser import parse_module
from wiadsl.ir.printer import print_module
from wiadsl.passes import default_pipeline

from .helpers import AXPY, SOFTMAX

GENERIC = "kernel twice(input x: tensor, output y: tensor) { y = x + x; }"
F32 = np.dtype(np.float32)


def softmax_ir():
    return wiadsl.jit(SOFTMAX, kernel="probs", target="cpu").ir_for()


def parts(module=None, kernel="probs", shapes=((4, 8),), dtypes=(F32,), level=3, gemm=None):
    module = module or softmax_ir()
    return cpu_key_parts(module, kernel, shapes, dtypes, level, default_pipeline(level),
                         (gemm or default_config()).label())


def changed(a, b):
    assert a.digest() != b.digest()
    return diff_components(a.components(), b.components())


def test_same_inputs_same_key():
    assert parts().digest() == parts().digest()


def test_shape_changes_the_key():
    assert changed(parts(), parts(shapes=((4, 9),))) == ["shapes"]


def test_dtype_changes_the_key():
    fn = wiadsl.jit(GENERIC, kernel="twice", target="cpu")
    ir32 = fn.ir_for({"x": (DType.F32, 1)})
    ir64 = fn.ir_for({"x": (DType.F64, 1)})
    a = parts(ir32, "twice", ((5,),), (F32,))
    b = parts(ir64, "twice", ((5,),), (np.dtype(np.float64),))
    assert "dtypes" in changed(a, b)


def test_flag_changes_the_key():
    assert changed(parts(level=3), parts(level=2)) == ["flags", "pipeline"]


def test_gemm_config_changes_the_key():
    other = records.replace(default_config(), kc=128)
    assert changed(parts(), parts(gemm=other)) == ["gemm"]


def edited_callee():
    text = print_module(softmax_ir())
    head = text.index("func @nn.softmax(")
    body_end = text.index("\n}", head)
    edited = text[:head] + text[head:body_end].replace("tensor.exp", "tensor.tanh") + text[body_end:]
    assert edited != text
    return parse_module(edited)


def test_stdlib_callee_changes_the_key():
    assert changed(parts(), parts(edited_callee())) == ["callee @nn.softmax"]


def test_compiler_version_changes_the_key():
    base = parts()
    assert base.version == compiler_version() and "wiadsl" in base.version
    assert changed(base, records.replace(base, version=base.version + "+1")) == ["version"]


def test_the_target_names_the_toolchain_and_the_version_does_not():
    """llvmlite and LLVM make the CPU's code: the CPU backend keys on them (kernels,
    helpers and the source-level key alike); the cache's own version is the
    compiler's alone (the cache layer knows no backend)."""
    import llvmlite

    from wiadsl.backends.llvm.backend import BACKEND
    from wiadsl.backends.llvm.host import llvm_host

    toolchain = f"llvmlite {llvmlite.__version__} LLVM {llvm_host().llvm_version}"
    assert parts().target.endswith(toolchain) and parts().target.startswith("cpu ")
    assert toolchain in BACKEND.cache_host()
    assert "llvmlite" not in compiler_version() and "LLVM" not in compiler_version()


def test_cpu_and_target_change_the_key():
    base = parts()
    assert changed(base, records.replace(base, cpu="other")) == ["cpu"]
    assert changed(base, records.replace(base, target="cpu riscv64")) == ["target"]


def test_why_names_the_changed_shape():
    fn = wiadsl.jit(AXPY, kernel="axpy", target="cpu", shapes="static")
    fn(np.ones(5, np.float32), np.ones(5, np.float32), np.float32(1))
    assert "only one entry" in cache_why("axpy")
    fn(np.ones(6, np.float32), np.ones(6, np.float32), np.float32(1))
    why = cache_why("axpy")
    assert "changed: shapes" in why and "[[5], [5], []] -> [[6], [6], []]" in why
    assert "axpy: 2 specializations" in cache_info()
    assert "no cache entries" in cache_why("nope")


def test_why_names_the_changed_stdlib_callee():
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    CpuKernel(softmax_ir(), "probs").run([x])
    got = CpuKernel(edited_callee(), "probs").run([x])[0]
    e = np.tanh(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)
    why = cache_why("probs")
    assert "changed: callee @nn.softmax" in why and "canonical IR changed" in why


def test_clear_removes_everything(cache_dir):
    from wiadsl.cache.cli import cache_clear

    wiadsl.jit(AXPY, kernel="axpy", target="cpu")(np.ones(3, np.float32), np.ones(3, np.float32),
                                                  np.float32(1))
    from wiadsl.cache import store as cache_store

    files = [p for p in cache_store.root().rglob("*") if p.is_file()]
    assert len(files) >= 3  # the object, the source index and its specialization
    assert f"removed {len(files)} files" in cache_clear()
    assert not cache_store.root().exists()
    assert "entries: 0 compiled kernels" in cache_info()
    assert isinstance(GemmConfig(), GemmConfig)
