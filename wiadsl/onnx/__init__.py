"""ONNX import: an ONNX graph becomes one WIA DSL kernel, compiled as written source is.

- ``importer``: the graph walk, graph inputs and outputs (``import_onnx``, ``load_onnx``);
- ``graph``: the values and the kernel text being written, shared by every translator;
- ``ops``: the op translators, one module per family;
- ``symbolic``: shape subgraphs folded at import (``Shape -> Gather -> Concat``);
- ``shapes``, ``text``: symbolic extents, identifiers and literals;
- ``module``: the imported model as a ``wiadsl.jit``-style Module.

This package sits above ``frontend`` (it writes source the frontend reads) and
``runtime`` (its module is a runtime kernel); neither imports it.
"""

from __future__ import annotations

from .graph import OnnxImportError
from .importer import ImportedModel, import_onnx, load_onnx, onnx_to_source, supported_ops

__all__ = ["ImportedModel", "OnnxImportError", "import_onnx", "load_onnx", "onnx_to_source",
           "supported_ops"]
