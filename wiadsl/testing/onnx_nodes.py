"""Running ONNX's own single-node conformance cases through the importer.

``onnx.backend.test.case.node.collect_testcases()`` generates them (no download): one
model of one node plus inputs and the expected outputs that onnx's reference
computes. ``outcome(case, target)`` loads a case with ``wiadsl.load_onnx``, runs it
and compares with the case's own tolerances (rtol 1e-3 at least, NaNs in the same
places). Outcomes:

- ``passed``; ``bound``: passed once its parameter inputs were bound as initializers
  (as exporters write them): scalars (Range's bounds, Pad's value), integer inputs of
  rank 1 (axes, shapes, indices) and other rank-1 inputs after the first (Resize's
  scales), tried only when the case was refused for a non-constant input;
- ``ort``: the values differ from the case's but equal ONNX Runtime's on the same
  model and inputs (the importer follows ORT, which is what users compare with);
- ``refused``: a WiaError at import or call (a gap, said by name);
- ``wrong``, ``crash``: defects;
- ``types``: element types the language has no dtype for (strings, float8, int4,
  complex), not run.

``benchmarks/onnx_nodes.py`` prints the rates per op; ``tests/onnx/test_node_cases.py``
runs every case in CI.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

#: TensorProto element types the language has no dtype for: string, complex, float8s,
#: 4-bit integers and floats
UNSUPPORTED_TYPES = {8, 14, 15, *range(17, 29)}


def node_cases(ops: set[str]) -> list[Any]:
    """The single-node cases of the ops in ``ops``."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    return [c for c in cases if c.model is not None and len(c.model.graph.node) == 1
            and c.model.graph.node[0].op_type in ops]


def _arrays(values) -> list[np.ndarray]:
    from onnx import TensorProto, numpy_helper

    return [numpy_helper.to_array(v) if isinstance(v, TensorProto) else np.asarray(v)
            for v in values]


def _bind_parameter_inputs(model, inputs: list[np.ndarray]):
    """The model with every parameter input (module docstring) made an initializer of
    its case value (what exporters write as constants), and the other inputs."""
    from onnx import numpy_helper

    bound = model.__class__()
    bound.CopyFrom(model)
    graph = bound.graph
    keep, rest = [], []
    for i, (value_info, array) in enumerate(zip(list(graph.input), inputs)):
        if array.ndim == 0 or array.ndim == 1 and (array.dtype.kind in "iu" or i):
            graph.initializer.append(numpy_helper.from_array(array, value_info.name))
        else:
            keep.append(value_info)
            rest.append(array)
    del graph.input[:]
    graph.input.extend(keep)
    return bound, rest


def outcome(case: Any, target: str) -> tuple[str, str]:
    """(outcome, why) of one case (module docstring)."""
    graph = case.model.graph
    types = {v.type.tensor_type.elem_type for v in [*graph.input, *graph.output]}
    types |= {a.t.data_type for n in graph.node for a in n.attribute if a.HasField("t")}
    if types & UNSUPPORTED_TYPES:
        return "types", ""
    outcome, why = _run(case, case.model, None, target)
    if outcome == "refused" and "must be a constant initializer" in why \
            and len(case.data_sets) == 1:
        model, rest = _bind_parameter_inputs(case.model, _arrays(case.data_sets[0][0]))
        again, why_again = _run(case, model, rest, target)
        return ("bound", "") if again == "passed" else (again, why_again)
    return outcome, why


def _run(case, model, inputs_override, target: str) -> tuple[str, str]:
    import wiadsl

    try:
        net = wiadsl.load_onnx(model, target=target)
    except wiadsl.WiaError as exc:
        return "refused", str(exc).splitlines()[0]
    except Exception as exc:  # noqa: BLE001 - a crash is what this script looks for
        return "crash", f"{type(exc).__name__}: {exc}".splitlines()[0]
    for inputs, expected in case.data_sets:
        inputs = inputs_override if inputs_override is not None else _arrays(inputs)
        expected = _arrays(expected)
        try:
            got = net(*inputs)
        except wiadsl.WiaError as exc:
            return "refused", str(exc).splitlines()[0]
        except Exception as exc:  # noqa: BLE001
            return "crash", f"{type(exc).__name__}: {exc}".splitlines()[0]
        got = got if isinstance(got, tuple) else (got,)
        if len(got) != len(expected):
            return "wrong", f"{len(got)} outputs, expected {len(expected)}"
        for g, e in zip(got, expected):
            g, e = np.asarray(g), np.asarray(e)
            if g.shape != e.shape:
                return "wrong", f"shape {g.shape}, expected {e.shape}"
            if g.dtype != e.dtype:
                return "wrong", f"dtype {g.dtype}, expected {e.dtype}"
            if e.dtype.kind in "fcV":  # V: ml_dtypes' bfloat16
                ok = np.allclose(g.astype(np.float64), e.astype(np.float32).astype(np.float64),
                                 rtol=max(case.rtol, 1e-3), atol=max(case.atol, 1e-6),
                                 equal_nan=True)
            else:
                ok = np.array_equal(g, e)
            if not ok and _matches_ort(model, inputs, got):
                return "ort", "onnx's reference and ONNX Runtime differ; ours is ORT's"
            if not ok:
                return "wrong", "values differ"
    return "passed", ""


def _matches_ort(model, inputs: list[np.ndarray], got: tuple) -> bool:
    """Whether ONNX Runtime computes ``got`` too (where it and onnx's reference differ,
    the importer follows ORT: it is what users compare with)."""
    import onnxruntime as ort

    try:
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        want = sess.run(None, dict(zip([i.name for i in sess.get_inputs()], inputs)))
    except Exception:  # noqa: BLE001 - ORT refusing the model is not a match
        return False
    return all(np.allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=1e-3,
                           atol=1e-6, equal_nan=True) for g, w in zip(got, want))
