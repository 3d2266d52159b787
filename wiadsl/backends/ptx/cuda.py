"""Target ``cuda``: run the emitted PTX on a real GPU through the CUDA driver API (cuda-python).

``cuda-python`` is imported on first use only; without it (or without a GPU) the
target fails with a WiaUsageError saying what is missing.

Options: ``arch`` (default: the device's), ``opt_level`` (default 2), ``fast_math``
and ``allow_tf32``; the PTX is built by ``program.ptx_program``, as ``wiac -o x.ptx``
builds it.

Invariants:
- One context per process (the primary context of device 0); modules are loaded
  once per PTX text (``cuModuleLoadData``) and kept.
- Every driver call is checked; a failing call raises WiaRuntimeError naming it.
- Kernel parameters are passed as an array of pointers to host copies of each
  argument, typed as the plan says (``u64`` device pointers, ``u32/s32`` sizes,
  scalars in their ``.param`` type, the 128 bytes of a TMA tensor map).
- A tensor map is encoded at launch by the driver's ``cuTensorMapEncodeTiled``
  (``encode_tensor_map``, called through ctypes with the C signature of the driver
  API docs: the CUtensorMap out-parameter 64-byte aligned, dims and box innermost
  first, rank-1 byte strides, interleave none, L2 promotion 128B, zero OOB fill).
- A launch with more than 48 KiB of dynamic shared memory first raises the
  function's ``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`` (once per size).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...diagnostics import WiaRuntimeError, WiaUsageError
from ...ir.module import ModuleOp
from .isa import DEFAULT_ARCH
from .program import TargetOptions
from .sim.tensormap import TensorMap
from .simbackend import ShapeSpecialized

_STATE: dict[str, Any] = {}
#: CUtensorMapL2promotion: CU_TENSOR_MAP_L2_PROMOTION_L2_128B
L2_PROMOTION_128B = 2
#: static shared memory a kernel may use without opting in to more (bytes)
DEFAULT_SHARED_LIMIT = 48 * 1024


@dataclass
class CudaTensorMap:
    """The 128 bytes of a ``CUtensorMap`` (64-byte aligned), passed to a kernel by value."""

    raw: np.ndarray


def encode_tensor_map(lib: Any, ptr: int, tm: TensorMap) -> CudaTensorMap:
    """``cuTensorMapEncodeTiled`` of ``tm`` for the tensor at device address ``ptr`` +
    ``tm.address`` (``lib``: the driver library, ``libcuda.so.1``)."""
    c_u32, c_u64, c_int = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int
    fn = lib.cuTensorMapEncodeTiled
    fn.restype = c_int
    fn.argtypes = [ctypes.c_void_p, c_int, c_u32, ctypes.c_void_p, ctypes.POINTER(c_u64),
                   ctypes.POINTER(c_u64), ctypes.POINTER(c_u32), ctypes.POINTER(c_u32),
                   c_int, c_int, c_int, c_int]
    store = np.zeros(128 + 64, np.uint8)
    start = -store.ctypes.data % 64
    raw = store[start:start + 128]
    r = tm.rank
    err = fn(raw.ctypes.data, tm.data_type, r, ptr + tm.address,
             (c_u64 * r)(*tm.dims), (c_u64 * max(1, r - 1))(*tm.strides, *([0] if r == 1 else [])),
             (c_u32 * r)(*tm.box), (c_u32 * r)(*(tm.element_strides or (1,) * r)),
             0, tm.swizzle, L2_PROMOTION_128B, 0)
    if err != 0:
        name = ctypes.c_char_p()
        lib.cuGetErrorName(err, ctypes.byref(name))
        raise WiaRuntimeError(f"CUDA cuTensorMapEncodeTiled failed: "
                              f"{name.value.decode() if name.value else err}")
    return CudaTensorMap(raw)


def _libcuda() -> Any:
    if "libcuda" not in _STATE:
        _STATE["libcuda"] = ctypes.CDLL("libcuda.so.1")
    return _STATE["libcuda"]


def driver() -> Any:
    """The cuda-python driver module, with a context made current (cached)."""
    if "cuda" in _STATE:
        return _STATE["cuda"]
    try:
        from cuda.bindings import driver as cuda  # cuda-python >= 12.6
    except ImportError:
        try:
            from cuda import cuda  # type: ignore[no-redef]  # older cuda-python
        except ImportError:
            raise WiaUsageError("target 'cuda' needs cuda-python (pip install cuda-python) "
                                "and an NVIDIA GPU with its driver") from None
    check(cuda, cuda.cuInit(0), "cuInit")
    dev = check(cuda, cuda.cuDeviceGet(0), "cuDeviceGet")
    ctx = check(cuda, cuda.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    check(cuda, cuda.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    _STATE.update(cuda=cuda, device=dev, context=ctx, modules={})
    return cuda


def check(cuda: Any, result: Any, what: str) -> Any:
    err, *rest = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        _, name = cuda.cuGetErrorName(err)
        raise WiaRuntimeError(f"CUDA {what} failed: {name.decode() if name else err}")
    return rest[0] if len(rest) == 1 else (tuple(rest) if rest else None)


def device_arch() -> str:
    cuda = driver()
    attr = cuda.CUdevice_attribute
    major = check(cuda, cuda.cuDeviceGetAttribute(
        attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, _STATE["device"]), "cuDeviceGetAttribute")
    minor = check(cuda, cuda.cuDeviceGetAttribute(
        attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, _STATE["device"]), "cuDeviceGetAttribute")
    return f"sm_{major}{minor}"


@dataclass
class DeviceBuffer:
    ptr: int
    nbytes: int

    def __del__(self) -> None:
        cuda = _STATE.get("cuda")
        if cuda is not None and self.ptr:
            cuda.cuMemFree(self.ptr)


@dataclass
class CudaDevice:
    """Device memory via cuMemAlloc; launches via cuLaunchKernel on the default stream
    (``prepare`` packs a launch once for repeating it; ``copy``: cuMemcpyDtoD)."""

    ptx: str
    functions: dict[str, Any] = field(default_factory=dict)
    shared_set: set[tuple[str, int]] = field(default_factory=set)

    def __post_init__(self) -> None:
        cuda = driver()
        modules = _STATE["modules"]
        if not self.ptx:  # a device for memory only (no module: nothing to launch)
            self.module = None
            return
        if self.ptx not in modules:
            data = np.frombuffer(self.ptx.encode() + b"\0", np.uint8)
            modules[self.ptx] = check(cuda, cuda.cuModuleLoadData(data.ctypes.data), "cuModuleLoadData")
        self.module = modules[self.ptx]

    def alloc(self, nbytes: int) -> DeviceBuffer:
        cuda = driver()
        return DeviceBuffer(int(check(cuda, cuda.cuMemAlloc(max(nbytes, 1)), "cuMemAlloc")), nbytes)

    def upload(self, data: np.ndarray) -> DeviceBuffer:
        raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        buf = self.alloc(raw.size)
        self.write(buf, raw, 0)
        return buf

    def write(self, buf: DeviceBuffer, data: np.ndarray, offset: int) -> None:
        cuda = driver()
        raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        if raw.size:
            check(cuda, cuda.cuMemcpyHtoD(buf.ptr + offset * data.dtype.itemsize, raw.ctypes.data,
                                          raw.size), "cuMemcpyHtoD")

    def download(self, buf: DeviceBuffer, dtype: np.dtype, count: int, offset: int = 0) -> np.ndarray:
        cuda = driver()
        out = np.empty(count, dtype)
        if count:
            check(cuda, cuda.cuMemcpyDtoH(out.ctypes.data, buf.ptr + offset * out.itemsize,
                                          out.nbytes), "cuMemcpyDtoH")
        return out

    def function(self, name: str) -> Any:
        if name not in self.functions:
            cuda = driver()
            self.functions[name] = check(cuda, cuda.cuModuleGetFunction(self.module, name.encode()),
                                         "cuModuleGetFunction")
        return self.functions[name]

    def tensor_map(self, buf: DeviceBuffer, tm: TensorMap) -> CudaTensorMap:
        driver()
        return encode_tensor_map(_libcuda(), buf.ptr, tm)

    def launch(self, kernel: str, grid, block, args: list[Any], shared_bytes: int) -> None:
        self.prepare(kernel, grid, block, args, shared_bytes)()

    def prepare(self, kernel: str, grid, block, args: list[Any],
                shared_bytes: int) -> Callable[[], None]:
        """A function making this launch (arguments packed once; see ``kernel_params``),
        on the default stream: it returns when the launch is queued."""
        cuda = driver()
        function = self.function(kernel)
        if shared_bytes > DEFAULT_SHARED_LIMIT and (kernel, shared_bytes) not in self.shared_set:
            attr = cuda.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            check(cuda, cuda.cuFuncSetAttribute(function, attr, shared_bytes), "cuFuncSetAttribute")
            self.shared_set.add((kernel, shared_bytes))
        holders, pointers = kernel_params(args)
        gx, gy, gz = (int(g) for g in grid)
        bx, by, bz = (int(b) for b in block)

        def launch() -> None:
            # holders stay referenced here: the driver reads each argument through pointers
            assert len(holders) == pointers.size
            check(cuda, cuda.cuLaunchKernel(function, gx, gy, gz, bx, by, bz, shared_bytes, 0,
                                            pointers.ctypes.data, 0), "cuLaunchKernel")
        return launch

    def copy(self, dst: DeviceBuffer, src: DeviceBuffer, nbytes: int) -> None:
        """Device-to-device copy of the first ``nbytes`` of ``src`` (``cuMemcpyDtoD``)."""
        cuda = driver()
        check(cuda, cuda.cuMemcpyDtoD(dst.ptr, src.ptr, nbytes), "cuMemcpyDtoD")

    def synchronize(self) -> None:
        synchronize()


def synchronize() -> None:
    """Wait for all work queued in the context (``cuCtxSynchronize``); a failed kernel's
    error surfaces here."""
    cuda = driver()
    check(cuda, cuda.cuCtxSynchronize(), "cuCtxSynchronize")


def kernel_params(args: list[Any]) -> tuple[list[np.ndarray], np.ndarray]:
    """``cuLaunchKernel``'s ``kernelParams``: (host copies of the arguments, the array of
    their addresses). A device buffer is its u64 address, a tensor map its 128 bytes,
    anything else a NumPy scalar of the parameter's own type and size (the executor
    types sizes and scalars as the kernel declares them)."""
    holders = [a.raw if isinstance(a, CudaTensorMap) else
               np.array([a.ptr], np.uint64) if isinstance(a, DeviceBuffer) else
               np.array([a], np.asarray(a).dtype)
               for a in args]
    return holders, np.array([h.ctypes.data for h in holders], np.uint64)


def device_info() -> dict[str, Any]:
    """The GPU's name, compute capability, multiprocessors and memory, and the driver's
    CUDA version (``cuDriverGetVersion``: 1000 * major + 10 * minor)."""
    cuda = driver()
    dev = _STATE["device"]
    attr = cuda.CUdevice_attribute
    name = check(cuda, cuda.cuDeviceGetName(256, dev), "cuDeviceGetName")
    version = int(check(cuda, cuda.cuDriverGetVersion(), "cuDriverGetVersion"))
    sms = check(cuda, cuda.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev),
                "cuDeviceGetAttribute")
    memory = check(cuda, cuda.cuDeviceTotalMem(dev), "cuDeviceTotalMem")
    return {"name": bytes(name).split(b"\0", 1)[0].decode(errors="replace"),
            "arch": device_arch(), "sms": int(sms), "memory_bytes": int(memory),
            "driver_cuda": f"{version // 1000}.{version % 1000 // 10}"}


class CudaBackend:
    name = "cuda"
    specialize_shapes = True

    def probe(self) -> None:
        """Raise a WiaError unless a GPU and its driver answer (importing this module
        needs neither, so ':target' asks here before it says 'available')."""
        try:
            driver()
        except WiaRuntimeError as err:
            raise WiaUsageError(f"target 'cuda' has no usable GPU here: {err.message}") from None
        except (OSError, RuntimeError) as exc:  # cuda-python without libcuda, say
            raise WiaUsageError(f"target 'cuda' has no usable GPU here: {exc}") from None

    def compile(self, module: ModuleOp, kernel: str, options: dict[str, Any]) -> ShapeSpecialized:
        TargetOptions.from_target(self.name, options, DEFAULT_ARCH)  # bad options before the driver
        driver()  # fail early and clearly when cuda-python or the GPU is missing
        arch = options.get("arch") or supported_arch(device_arch())
        return ShapeSpecialized(module, kernel, TargetOptions.from_target(self.name, options, arch),
                                CudaDevice)


def supported_arch(arch: str) -> str:
    """``arch`` if the emitter targets it, else the default (a newer GPU runs its PTX)."""
    from .isa import MIN_VERSION
    return arch if arch in MIN_VERSION else DEFAULT_ARCH


BACKEND = CudaBackend()
