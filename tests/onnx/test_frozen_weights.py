"""An imported model's weights are frozen (onnx/module.py): on the CPU each gemm
whose B is a weight packs it once, on the first call, into its entry's state
(backends/llvm/prepacked.py). The MLP's three products against ONNX Runtime at odd
batch sizes and over repeated calls, and two imports of one architecture with
different weights (one compiled code, a state each)."""

from __future__ import annotations

import numpy as np

from tests.onnx.helpers import assert_close, ort_run, require_onnx

require_onnx()

from tests.onnx import models  # noqa: E402
from wiadsl.onnx.importer import load_onnx  # noqa: E402


def states(module) -> tuple[int, list[list[int]]]:
    """(the codes of the module's CPU kernel, the cells of each distinct state its
    entries hold)."""
    kernels = list({id(c): c for c in module.kernel._by_shape.values()}.values())
    held = {id(nat.state): nat.state for k in kernels for nat in k._natives.values()}
    return sum(len(k._code) for k in kernels), [list(st.cells) for st in held.values()]


def test_the_mlp_packs_its_three_weights_once_per_code() -> None:
    built = models.mlp()
    module = load_onnx(built.model)
    for batch in (1, 7, 33):
        feeds = built.make_inputs(batch)
        (want,) = ort_run(built.model, feeds)
        for _ in range(3):  # the first call packs, the others read the packing
            assert_close(module(feeds["x"]), want, rtol=1e-5, atol=1e-5)
    codes, cells = states(module)
    # one state per code (static for batch 1, one shape-generic for 7 and 33), each
    # holding the three packed weights: Gemm (transB), MatMul, Gemm (transB)
    assert len(cells) == codes == 2
    assert all(len(c) == 3 and all(c) for c in cells)


def test_two_models_of_one_architecture_keep_their_own_weights() -> None:
    builts = [models.mlp(seed=s) for s in (0, 1)]
    modules = [load_onnx(b.model) for b in builts]
    feeds = builts[0].make_inputs(5)
    wants = [ort_run(b.model, feeds)[0] for b in builts]
    assert not np.allclose(wants[0], wants[1])
    for _ in range(2):
        for module, want in zip(modules, wants):
            assert_close(module(feeds["x"]), want, rtol=1e-5, atol=1e-5)
