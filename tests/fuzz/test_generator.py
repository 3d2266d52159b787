"""The generator: deterministic, well-typed, round-trips through the parser, covers the
constructs the issue asks for."""

import collections

from hypothesis import given, settings
from hypothesis import strategies as st

from wiadsl.frontend import ast
from wiadsl.frontend.compile import compile_source
from wiadsl.frontend.parser import parse_source
from wiadsl.fuzz.genprog import generate, make_inputs
from wiadsl.fuzz.reduce import walk


def test_same_seed_same_program_and_inputs() -> None:
    a, b = generate(123), generate(123)
    assert a.source == b.source and a.dims == b.dims
    assert all((a.inputs[k] == b.inputs[k]).all() for k in a.inputs)
    assert generate(124).source != a.source


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31))
def test_generated_programs_parse_back_and_type_check(seed: int) -> None:
    case = generate(seed)
    assert parse_source(case.source) == case.program  # the unparser round-trips
    compiled = compile_source(case.source, "<fuzz>")  # the model predicted every type
    compiled.lower_kernel(case.kernel, {})


def test_inputs_follow_the_declarations() -> None:
    case = generate(7)
    k = case.program.kernels[0]
    for p in k.params:
        if p.direction == "input":
            assert p.name in case.inputs
    again = make_inputs(case.program, case.kernel, case.dims, case.seed)
    assert all((again[n] == v).all() for n, v in case.inputs.items())


def _features(program: ast.Program) -> set[str]:
    found = set()
    for _, node in walk(program):
        if isinstance(node, ast.Call):
            found.add(node.name if not node.name.startswith("f") else "func-call")
        elif isinstance(node, ast.BinOp):
            found.add(node.op)
        elif isinstance(node, ast.Slice):
            found.add("slice")
        elif isinstance(node, ast.If | ast.For | ast.While | ast.SliceAssign | ast.AugAssign
                        | ast.Func):
            found.add(type(node).__name__)
    return found


def test_coverage_over_a_hundred_programs() -> None:
    seen: collections.Counter = collections.Counter()
    for seed in range(100):
        seen.update(_features(generate(seed).program))
    wanted = {"@", "+", "*", "<", "reduce_sum", "reduce_max", "argmax", "cast", "where",
              "transpose", "concat", "broadcast_to", "If", "For", "While", "SliceAssign",
              "AugAssign", "Func", "func-call", "slice", "exp", "zeros"}
    assert wanted <= set(seen), f"never generated: {wanted - set(seen)}"
