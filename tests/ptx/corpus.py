"""Op tests for the PTX backend: small kernels, each run on odd shapes (1, 7, 33, 129).

``OPS``: name -> (WIA source of kernel ``k``, {input: shape template}); templates
use the letters M, N (taken from the size under test) or ints. Scalars are ().
"""

from __future__ import annotations

import numpy as np

OPS: dict[str, tuple[str, dict[str, tuple]]] = {
    "add_bcast": ("kernel k(input a: f32[M, N], input b: f32[N], output y: f32[M, N]) { y = a + b; }",
                  {"a": ("M", "N"), "b": ("N",)}),
    "chain": ("kernel k(input a: f32[M, N], input b: f32[M, N], input c: f32[M, N], output y: f32[M, N])"
              " { y = relu(a * b + c); }", {"a": ("M", "N"), "b": ("M", "N"), "c": ("M", "N")}),
    "unary": ("kernel k(input a: f32[M, N], output y: f32[M, N]) { y = exp(a) + log(abs(a) + 1.0)"
              " + sqrt(abs(a)) + tanh(a) + sigmoid(a) + sin(a) + cos(a) + floor(a) + ceil(a)"
              " + erf(a) + rsqrt(abs(a) + 1.0) - neg(a); }", {"a": ("M", "N")}),
    "unary_f64": ("kernel k(input a: f64[M, N], output y: f64[M, N]) { y = exp(a) + log(abs(a) + 1.0)"
                  " + tanh(a) + sigmoid(a) + sin(a) + cos(a) + erf(a); }", {"a": ("M", "N")}),
    "pow_f64": ("kernel k(input a: f64[M, N], input b: f64[M, N], output y: f64[M, N]) {"
                " y = abs(a) ** b + a ** 3.0; }", {"a": ("M", "N"), "b": ("M", "N")}),
    "binary": ("kernel k(input a: f32[M, N], input b: f32[M, N], output y: f32[M, N]) {"
               " y = a / (abs(b) + 0.5) - max(a, b) * min(a, b) + (a % (abs(b) + 1.0)) + abs(a) ** 1.5; }",
               {"a": ("M", "N"), "b": ("M", "N")}),
    "int_ops": ("kernel k(input a: i32[M, N], input b: i32[M, N], output y: i32[M, N]) {"
                " y = a % (abs(b) + 1) + max(a, b) * 3 - min(a, b) * a; }",
                {"a": ("M", "N"), "b": ("M", "N")}),
    "where_cmp": ("kernel k(input a: f32[M, N], input b: f32[M, N], output y: f32[M, N]) {"
                  " y = where(a > b, a, b * 2.0); }", {"a": ("M", "N"), "b": ("M", "N")}),
    "cast_f16": ("kernel k(input a: f32[M, N], output y: f16[M, N]) { y = cast(a, f16) * cast(a, f16); }",
                 {"a": ("M", "N")}),
    "sum_rows": ("kernel k(input a: f32[M, N], output y: f32[M]) { y = reduce_sum(a, axis=1); }",
                 {"a": ("M", "N")}),
    "max_cols": ("kernel k(input a: f32[M, N], output y: f32[N]) { y = reduce_max(a, axis=0); }",
                 {"a": ("M", "N")}),
    "mean_all": ("kernel k(input a: f32[M, N], output y: f32) { y = reduce_mean(a); }", {"a": ("M", "N")}),
    "min_prod": ("kernel k(input a: f32[M, N], output y: f32[M], output z: f32[M]) {"
                 " y = reduce_min(a, axis=1); z = reduce_prod(a * 0.1 + 1.0, axis=1); }", {"a": ("M", "N")}),
    "argmax": ("kernel k(input a: f32[M, N], output i: i64[M], output j: i64[N]) {"
               " i = argmax(a, axis=1); j = argmin(a, axis=0); }", {"a": ("M", "N")}),
    "softmax": ("import nn;\nkernel k(input a: f32[M, N], output y: f32[M, N]) { y = nn.softmax(a); }",
                {"a": ("M", "N")}),
    "layer_norm": ("import nn;\nkernel k(input a: f32[M, N], input g: f32[N], input b: f32[N],"
                   " output y: f32[M, N]) { y = nn.layer_norm(a, g, b); }",
                   {"a": ("M", "N"), "g": ("N",), "b": ("N",)}),
    "matmul": ("kernel k(input a: f32[M, 5], input b: f32[5, N], output y: f32[M, N]) { y = a @ b; }",
               {"a": ("M", 5), "b": (5, "N")}),
    "matmul_t_bias": ("kernel k(input a: f32[M, 9], input b: f32[N, 9], input c: f32[N],"
                      " output y: f32[M, N]) { y = relu(a @ transpose(b) + c); }",
                      {"a": ("M", 9), "b": ("N", 9), "c": ("N",)}),
    "matvec": ("kernel k(input a: f32[M, N], input v: f32[N], output y: f32[M]) { y = a @ v; }",
               {"a": ("M", "N"), "v": ("N",)}),
    "matmul_i8": ("kernel k(input a: i8[M, 6], input b: i8[6, N], output y: i32[M, N]) {"
                  " y = cast(a, i32) @ cast(b, i32); }", {"a": ("M", 6), "b": (6, "N")}),
    "transpose": ("kernel k(input a: f32[M, N], output y: f32[N, M]) { y = transpose(a) * 2.0; }",
                  {"a": ("M", "N")}),
    "concat_reshape": ("kernel k(input a: f32[M, 4], output y: f32[M, 8], output r: f32[4, M]) {"
                       " y = concat([a, a * 3.0], axis=1); r = reshape(a, [4, M]); }", {"a": ("M", 4)}),
    "slices": ("kernel k(input a: f32[M, N], output y: f32[M, N], output s: f32) {"
               " u = a; u[0, :] = a[-1, :] * 2.0; y = u[::-1, :]; s = a[0, -1]; }", {"a": ("M", "N")}),
    "pools": ("kernel k(input a: f32[2, 3, 8, 6], output y: f32[2, 3, 4, 3],"
              " output z: f32[2, 3, 4, 3]) { y = max_pool(a); z = avg_pool(a); }",
              {"a": (2, 3, 8, 6)}),
    "conv": ("kernel k(input x: f32[1, 3, M, N], input w: f32[4, 3, 3, 3], output y: f32[1, 4, M, N]) {"
             " y = conv2d(x, w, padding=1); }", {"x": (1, 3, "M", "N"), "w": (4, 3, 3, 3)}),
    "creation": ("kernel k(input a: f32[M], output y: f32[M], output z: i64[M]) {"
                 " y = full([M], 2.5, f32) + a; z = arange(M); }", {"a": ("M",)}),
    "quant": ("kernel k(input x: f32[M, N], input s: f32, output q: i8[M, N], output d: f32[M, N]) {"
              " q = quantize(x, s, 3); d = dequantize(q, s, 3); }", {"x": ("M", "N"), "s": ()}),
}

#: (M, N) pairs: odd sizes, a row of 1, a 129-wide row (more than one warp per row lane set).
SIZES = [(1, 7), (7, 33), (33, 1), (3, 129)]


def shape(template: tuple, m: int, n: int) -> tuple[int, ...]:
    return tuple(m if d == "M" else n if d == "N" else d for d in template)


def make_inputs(kernel_params, shapes: dict[str, tuple], m: int, n: int, seed: int = 0) -> list:
    """Random inputs for the kernel's input params (declaration order)."""
    rng = np.random.default_rng(seed)
    out = []
    for p in kernel_params:
        dims = shape(shapes[p.name], m, n)
        dt = p.dtype.numpy if p.dtype is not None else np.float32
        if np.issubdtype(dt, np.integer):
            out.append(rng.integers(-9, 10, size=dims).astype(dt))
        elif dims == ():
            out.append(dt.type(0.25))
        else:
            out.append(rng.standard_normal(dims).astype(dt))
    return out
