"""The ONNX op table: op name -> translator.

A translator takes a ``Node`` and returns one ``Val`` per ONNX output. Each family
module (``elementwise``, ``matmul``, ``conv``, ...) registers its ops with ``@op``;
importing ``wiadsl.onnx.ops`` registers them all.
"""

from __future__ import annotations

from collections.abc import Callable

from ..graph import Node, Val

Translator = Callable[[Node], list[Val]]
OPS: dict[str, Translator] = {}


def op(*names: str) -> Callable[[Translator], Translator]:
    def register(fn: Translator) -> Translator:
        for name in names:
            OPS[name] = fn
        return fn
    return register
