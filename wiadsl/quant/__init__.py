"""int8 post-training quantization: calibration, parameter choice, the ``quantize`` API.

``wiadsl.quant.quantize`` (exported as ``wiadsl.quantize``) is the entry point; the
IR rewrite itself is the ``quantize-int8`` pass (``wiadsl/passes/quantize_int8.py``)
and f16/bf16 storage is the ``mixed-precision`` pass. ``params`` holds the NumPy
reference numerics of LANGUAGE.md §7 that every backend is tested against.
The API names load lazily (the passes package imports ``quant.params``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["QuantReport", "QuantizedKernel", "quantize"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import api
        return getattr(api, name)
    raise AttributeError(f"module 'wiadsl.quant' has no attribute {name!r}")
