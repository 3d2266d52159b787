"""IR snippets covering every op kind, shared by the round-trip and verifier tests.

Each entry is one function that verifies; ``ELEMENTWISE_CASES`` is generated from
the op table so a new elementwise function is covered automatically.
"""

from __future__ import annotations

from pathlib import Path

import wiadsl.loops  # noqa: F401  (registers the loop-level ops it owns: conv2d, qgemm)
from wiadsl.ir.ops import ELEMENTWISE_FNS

SEED = """\
func @conditional_compute(%x: tensor<?xf32>, %threshold: f32) -> tensor<?xf32> {
^entry:
  %0 = tensor.abs %x : tensor<?xf32>
  %norm = tensor.reduce_sum %0 {axes = [0]} : tensor<?xf32> -> f32
  %c = arith.cmpf ogt, %norm, %threshold : f32
  cond_br %c, ^compute, ^exit(%x : tensor<?xf32>)
^compute:
  %r = tensor.mul %x, %x : tensor<?xf32>
  br ^exit(%r : tensor<?xf32>)
^exit(%final: tensor<?xf32>):
  return %final : tensor<?xf32>
}
"""


def _func(name: str, params: str, result: str, body: list[str]) -> str:
    lines = [f"func @{name}({params}) -> {result} {{", "^entry:"]
    lines += [f"  {line}" for line in body]
    return "\n".join(lines) + "\n}\n"


def _elementwise_cases() -> dict[str, str]:
    cases = {}
    for fn in ELEMENTWISE_FNS:
        dtype = {"float": "f32", "bits": "i1"}.get(fn.domain, "f32")
        args = ", ".join(["%a", "%b"][: fn.arity])
        cases[f"arith.{fn.name}"] = _func(
            f"arith_{fn.name}", f"%a: {dtype}, %b: {dtype}", dtype,
            [f"%r = arith.{fn.name} {args} : {dtype}", f"return %r : {dtype}"])
        tensor_args = ", ".join(["%x", "%s"][: fn.arity])
        sig = (f"(tensor<4x?x{dtype}>, {dtype}) -> tensor<4x?x{dtype}>" if fn.arity == 2
               else f"tensor<4x?x{dtype}>")
        cases[f"tensor.{fn.name}"] = _func(
            f"tensor_{fn.name}", f"%x: tensor<4x?x{dtype}>, %s: {dtype}", f"tensor<4x?x{dtype}>",
            [f"%r = tensor.{fn.name} {tensor_args} : {sig}", f"return %r : tensor<4x?x{dtype}>"])
    return cases


#: the fused ops' cases live beside the passes that make them
_FUSED = (Path(__file__).parent.parent / "passes" / "fused_corpus.ir").read_text()

CASES: dict[str, str] = {
    "fused": _FUSED,
    **_elementwise_cases(),
    "seed": SEED,
    "arith.constant": _func("consts", "", "(f32, i64, i1, index, bf16, f16)", [
        "%0 = arith.constant 1.5 : f32",
        "%1 = arith.constant -3 : i64",
        "%2 = arith.constant true : i1",
        "%3 = arith.constant 7 : index",
        "%4 = arith.constant 0.1 : bf16",
        "%5 = arith.constant 1e-05 : f16",
        "return %0, %1, %2, %3, %4, %5 : f32, i64, i1, index, bf16, f16"]),
    "arith.cmpf": _func("cmpf", "%a: f32, %b: f32", "(i1, i1)", [
        "%0 = arith.cmpf olt, %a, %b : f32",
        "%1 = arith.cmpf une, %a, %b : f32",
        "return %0, %1 : i1, i1"]),
    "arith.cmpi": _func("cmpi", "%a: i64, %b: i64, %i: index", "(i1, i1)", [
        "%0 = arith.cmpi sge, %a, %b : i64",
        "%1 = arith.cmpi eq, %i, %i : index",
        "return %0, %1 : i1, i1"]),
    "tensor.cmpf": _func("tcmpf", "%x: tensor<?x3xf32>, %s: f32", "tensor<?x3xi1>", [
        "%0 = tensor.cmpf oge, %x, %s : (tensor<?x3xf32>, f32) -> tensor<?x3xi1>",
        "return %0 : tensor<?x3xi1>"]),
    "tensor.cmpi": _func("tcmpi", "%x: tensor<3xi32>, %y: tensor<2x1xi32>", "tensor<2x3xi1>", [
        "%0 = tensor.cmpi ne, %x, %y : (tensor<3xi32>, tensor<2x1xi32>) -> tensor<2x3xi1>",
        "return %0 : tensor<2x3xi1>"]),
    "arith.select": _func("sel", "%c: i1, %a: f64, %b: f64", "f64", [
        "%0 = arith.select %c, %a, %b : (i1, f64, f64) -> f64",
        "return %0 : f64"]),
    "tensor.select": _func("tsel", "%c: tensor<4xi1>, %a: tensor<4xf32>, %b: f32", "tensor<4xf32>", [
        "%0 = tensor.select %c, %a, %b : (tensor<4xi1>, tensor<4xf32>, f32) -> tensor<4xf32>",
        "return %0 : tensor<4xf32>"]),
    "arith.cast": _func("cast", "%a: f32, %i: index", "(i8, i64)", [
        "%0 = arith.cast %a : f32 -> i8",
        "%1 = arith.cast %i : index -> i64",
        "return %0, %1 : i8, i64"]),
    "tensor.cast": _func("tcast", "%x: tensor<?xf32>", "tensor<?xbf16>", [
        "%0 = tensor.cast %x : tensor<?xf32> -> tensor<?xbf16>",
        "return %0 : tensor<?xbf16>"]),
    **{f"tensor.{name}": _func(name, "%x: tensor<4x?xf32>", result, [
        f"%0 = tensor.{name} %x {attrs} : tensor<4x?xf32>"
        + ("" if result == "tensor<4x?xf32>" else f" -> {result}"),
        f"return %0 : {result}"])
       for name, attrs, result in [
           ("reduce_sum", "{axes = [0, 1]}", "f32"),
           ("reduce_mean", "{axes = [1], keepdims}", "tensor<4x1xf32>"),
           ("reduce_max", "{axes = [-1], keepdims = false}", "tensor<4xf32>"),
           ("reduce_min", "{axes = [0]}", "tensor<?xf32>"),
           ("reduce_prod", "{axes = []}", "tensor<4x?xf32>"),
           ("argmax", "{axes = [1]}", "tensor<4xi64>"),
           ("argmin", "{axes = [0, 1]}", "i64")]},
    "tensor.matmul": _func("mm", "%a: tensor<2x4x3xf32>, %b: tensor<3x?xf32>, %v: tensor<3xf32>",
                           "(tensor<2x4x?xf32>, f32)", [
        "%0 = tensor.matmul %a, %b : (tensor<2x4x3xf32>, tensor<3x?xf32>) -> tensor<2x4x?xf32>",
        "%1 = tensor.matmul %v, %v : (tensor<3xf32>, tensor<3xf32>) -> f32",
        "return %0, %1 : tensor<2x4x?xf32>, f32"]),
    "tensor.transpose": _func("tr", "%x: tensor<2x?x5xi32>", "tensor<5x2x?xi32>", [
        "%0 = tensor.transpose %x {perm = [2, 0, 1]} : tensor<2x?x5xi32> -> tensor<5x2x?xi32>",
        "return %0 : tensor<5x2x?xi32>"]),
    "tensor.conv2d": _func("conv", "%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>",
                           "tensor<1x4x4x4xf32>", [
        "%0 = tensor.conv2d %x, %w {stride = [2, 2], padding = [1, 1]} : "
        "(tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x4x4xf32>",
        "return %0 : tensor<1x4x4x4xf32>"]),
    "tensor.depthwise_conv2d": _func("dw", "%x: tensor<?x3x8x8xf32>, %w: tensor<3x3x3xf32>",
                                     "tensor<?x3x4x4xf32>", [
        "%0 = tensor.depthwise_conv2d %x, %w {stride = [2, 2], dilation = [1, 1], padding = [1, -1]} : "
        "(tensor<?x3x8x8xf32>, tensor<3x3x3xf32>) -> tensor<?x3x4x4xf32>",
        "return %0 : tensor<?x3x4x4xf32>"]),
    **{f"tensor.{k}_pool": _func(f"{k}pool", "%x: tensor<1x2x7x7xf32>", "tensor<1x2x3x3xf32>", [
        f"%0 = tensor.{k}_pool %x {{kernel = [2, 2], stride = [2, 2]}} : "
        "tensor<1x2x7x7xf32> -> tensor<1x2x3x3xf32>",
        "return %0 : tensor<1x2x3x3xf32>"]) for k in ("max", "avg")},
    "tensor.reshape": _func("rs", "%x: tensor<?x4xf32>, %n: index", "tensor<?x2x2xf32>", [
        "%0 = tensor.reshape %x, %n : (tensor<?x4xf32>, index) -> tensor<?x2x2xf32>",
        "return %0 : tensor<?x2x2xf32>"]),
    "tensor.broadcast_to": _func("bc", "%x: tensor<4xf32>, %n: index", "tensor<?x4xf32>", [
        "%0 = tensor.broadcast_to %x, %n : (tensor<4xf32>, index) -> tensor<?x4xf32>",
        "return %0 : tensor<?x4xf32>"]),
    "tensor.concat": _func("cat", "%a: tensor<2x3xf32>, %b: tensor<?x3xf32>", "tensor<?x3xf32>", [
        "%0 = tensor.concat %a, %b {axis = 0} : (tensor<2x3xf32>, tensor<?x3xf32>) -> tensor<?x3xf32>",
        "return %0 : tensor<?x3xf32>"]),
    "tensor.full": _func("full", "%v: f32, %n: index", "tensor<?x3xf32>", [
        "%0 = tensor.full %v, %n : (f32, index) -> tensor<?x3xf32>",
        "return %0 : tensor<?x3xf32>"]),
    "tensor.arange": _func("ar", "%n: index", "(tensor<?xi64>, tensor<4xf32>)", [
        "%0 = tensor.arange %n {start = 0, step = 1} : index -> tensor<?xi64>",
        "%1 = tensor.arange {start = 0.5, step = 2.0} : tensor<4xf32>",
        "return %0, %1 : tensor<?xi64>, tensor<4xf32>"]),
    "tensor.dim": _func("dim", "%x: tensor<?x4xf32>", "index", [
        "%0 = tensor.dim %x {axis = 0} : tensor<?x4xf32> -> index",
        "return %0 : index"]),
    "tensor.constant": _func("tc", "", "(tensor<2x2xf32>, tensor<3xi1>, tensor<0x2xi64>)", [
        "%0 = tensor.constant {value = dense<[[1.0, 2.5], [-3.0, 4e+20]] : tensor<2x2xf32>>} "
        ": tensor<2x2xf32>",
        "%1 = tensor.constant {value = dense<[true, false, true] : tensor<3xi1>>} : tensor<3xi1>",
        "%2 = tensor.constant {value = dense<[] : tensor<0x2xi64>>} : tensor<0x2xi64>",
        "return %0, %1, %2 : tensor<2x2xf32>, tensor<3xi1>, tensor<0x2xi64>"]),
    "tensor.extract": _func("ext", "%x: tensor<?x4xf32>, %i: i64, %j: i64", "f32", [
        "%0 = tensor.extract %x, %i, %j : (tensor<?x4xf32>, i64, i64) -> f32",
        "return %0 : f32"]),
    "tensor.insert": _func("ins", "%x: tensor<?x4xf32>, %v: f64, %i: i64", "tensor<?x4xf32>", [
        "%0 = tensor.insert %v, %x, %i, %i : (f64, tensor<?x4xf32>, i64, i64) -> tensor<?x4xf32>",
        "return %0 : tensor<?x4xf32>"]),
    "tensor.extract_slice": _func("es", "%x: tensor<?x4x6xf32>, %i: i64, %s: i64", "tensor<?x6xf32>", [
        '%0 = tensor.extract_slice %x, %s, %i {layout = ["s:", "i"]} : '
        "(tensor<?x4x6xf32>, i64, i64) -> tensor<?x6xf32>",
        "return %0 : tensor<?x6xf32>"]),
    "tensor.insert_slice": _func("is", "%x: tensor<8x4xi32>, %v: tensor<4xf32>, %s: i64, %t: i64",
                                 "tensor<8x4xi32>", [
        '%0 = tensor.insert_slice %v, %x, %s, %t {layout = ["s::t", ":"]} : '
        "(tensor<4xf32>, tensor<8x4xi32>, i64, i64) -> tensor<8x4xi32>",
        "return %0 : tensor<8x4xi32>"]),
    "tensor.quantize": _func("q", "%x: tensor<?xf32>, %s: f32, %z: i64", "tensor<?xi8>", [
        "%0 = tensor.quantize %x, %s, %z : (tensor<?xf32>, f32, i64) -> tensor<?xi8>",
        "return %0 : tensor<?xi8>"]),
    "tensor.dequantize": _func("dq", "%x: tensor<?xi8>, %s: f32, %z: i64", "tensor<?xf32>", [
        "%0 = tensor.dequantize %x, %s, %z : (tensor<?xi8>, f32, i64) -> tensor<?xf32>",
        "return %0 : tensor<?xf32>"]),
    "tensor.fake_quant": _func("fq", "%x: tensor<?xf32>, %s: f32, %z: i64", "tensor<?xf32>", [
        "%0 = tensor.fake_quant %x, %s, %z : (tensor<?xf32>, f32, i64) -> tensor<?xf32>",
        "return %0 : tensor<?xf32>"]),
    "func.call": """\
func @callee(%a: f32, %b: f32) -> (f32, f32) {
^entry:
  return %b, %a : f32, f32
}

func @caller(%a: f32) -> f32 attributes {kernel, outputs = ["C"], tag = "x\\"y"} {
^entry:
  %0, %1 = func.call @callee(%a, %a) : (f32, f32) -> (f32, f32)
  %2 = func.call @side() : () -> f32
  return %1 : f32
}

func @side() -> f32 {
^entry:
  %0 = arith.constant 2.0 : f32
  return %0 : f32
}
""",
    "cf.loop": """\
func @count(%n: i64) -> i64 {
^entry:
  %zero = arith.constant 0 : i64
  %one = arith.constant 1 : i64
  br ^header(%zero, %zero : i64, i64)
^header(%i: i64, %acc: i64):
  %c = arith.cmpi slt, %i, %n : i64
  cond_br %c, ^body, ^exit
^body:
  %acc.next = arith.add %acc, %i : i64
  %i.next = arith.add %i, %one : i64
  br ^header(%i.next, %acc.next : i64, i64)
^exit:
  return %acc : i64
}
""",
    "loop": """\
func @loop_ops(%a: tensor<?x4xf32>, %n: index, %ok: i1) -> tensor<?xf32> {
^entry:
  %z = arith.constant 0 : index
  %four = arith.constant 4 : index
  %b = loop.alloc %n : index -> tensor<?x4xf32>
  %c = loop.alloc : tensor<4x4xf32>
  loop.copy %a, %b, %z, %z, %four : (tensor<?x4xf32>, tensor<?x4xf32>, index, index, index) -> ()
  %v = loop.load %b, %z : (tensor<?x4xf32>, index) -> f32
  loop.store %v, %b, %z : (f32, tensor<?x4xf32>, index) -> ()
  loop.check %ok {message = "'tensor.extract': index is out of range for axis 0"} : i1
  loop.gemm %a, %c, %b, %z, %z, %z, %n, %four, %four, %four, %four, %four {accumulate = false} : (tensor<?x4xf32>, tensor<4x4xf32>, tensor<?x4xf32>, index, index, index, index, index, index, index, index, index) -> ()
  loop.conv2d %a, %c, %b, %z, %z, %four, %four, %four, %four, %four, %four, %four, %four {stride = [1, 1]} : (tensor<?x4xf32>, tensor<4x4xf32>, tensor<?x4xf32>, index, index, index, index, index, index, index, index, index, index) -> ()
  loop.conv2d %a, %c, %b, %z, %z, %four, %four, %four, %four, %four, %four, %four, %four, %z, %four {stride = [1, 1], chunk = 128} : (tensor<?x4xf32>, tensor<4x4xf32>, tensor<?x4xf32>, index, index, index, index, index, index, index, index, index, index, index, index) -> ()
  loop.depthwise2d %a, %c, %b, %z, %z, %z, %four, %four, %four, %four, %four, %four {kernel = [1, 1], stride = [1, 1], dilation = [1, 1], padding = [0, 0], block = 1} : (tensor<?x4xf32>, tensor<4x4xf32>, tensor<?x4xf32>, index, index, index, index, index, index, index, index, index) -> ()
  loop.maxpool2d %a, %b, %z, %z, %four, %four, %four, %four, %four {kernel = [1, 1], stride = [1, 1]} : (tensor<?x4xf32>, tensor<?x4xf32>, index, index, index, index, index, index, index) -> ()
  %qa = loop.alloc : tensor<4x4xi8>
  %qc = loop.alloc : tensor<4x4xi32>
  loop.qgemm %qa, %qa, %qc, %z, %z, %z, %four, %four, %four, %four, %four, %four : (tensor<4x4xi8>, tensor<4x4xi8>, tensor<4x4xi32>, index, index, index, index, index, index, index, index, index) -> ()
  %d = loop.alloc : tensor<4xf32>
  %r = loop.retype %d : tensor<4xf32> -> tensor<?xf32>
  return %r : tensor<?xf32>
}
""",
    "vector": """\
func @vector_ops(%a: tensor<?xf32>, %o: tensor<?xf32>, %i: index, %x: f32) -> f32 {
^entry:
  %v = loop.vload %a, %i : (tensor<?xf32>, index) -> vector<8xf32>
  %s = loop.broadcast %x : f32 -> vector<8xf32>
  %m = arith.max %v, %s : vector<8xf32>
  %c = arith.cmpf olt, %v, %s : vector<8xf32>
  %y = arith.select %c, %m, %v : (vector<8xi1>, vector<8xf32>, vector<8xf32>) -> vector<8xf32>
  %k = arith.cast %y : vector<8xf32> -> vector<8xi32>
  loop.vstore %y, %o, %i : (vector<8xf32>, tensor<?xf32>, index) -> ()
  loop.prefetch %a, %i : (tensor<?xf32>, index) -> ()
  %r = loop.vreduce %y {kind = "add"} : vector<8xf32> -> f32
  return %r : f32
}
""",
}
