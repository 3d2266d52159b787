"""Non-temporal stores on the CPU (loops/stream_stores.py, runtime.py's ``stream_store``):
the kernel's LLVM IR marks the streamed stores ``!nontemporal`` behind a 16-byte
alignment check and fences before returning; results match NumPy whatever the
buffers' alignment (NumPy's own, views one element in, caller-given outputs), at odd
sizes and at one and two threads. The threshold is lowered through the
``loop_pipeline`` option so that small arrays stream: the default is the host's
last-level cache, which no test may assume."""

from __future__ import annotations

import numpy as np
import pytest

import wiadsl
from wiadsl.backends.llvm import caches
from wiadsl.backends.llvm.compile import cpu_loop_pipeline, lower_kernel
from wiadsl.backends.llvm.host import host
from wiadsl.ir import parse_module, print_module

SRC = "kernel fused(input a: f32[N], input b: f32[N], input c: f32[N], output y: f32[N]) { y = relu(a * b + c); }"
STREAM = "stream-stores{bytes=64}"

TENSOR = """
func @fused(%a: tensor<?xf32>, %b: tensor<?xf32>, %c: tensor<?xf32>) -> tensor<?xf32> attributes {kernel, outputs = ["y"]} {
^entry:
  %0 = tensor.mul %a, %b : tensor<?xf32>
  %1 = tensor.add %0, %c : tensor<?xf32>
  %2 = tensor.relu %1 : tensor<?xf32>
  return %2 : tensor<?xf32>
}
"""

rng = np.random.default_rng(13)


pytestmark = pytest.mark.usefixtures("restore_thread_count")


def test_streamed_stores_are_nontemporal_behind_an_alignment_check_and_fenced():
    lowered = lower_kernel(parse_module(TENSOR), "fused", [[4099]] * 3, loop_pipeline=STREAM)
    text = lowered.llvm_ir
    x86 = host().triple.split("-")[0] in ("x86_64", "i386", "i686")
    # CHECK: and i64 {{.*}}, 15
    # CHECK: store <8 x float> {{.*}}, align 16, !nontemporal
    # CHECK: call void @"llvm.x86.sse.sfence"()
    assert ("!nontemporal" in text) == x86
    assert ("llvm.x86.sse.sfence" in text) == x86
    if x86:
        assert ", 15" in text and "align 16, !nontemporal" in text


def test_generic_code_streams_behind_a_size_check():
    from wiadsl.frontend.compile import compile_to_ir

    lowered = lower_kernel(compile_to_ir(SRC), "fused", [[None]] * 3, loop_pipeline=STREAM)
    loops = print_module(lowered.loop_ir)
    assert "arith.cmpi sge" in loops and "{nontemporal}" in loops
    x86 = host().triple.split("-")[0] in ("x86_64", "i386", "i686")
    assert ("!nontemporal" in lowered.llvm_ir) == x86


def test_without_the_pass_no_store_is_nontemporal():
    lowered = lower_kernel(parse_module(TENSOR), "fused", [[4099]] * 3)
    assert "!nontemporal" not in lowered.llvm_ir and "sfence" not in lowered.llvm_ir


def test_the_default_threshold_is_the_last_level_cache():
    assert f"stream-stores{{bytes={caches.last_level_bytes()}," in cpu_loop_pipeline()


def shifted(x: np.ndarray) -> np.ndarray:
    """A copy of ``x`` one element into a larger buffer: 4-byte, not 16-byte, aligned."""
    raw = np.empty(x.size + 1, x.dtype)
    raw[1:] = x
    return raw[1:]


@pytest.mark.parametrize("shapes", ["static", "generic"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n", [1, 7, 33, 129, 4099, 300_001])
def test_results_match_numpy_at_any_alignment(n, threads, shapes):
    """Generic code streams from 64 bytes (16 elements) on and runs the plain loop below."""
    wiadsl.set_num_threads(threads)
    mod = wiadsl.jit(SRC, target="cpu", loop_pipeline=STREAM, shapes=shapes)
    a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    want = np.maximum(a * b + c, 0)
    np.testing.assert_allclose(mod.fused(a, b, c), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(mod.fused(shifted(a), shifted(b), shifted(c)), want, rtol=1e-6, atol=1e-6)
    for y in (np.empty(n, np.float32), shifted(np.zeros(n, np.float32))):
        mod.fused(a, b, c, y=y)
        np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)
