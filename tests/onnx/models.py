"""ONNX models built with ``onnx.helper`` (no downloads), shared by the tests and
``benchmarks/onnx.py``. Each builder returns a checked ``ModelProto`` whose
weights come from a seeded generator, plus a function making matching inputs.

The four models of issue 12: an MLP (Gemm, MatMul+Add, Relu), a small CNN (Conv,
BatchNormalization, Relu, MaxPool, AveragePool, GlobalAveragePool, Flatten, Gemm,
Softmax), a transformer encoder block (multi-head attention through Reshape and
Transpose, Softmax, LayerNormalization, Gelu, residual Adds) and a QDQ-quantized
matmul (QuantizeLinear/DequantizeLinear around MatMul).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from onnx import TensorProto, checker, helper, numpy_helper

F32 = TensorProto.FLOAT


@dataclass
class Built:
    model: object  # onnx.ModelProto
    make_inputs: Callable[[int], dict[str, np.ndarray]]  # batch -> feeds


class _Graph:
    """Collects nodes and initializers; names are generated, seeded weights."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: list = []
        self.n = 0

    def weight(self, name: str, shape: tuple[int, ...], scale: float | None = None,
               dtype: type = np.float32) -> str:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
        s = scale if scale is not None else 1.0 / np.sqrt(max(fan_in, 1))
        self.inits.append(numpy_helper.from_array(
            (self.rng.standard_normal(shape) * s).astype(dtype), name))
        return name

    def const(self, name: str, value: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op: str, inputs: list[str], out: str | None = None, **attrs) -> str:
        self.n += 1
        out = out or f"{op.lower()}_{self.n}"
        self.nodes.append(helper.make_node(op, inputs, [out], name=f"{op}_{self.n}", **attrs))
        return out

    def model(self, name: str, inputs: list, outputs: list, opset: int) -> object:
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                                  producer_name="wiadsl-tests")
        model.ir_version = 8
        checker.check_model(model)
        return model


def _feeds(name: str, shape: Callable[[int], tuple[int, ...]], seed: int = 7):
    def make(batch: int) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(seed + batch)
        return {name: rng.standard_normal(shape(batch)).astype(np.float32)}
    return make


def mlp(n_in: int = 64, hidden: int = 128, n_out: int = 10, seed: int = 0) -> Built:
    g = _Graph(seed)
    h = g.node("Gemm", ["x", g.weight("fc1.weight", (hidden, n_in)), g.weight("fc1.bias", (hidden,))],
               transB=1)
    h = g.node("Relu", [h])
    h = g.node("MatMul", [h, g.weight("fc2.weight", (hidden, hidden))])
    h = g.node("Add", [h, g.weight("fc2.bias", (hidden,))])
    h = g.node("Relu", [h])
    g.node("Gemm", [h, g.weight("fc3.weight", (n_out, hidden)), g.weight("fc3.bias", (n_out,))],
           "logits", transB=1, alpha=0.5, beta=2.0)
    model = g.model("mlp", [helper.make_tensor_value_info("x", F32, ["batch", n_in])],
                    [helper.make_tensor_value_info("logits", F32, ["batch", n_out])], 17)
    return Built(model, _feeds("x", lambda b: (b, n_in)))


def cnn(channels: int = 3, size: int = 16, classes: int = 10, seed: int = 1) -> Built:
    g = _Graph(seed)
    c1, c2 = 8, 16
    h = g.node("Conv", ["image", g.weight("conv1.w", (c1, channels, 3, 3))],
               kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    rng = g.rng
    h = g.node("BatchNormalization", [
        h, g.const("bn.scale", (1 + 0.1 * rng.standard_normal(c1)).astype(np.float32)),
        g.const("bn.bias", (0.1 * rng.standard_normal(c1)).astype(np.float32)),
        g.const("bn.mean", (0.1 * rng.standard_normal(c1)).astype(np.float32)),
        g.const("bn.var", (1 + 0.1 * rng.random(c1)).astype(np.float32))], epsilon=1e-5)
    h = g.node("Relu", [h])
    h = g.node("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])
    h = g.node("Conv", [h, g.weight("conv2.w", (c2, c1, 3, 3)), g.weight("conv2.b", (c2,))],
               kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    h = g.node("Relu", [h])
    h = g.node("AveragePool", [h], kernel_shape=[2, 2], strides=[2, 2])
    h = g.node("GlobalAveragePool", [h])
    h = g.node("Flatten", [h], axis=1)
    h = g.node("Gemm", [h, g.weight("fc.w", (classes, c2)), g.weight("fc.b", (classes,))],
               transB=1)
    g.node("Softmax", [h], "probs", axis=-1)
    model = g.model("cnn", [helper.make_tensor_value_info("image", F32,
                                                          ["N", channels, size, size])],
                    [helper.make_tensor_value_info("probs", F32, ["N", classes])], 17)
    return Built(model, _feeds("image", lambda b: (b, channels, size, size)))


def mobilenet_v2(channels: int = 3, size: int = 16, classes: int = 10, width: int = 8,
                 seed: int = 4) -> Built:
    """MobileNetV2's structure at a small width: a strided stem, two inverted residual
    blocks (1x1 expand, ReLU6, 3x3 depthwise, 1x1 project; the first with its
    residual Add, the second strided), a 1x1 head, global pooling and a classifier.
    BatchNormalization follows every Conv, as torchvision's export writes it."""
    g = _Graph(seed)
    rng = g.rng
    six = [g.const("relu6.min", np.array(0.0, np.float32)),
           g.const("relu6.max", np.array(6.0, np.float32))]

    def conv_bn(x: str, name: str, c_in: int, c_out: int, k: int, stride: int = 1,
                group: int = 1, relu6: bool = True) -> str:
        w = g.weight(f"{name}.w", (c_out, c_in // group, k, k))
        h = g.node("Conv", [x, w], kernel_shape=[k, k], strides=[stride, stride],
                   pads=[k // 2] * 4, group=group)
        stats = [(1 + 0.1 * rng.standard_normal(c_out)), 0.1 * rng.standard_normal(c_out),
                 0.1 * rng.standard_normal(c_out), 1 + 0.1 * rng.random(c_out)]
        h = g.node("BatchNormalization", [h] + [
            g.const(f"{name}.bn{i}", v.astype(np.float32)) for i, v in enumerate(stats)])
        return g.node("Clip", [h, *six]) if relu6 else h

    def inverted_residual(x: str, name: str, c_in: int, c_out: int, stride: int) -> str:
        hidden = 4 * c_in
        h = conv_bn(x, f"{name}.expand", c_in, hidden, 1)
        h = conv_bn(h, f"{name}.dw", hidden, hidden, 3, stride, group=hidden)
        h = conv_bn(h, f"{name}.project", hidden, c_out, 1, relu6=False)
        return g.node("Add", [x, h]) if stride == 1 and c_in == c_out else h

    h = conv_bn("image", "stem", channels, width, 3, 2)
    h = inverted_residual(h, "block1", width, width, 1)
    h = inverted_residual(h, "block2", width, 2 * width, 2)
    h = conv_bn(h, "head", 2 * width, 4 * width, 1)
    h = g.node("Flatten", [g.node("GlobalAveragePool", [h])], axis=1)
    g.node("Gemm", [h, g.weight("fc.w", (classes, 4 * width)), g.weight("fc.b", (classes,))],
           "logits", transB=1)
    model = g.model("mobilenet_v2", [helper.make_tensor_value_info(
        "image", F32, ["N", channels, size, size])],
        [helper.make_tensor_value_info("logits", F32, ["N", classes])], 17)
    return Built(model, _feeds("image", lambda b: (b, channels, size, size)))


def resnet18(channels: int = 3, size: int = 224, classes: int = 1000, width: int = 64,
             seed: int = 5) -> Built:
    """torchvision's ResNet-18 as ``torch.onnx.export`` writes it in eval mode
    (BatchNormalization folded into each Conv's weight and bias): a 7x7 stride-2
    stem, 3x3 max pooling, four stages of two basic blocks (the first block of
    stages 2-4 strided, with a 1x1 strided shortcut), global pooling, a classifier.
    ``width`` is the stem's channels (64 in the paper). For benchmarks/first_result.py
    (and one CPU test at a small size): too big for ``MODELS``, which every target runs."""
    g = _Graph(seed)

    def conv(x: str, name: str, c_in: int, c_out: int, k: int, stride: int = 1,
             relu: bool = True) -> str:
        h = g.node("Conv", [x, g.weight(f"{name}.w", (c_out, c_in, k, k)),
                            g.weight(f"{name}.b", (c_out,), 0.1)],
                   kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4)
        return g.node("Relu", [h]) if relu else h

    def block(x: str, name: str, c_in: int, c_out: int, stride: int) -> str:
        h = conv(x, f"{name}.conv1", c_in, c_out, 3, stride)
        h = conv(h, f"{name}.conv2", c_out, c_out, 3, relu=False)
        short = x if stride == 1 and c_in == c_out else \
            conv(x, f"{name}.down", c_in, c_out, 1, stride, relu=False)
        return g.node("Relu", [g.node("Add", [h, short])])

    h = conv("image", "stem", channels, width, 7, 2)
    h = g.node("MaxPool", [h], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c = width
    for stage in range(4):
        c_out = width * 2 ** stage
        for b in range(2):
            stride = 2 if stage > 0 and b == 0 else 1
            h = block(h, f"layer{stage + 1}.{b}", c, c_out, stride)
            c = c_out
    h = g.node("Flatten", [g.node("GlobalAveragePool", [h])], axis=1)
    g.node("Gemm", [h, g.weight("fc.w", (classes, c)), g.weight("fc.b", (classes,))],
           "logits", transB=1)
    model = g.model("resnet18", [helper.make_tensor_value_info(
        "image", F32, ["N", channels, size, size])],
        [helper.make_tensor_value_info("logits", F32, ["N", classes])], 17)
    return Built(model, _feeds("image", lambda b: (b, channels, size, size)))


def encoder(seq: int = 8, d: int = 32, heads: int = 4, ff: int = 64, seed: int = 2,
            gelu: str = "op") -> Built:
    """One post-norm encoder block; ``gelu="op"`` uses the opset-20 Gelu op,
    ``"erf"`` the Div/Erf/Add/Mul decomposition exporters write for older opsets."""
    g = _Graph(seed)
    dh = d // heads
    heads_shape = g.const("heads_shape", np.array([0, 0, heads, dh], np.int64))
    merge_shape = g.const("merge_shape", np.array([0, 0, d], np.int64))

    def linear(x: str, name: str, n_in: int, n_out: int) -> str:
        y = g.node("MatMul", [x, g.weight(f"{name}.w", (n_in, n_out))])
        return g.node("Add", [y, g.weight(f"{name}.b", (n_out,), scale=0.1)])

    def split(x: str, perm: list[int]) -> str:
        return g.node("Transpose", [g.node("Reshape", [x, heads_shape])], perm=perm)

    q = split(linear("x", "q", d, d), [0, 2, 1, 3])            # [B, H, T, dh]
    k = split(linear("x", "k", d, d), [0, 2, 3, 1])            # [B, H, dh, T]
    v = split(linear("x", "v", d, d), [0, 2, 1, 3])
    s = g.node("MatMul", [q, k])
    s = g.node("Div", [s, g.const("sqrt_dh", np.array(np.sqrt(dh), np.float32))])
    a = g.node("MatMul", [g.node("Softmax", [s], axis=-1), v])   # [B, H, T, dh]
    a = g.node("Reshape", [g.node("Transpose", [a], perm=[0, 2, 1, 3]), merge_shape])
    h = g.node("Add", ["x", linear(a, "o", d, d)])
    ln = [g.weight("ln1.g", (d,), 0.1), g.weight("ln1.b", (d,), 0.1)]
    h = g.node("LayerNormalization", [h, *ln], axis=-1, epsilon=1e-5)
    f = linear(h, "ff1", d, ff)
    if gelu == "op":
        f = g.node("Gelu", [f])
    else:
        e = g.node("Erf", [g.node("Div", [f, g.const("sqrt2", np.array(np.sqrt(2), np.float32))])])
        e = g.node("Add", [e, g.const("one", np.array(1.0, np.float32))])
        f = g.node("Mul", [g.node("Mul", [f, e]), g.const("half", np.array(0.5, np.float32))])
    f = linear(f, "ff2", ff, d)
    h = g.node("Add", [h, f])
    ln2 = [g.weight("ln2.g", (d,), 0.1), g.weight("ln2.b", (d,), 0.1)]
    g.node("LayerNormalization", [h, *ln2], "y", axis=-1, epsilon=1e-5)
    opset = 20 if gelu == "op" else 17
    model = g.model("encoder_block",
                    [helper.make_tensor_value_info("x", F32, ["batch", seq, d])],
                    [helper.make_tensor_value_info("y", F32, ["batch", seq, d])], opset)
    return Built(model, _feeds("x", lambda b: (b, seq, d)))


def qdq_matmul(k: int = 32, n: int = 16, signed: bool = True, seed: int = 3) -> Built:
    """x -> Q/DQ (activation, int8 or uint8) -> MatMul(DQ(int8 weight)) + bias -> Q/DQ."""
    g = _Graph(seed)
    act_t = np.int8 if signed else np.uint8
    zp_act = np.array(3 if signed else 128, act_t)
    xq = g.node("QuantizeLinear", ["x", g.const("x_scale", np.array(0.02, np.float32)),
                                   g.const("x_zp", zp_act)])
    xd = g.node("DequantizeLinear", [xq, "x_scale", "x_zp"])
    # 7-bit weights (reduce_range), as ORT advises: its x86 u8s8 kernels saturate 8-bit ones
    w = (g.rng.standard_normal((k, n)) * 20).clip(-63, 63).astype(np.int8)
    wd = g.node("DequantizeLinear", [g.const("w_q", w), g.const("w_scale", np.array(0.004, np.float32)),
                                     g.const("w_zp", np.array(0, np.int8))])
    y = g.node("MatMul", [xd, wd])
    y = g.node("Add", [y, g.weight("bias", (n,), 0.1)])
    yq = g.node("QuantizeLinear", [y, g.const("y_scale", np.array(0.05, np.float32)),
                                   g.const("y_zp", np.array(-2 if signed else 120, act_t))])
    g.node("DequantizeLinear", [yq, "y_scale", "y_zp"], "y")
    model = g.model("qdq_matmul", [helper.make_tensor_value_info("x", F32, ["batch", k])],
                    [helper.make_tensor_value_info("y", F32, ["batch", n])], 13)
    return Built(model, _feeds("x", lambda b: (b, k)))


MODELS: dict[str, Callable[[], Built]] = {
    "mlp": mlp, "cnn": cnn, "mobilenet_v2": mobilenet_v2, "encoder": encoder,
    "qdq_matmul": qdq_matmul,
}
