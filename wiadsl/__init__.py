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


__all__ = [
    "WiaCallError", "WiaError", "WiaIRError", "WiaImportError", "WiaNameError",
    "WiaRuntimeError", "WiaShapeError", "WiaSyntaxError", "WiaTypeError", "WiaUsageError",
    "__version__", "jit",
]
