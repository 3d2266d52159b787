"""Run a launch plan (docs/ptx.md) on a ``Device``: the PTX simulator or a CUDA GPU.

Invariants:
- The executor follows the plan's host program exactly: blocks in control-flow
  order, steps in order, block parameters bound by reference (buffers are never
  written after the step that fills them, so sharing is safe).
- Inputs are checked against the plan (rank, static extents, equal dims) before
  any device work; a failed ``check`` step raises WiaRuntimeError with its message.
- bf16 lives on the device as 16-bit patterns and on the host as float32
  (rounded to nearest even on the way in).
- A launch with a ``when`` condition runs only where it holds; a TMA tensor map
  argument is built at launch by the device (``Device.tensor_map``) from the plan's
  fields, with ``address`` = the byte offset into the buffer (checked first:
  ``sim.tensormap.validate``, the driver API's rules).
- With ``record`` a list, every launch made is appended to it as a ``LaunchCall``
  holding the device's own arguments (buffer handles, tensor maps, typed sizes), so
  the same launches can be made again on the same buffers (``timing.py``); steps
  that move data between host and device are counted in ``host_steps``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ...diagnostics import WiaCallError, WiaRuntimeError
from ...dtypes import DTYPE_NAMES, IR_DTYPE_NAMES, DType
from .isa import DEVICE_NUMPY
from .sim.tensormap import TensorMap, validate
from .symbolic import evaluate

MAX_BLOCK_VISITS = 10_000_000


class Device(Protocol):
    def alloc(self, nbytes: int) -> Any: ...
    def upload(self, data: np.ndarray) -> Any: ...
    def download(self, buf: Any, dtype: np.dtype, count: int, offset: int = 0) -> np.ndarray: ...
    def write(self, buf: Any, data: np.ndarray, offset: int) -> None: ...
    def launch(self, kernel: str, grid: tuple[int, int, int], block: tuple[int, int, int],
               args: list[Any], shared_bytes: int) -> None: ...
    def tensor_map(self, buf: Any, tm: TensorMap) -> Any: ...


def dtype_of(name: str) -> DType:
    return DTYPE_NAMES.get(name) or IR_DTYPE_NAMES[name]


def to_device(array: np.ndarray, dtype: DType) -> np.ndarray:
    """Host values -> device storage (bf16: the upper 16 bits, rounded to nearest even)."""
    if dtype is DType.BF16:
        bits: np.ndarray = np.ascontiguousarray(array, np.float32).view(np.uint32).astype(np.uint64)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        return bits.astype(np.uint16)
    return np.ascontiguousarray(array, DEVICE_NUMPY[dtype])


def to_host(array: np.ndarray, dtype: DType) -> np.ndarray:
    if dtype is DType.BF16:
        return (array.astype(np.uint32) << 16).view(np.float32)
    if dtype is DType.BOOL:
        return array.astype(np.bool_)
    return array


@dataclass
class Buffer:
    handle: Any
    dtype: DType
    shape: tuple[int, ...] | None = None


@dataclass(frozen=True)
class LaunchCall:
    """One kernel launch as the device receives it (``Device.launch``'s arguments)."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: tuple[Any, ...]
    shared_bytes: int


@dataclass
class PlanRun:
    """One execution of a plan."""

    plan: dict[str, Any]
    device: Device
    scalars: dict[str, Any] = field(default_factory=dict)
    buffers: dict[str, Buffer] = field(default_factory=dict)
    launches: int = 0
    #: when a list, each launch made is appended to it
    record: list[LaunchCall] | None = None
    #: read / write / upload steps run (host <-> device transfers besides inputs, outputs)
    host_steps: int = 0

    def run(self, inputs: Sequence[np.ndarray | object]) -> list[Any]:
        self.bind_inputs(inputs)
        blocks = {b["name"]: b for b in self.plan["blocks"]}
        block = blocks[self.plan["entry"]]
        incoming: list[Any] = []
        for _ in range(MAX_BLOCK_VISITS):
            for p, v in zip(block["params"], incoming, strict=True):
                if "buffer" in p:
                    self.buffers[p["buffer"]] = v
                else:
                    self.scalars[p["scalar"]] = v
            outcome = self.run_steps(block["steps"])
            if isinstance(outcome, list):
                return outcome
            target, incoming = outcome
            block = blocks[target]
        raise WiaRuntimeError("the launch plan ran more blocks than allowed (endless loop?)")

    # ------------------------------------------------------------ inputs
    def bind_inputs(self, inputs: Sequence[Any]) -> None:
        specs = self.plan["inputs"]
        if len(inputs) != len(specs):
            raise WiaCallError(f"kernel '{self.plan['kernel']}' takes {len(specs)} inputs, "
                               f"got {len(inputs)}")
        for spec, value in zip(specs, inputs, strict=True):
            dtype = None if spec["dtype"] == "index" else dtype_of(spec["dtype"])
            if spec["kind"] == "scalar":
                self.scalars[spec["name"]] = np.asarray(value).astype(
                    dtype.numpy if dtype else np.int64)[()]
                continue
            assert dtype is not None  # only scalars are index
            array = np.asarray(value)
            if array.ndim != len(spec["shape"]):
                raise WiaCallError(f"input {spec['name']}: rank {array.ndim}, expected "
                                   f"{len(spec['shape'])}")
            for axis, d in enumerate(spec["shape"]):
                if isinstance(d, int) and array.shape[axis] != d:
                    raise WiaCallError(f"input {spec['name']}: axis {axis} has extent "
                                       f"{array.shape[axis]}, expected {d}")
            self.buffers[spec["name"]] = Buffer(self.device.upload(to_device(array, dtype)),
                                                dtype, array.shape)
        shapes = {s["name"]: self.buffers[s["name"]].shape for s in specs if s["kind"] == "tensor"}
        for sym, src in self.plan["dims"].items():
            value = shapes[src["input"]][src["axis"]]  # type: ignore[index]
            self.scalars[sym] = value
            for other in src.get("equal", []):
                got = shapes[other["input"]][other["axis"]]  # type: ignore[index]
                if got != value:
                    raise WiaCallError(
                        f"input {other['input']} axis {other['axis']} has extent {got} but "
                        f"input {src['input']} axis {src['axis']} has {value}; they must agree")

    # ------------------------------------------------------------ steps
    def env(self) -> dict[str, Any]:
        return {k: (v.item() if isinstance(v, np.generic) else v) for k, v in self.scalars.items()}

    def ev(self, expr: Any) -> Any:
        return evaluate(expr, self.env())

    def entry(self, e: dict[str, Any]) -> Any:
        if "buffer" in e:
            buf = self.buffers[e["buffer"]]
            if "shape" in e:
                return Buffer(buf.handle, buf.dtype, tuple(int(self.ev(d)) for d in e["shape"]))
            return buf
        if "scalar" in e:
            return self.scalars[e["scalar"]]
        dt = e.get("dtype", "index")
        return np.asarray(e["value"]).astype(np.int64 if dt == "index" else dtype_of(dt).numpy)[()]

    def run_steps(self, steps: list[dict[str, Any]]) -> Any:
        for s in steps:
            op = s["op"]
            if op == "return":
                return [self.output(self.entry(v)) for v in s["values"]]
            if op == "br":
                return s["target"], [self.entry(a) for a in s["args"]]
            if op == "cond_br":
                side = s["true"] if bool(self.entry(s["cond"])) else s["false"]
                return side["target"], [self.entry(a) for a in side["args"]]
            getattr(self, f"step_{op}")(s)
        raise WiaRuntimeError("a plan block ended without a terminator")

    def step_alloc(self, s: dict[str, Any]) -> None:
        dtype = dtype_of(s["dtype"])
        n = int(self.ev(s["size"]))
        shape = tuple(int(self.ev(d)) for d in s.get("shape", [n]))
        nbytes = max(1, n * np.dtype(DEVICE_NUMPY[dtype]).itemsize)
        self.buffers[s["buffer"]] = Buffer(self.device.alloc(nbytes), dtype, shape)

    def step_launch(self, s: dict[str, Any]) -> None:
        if "when" in s and not self.ev(s["when"]):
            return
        grid = tuple(int(self.ev(g)) for g in s["grid"])
        if min(grid) <= 0:
            return
        check_grid(s["kernel"], grid)
        args: list[Any] = []
        for a in s["args"]:
            if "buffer" in a:
                args.append(self.buffers[a["buffer"]].handle)
            elif "expr" in a:
                args.append(_size_arg(int(self.ev(a["expr"])), a["type"], s["kernel"]))
            elif "tmap" in a:
                args.append(self.tensor_map(a, s["kernel"]))
            else:
                args.append(_param_value(self.scalars[a["scalar"]], dtype_of(a["dtype"])))
        call = LaunchCall(s["kernel"], grid, tuple(s["block"]), tuple(args),  # type: ignore[arg-type]
                          int(s.get("shared_bytes", 0)))
        self.device.launch(call.kernel, call.grid, call.block, args, call.shared_bytes)
        self.launches += 1
        if self.record is not None:
            self.record.append(call)

    def tensor_map(self, a: dict[str, Any], kernel: str) -> Any:
        """The device's tensor map for plan argument ``a`` (its ``address`` field: the byte
        offset into the buffer; the device adds the buffer's address)."""
        tm = TensorMap(int(self.ev(a["offset"])), int(a["elem_bytes"]),
                       tuple(int(self.ev(d)) for d in a["dims"]),
                       tuple(int(self.ev(x)) for x in a["strides"]), tuple(a["box"]),
                       swizzle=int(a["swizzle"]), data_type=int(a["data_type"]))
        try:
            validate(tm)
        except ValueError as e:
            raise WiaRuntimeError(f"kernel {kernel}: tensor map of '{a['tmap']}': {e}") from None
        return self.device.tensor_map(self.buffers[a["tmap"]].handle, tm)

    def step_read(self, s: dict[str, Any]) -> None:
        self.host_steps += 1
        dtype = dtype_of(s["dtype"])
        buf = self.buffers[s["buffer"]]
        raw = self.device.download(buf.handle, np.dtype(DEVICE_NUMPY[dtype]), 1, int(self.ev(s["index"])))
        self.scalars[s["dst"]] = to_host(raw, dtype).astype(dtype.numpy)[0]

    def step_write(self, s: dict[str, Any]) -> None:
        self.host_steps += 1
        dtype = dtype_of(s["dtype"])
        value = np.asarray([self.entry(s["value"])]).astype(dtype.numpy)
        self.device.write(self.buffers[s["buffer"]].handle, to_device(value, dtype),
                          int(self.ev(s["index"])))

    def step_upload(self, s: dict[str, Any]) -> None:
        self.host_steps += 1
        dtype = dtype_of(s["dtype"])
        data = to_device(np.asarray(s["data"]).astype(dtype.numpy), dtype)
        self.device.write(self.buffers[s["buffer"]].handle, data, 0)

    def step_let(self, s: dict[str, Any]) -> None:
        self.scalars[s["dst"]] = np.int64(self.ev(s["expr"]))

    def step_check(self, s: dict[str, Any]) -> None:
        if not self.ev(s["cond"]):
            raise WiaRuntimeError(s["message"])

    def step_scalar(self, s: dict[str, Any]) -> None:
        from .hostops import evaluate_host_op
        args = [self.entry(a) for a in s["args"]]
        self.scalars[s["dst"]] = evaluate_host_op(s["ir"], s["attrs"], s["types"], s["type"], args)

    # ------------------------------------------------------------ outputs
    def output(self, v: Any) -> Any:
        if not isinstance(v, Buffer):
            return v
        count = int(np.prod(v.shape, dtype=np.int64)) if v.shape else 1
        raw = self.device.download(v.handle, np.dtype(DEVICE_NUMPY[v.dtype]), count)
        out = to_host(raw, v.dtype).reshape(v.shape or ())
        return out if v.shape else out[()]


#: the CUDA launch limits: gridDim.x <= 2^31 - 1, gridDim.y and gridDim.z <= 65535
GRID_LIMITS = (2**31 - 1, 65535, 65535)
#: a size parameter's PTX type -> its NumPy type
SIZE_TYPES: dict[str, type[np.integer]] = {"u32": np.uint32, "s32": np.int32,
                                            "u64": np.uint64, "s64": np.int64}


def check_grid(kernel: str, grid: tuple[int, ...]) -> None:
    """A grid beyond the hardware's limits is an error before any launch (the planner
    folds large y/z extents into x, so this only fires past 2^31 - 1 blocks)."""
    for axis, (g, top) in enumerate(zip(grid, GRID_LIMITS, strict=True)):
        if g > top:
            raise WiaRuntimeError(f"kernel {kernel}: grid extent {g} along {'xyz'[axis]} is "
                                  f"above the device limit {top}")


def _size_arg(v: int, ptype: str, kernel: str) -> Any:
    """A size/stride/offset parameter; a value its type cannot hold is an error (a
    32-bit parameter is only emitted where the planner proved the value fits)."""
    numpy_type = SIZE_TYPES[ptype]
    info = np.iinfo(numpy_type)
    if not info.min <= v <= info.max:
        raise WiaRuntimeError(f"kernel {kernel}: size {v} does not fit its {ptype} parameter")
    return numpy_type(v)


def _param_value(v: Any, dtype: DType) -> Any:
    if dtype in (DType.F16, DType.BF16, DType.F32):
        return np.float32(v)
    if dtype is DType.F64:
        return np.float64(v)
    if dtype is DType.BOOL:
        return np.uint32(bool(v))
    if dtype is DType.I64:
        return np.int64(v)
    return np.int32(v)
