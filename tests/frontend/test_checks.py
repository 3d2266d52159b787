"""The checker on whole programs: examples and stdlib, imports, scoping, inference,
multiple errors, and call-time re-checking."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from wiadsl.diagnostics import (
    WiaCallError,
    WiaError,
    WiaErrors,
    WiaImportError,
    WiaNameError,
    WiaShapeError,
)
from wiadsl.dtypes import DType
from wiadsl.frontend.builtins import BUILTINS, Sym
from wiadsl.frontend.loader import MAIN_MODULE, load_file, load_program
from wiadsl.frontend.typecheck import CheckedProgram, check, check_kernel_call
from wiadsl.frontend.typerules import UNKNOWN, ValueType

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.wia"))


def checked(src: str, filename: str = "t.wia") -> CheckedProgram:
    return check(load_program(src, filename))


def errors_of(src: str, filename: str = "t.wia") -> list[WiaError]:
    with pytest.raises(WiaError) as info:
        checked(src, filename)
    e = info.value
    return e.errors if isinstance(e, WiaErrors) else [e]


def messages(src: str) -> list[str]:
    return [e.message for e in errors_of(src)]


# ------------------------------------------------------------------ examples and stdlib

@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_type_checks(path: Path) -> None:
    program = check(load_file(path))
    assert program.kernels


def test_examples_exist() -> None:
    assert len(EXAMPLES) >= 5


def test_stdlib_modules_check() -> None:
    program = checked("import nn;\nimport linalg;\n")
    assert program.consts["nn"]["EPS"] == pytest.approx(1e-5)
    assert set(program.loaded.modules) == {"nn", "linalg"}


def test_every_section7_builtin_is_in_the_table() -> None:
    section7 = """abs neg exp log sqrt rsqrt tanh sigmoid relu sin cos floor ceil erf max min where
        reduce_sum reduce_mean reduce_max reduce_min reduce_prod argmax argmin matmul transpose
        conv2d max_pool avg_pool reshape flatten broadcast_to concat zeros ones full arange cast
        dim quantize dequantize fake_quant""".split()
    assert sorted(section7) == sorted(BUILTINS)


# ------------------------------------------------------------------ imports

def test_import_next_to_file_wins_over_stdlib(tmp_path: Path) -> None:
    (tmp_path / "nn.wia").write_text("func gelu(x) { return x * 2.0; }\n")
    main = tmp_path / "main.wia"
    main.write_text("import nn;\nkernel k(input x: f32[N], output y: f32[N]) { y = nn.gelu(x); }\n")
    program = check(load_file(main))
    assert Path(program.loaded.modules["nn"].filename) == tmp_path / "nn.wia"


def test_nested_imports_and_module_consts(tmp_path: Path) -> None:
    (tmp_path / "a.wia").write_text("import b;\nconst A = b.B * 2.0;\n"
                                    "func f(x) { return b.g(x) + A; }\n")
    (tmp_path / "b.wia").write_text("const B = 1.5;\nfunc g(x) { return x * B; }\n")
    main = tmp_path / "main.wia"
    main.write_text("import a;\nkernel k(input x: f32[N], output y: f32[N]) { y = a.f(x) + a.A; }\n")
    program = check(load_file(main))
    assert program.consts["a"]["A"] == 3.0
    assert program.consts["b"]["B"] == 1.5


def test_cyclic_import_names_the_cycle(tmp_path: Path) -> None:
    (tmp_path / "a.wia").write_text("import b;\n")
    (tmp_path / "b.wia").write_text("import a;\n")
    main = tmp_path / "main.wia"
    main.write_text("import a;\n")
    with pytest.raises(WiaImportError) as info:
        load_file(main)
    assert info.value.message == "cyclic import: a -> b -> a"
    assert info.value.span is not None and info.value.span.filename.endswith("b.wia")


def test_import_of_the_main_file_is_a_cycle(tmp_path: Path) -> None:
    (tmp_path / "a.wia").write_text("import main;\n")
    main = tmp_path / "main.wia"
    main.write_text("import a;\n")
    with pytest.raises(WiaImportError, match=r"cyclic import: main -> a -> main"):
        load_file(main)


def test_missing_import(tmp_path: Path) -> None:
    main = tmp_path / "main.wia"
    main.write_text("// x\nimport nothere;\n")
    with pytest.raises(WiaImportError) as info:
        load_file(main)
    assert info.value.message.startswith("cannot find module 'nothere'")
    assert (info.value.span.line, info.value.span.column) == (2, 1)  # type: ignore[union-attr]


def test_recursion_across_modules(tmp_path: Path) -> None:
    (tmp_path / "m.wia").write_text("import main;\n")
    (tmp_path / "r.wia").write_text("func f(x) { return g(x); }\nfunc g(x) { return f(x); }\n")
    main = tmp_path / "main.wia"
    main.write_text("import r;\nkernel k(input x: f32[N], output y: f32[N]) { y = r.f(x); }\n")
    with pytest.raises(WiaNameError, match=r"recursion is not allowed: r.f -> r.g -> r.f"):
        check(load_file(main))


def test_qualified_call_needs_import() -> None:
    assert messages("kernel k(input x: f32[N], output y: f32[N]) { y = linalg.norm(x) * x; }") == [
        "unknown module 'linalg'; add 'import linalg;'"]


# ------------------------------------------------------------------ scoping and paths

def test_all_errors_are_collected() -> None:
    src = """kernel k(input x: f32[N], output y: f32[N]) {
    a = x + nope;
    b = x @ 1.0;
    y = x;
}
kernel k2(input x: f32[N], output y: f32[N]) {
}"""
    assert len(errors_of(src)) == 3


def test_else_if_path_is_named() -> None:
    src = """kernel k(input x: f32[N], input t: f32, output y: f32[N]) {
    if t > 1.0 { y = x; } else if t > 0.0 { y = x * 2.0; }
}"""
    assert messages(src) == ["output 'y' is not assigned on every path: not on the path where "
                             "'if t > 1.0' is false and 'if t > 0.0' is false"]


def test_bound_on_every_path_is_visible() -> None:
    checked("""kernel k(input x: f32[N], input t: f32, output y: f32[N]) {
    if t > 1.0 { h = x; } else if t > 0.0 { h = x * 2.0; } else { h = -x; }
    y = h;
}""")


def test_rebinding_inputs_and_loop_carried_values() -> None:
    checked("""kernel k(input x: f32[N], output y: f32[N], output s: f32, output n: i64) {
    x = x * 2.0;
    acc = 0.0;
    cnt = 0;
    for i in range(N) {
        acc = acc + x[i];
        cnt += 1;
    }
    y = x; s = acc; n = cnt;
}""")


def test_loop_carried_dtype_change_is_an_error() -> None:
    src = """kernel k(input x: f32[N], output y: f32[N]) {
    h = x;
    for i in range(3) { h = cast(h, f64); }
    y = cast(h, f32);
}"""
    assert messages(src) == ["'h' is f32[N] on one path and f64[N] on another; use cast"]


def test_func_returning_on_every_path() -> None:
    checked("""func pick(a, b) {
    if reduce_max(a) > reduce_max(b) { return a; } else { return b; }
}
kernel k(input x: f32[N], input z: f32[N], output y: f32[N]) { y = pick(x, z); }""")


# ------------------------------------------------------------------ inference

@pytest.mark.parametrize("expr, out", [
    ("x * 2.0", "f16[N]"), ("x + N", "f16[N]"), ("x * reduce_sum(i8s)", "f64[N]"),
    ("i8s + i32s", "i32[N]"), ("i8s / i8s", "f64[N]"), ("exp(i32s)", "f64[N]"),
    ("sqrt(D)", "f64"), ("reduce_sum(i8s)", "i64"), ("argmax(x)", "i64"),
    ("x @ x", "f16"), ("x < 1.0", "bool[N]"), ("cast(x, f32)", "f32[N]"),
])
def test_inferred_output_types(expr: str, out: str) -> None:
    checked(f"""kernel k(input x: f16[N], input i8s: i8[N], input i32s: i32[N], input w: f32[N, D],
                  output y: {out}) {{ y = {expr}; }}""")


def test_generic_func_is_typed_per_call_site() -> None:
    checked("""func double(v) { return v + v; }
kernel k(input a: f16[N], input b: i32[M], output p: f16[N], output q: i32[M]) {
    p = double(a);
    q = double(b);
}""")


def test_func_keeps_compile_time_arguments() -> None:
    checked("""func s(v, ax) { return reduce_sum(v, axis=ax); }
kernel k(input a: f32[N, M], output p: f32[N]) { p = s(a, 1); }""")


def test_consts_are_evaluated() -> None:
    program = checked("""const A = 3;
const B = A * 2 + 1;
const W = [[1.0, 2.0], [3.0, 4.0]];
const T = true;
kernel k(input x: f32[2, 2], output y: f32[2, 2]) { y = x @ W + B; }""")
    consts = program.consts[MAIN_MODULE]
    assert consts["A"] == 3 and consts["B"] == 7 and consts["T"] is True
    assert isinstance(consts["W"], np.ndarray) and consts["W"].dtype == np.float64
    np.testing.assert_array_equal(consts["W"], [[1.0, 2.0], [3.0, 4.0]])


def test_const_used_as_static_range_and_axis() -> None:
    checked("""const AX = -1;
const STEPS = 4;
kernel k(input x: f32[N, M], output y: f32[N]) {
    y = reduce_sum(x, axis=AX);
    for i in range(STEPS) { y = y * 0.5; }
}""")


def test_error_rendering() -> None:
    (e,) = errors_of("""kernel k(input A: f32[3, 4], input x: f32[5], output y: f32[3]) {
    y = A @ x;
}""", "kernel.wia")
    assert isinstance(e, WiaShapeError)
    assert e.render() == ("kernel.wia:2:11: error: shape mismatch in '@': A is f32[3, 4], "
                          "x is f32[5]\n        y = A @ x;\n              ^")


# ------------------------------------------------------------------ kernels and calls

MATVEC = """kernel mv(input A: f32[M, K], input x: f32[N], output y: f32[M]) {
    y = A @ x;
}"""


def test_kernel_typing_exposes_params_and_constraints() -> None:
    typing = checked(MATVEC).kernels["mv"]
    assert [(p.name, p.direction, p.type) for p in typing.params] == [
        ("A", "input", ValueType(DType.F32, ("M", "K"))),
        ("x", "input", ValueType(DType.F32, ("N",))),
        ("y", "output", ValueType(DType.F32, ("M",)))]
    assert typing.dims == {"M": Sym("M"), "K": Sym("K"), "N": Sym("N")}
    (c,) = typing.constraints
    assert (c.left, c.right, c.kind) == ("K", "N", "equal")
    assert c.span is not None and (c.span.line, c.span.column) == (2, 11)


def test_call_with_consistent_extents() -> None:
    program = checked(MATVEC)
    typing = check_kernel_call(program, "mv", {"A": ValueType(DType.F32, (3, 4)),
                                               "x": ValueType(DType.F32, (4,))})
    assert typing.dims == {"M": 3, "K": 4, "N": 4}
    assert typing.outputs[0].type == ValueType(DType.F32, (3,))
    assert typing.constraints == []


def test_call_violating_a_constraint_reports_the_source_error() -> None:
    program = checked(MATVEC)
    with pytest.raises(WiaShapeError) as info:
        check_kernel_call(program, "mv", {"A": ValueType(DType.F32, (3, 4)),
                                          "x": ValueType(DType.F32, (5,))})
    assert info.value.message == "shape mismatch in '@': A is f32[3, 4], x is f32[5]"


def test_call_binding_errors() -> None:
    program = checked("""kernel mm(input A: f32[M, K], input B: f32[K, N], output C: f32[M, N]) {
    C = A @ B;
}""")
    with pytest.raises(WiaCallError, match="dim 'K' is 4 in argument 'A' but 5 in argument 'B'"):
        check_kernel_call(program, "mm", {"A": ValueType(DType.F32, (3, 4)),
                                          "B": ValueType(DType.F32, (5, 2))})
    with pytest.raises(WiaCallError, match="argument 'A' must be f32, got f64"):
        check_kernel_call(program, "mm", {"A": ValueType(DType.F64, (3, 4)),
                                          "B": ValueType(DType.F32, (4, 2))})
    with pytest.raises(WiaCallError, match="missing argument 'B'"):
        check_kernel_call(program, "mm", {"A": ValueType(DType.F32, (3, 4))})


def test_tensor_params_are_checked_at_call_time() -> None:
    program = checked("""kernel f(input a: tensor, input b: tensor, output c: tensor) {
    c = a @ b;
}""")
    assert program.kernels["f"].params[0].type is UNKNOWN
    ok = check_kernel_call(program, "f", {"a": ValueType(DType.F32, (2, 3)),
                                          "b": ValueType(DType.F32, (3, 4))})
    assert ok.params[0].type == ValueType(DType.F32, (2, 3))
    with pytest.raises(WiaShapeError, match="shape mismatch in '@'"):
        check_kernel_call(program, "f", {"a": ValueType(DType.F32, (2, 3)),
                                         "b": ValueType(DType.F32, (4, 4))})


def test_dim_names_become_extents_at_call_time() -> None:
    program = checked("""kernel z(input x: f32[N], output y: f32[N]) {
    y = zeros([N], f32) + x;
}""")
    typing = check_kernel_call(program, "z", {"x": ValueType(DType.F32, (7,))})
    assert typing.dims == {"N": 7}
