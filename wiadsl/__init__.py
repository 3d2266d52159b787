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


def load_onnx(model, target: str | None = None, dims=None, **options):
    """Import an ONNX model (a path, bytes or ModelProto) as a Module of one kernel.

    Needs the ``onnx`` extra; see ``wiadsl.frontend.onnx_import.load_onnx``.
    """
    from .frontend.onnx_import import load_onnx as _load

    return _load(model, target=target, dims=dims, **options)


__all__ = [
    "WiaCallError", "WiaError", "WiaIRError", "WiaImportError", "WiaNameError",
    "WiaRuntimeError", "WiaShapeError", "WiaSyntaxError", "WiaTypeError", "WiaUsageError",
    "__version__", "jit", "load_onnx",
]
