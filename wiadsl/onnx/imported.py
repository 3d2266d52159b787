"""``ImportedModel``: what the importer makes of a graph, and what the import cache keeps."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class ImportedModel:
    """A translated graph: the source, the weights it expects, name mappings."""

    source: str
    kernel: str
    opset: int
    #: (ONNX name, DSL name) of each graph input and output, in order.
    inputs: tuple[tuple[str, str], ...]
    outputs: tuple[tuple[str, str], ...]
    weights: dict[str, np.ndarray] = field(repr=False)
    #: DSL name -> the NumPy dtype callers use, for the graph inputs and outputs whose
    #: ONNX element type the kernel holds in another dtype (``storage``)
    boundary: dict[str, np.dtype] = field(default_factory=dict)

    def save_weights(self, path: str | os.PathLike) -> None:
        """The weights as an ``.npz`` (keys are the kernel's input names)."""
        np.savez(path, **self.weights)  # type: ignore[arg-type]
