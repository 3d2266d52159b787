"""ONNX element types the language holds in another dtype (``wiadsl/onnx/storage.py``):
uint8, int16, uint16, uint32 and uint64 graphs, bfloat16 at the boundary, and
narrow floats rounded once per op. Oracle: ONNX Runtime where it has the kernel for
the type, else onnx's reference evaluator (the spec's own implementation)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.onnx.helpers import ort_run, require_onnx

require_onnx()

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from wiadsl import WiaCallError  # noqa: E402
from wiadsl.onnx import load_onnx, onnx_to_source  # noqa: E402

INT_TYPES = [np.uint8, np.int16, np.uint16, np.uint32, np.uint64]
ONNX_TYPE = {np.dtype(t): helper.np_dtype_to_tensor_dtype(np.dtype(t))
             for t in [*INT_TYPES, np.float32, np.int64, np.bool_]}


def _graph(nodes: list[Any], inputs: dict[str, np.dtype], outputs: dict[str, np.dtype],
           shape: list[int], inits: tuple[Any, ...] = (), opset: int = 17) -> Any:
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, ONNX_TYPE[np.dtype(t)], shape)
                     for n, t in inputs.items()],
        [helper.make_tensor_value_info(n, ONNX_TYPE[np.dtype(t)], None)
         for n, t in outputs.items()], list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _oracle(model: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    try:
        return ort_run(model, feeds)
    except Exception:  # noqa: BLE001 - ORT has no kernel for this op and type
        from onnx.reference import ReferenceEvaluator

        return list(ReferenceEvaluator(model).run(None, feeds))


def _extremes(kind: Any, rng: np.random.Generator, n: int) -> np.ndarray:
    """Random values of ``kind`` with its minimum, maximum and 0 among them."""
    info = np.iinfo(kind)
    values = rng.integers(int(info.min), int(info.max), size=n, dtype=kind, endpoint=True)
    values[:3] = [info.min, info.max, 0]
    return values


@pytest.mark.parametrize("kind", INT_TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Max", "Min", "Equal", "Less",
                                "GreaterOrEqual"])
def test_a_binary_op_matches_the_oracle(op: str, kind: Any) -> None:
    rng = np.random.default_rng(hash((op, np.dtype(kind).name)) % 2**32)
    a, b = _extremes(kind, rng, 33), _extremes(kind, rng, 33)[::-1].copy()
    out_t = np.bool_ if op in ("Equal", "Less", "GreaterOrEqual") else kind
    model = _graph([helper.make_node(op, ["a", "b"], ["y"])], {"a": kind, "b": kind},
                   {"y": out_t}, [33])
    (want,) = _oracle(model, {"a": a, "b": b})
    got = load_onnx(model)(a, b)
    assert got.dtype == want.dtype and np.array_equal(got, want)


@pytest.mark.parametrize("kind", [np.uint8, np.int16, np.uint16, np.uint32],
                         ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("op", ["Div", "Mod"])
def test_division_matches_the_oracle(op: str, kind: Any) -> None:
    rng = np.random.default_rng(7)
    a = _extremes(kind, rng, 7)
    b = _extremes(kind, rng, 7)
    b[b == 0] = 3
    if np.dtype(kind).kind == "i":  # ONNX leaves -32768 / -1 undefined: keep away from it
        b[b == -1] = 2
    model = _graph([helper.make_node(op, ["a", "b"], ["y"])], {"a": kind, "b": kind},
                   {"y": kind}, [7])
    (want,) = _oracle(model, {"a": a, "b": b})
    got = load_onnx(model)(a, b)
    assert got.dtype == want.dtype and np.array_equal(got, want)


def test_each_op_wraps_before_the_next_reads_it() -> None:
    """uint8 (250 + 10) / 2 is 2 (the sum wraps to 4 first), never 130."""
    nodes = [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Div", ["s", "c"], ["y"])]
    model = _graph(nodes, {"a": np.uint8, "b": np.uint8, "c": np.uint8}, {"y": np.uint8}, [1])
    a, b, c = (np.array([v], np.uint8) for v in (250, 10, 2))
    got = load_onnx(model)(a, b, c)
    assert got.dtype == np.uint8 and got.tolist() == [2]
    assert got.tolist() == [int(v) for v in _oracle(model, {"a": a, "b": b, "c": c})[0]]


def test_wraps_follow_only_the_ops_that_can_leave_the_range() -> None:
    nodes = [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Max", ["s", "b"], ["y"])]
    source = onnx_to_source(_graph(nodes, {"a": np.uint8, "b": np.uint8}, {"y": np.uint8}, [4]))
    assert "input a: i32[4]" in source and "output y: i32[4]" in source
    assert source.count("% 256") == 1  # after the Add; Max selects an operand


def test_uint64_order_is_unsigned() -> None:
    """2**64 - 1 is held as -1: comparisons and Max see it as the largest value."""
    a = np.array([2**64 - 1, 5, 2**63], np.uint64)
    b = np.array([1, 2**63 + 1, 7], np.uint64)
    nodes = [helper.make_node("Max", ["a", "b"], ["m"]), helper.make_node("Less", ["a", "b"], ["lt"])]
    model = _graph(nodes, {"a": np.uint64, "b": np.uint64}, {"m": np.uint64, "lt": np.bool_}, [3])
    m, lt = load_onnx(model)(a, b)
    assert m.dtype == np.uint64 and m.tolist() == [2**64 - 1, 2**63 + 1, 2**63]
    assert lt.tolist() == [False, True, False]


@pytest.mark.parametrize("to", [np.uint8, np.int16, np.uint16, np.uint32])
def test_casts_to_and_from_held_types(to: Any) -> None:
    x = np.array([0.0, 1.9, 200.0, 65.5, 3.0e4], np.float32)
    nodes = [helper.make_node("Cast", ["x"], ["q"], to=ONNX_TYPE[np.dtype(to)]),
             helper.make_node("Cast", ["q"], ["y"], to=TensorProto.FLOAT)]
    model = _graph(nodes, {"x": np.float32}, {"q": to, "y": np.float32}, [5])
    got_q, got_y = load_onnx(model)(x)
    want_q, want_y = _oracle(model, {"x": x})
    in_range = (x >= np.iinfo(to).min) & (x <= np.iinfo(to).max)  # outside: undefined
    assert got_q.dtype == np.dtype(to)
    assert np.array_equal(got_q[in_range], want_q[in_range])
    assert np.array_equal(got_y[in_range], want_y[in_range])


def test_held_initializers_and_uint8_constant_of_shape() -> None:
    w = numpy_helper.from_array(np.array([65535, 1, 40000], np.uint16), "w")
    fill = numpy_helper.from_array(np.array([200], np.uint8), "fill")
    nodes = [helper.make_node("Add", ["x", "w"], ["y"]),
             helper.make_node("ConstantOfShape", ["shape"], ["z"], value=fill)]
    shape = numpy_helper.from_array(np.array([3], np.int64), "shape")
    model = _graph(nodes, {"x": np.uint16}, {"y": np.uint16, "z": np.uint8}, [3], (w, shape))
    x = np.array([1, 2, 30000], np.uint16)
    y, z = load_onnx(model)(x)
    assert y.tolist() == [0, 3, 4464] and y.dtype == np.uint16
    assert z.tolist() == [200, 200, 200] and z.dtype == np.uint8


def test_an_argument_of_another_type_is_refused_by_name() -> None:
    model = _graph([helper.make_node("Add", ["a", "b"], ["y"])], {"a": np.uint8, "b": np.uint8},
                   {"y": np.uint8}, [2])
    net = load_onnx(model)
    with pytest.raises(WiaCallError, match="argument 'a': expected a uint8 array .* got int32"):
        net(np.zeros(2, np.int32), np.zeros(2, np.uint8))
    assert net(b=np.ones(2, np.uint8), a=np.full(2, 255, np.uint8)).tolist() == [0, 0]


@pytest.mark.parametrize("kind", [np.int16, np.uint16])
def test_16_bit_quantization_round_trips(kind: Any) -> None:
    x = np.array([-3.0, -0.26, 0.0, 0.25, 0.75, 1e6, -1e6], np.float32)
    zp = numpy_helper.from_array(np.array(3, kind), "zp")
    scale = numpy_helper.from_array(np.array(0.5, np.float32), "s")
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"])]
    model = _graph(nodes, {"x": np.float32}, {"q": kind, "y": np.float32}, [7], (zp, scale),
                   opset=21)
    got_q, got_y = load_onnx(model)(x)
    want_q, want_y = _oracle(model, {"x": x})
    assert got_q.dtype == np.dtype(kind) and np.array_equal(got_q, want_q)
    assert np.array_equal(got_y, want_y)


def test_uint8_quantized_output_is_a_uint8_array() -> None:
    """Quantized uint8 (held shifted in i8 for the int8 GEMM) leaves the graph as uint8."""
    scale = numpy_helper.from_array(np.array(0.1, np.float32), "s")
    zp = numpy_helper.from_array(np.array(128, np.uint8), "zp")
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"]),
             helper.make_node("Relu", ["q"], ["y"])]
    model = _graph(nodes, {"x": np.float32}, {"q": np.uint8, "y": np.uint8}, [4], (scale, zp),
                   opset=13)
    x = np.array([-20.0, -1.0, 0.33, 20.0], np.float32)
    got = load_onnx(model)(x)
    want = _oracle(model, {"x": x})
    for g, w in zip(got, want):
        assert g.dtype == np.uint8 and np.array_equal(g, w)


def test_bfloat16_comes_back_as_bfloat16_rounded_once() -> None:
    """Celu on bfloat16 computes in f32 and rounds once: celu(-0.5) is -0.443359
    (-0.44240 rounded), where rounding after each DSL op gives -0.445312."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf16 = np.dtype(ml_dtypes.bfloat16)
    graph = helper.make_graph(
        [helper.make_node("Celu", ["x"], ["y"], alpha=2.0)], "g",
        [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [5])],
        [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [5])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = np.array([-3.0, -0.5, 0.0, 0.5, 3.0], np.float32).astype(bf16)
    got = load_onnx(model)(x)
    want = (np.maximum(0, x.astype(np.float64)) + np.minimum(
        0, 2.0 * (np.exp(x.astype(np.float64) / 2.0) - 1.0))).astype(bf16)
    assert got.dtype == bf16
    assert got.astype(np.float32).tolist() == want.astype(np.float32).tolist()
