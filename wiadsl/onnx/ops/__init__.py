"""The ONNX op translators, by family; importing this package registers them all
in ``OPS`` (op name -> translator)."""

from __future__ import annotations

from . import (  # noqa: F401  (each module registers its ops)
    conv,
    conv_transpose,
    einsum,
    elementwise,
    gather,
    index,
    matmul,
    nn,
    pool,
    resize,
    shape,
    split_pad,
    topk,
)
from .registry import OPS, Translator

__all__ = ["OPS", "Translator"]
