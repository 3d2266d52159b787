"""ONNX's own single-node conformance cases, for every op the importer takes.

Usage:
    PYTHONPATH=. python benchmarks/onnx_nodes.py [--target cpu|interp] [--ops Add,Gemm] [-v]

``onnx.backend.test.case.node.collect_testcases()`` generates the cases (no download):
one model of one node plus inputs and the expected outputs that onnx's reference
computes. Each case of an op in ``OPS`` (the importer's table) is loaded with
``wiadsl.load_onnx`` and run; outputs are compared with the case's own tolerances
(rtol 1e-3 at least, NaNs in the same places). Per op it prints passed / wrong
values / refused at import (a WiaError naming what is not supported) / failed
otherwise; a case refused because an axes/shape/indices input is not a constant is
run again with its parameter inputs bound as initializers (as exporters write them;
counted apart: integer inputs of rank <= 1, such as axes, shapes and indices, and float
ones of rank <= 1 after the first, such as Resize's scales and Pad's value); cases of element types the language has no dtype for (strings, float8,
int4, complex) are counted apart. Wrong values and crashes are defects; refusals
are gaps. Where the values differ from the case's (onnx's reference) but equal ONNX
Runtime's on the same model and inputs, the case is counted apart: the importer
follows ORT, which is what users compare with.
"""

from __future__ import annotations

import sys
import warnings
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
# benchmarks/onnx.py would shadow the onnx package when this folder is on the path
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))

#: TensorProto element types the language has no dtype for: string, complex, float8s,
#: 4-bit integers and floats
UNSUPPORTED_TYPES = {8, 14, 15, *range(17, 29)}


def _cases(ops: set[str]) -> list:
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    return [c for c in cases if c.model.graph.node and c.model.graph.node[0].op_type in ops
            and len(c.model.graph.node) == 1]


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
        if array.ndim <= 1 and (array.dtype.kind in "iu" or array.dtype.kind == "f" and i):
            graph.initializer.append(numpy_helper.from_array(array, value_info.name))
        else:
            keep.append(value_info)
            rest.append(array)
    del graph.input[:]
    graph.input.extend(keep)
    return bound, rest


def _outcome(case, target: str) -> tuple[str, str]:
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


def main(argv: list[str]) -> None:
    from wiadsl.onnx.ops import OPS

    target = argv[argv.index("--target") + 1] if "--target" in argv else "cpu"
    chosen = set(argv[argv.index("--ops") + 1].split(",")) if "--ops" in argv else set(OPS)
    verbose = "-v" in argv
    per_op: dict[str, Counter] = defaultdict(Counter)
    notes: dict[str, list[str]] = defaultdict(list)
    for case in _cases(chosen & set(OPS)):
        op = case.model.graph.node[0].op_type
        outcome, why = _outcome(case, target)
        per_op[op][outcome] += 1
        if outcome not in ("passed", "bound") and verbose:
            notes[op].append(f"{case.name}: {outcome}: {why[:160]}")
    total: Counter = Counter()
    print("| op | cases | passed | passed, parameter inputs bound | ORT's values, not the "
          "reference's | wrong | refused | crash | other dtypes |\n"
          "|---|---|---|---|---|---|---|---|---|")
    for op in sorted(per_op):
        c = per_op[op]
        total.update(c)
        n = sum(c.values()) - c["types"]
        print(f"| {op} | {n} | {c['passed']} | {c['bound']} | {c['ort']} | {c['wrong']} | "
              f"{c['refused']} | "
              f"{c['crash']} | {c['types']} |")
    n = sum(total.values()) - total["types"]
    ok = total["passed"] + total["bound"]
    print(f"\n{len(per_op)} ops, {n} cases (target {target}): {ok} passed "
          f"({100 * ok / max(n, 1):.0f}%; {total['bound']} of them with their parameter inputs "
          f"bound as constants), {total['ort']} equal to ONNX Runtime where onnx's reference "
          f"differs, {total['wrong']} wrong values, "
          f"{total['refused']} refused, {total['crash']} crashes; {total['types']} cases of "
          "element types without a dtype here")
    for op, lines in sorted(notes.items()):
        print(f"\n{op}:\n  " + "\n  ".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:])
