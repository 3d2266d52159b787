"""LLVM compiles on several threads at once (issue 21, cold compile): target.py's
``object_code`` path parses into a private context and runs the pass pipeline and
code generation outside llvmlite's process-wide lock, and library.py builds a
kernel's helpers on background threads while the kernel itself compiles.

Checked here: that path gives byte-identical object code to the locked one, also
when two threads compile at once; and in a fresh process with no cache, that a
matmul kernel's gemm helper is built on a helper thread, not after the kernel.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from wiadsl.backends.llvm import library
from wiadsl.backends.llvm.gemm_config import current_config
from wiadsl.backends.llvm.library_ir import library_ir
from wiadsl.backends.llvm.target import emit_jit_object, object_code, optimize, parse_and_verify

ROOT = Path(__file__).resolve().parents[2]

KERNEL_IR = """
define void @scale(ptr noalias %out, ptr noalias %in, i64 %n, float %s) {
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %src = getelementptr float, ptr %in, i64 %i
  %x = load float, ptr %src
  %y = fmul float %x, %s
  %dst = getelementptr float, ptr %out, i64 %i
  store float %y, ptr %dst
  %next = add i64 %i, 1
  %done = icmp eq i64 %next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret void
}
"""


def locked_object(text: str, level: int, unroll: bool = True, vectorize: bool | None = None) -> bytes:
    mod = parse_and_verify(text)
    optimize(mod, level, unroll, vectorize)
    return emit_jit_object(mod)


@pytest.fixture(scope="module")
def gemm_ir() -> str:
    return library_ir({"kind": "gemm", "dtype": "f32", "config": current_config().as_dict()})


@pytest.mark.parametrize("level,unroll", [(0, False), (1, False), (2, False), (3, True)])
def test_the_unlocked_path_gives_the_locked_paths_object_code(level: int, unroll: bool) -> None:
    assert object_code(KERNEL_IR, level, unroll) == locked_object(KERNEL_IR, level, unroll)


def test_a_helper_compiles_to_the_same_code_on_either_path(gemm_ir: str) -> None:
    spec = {"kind": "gemm", "dtype": "f32", "config": current_config().as_dict()}
    pipeline = library.pipeline(spec)
    assert object_code(gemm_ir, *pipeline) == locked_object(gemm_ir, *pipeline)


def test_threads_compiling_at_once_each_get_the_serial_result(gemm_ir: str) -> None:
    texts = [gemm_ir, KERNEL_IR, gemm_ir, KERNEL_IR]
    want = [object_code(t, 1, False, True) for t in texts]
    got: list[bytes | None] = [None] * len(texts)
    barrier = threading.Barrier(len(texts))

    def compile_one(i: int) -> None:
        barrier.wait(30)
        got[i] = object_code(texts[i], 1, False, True)
    threads = [threading.Thread(target=compile_one, args=(i,), daemon=True) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a compile hung"
    assert got == want


def test_a_bad_module_is_an_error_on_the_unlocked_path() -> None:
    with pytest.raises(RuntimeError):
        object_code("define i32 @f() {\n  ret i64 0\n}\n", 2)


CHILD = textwrap.dedent("""
    import json, threading
    import numpy as np
    import wiadsl
    from wiadsl.backends.llvm import library

    built = {}
    original = library._object
    def recording(spec, name):
        built[name] = threading.current_thread().name
        return original(spec, name)
    library._object = recording
    mod = wiadsl.jit("kernel mm(input A: f32[M, K], input B: f32[K, N], output C: f32[M, N]) "
                     "{ C = A @ B; }", target="cpu")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((33, 129), np.float32), rng.standard_normal((129, 7), np.float32)
    np.testing.assert_allclose(mod.mm(a, b), a @ b, rtol=1e-4, atol=1e-4)
    print(json.dumps(built))
""")


def test_a_kernels_helpers_are_built_beside_it_on_helper_threads() -> None:
    env = dict(os.environ, WIADSL_CACHE="0", PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, cwd=str(ROOT), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    built = json.loads(done.stdout.strip().splitlines()[-1])
    gemm = [name for name in built if name.startswith("wia.lib.gemm.")]
    assert gemm, built
    assert all(built[name].startswith("wia-helper") for name in gemm + [library.SCRATCH_SYMBOL]), built
