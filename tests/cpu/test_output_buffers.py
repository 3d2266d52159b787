"""Output buffers on the CPU backend: results computed in the caller's buffer.

``kernel(x, y=buf)`` returns ``buf``. A result returned straight from an
allocation that runs once per call is computed in ``buf`` (destination passing,
``backends/llvm/destinations.py``); any other is copied there. A buffer that
overlaps an input is never written by native code while the kernel runs; one
buffer for two outputs (or overlapping ones) is refused with a WiaCallError
naming both (issue 17). NumPy is the oracle.
"""

from __future__ import annotations

import numpy as np
import pytest

import wiadsl
from wiadsl.backends.llvm.destinations import result_allocations
from wiadsl.ir import parse_module
from wiadsl.loops import lower_module

SIZES = [0, 1, 7, 33, 129]
LEVELS = [0, 3]

SRC = """
kernel fused(input a: f32[N], input b: f32[N], output y: f32[N]) { y = relu(a * b + 1.0); }
kernel two(input a: f32[M, K], input b: f32[K, N], output y: f32[M, N], output s: f32[M]) {
    y = a @ b;
    s = reduce_sum(a, axis=1);
}
kernel carried(input a: f32[N], input n: i64, output y: f32[N]) {
    y = a;
    for i in range(n) { y = y * 0.5 + a; }
}
kernel both(input a: f32[N], output y: f32[N], output z: f32[N], output t: f32) {
    y = a;
    z = a * 2.0;
    t = reduce_max(a);
}
"""


def module(level: int):
    return wiadsl.jit(SRC, target="cpu", opt_level=level)


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("n", SIZES)
def test_elementwise_result_lands_in_the_buffer(level: int, n: int) -> None:
    a, b = rand(n), rand(n, seed=1)
    y = np.full(n, np.nan, np.float32)
    assert module(level).fused(a, b, y=y) is y
    np.testing.assert_allclose(y, np.maximum(a * b + 1, 0), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("level", LEVELS)
def test_buffer_that_is_an_input_gets_the_right_result(level: int) -> None:
    a, b = rand(129), rand(129, seed=1)
    want = np.maximum(a * b + 1, 0)
    module(level).fused(a, b, y=a)  # in place: the kernel must not write a while reading it
    np.testing.assert_allclose(a, want, rtol=1e-5, atol=1e-6)
    x = rand(33, 33)
    want2 = x @ x
    module(level).two(x, x, y=x, s=np.empty(33, np.float32))
    np.testing.assert_allclose(x, want2, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (7, 33, 129), (33, 7, 1), (0, 3, 5)])
def test_matmul_and_reduction_into_buffers(level: int, m: int, k: int, n: int) -> None:
    a, b = rand(m, k), rand(k, n, seed=1)
    y, s = np.empty((m, n), np.float32), np.empty(m, np.float32)
    got = module(level).two(a, b, y=y, s=s)
    assert got[0] is y and got[1] is s
    np.testing.assert_allclose(y, a @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(s, a.sum(axis=1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("trips", [0, 1, 5])
def test_loop_carried_output_into_buffer(level: int, trips: int) -> None:
    a = rand(33)
    want = a.copy()
    for _ in range(trips):
        want = want * np.float32(0.5) + a
    y = np.empty(33, np.float32)
    assert module(level).carried(a, np.int64(trips), y=y) is y
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("level", LEVELS)
def test_passthrough_shared_buffer_and_scalar_outputs(level: int) -> None:
    a = rand(7)
    y, z = np.empty(7, np.float32), np.empty(7, np.float32)
    got_y, got_z, t = module(level).both(a, y=y, z=z)
    assert got_y is y and got_z is z
    np.testing.assert_array_equal(y, a)
    np.testing.assert_array_equal(z, a * 2)
    assert t == a.max()


@pytest.mark.parametrize("level", LEVELS)
def test_one_buffer_for_two_outputs_is_refused(level: int) -> None:
    """Issue 17: ``y`` used to come back holding ``z``. Refused before anything runs,
    naming both outputs, for the same buffer and for overlapping views of one."""
    a = rand(7)
    shared = np.full(7, -1.0, np.float32)
    with pytest.raises(wiadsl.WiaCallError, match=r"outputs 'y' and 'z'.*same buffer"):
        module(level).both(a, y=shared, z=shared)
    np.testing.assert_array_equal(shared, -1.0)  # untouched
    big = np.full(10, -1.0, np.float32)
    with pytest.raises(wiadsl.WiaCallError, match=r"outputs 'y' and 'z'.*overlapping"):
        module(level).both(a, y=big[:7], z=big[3:])
    np.testing.assert_array_equal(big, -1.0)
    # disjoint views of one array are fine
    two = np.empty(14, np.float32)
    y, z, _ = module(level).both(a, y=two[:7], z=two[7:])
    np.testing.assert_array_equal(two, np.concatenate([a, a * 2]))


def test_shared_output_buffer_refused_on_every_target() -> None:
    """Every target's call path refuses it the same way (the check is in bind_call),
    and the CPU kernel's own ``run_into`` refuses it too."""
    a = rand(7)
    for target in ("cpu", "interp", "systolic", "ptxsim", "cuda"):
        try:
            k = wiadsl.jit(SRC, kernel="both", target=target)
        except wiadsl.WiaError:  # a target this machine does not have (cuda)
            continue
        shared = np.empty(7, np.float32)
        with pytest.raises(wiadsl.WiaCallError, match="outputs 'y' and 'z'"):
            k(a, y=shared, z=shared)
        if target == "cuda":
            continue  # refused before any device work; running needs a GPU
        y, z, t = k(a, y=np.empty(7, np.float32), z=np.empty(7, np.float32))
        np.testing.assert_allclose(z, a * 2, rtol=1e-6)
    cpu = wiadsl.jit(SRC, kernel="both", target="cpu")
    compiled = cpu.compiled_for([a])
    shared = np.empty(7, np.float32)
    with pytest.raises(wiadsl.WiaCallError, match="outputs 'y' and 'z'"):
        compiled.run_into([a], [shared, shared, None])


CHAIN = """
func @f(%a: tensor<?xf32>) -> (tensor<?xf32>, tensor<?xf32>, f32) attributes {kernel, outputs = ["y", "z", "t"]} {
^entry:
  %0 = tensor.relu %a : tensor<?xf32>
  %t = arith.constant 1.0 : f32
  return %0, %0, %t : tensor<?xf32>, tensor<?xf32>, f32
}
"""

CARRIED = """
func @f(%A: tensor<?xf32>, %n: i64) -> tensor<?xf32> attributes {kernel, outputs = ["y"]} {
^entry:
  %z = arith.constant 0 : i64
  %one = arith.constant 1 : i64
  br ^loop(%z, %A : i64, tensor<?xf32>)
^loop(%i: i64, %acc: tensor<?xf32>):
  %c = arith.cmpi slt, %i, %n : i64
  cond_br %c, ^body, ^exit
^body:
  %u = tensor.neg %acc : tensor<?xf32>
  %next = arith.add %i, %one : i64
  br ^loop(%next, %u : i64, tensor<?xf32>)
^exit:
  return %acc : tensor<?xf32>
}
"""


def test_allocation_returned_directly_takes_the_first_buffer_only() -> None:
    func = lower_module(parse_module(CHAIN), {"f": [(8,)]})["f"]
    found = result_allocations(func)
    allocs = [op for op in func.walk() if op.name == "loop.alloc"]
    # the relu's buffer is returned as y and as z: only y's buffer may hold it
    assert list(found.values()) == [0] and id(allocs[-1]) in found


def test_allocation_in_a_loop_never_takes_a_buffer() -> None:
    func = lower_module(parse_module(CARRIED), {"f": [(8,), ()]})["f"]
    assert result_allocations(func) == {}


@pytest.mark.parametrize("n", [16384, 16385, 70001])
def test_a_large_result_computed_in_place_takes_a_fresh_array_every_call(n: int) -> None:
    """A result of WRAP_BYTES (64 KiB) or more is handed over without a copy on the
    first call; when the entry computes it in the caller's buffer (``fused``), every
    later call gives it a fresh array instead (no copy either way, and the native
    call path): each result owns its memory and keeps its values."""
    mod = module(3)
    results = []
    for seed in range(4):
        a, b = rand(n, seed=seed), rand(n, seed=seed + 10)
        results.append((mod.fused(a, b), np.maximum(a * b + 1, 0)))
    assert all(y.flags.owndata for y, _ in results[1:])
    for y, want in results:
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


def test_a_large_result_not_in_place_is_still_handed_over() -> None:
    """``carried``'s result comes out of a loop (never the caller's buffer): large, it
    is handed over as the kernel allocated it, call after call."""
    mod = module(3)
    a = rand(20000)
    for _ in range(3):
        y = mod.carried(a, 3)
        assert not y.flags.owndata
        want = a.copy()
        for _ in range(3):
            want = want * 0.5 + a
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


def test_calls_into_buffers_take_the_call_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """After one checked call into buffers, calls like it run through the call plan
    (no binding, no checks in Python beyond the plan's), with the same results; a
    buffer the plan does not take goes the checking way, which refuses it as before."""
    mod = module(3)
    fn = mod.kernels["two"]
    checked = []
    original = type(fn)._call_checked
    monkeypatch.setattr(type(fn), "_call_checked",
                        lambda self, args, kwargs: checked.append(1) or original(self, args, kwargs))
    for seed in range(4):
        a, b = rand(7, 33, seed=seed), rand(33, 129, seed=seed + 1)
        y, s = np.full((7, 129), np.nan, np.float32), np.full(7, np.nan, np.float32)
        got = mod.two(a, b, y=y, s=s)
        assert got[0] is y and got[1] is s
        np.testing.assert_allclose(y, a @ b, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(s, a.sum(axis=1), rtol=1e-4, atol=1e-4)
        y2, s2 = mod.two(a, b, s=s)  # one buffer, one fresh result
        assert s2 is s and y2 is not y
        np.testing.assert_allclose(y2, a @ b, rtol=1e-4, atol=1e-4)
    assert len(checked) == 1
    with pytest.raises(wiadsl.WiaCallError, match="output 'y'"):
        mod.two(a, b, y=np.empty((7, 129), np.float64))
    with pytest.raises(wiadsl.WiaCallError, match="dim 'N' is 129 .* but 128 from argument 'y'"):
        mod.two(a, b, y=np.empty((7, 128), np.float32))
    with pytest.raises(wiadsl.WiaCallError, match="C-contiguous"):
        mod.two(a, b, y=np.empty((129, 7), np.float32).T)
    shared = np.full(7, -1.0, np.float32)
    with pytest.raises(wiadsl.WiaCallError, match=r"outputs 'y' and 'z'.*same buffer"):
        mod.both(a[0, :7].copy(), y=shared, z=shared)
    mod.both(a[0, :7], y=np.empty(7, np.float32), z=np.empty(7, np.float32))  # plans both
    with pytest.raises(wiadsl.WiaCallError, match=r"outputs 'y' and 'z'.*same buffer"):
        mod.both(a[0, :7].copy(), y=shared, z=shared)
    np.testing.assert_array_equal(shared, -1.0)


def test_a_planned_call_into_an_input_buffer_gets_the_right_result() -> None:
    mod = module(3)
    for seed in range(3):
        a, b = rand(129, seed=seed), rand(129, seed=seed + 5)
        want = np.maximum(a * b + 1, 0)
        assert mod.fused(a, b, y=a) is a
        np.testing.assert_allclose(a, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n", [7, 33, 20000])
def test_a_first_call_into_a_buffer_leaves_the_native_plan(n: int) -> None:
    """A kernel first called into a buffer learns its result's shape from it, so its
    plan has the whole-call native path (for calls with and without buffers); plain
    calls then get fresh arrays, never the buffer of an earlier call."""
    mod = module(3)
    a, b = rand(n), rand(n, seed=1)
    y = np.full(n, np.nan, np.float32)
    assert mod.fused(a, b, y=y) is y
    assert mod.kernels["fused"]._plan.fast is not None
    before = y.copy()
    for seed in range(3):
        a2, b2 = rand(n, seed=seed + 2), rand(n, seed=seed + 3)
        fresh = mod.fused(a2, b2)
        assert fresh is not y
        np.testing.assert_allclose(fresh, np.maximum(a2 * b2 + 1, 0), rtol=1e-5, atol=1e-6)
        assert mod.fused(a2, b2, y=y) is y
        np.testing.assert_allclose(y, fresh, rtol=0, atol=0)
    np.testing.assert_array_equal(mod.fused(a, b, y=y), before)
