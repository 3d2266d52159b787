"""The generator: deterministic, well-typed, round-trips through the parser, covers the
constructs the issue asks for."""

import collections

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from wiadsl.frontend import ast
from wiadsl.frontend.compile import compile_source
from wiadsl.frontend.parser import parse_source
from wiadsl.fuzz.genprog import generate, make_inputs
from wiadsl.fuzz.model import lit
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


def _wide_features(case) -> set[str]:
    """The issue-17 classes a program holds (as the fuzzer should make them itself)."""
    found = set()
    for _, node in walk(case.program):
        if isinstance(node, ast.BinOp) and node.op == "@":
            casts = [x for x in (node.lhs, node.rhs) if isinstance(x, ast.Call)
                     and x.name == "cast" and getattr(x.args[1], "id", "") in ("i32", "i64")]
            if len(casts) == 2:
                found.add("int-matmul")
                if any(isinstance(c.args[0], ast.Call) and c.args[0].name == "quantize"
                       for c in casts):
                    found.add("quantized-matmul")
            if node.lhs != node.rhs and not (isinstance(node.rhs, ast.Call)
                                             and node.rhs.args == (node.lhs,)):
                found.add("independent-matmul")
        if isinstance(node, ast.Call) and node.name in ("quantize", "dequantize", "fake_quant"):
            found.add(node.name)
        if isinstance(node, ast.Call) and node.name == "cast" and isinstance(node.args[0],
                                                                            ast.IntLit | ast.FloatLit | ast.UnaryOp | ast.BinOp):
            found.add(f"const-cast-{node.args[1].id}")  # type: ignore[union-attr]
        if isinstance(node, ast.BinOp) and node.op in ("%", "**"):
            found.add(node.op)
        if isinstance(node, ast.FloatLit) and node.value == 1e38:
            found.add("float-1e+38")
        if isinstance(node, ast.BinOp) and node.op == "/" and node.rhs == lit(0.0):
            found.add("float-inf")  # 1.0 / 0.0: no literal is inf
    k = case.program.kernels[0]
    for p in k.params:
        dims = [d.value for d in getattr(p.type, "dims", ())]
        if any(isinstance(d, int) and d > 16 and d % 2 for d in dims):
            found.add("odd-extent")
    for v in case.inputs.values():
        if v.dtype.kind == "f" and not np.isfinite(v).all():
            found.add("special-input")
    return found


def test_the_wider_classes_are_generated() -> None:
    seen: collections.Counter = collections.Counter()
    for seed in range(200):
        seen.update(_wide_features(generate(seed)))
    wanted = {"int-matmul", "quantized-matmul", "independent-matmul", "quantize", "dequantize",
              "fake_quant", "%", "**", "float-1e+38", "float-inf", "odd-extent", "special-input",
              *(f"const-cast-{d}" for d in ("f16", "bf16", "i8", "i32", "i64", "bool"))}
    assert wanted <= set(seen), f"never generated: {wanted - set(seen)}"
    # the old classes keep their share: most programs still have no wide matmul at all
    assert seen["int-matmul"] < 100, seen
