"""The jit's fast call path (``CallPlan``, ``CpuKernel.call``): a repeated call skips the
general binding, but every argument is still checked -- anything unusual goes the
general way, so each call gives the right result or a WiaError naming the argument."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

import wiadsl
from wiadsl import records
from wiadsl.diagnostics import WiaCallError, WiaError

ADD = "kernel add(input a: f32[N], input b: f32[N], output c: f32[N]) { c = a + b; }"
SCALE = """
kernel scale(input x: f32[N], input s: f32, input flag: bool, output y: f32[N]) {
    y = x * s;
    if flag { y = y + 1.0; }
}
"""
STATS = """
kernel stats(input x: f32[N], input scale: f32, output total: f32, output scaled: f32[N],
             output n: i64) {
    total = reduce_sum(x);
    scaled = x * scale;
    n = N;
}
"""
MATMUL = "kernel mm(input A: f32[M, K], input B: f32[K, N], output C: f32[M, N]) { C = A @ B; }"
ROOT = Path(__file__).resolve().parents[2]
ANY = "kernel twice(input t: tensor, output y: tensor) { y = t + t; }"


@pytest.fixture(scope="module")
def add():
    return wiadsl.jit(ADD, kernel="add")


def f32(*values: float) -> np.ndarray:
    return np.array(values, np.float32)


def warm(fn, *args):
    """Call twice, so the second call and all later ones have a plan."""
    fn(*args)
    out = fn(*args)
    assert fn._plan is not None
    return out


def test_repeated_calls_take_the_plan_and_read_new_data(add):
    a, b = f32(1, 2, 3, 4), f32(10, 20, 30, 40)
    np.testing.assert_array_equal(warm(add, a, b), a + b)
    plan = add._plan
    for i in range(5):
        x, y = a * i, b - i
        got = add(x, y)
        np.testing.assert_array_equal(got, x + y)
        assert add._plan is plan and got.dtype == np.float32 and got.flags.c_contiguous


def test_each_call_returns_a_fresh_array(add):
    a, b = f32(1, 2, 3, 4), f32(1, 1, 1, 1)
    first = warm(add, a, b)
    second = add(a, b)
    assert first is not second
    first[:] = 0
    np.testing.assert_array_equal(second, a + b)


def test_wrong_dtype_after_the_plan_names_the_argument(add):
    warm(add, f32(1, 2, 3, 4), f32(1, 2, 3, 4))
    with pytest.raises(WiaCallError, match="argument 'b': expected f32\\[N\\], got a float64"):
        add(f32(1, 2, 3, 4), np.ones(4))
    with pytest.raises(WiaCallError, match="argument 'a'"):
        add(np.ones(4, np.int32), f32(1, 2, 3, 4))
    with pytest.raises(WiaCallError, match="argument 'a'"):  # not native byte order
        add(np.ones(4, ">f4"), f32(1, 2, 3, 4))


def test_wrong_shape_after_the_plan_names_the_argument(add):
    warm(add, f32(1, 2, 3, 4), f32(1, 2, 3, 4))
    with pytest.raises(WiaCallError, match="dim 'N' is 4 from argument 'a'.*5 from argument 'b'"):
        add(f32(1, 2, 3, 4), f32(1, 2, 3, 4, 5))
    with pytest.raises(WiaCallError, match="argument 'a': expected f32\\[N\\] \\(rank 1\\)"):
        add(np.ones((2, 2), np.float32), f32(1, 2, 3, 4))
    with pytest.raises(WiaCallError, match="takes 2 input"):
        add(f32(1, 2, 3, 4), f32(1, 2, 3, 4), f32(1, 2, 3, 4))
    with pytest.raises(WiaCallError, match="missing input"):
        add(f32(1, 2, 3, 4))


def test_a_new_shape_gets_its_own_plan_and_both_stay_right(add):
    a4, a7 = f32(1, 2, 3, 4), np.arange(7, dtype=np.float32)
    warm(add, a4, a4)
    warm(add, a7, a7)
    for _ in range(3):  # alternate: each call finds its own plan
        np.testing.assert_array_equal(add(a4, a4), a4 * 2)
        np.testing.assert_array_equal(add(a7, a7), a7 * 2)
    assert {(4,), (7,)} <= {key[0] for key in add._plans}


def test_non_contiguous_unaligned_and_subclass_inputs_are_right(add):
    a = f32(1, 2, 3, 4)
    warm(add, a, a)
    strided = np.arange(8, dtype=np.float32)[::2]
    np.testing.assert_array_equal(add(strided, a), strided + a)
    raw = np.zeros(4 * 4 + 1, np.uint8)[1:].view(np.float32)  # unaligned float32 data
    raw[:] = [5, 6, 7, 8]
    assert not raw.flags.aligned
    np.testing.assert_array_equal(add(raw, a), raw + a)

    class Sub(np.ndarray):
        pass
    sub = a.view(Sub)
    np.testing.assert_array_equal(add(sub, sub), a * 2)
    fortran = np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    mm = wiadsl.jit(MATMUL, kernel="mm")
    b = np.ones((3, 2), np.float32)
    warm(mm, np.ascontiguousarray(fortran), b)
    np.testing.assert_allclose(mm(fortran, b), fortran @ b)
    np.testing.assert_allclose(mm(fortran.T.T, b), fortran @ b)


def test_read_only_inputs_are_read(add):
    a, b = f32(1, 2, 3, 4), f32(4, 3, 2, 1)
    warm(add, a, b)
    a.flags.writeable = False
    np.testing.assert_array_equal(add(a, b), f32(5, 5, 5, 5))
    np.testing.assert_array_equal(add(b, a), f32(5, 5, 5, 5))


def test_read_only_output_buffer_names_the_output(add):
    a = f32(1, 2, 3, 4)
    warm(add, a, a)
    out = np.zeros(4, np.float32)
    out.flags.writeable = False
    with pytest.raises(WiaCallError, match="output 'c': the buffer must be C-contiguous and writable"):
        add(a, a, c=out)
    with pytest.raises(WiaCallError, match="output 'c'"):
        add(a, a, c=np.zeros(4, np.float64))
    with pytest.raises(WiaCallError, match="dim 'N' is 4 from argument 'a'.*argument 'c'"):
        add(a, a, c=np.zeros(5, np.float32))


def test_keyword_calls_and_output_buffers(add):
    a, b = f32(1, 2, 3, 4), f32(1, 1, 1, 1)
    warm(add, a, b)
    np.testing.assert_array_equal(add(a, b=b), a + b)
    np.testing.assert_array_equal(add(b=b, a=a), a + b)
    out = np.zeros(4, np.float32)
    assert add(a, b, c=out) is out
    np.testing.assert_array_equal(out, a + b)
    with pytest.raises(WiaCallError, match="unknown argument 'd'"):
        add(a, b, d=out)


def test_the_same_array_twice(add):
    a = f32(1, 2, 3, 4)
    warm(add, a, a)
    np.testing.assert_array_equal(add(a, a), a * 2)
    np.testing.assert_array_equal(a, f32(1, 2, 3, 4))  # inputs are left alone


def test_python_and_numpy_scalars_for_a_scalar_input():
    k = wiadsl.jit(SCALE, kernel="scale")
    x = f32(1, 2, 3)
    warm(k, x, np.array(2, np.float32), np.array(True))  # 0-d arrays: the plan takes them
    np.testing.assert_array_equal(k(x, np.array(3, np.float32), np.array(False)), x * 3)
    np.testing.assert_array_equal(k(x, 2.0, True), x * 2 + 1)  # Python scalars
    np.testing.assert_array_equal(k(x, 2, False), x * 2)
    np.testing.assert_array_equal(k(x, np.float32(0.5), np.bool_(True)), x * 0.5 + 1)
    np.testing.assert_array_equal(k(x, np.array(3, np.float32), np.array(True)), x * 3 + 1)
    with pytest.raises(WiaCallError, match="argument 's'"):
        k(x, "2", True)
    with pytest.raises(WiaCallError, match="argument 's': expected f32"):
        k(x, np.array(2.0), True)  # a 0-d float64 array
    with pytest.raises(WiaCallError, match="argument 's': expected f32 \\(rank 0\\)"):
        k(x, f32(2), True)


def test_several_outputs_with_scalars():
    k = wiadsl.jit(STATS, kernel="stats")
    x = f32(1, 2, 3, 4)
    for scale in (2.0, np.array(3, np.float32), np.array(4, np.float32)):
        total, scaled, n = k(x, scale)
        assert isinstance(total, np.float32) and total == 10
        np.testing.assert_array_equal(scaled, x * np.float32(scale))
        assert isinstance(n, np.int64) and n == 4
    assert k._plan is not None


def test_empty_and_large_arrays(add):
    empty = np.zeros(0, np.float32)
    for _ in range(3):
        got = add(empty, empty)
        assert got.shape == (0,) and got.dtype == np.float32
    big = np.arange(1 << 16, dtype=np.float32)  # a result over WRAP_BYTES: wrapped
    for i in range(3):
        np.testing.assert_array_equal(add(big, big + i), big * 2 + i)


def test_calls_from_several_threads_do_not_mix(add):
    arrays = [np.full(4, i, np.float32) for i in range(8)]
    warm(add, arrays[0], arrays[0])
    errors: list[str] = []

    def work(i: int) -> None:
        for _ in range(300):
            got = add(arrays[i], arrays[i])
            if not np.array_equal(got, arrays[i] * 2):
                errors.append(f"thread {i}: {got}")
    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_tensor_params_plan_per_dtype():
    k = wiadsl.jit(ANY, kernel="twice")
    i32, f64 = np.arange(4, dtype=np.int32), np.arange(4, dtype=np.float64)
    for _ in range(3):  # the same shape, two dtypes: each call is right
        got = k(i32)
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, i32 * 2)
        got = k(f64)
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got, f64 * 2)


def test_backend_call_takes_only_exact_arrays():
    k = wiadsl.jit(ADD, kernel="add")
    a = f32(1, 2, 3, 4)
    warm(k, a, a)
    call = k._plan.call
    assert call((a, a)) is not None
    for bad in [(a,), (a, a, a), (a, a.astype(np.float64)), (a, f32(1, 2, 3)), (a, 1.0),
                (a, np.arange(8, dtype=np.float32)[::2]), (a, list(a)), (a, np.float32(1))]:
        assert call(bad) is None, bad


def test_interpreter_target_takes_the_general_way():
    k = wiadsl.jit(ADD, kernel="add", target="interp")
    a = f32(1, 2, 3, 4)
    for _ in range(3):
        np.testing.assert_array_equal(k(a, a), a * 2)
    assert k._plan is None
    with pytest.raises(WiaError, match="argument 'b'"):
        k(a, np.ones(4))


def test_a_runtime_error_on_the_fast_path_leaves_the_kernel_usable():
    k = wiadsl.jit("kernel p(input a: i64[N], input b: i64[N], output c: i64[N]) { c = a ** b; }",
                   kernel="p")
    a, ok, bad = (np.array(v, np.int64) for v in ([2, 3], [2, 1], [1, -1]))
    warm(k, a, ok)
    for _ in range(2):
        with pytest.raises(wiadsl.WiaRuntimeError, match="negative integer powers"):
            k(a, bad)
        np.testing.assert_array_equal(k(a, ok), [4, 3])


def test_checked_calls_run_through_the_plan_of_their_checked_inputs(monkeypatch):
    k = wiadsl.jit(SCALE, kernel="scale")
    x = f32(1, 2, 3)
    warm(k, x, np.array(2, np.float32), np.array(True))
    (compiled,) = k._specializations.values()  # the CpuKernel behind every plan

    def no_run(inputs):
        raise AssertionError("the plan should have run this call")
    monkeypatch.setattr(compiled, "run", no_run)
    np.testing.assert_array_equal(k(x, 2.0, True), x * 2 + 1)  # Python scalars, bound
    np.testing.assert_array_equal(k(x, s=np.float32(3), flag=False), x * 3)  # by name
    np.testing.assert_array_equal(k(np.arange(6, dtype=np.float32)[::2], 1.0, False),
                                  [0, 2, 4])  # a strided view, copied by the binding


def test_the_steady_state_is_one_native_call(add):
    """After two calls the plan has a native fast call (backends/llvm/fastcall.py) that
    checks the arguments itself; whatever it does not take goes the checking way."""
    a, b = f32(1, 2, 3, 4), f32(4, 3, 2, 1)
    warm(add, a, b)
    fast = add._plan.fast
    assert fast is not None
    got = fast((a, b))
    np.testing.assert_array_equal(got, a + b)
    assert fast((a, b)) is not got  # a fresh array per call
    from wiadsl.backends.contract import NOT_RUN

    raw = np.zeros(17, np.uint8)
    unaligned = raw[1:].view(np.float32)
    assert not unaligned.flags.aligned
    strided = np.arange(8, dtype=np.float32)[::2]
    for bad in [(a,), (a, b, a), (a, b.astype(np.float64)), (a, f32(1, 2, 3)), (a, strided),
                (a, list(b)), (a, 1.0), (a, b.reshape(2, 2)), (a, b.astype(">f4")),
                (a, unaligned), (a, b.reshape(1, 4).view(np.matrix))]:
        assert fast(bad) is NOT_RUN, bad
    for other in (strided, unaligned):  # the checking way copies them
        np.testing.assert_array_equal(add(a, other), a + other)
    read_only = b.copy()
    read_only.flags.writeable = False
    np.testing.assert_array_equal(fast((a, read_only)), a + b)


def test_a_result_shape_that_varies_with_the_data():
    """The output's shape depends on a value, not on the input shapes: the buffer the
    fast call made has the first call's shape, the helper says so, and the call is
    made again the checking way (kernels are pure); every call stays right."""
    k = wiadsl.jit("kernel head(input x: f32[N], input n: i64, output y: tensor) "
                   "{ y = x[0:n]; }", kernel="head")
    x = np.arange(8, dtype=np.float32)
    for n in [3, 3, 3, 5, 3, 8, 0, 5]:
        np.testing.assert_array_equal(k(x, np.int64(n)), x[:n])


def test_the_object_layout_is_verified():
    from wiadsl.backends.llvm import fastcall

    layout = fastcall.probe()
    assert layout is not None  # CPython 3.10+ and NumPy 1.x/2.x lay them out alike
    a = np.ones((2, 3), np.float32)
    assert fastcall._agrees(layout, a)
    wrong = records.replace(layout, dims=layout.dims + 8)  # the strides field
    assert not fastcall._agrees(wrong, a)


def test_the_call_helper_outlives_its_module(tmp_path):
    """At interpreter exit the library module's objects may go before the builtin
    ``call_helper`` returned, which reads its definition when it is freed: a process
    crashed at exit about half the time under load. Here the module is emptied first,
    in a child whose allocator fills freed memory (PYTHONMALLOC=debug), and the
    builtin is still read and freed."""
    program = textwrap.dedent("""
        import gc
        from wiadsl.backends.llvm import library
        helper = library.call_helper()
        library.__dict__.clear()
        gc.collect()
        reuse = [bytes(32) for _ in range(100_000)]
        print(helper.__name__)
        del helper
    """)
    env = dict(os.environ, PYTHONMALLOC="debug", WIADSL_CACHE_DIR=str(tmp_path),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["wia_call"]


def test_calls_that_alternate_shapes_each_take_their_native_plan(add, monkeypatch):
    """Shape-generic code serves both shapes; each keeps a plan with a native call,
    and a call of the other shape switches to that plan's native call (the Python
    plan calls are made to take nothing here, and the checking way to fail)."""
    a, b = f32(1, 2, 3, 4), f32(1, 2, 3)
    warm(add, a, a)
    warm(add, b, b)
    for key in [(a.shape, a.shape), (b.shape, b.shape)]:
        plan = add._plans[key]
        assert plan.fast is not None
        add._plans[key] = records.replace(plan, call=lambda args, buffers=(): None)
    add._plan = add._plans[(a.shape, a.shape)]
    import wiadsl.runtime.jit as jit_module

    def no_binding(*args, **kwargs):
        raise AssertionError("a planned shape went the checking way")
    monkeypatch.setattr(jit_module, "bind_call", no_binding)
    for _ in range(3):
        np.testing.assert_array_equal(add(a, a), a * 2)
        np.testing.assert_array_equal(add(b, b), b * 2)


def test_steady_calls_by_keyword_take_the_plan(monkeypatch):
    """Keywords that name exactly the remaining inputs, in any order, are taken by
    position once a checked call has shown it: such calls do not bind again. Other
    keywords (an output buffer, a missing input, an unknown name) go the checking way."""
    add = wiadsl.jit(ADD, kernel="add")
    a, b = f32(1, 2, 3, 4), f32(5, 6, 7, 8)
    for call in (lambda x, y: add(b=y, a=x), lambda x, y: add(x, b=y), lambda x, y: add(a=x, b=y)):
        call(a, b)
        call(a, b)
    import wiadsl.runtime.jit as jit_module
    real = jit_module.bind_call

    def no_binding(*args, **kwargs):
        raise AssertionError("a steady call by keyword went the checking way")
    monkeypatch.setattr(jit_module, "bind_call", no_binding)
    for i in range(3):
        x, y = a * i, b + i
        np.testing.assert_array_equal(add(b=y, a=x), x + y)
        np.testing.assert_array_equal(add(x, b=y), x + y)
        np.testing.assert_array_equal(add(a=x, b=y), x + y)
    monkeypatch.setattr(jit_module, "bind_call", real)
    out = np.zeros(4, np.float32)
    assert add(a=a, b=b, c=out) is out and (out == a + b).all()
    with pytest.raises(WiaCallError, match="missing"):
        add(b=b)
    with pytest.raises(WiaCallError, match="unknown argument 'd'"):
        add(a=a, b=b, d=b)
    with pytest.raises(WiaCallError, match="argument 'b'"):
        add(b=np.zeros(4, np.float64), a=a)  # a remembered order still checks each argument


def test_a_steady_call_is_its_plans_native_call_alone(monkeypatch):
    """Once a call ran its plan's native call, the next call runs that call and none of
    the Python call path (``KernelFunction._call_by_plans``), its stats the plan's; a call of
    another shape, or one that fails, goes that way and then leaves its own plan's."""
    add = wiadsl.jit(ADD, kernel="add")
    a, b = f32(1, 2, 3, 4), f32(1, 2, 3)
    warm(add, a, a)
    add(a, a)
    plan = add._plan
    assert add._steady is plan.fast is not None and add.stats is plan.stats
    import wiadsl.runtime.jit as jit_module
    real = jit_module.KernelFunction._call_by_plans

    def python_path(*args, **kwargs):
        raise AssertionError("a steady call went the Python way")
    monkeypatch.setattr(jit_module.KernelFunction, "_call_by_plans", python_path)
    for i in range(3):
        np.testing.assert_array_equal(add(a * i, a), a * i + a)
    assert add.stats is plan.stats
    monkeypatch.setattr(jit_module.KernelFunction, "_call_by_plans", real)
    warm(add, b, b)
    np.testing.assert_array_equal(add(b, b), b * 2)
    assert add._steady is add._plan.fast and add._plan is not plan
    with pytest.raises(WiaCallError, match="argument 'b'"):
        add(b, np.ones(3))
    assert add._steady is None
    np.testing.assert_array_equal(add(a, a), a * 2)  # the other plan, by the Python way
    np.testing.assert_array_equal(add(a, a), a * 2)
    assert add._steady is plan.fast and add.stats is plan.stats
