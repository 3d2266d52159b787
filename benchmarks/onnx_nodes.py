"""ONNX's own single-node conformance cases, for every op the importer takes.

Usage:
    PYTHONPATH=. python benchmarks/onnx_nodes.py [--target cpu|interp] [--ops Add,Gemm] [-v]

Every single-node case ONNX generates (``onnx.backend.test.case.node``) for an op in
the importer's table (``OPS``) runs through ``wiadsl.testing.onnx_nodes.outcome``
(its docstring defines the outcomes); per op this prints how many passed, passed
with their parameter inputs bound, equal ONNX Runtime where onnx's reference
differs, gave wrong values, were refused at import (a WiaError naming what is not
supported), crashed, or have element types without a dtype here. Wrong values and
crashes are defects; refusals are gaps.
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
# benchmarks/onnx.py would shadow the onnx package when this folder is on the path
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))


def main(argv: list[str]) -> None:
    from wiadsl.onnx.ops import OPS
    from wiadsl.testing.onnx_nodes import node_cases, outcome

    target = argv[argv.index("--target") + 1] if "--target" in argv else "cpu"
    chosen = set(argv[argv.index("--ops") + 1].split(",")) if "--ops" in argv else set(OPS)
    verbose = "-v" in argv
    per_op: dict[str, Counter] = defaultdict(Counter)
    notes: dict[str, list[str]] = defaultdict(list)
    for case in node_cases(chosen & set(OPS)):
        op = case.model.graph.node[0].op_type
        result, why = outcome(case, target)
        per_op[op][result] += 1
        if result not in ("passed", "bound") and verbose:
            notes[op].append(f"{case.name}: {result}: {why[:160]}")
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
