"""wiadsl: the WIA DSL tensor compiler.

``wiadsl.jit(source)`` compiles WIA DSL source and returns a Module whose
attributes are callable kernels (NumPy in, NumPy out).
"""

from .diagnostics import (
    WiaCallError,
    WiaError,
    WiaImportError,
    WiaIRError,
    WiaNameError,
    WiaRuntimeError,
    WiaShapeError,
    WiaSyntaxError,
    WiaTypeError,
    WiaUsageError,
)

__version__ = "0.1.0"


def jit(source: str, kernel: str | None = None, target: str = "cpu",
        filename: str = "<string>", **options):
    """Compile ``source``; return a Module of kernels, or the kernel named ``kernel``.

    See ``wiadsl.runtime.jit.jit`` (LANGUAGE.md §8 is the contract).
    """
    from .runtime.jit import jit as _jit

    return _jit(source, kernel=kernel, target=target, filename=filename, **options)


def jit_file(path, kernel: str | None = None, target: str = "cpu", **options):
    """``jit`` on the text of the file at ``path``; imports resolve next to it.

    A missing or unreadable file is a ``WiaUsageError`` that names the path.
    """
    from .runtime.jit import jit_file as _jit_file

    return _jit_file(path, kernel=kernel, target=target, **options)


def load_onnx(model, target: str | None = None, dims=None, **options):
    """Import an ONNX model (a path, bytes or ModelProto) as a Module of one kernel.

    Needs the ``onnx`` extra; see ``wiadsl.onnx.importer.load_onnx``.
    """
    from .onnx.importer import load_onnx as _load

    return _load(model, target=target, dims=dims, **options)


def autotune(kernel, *args, **options):
    """Tune the matmul/conv configuration of ``kernel`` on these arguments; the best
    config is kept in the compile cache. See ``wiadsl.tune.tuner.autotune``."""
    from .tune.tuner import autotune as _autotune

    return _autotune(kernel, *args, **options)


def set_num_threads(n: int) -> None:
    """Run every later parallel region of CPU code on ``n`` threads (the caller
    included), without recompiling; ``WIADSL_NUM_THREADS`` sets the count a process
    starts with. See ``wiadsl.backends.llvm.threads``."""
    from .backends.llvm.threads import set_num_threads as _set

    _set(n)


def get_num_threads() -> int:
    """The threads a parallel region of CPU code uses now."""
    from .backends.llvm.threads import get_num_threads as _get

    return _get()


# The function below shares its name with the subpackage ``wiadsl.profile``. Importing a
# subpackage binds its name in this module the first time, so the (empty) package is
# imported here, before the function is defined: later imports of its modules find it
# in sys.modules and no longer replace ``wiadsl.profile`` the function.
from . import profile as _profile_package  # noqa: E402,F401


def profile(kernel, *args, **options):
    """Per fused kernel time, FLOPs, bytes and roofline verdict, and eager vs compiled
    latency. See ``wiadsl.profile.profiler.profile``."""
    from .profile.profiler import profile as _profile

    return _profile(kernel, *args, **options)


def quantize(kernel, calibration, **options):
    """Post-training int8 quantization of ``kernel`` calibrated on ``calibration``.
    See ``wiadsl.quant.api.quantize``."""
    from .quant.api import quantize as _quantize

    return _quantize(kernel, calibration, **options)


__all__ = [
    "WiaCallError", "WiaError", "WiaIRError", "WiaImportError", "WiaNameError",
    "WiaRuntimeError", "WiaShapeError", "WiaSyntaxError", "WiaTypeError", "WiaUsageError",
    "__version__", "autotune", "get_num_threads", "jit", "jit_file", "load_onnx", "profile", "quantize",
    "set_num_threads",
]
