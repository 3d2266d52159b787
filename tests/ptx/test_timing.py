"""Timing a plan on a device (``backends/ptx/timing.py``) and the cuda target's launch arguments.

On the simulator: a recorded run's launches, made again on the same buffers, compute
the same outputs (``when`` conditions and folded grids as the executor chose them);
host steps are counted, not repeated; the batch sizing of ``time_steps`` on a fake
clock. Without a GPU: ``CudaDevice.prepare`` against a stand-in for the driver that
reads each kernel parameter through ``kernelParams`` with the size the PTX ``.entry``
declares, as ``cuLaunchKernel`` does -- every argument the executor builds (device
pointers, sizes, scalars of each dtype, tensor maps) must arrive with that size and value.
"""

from __future__ import annotations

import ctypes
import re
import struct
from types import SimpleNamespace

import numpy as np
import pytest

from wiadsl.backends.ptx import cuda, timing
from wiadsl.backends.ptx.executor import PlanRun
from wiadsl.backends.ptx.program import TargetOptions, ptx_program
from wiadsl.backends.ptx.sim.tensormap import TensorMapArg
from wiadsl.backends.ptx.simbackend import SimDevice

from .helpers import corpus_module

RNG = np.random.default_rng(2201)
MM = "kernel k(input a: f16[M, K], input b: f16[K, N], output y: f16[M, N]) { y = a @ b; }"
SOFTMAX = "import nn;\nkernel k(input x: f32[M, N], output y: f32[M, N]) { y = nn.softmax(x); }"
POW = "kernel k(input a: i32[N], input b: i32[N], output y: i32[N]) { y = a ** b; }"


def program(src: str, shapes: dict | None, arch: str = "sm_90") -> tuple[str, dict]:
    return ptx_program(corpus_module(src), {"k": shapes}, TargetOptions(arch))


def f16(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float16)


# ---------------------------------------------------------------- record and replay


@pytest.mark.parametrize("k", [72, 70])  # symbolic: the wgmma kernel (when), else sm_80's
def test_replayed_launches_recompute_the_outputs(k: int) -> None:
    a, b = f16(20, k), f16(k, 24)
    text, plan = program(MM, None)
    dev = SimDevice(text)
    (y,), runner, calls = timing.record_plan(plan, dev, [a, b])
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(y, want, rtol=2e-2, atol=2e-2)
    assert [c.kernel for c in calls] == ["k_k1_matmul" if k == 72 else "k_k1_matmul_sm80"]
    assert runner.host_steps == 0 and dev.launches == 1
    out = runner.buffers[plan["blocks"][0]["steps"][-1]["values"][0]["buffer"]].handle
    out[:] = 0xFF  # the replay must write every output element again
    timing.replay(dev, calls)()
    assert dev.launches == 2
    np.testing.assert_array_equal(out.view(np.float16).reshape(20, 24), y)


def test_time_plan_on_the_simulator() -> None:
    x = RNG.standard_normal((5, 33)).astype(np.float32)
    text, plan = program(SOFTMAX, {"x": x.shape})
    dev = SimDevice(text)
    (y,), t = timing.time_plan(plan, dev, [x], seconds=0.0, batches=2)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(1, keepdims=True), rtol=1e-6)
    assert (t.reps, t.batches, t.launches, t.host_steps) == (1, 2, 1, 0) and t.seconds > 0
    assert dev.launches == 1 + 1 + 2  # the recorded run, the warm-up, two batches of one


def test_host_steps_are_counted_not_repeated() -> None:
    """An integer power's error flag is zeroed and read back around the launch."""
    a = np.arange(1, 8, dtype=np.int32)
    text, plan = program(POW, {"a": a.shape, "b": a.shape})
    dev = SimDevice(text)
    (y,), t = timing.time_plan(plan, dev, [a, a % 3], seconds=0.0, batches=1)
    np.testing.assert_array_equal(y, a ** (a % 3))
    assert t.launches == 1 and t.host_steps == 2


def test_batches_are_sized_to_the_time_asked(monkeypatch) -> None:
    clock = [0.0]
    monkeypatch.setattr(timing.time, "perf_counter", lambda: clock[0])
    steps = []

    def step() -> None:  # 2 ms of "device work" per step
        steps.append(1)
        clock[0] += 0.002
    t = timing.time_steps(step, lambda: None, seconds=0.1, batches=5)
    assert (t.reps, t.batches) == (10, 5) and t.seconds == pytest.approx(0.002)
    assert len(steps) == 1 + 1 + 50  # warm-up, sizing, 5 batches of 10
    t = timing.time_steps(step, lambda: None, seconds=0.0, batches=3, warmup=False)
    assert (t.reps, t.batches) == (1, 3)


def test_copy_bandwidth_copies() -> None:
    dev = SimDevice("")
    bandwidth, t = timing.copy_bandwidth(dev, 4096, seconds=0.0, batches=1)
    assert bandwidth > 0 and t.reps == 1


# ---------------------------------------------------------------- cuda launch arguments

#: PTX parameter type -> (bytes, struct format)
PARAM_TYPES = {"u8": (1, "<B"), "s8": (1, "<b"), "u16": (2, "<H"), "s16": (2, "<h"),
               "u32": (4, "<I"), "s32": (4, "<i"), "f32": (4, "<f"), "b32": (4, "<I"),
               "u64": (8, "<Q"), "s64": (8, "<q"), "f64": (8, "<d"), "b64": (8, "<Q")}


def entry_params(text: str, kernel: str) -> list[tuple[str, int]]:
    """(type, bytes) of each parameter ``.entry kernel`` declares (``b8`` arrays: ``raw``)."""
    body = re.search(rf"\.entry {re.escape(kernel)}\((.*?)\)", text, re.S).group(1)
    out = []
    for p in re.finditer(r"\.param\s+(?:\.align\s+\d+\s+)?\.(\w+)\s+\w+(?:\[(\d+)\])?", body):
        t, n = p.group(1), p.group(2)
        out.append(("raw", int(n)) if n else (t, PARAM_TYPES[t][0]))
    return out


class FakeDriver:
    """Just enough of cuda-python's driver module: cuLaunchKernel reads each parameter
    through the ``kernelParams`` pointer array with the size the PTX declares."""

    def __init__(self, text: str):
        self.text = text
        self.launches: list[dict] = []
        self.attrs: list[tuple] = []
        self.CUfunction_attribute = SimpleNamespace(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES=8)

    def cuModuleLoadData(self, image: int):
        assert ctypes.string_at(image).decode() == self.text  # NUL-terminated PTX
        return 0, "module"

    def cuModuleGetFunction(self, module, name: bytes):
        return 0, name.decode()

    def cuFuncSetAttribute(self, fn, attr, value):
        self.attrs.append((fn, attr, value))
        return (0,)

    def cuLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        decl = entry_params(self.text, fn)
        pointers = np.frombuffer(ctypes.string_at(params, 8 * len(decl)), np.uint64)
        values = []
        for (t, size), ptr in zip(decl, pointers, strict=True):
            raw = ctypes.string_at(int(ptr), size)
            values.append(raw if t == "raw" else struct.unpack(PARAM_TYPES[t][1], raw)[0])
        self.launches.append(dict(kernel=fn, grid=(gx, gy, gz), block=(bx, by, bz), shared=shared,
                                  stream=stream, extra=extra, values=values, decl=decl))
        return (0,)

    def cuMemFree(self, ptr):
        return (0,)


def as_cuda_args(args: list, buffers: dict) -> list:
    """The simulator's launch arguments as the cuda device gets them (fake addresses)."""
    out = []
    for a in args:
        if isinstance(a, np.ndarray):
            out.append(buffers.setdefault(id(a), cuda.DeviceBuffer(0x7F00_0000_0000 + 0x1000 * len(buffers),
                                                                  a.nbytes)))
        elif isinstance(a, TensorMapArg):
            store = np.zeros(192, np.uint8)
            raw = store[-store.ctypes.data % 64:][:128]
            raw[:] = RNG.integers(0, 256, 128, dtype=np.uint8)
            out.append(cuda.CudaTensorMap(raw))
        else:
            out.append(a)
    return out


def expected(arg, t: str):
    if isinstance(arg, cuda.DeviceBuffer):
        return arg.ptr
    if isinstance(arg, cuda.CudaTensorMap):
        return bytes(arg.raw)
    return np.asarray(arg).astype(np.float32 if t == "f32" else np.float64 if t == "f64" else
                                  np.int64).item()


CASES = {
    "wgmma tensor maps": (MM, {"a": (33, 72), "b": (72, 40)}, "sm_90"),
    "wgmma symbolic": (MM, None, "sm_90"),
    "flash attention": ("import nn;\nkernel k(input q: f16[T, D], input k: f16[S, D], "
                        "input v: f16[S, D], output o: f16[T, D]) { o = nn.attention(q, k, v); }",
                        {}, "sm_80"),
    "softmax symbolic": (SOFTMAX, None, "sm_80"),
    "f16 scalar": ("kernel k(input a: f16[N], input s: f16, output y: f16[N]) { y = a * s; }",
                   None, "sm_90"),
    "f64 scalar": ("kernel k(input a: f64[N], input s: f64, output y: f64[N]) { y = a * s; }",
                   None, "sm_80"),
    "i64 scalar": ("kernel k(input a: i64[N], input s: i64, output y: i64[N]) { y = a + s; }",
                   None, "sm_80"),
    "i8 scalar": ("kernel k(input a: i8[N], input s: i8, output y: i8[N]) { y = a + s; }",
                  None, "sm_80"),
    "bool scalar": ("kernel k(input a: f32[N], input f: bool, output y: f32[N]) "
                    "{ y = where(f, a, -a); }", None, "sm_80"),
    "error flag": (POW, None, "sm_80"),
}
INPUTS = {"wgmma tensor maps": lambda: [f16(33, 72), f16(72, 40)],
          "wgmma symbolic": lambda: [f16(20, 72), f16(72, 24)],
          "flash attention": lambda: [f16(7, 64), f16(9, 64), f16(9, 64)],
          "softmax symbolic": lambda: [RNG.standard_normal((3, 5)).astype(np.float32)],
          "f16 scalar": lambda: [f16(9), np.float16(1.5)],
          "f64 scalar": lambda: [RNG.standard_normal(9), np.float64(-2.25)],
          "i64 scalar": lambda: [np.arange(9, dtype=np.int64), np.int64(-(2 ** 40))],
          "i8 scalar": lambda: [np.arange(9, dtype=np.int8), np.int8(-7)],
          "bool scalar": lambda: [RNG.standard_normal(9).astype(np.float32), np.bool_(True)],
          "error flag": lambda: [np.arange(1, 5, dtype=np.int32), np.arange(4, dtype=np.int32)]}


@pytest.mark.parametrize("case", sorted(CASES))
def test_cuda_kernel_params_match_the_ptx_entry(monkeypatch, case: str) -> None:
    src, shapes, arch = CASES[case]
    xs = INPUTS[case]()
    names = [a.name_hint for a in corpus_module(src)["k"].args]
    text, plan = program(src, None if shapes is None else dict(zip(names, (x.shape for x in xs))),
                         arch)
    if case == "flash attention":
        assert [k["kind"] for k in plan["kernels"]] == ["attention(flash,mma,64)"]
    calls = []
    PlanRun(plan, SimDevice(text), record=calls).run(xs)
    fake = FakeDriver(text)
    monkeypatch.setattr(cuda, "_STATE", {"cuda": fake, "modules": {}, "device": 0})
    dev = cuda.CudaDevice(text)
    buffers: dict = {}
    for c in calls:
        args = as_cuda_args(list(c.args), buffers)
        holders, _ = cuda.kernel_params(args)
        dev.prepare(c.kernel, c.grid, c.block, args, c.shared_bytes)()
        got = fake.launches[-1]
        assert (got["kernel"], got["grid"], got["block"], got["shared"]) == \
               (c.kernel, c.grid, c.block, c.shared_bytes)
        assert got["stream"] == 0 and got["extra"] == 0
        assert [h.nbytes for h in holders] == [size for _, size in got["decl"]], c.kernel
        for arg, value, (t, _) in zip(args, got["values"], got["decl"], strict=True):
            assert value == expected(arg, t), (c.kernel, t, arg)
    big = [c.shared_bytes for c in calls if c.shared_bytes > cuda.DEFAULT_SHARED_LIMIT]
    assert [a[2] for a in fake.attrs] == sorted(set(big), key=big.index)
