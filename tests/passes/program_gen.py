"""A small generator of well-typed straight-line IR programs (f32, static shapes):
elementwise chains with broadcasting, reductions with keepdims, matmuls, shared
subexpressions and values with several consumers - the shapes fusion cares about."""

from __future__ import annotations

import numpy as np

UNARY = ("neg", "abs", "relu", "tanh", "sigmoid", "exp")
BINARY = ("add", "sub", "mul", "max", "min")


def t(shape: tuple[int, ...]) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + "f32>"


def generate(seed: int) -> tuple[str, list[tuple[int, ...]]]:
    rng = np.random.default_rng(seed)
    m, n, k = (int(x) for x in rng.choice([3, 5, 7], 3))
    params = [("x", (m, n)), ("v", (n,)), ("w", (n, k)), ("c", (m, 1))]
    vals: list[tuple[str, tuple[int, ...]]] = list(params)
    lines: list[str] = []
    for i in range(int(rng.integers(4, 12))):
        name = f"%t{i}"
        kind = rng.choice(["un", "bin", "bin", "red", "mm", "const"])
        a_name, a_shape = vals[int(rng.integers(len(vals)))]
        a = a_name if a_name.startswith("%") else "%" + a_name
        if kind == "un":
            fn = str(rng.choice(UNARY))
            src = a
            if fn == "exp":  # keep magnitudes tame
                lines.append(f"  {name}_in = tensor.tanh {a} : {t(a_shape)}")
                src = f"{name}_in"
            lines.append(f"  {name} = tensor.{fn} {src} : {t(a_shape)}")
            vals.append((name, a_shape))
        elif kind == "bin":
            b_name, b_shape = vals[int(rng.integers(len(vals)))]
            b = b_name if b_name.startswith("%") else "%" + b_name
            try:
                out = np.broadcast_shapes(a_shape, b_shape)
            except ValueError:
                continue
            fn = str(rng.choice(BINARY))
            sig = t(a_shape) if a_shape == b_shape == out else f"({t(a_shape)}, {t(b_shape)}) -> {t(out)}"
            lines.append(f"  {name} = tensor.{fn} {a}, {b} : {sig}")
            vals.append((name, tuple(out)))
        elif kind == "red" and len(a_shape) == 2:
            fn = str(rng.choice(["reduce_sum", "reduce_max", "reduce_mean"]))
            out = (a_shape[0], 1)
            lines.append(f"  {name} = tensor.{fn} {a} {{axes = [1], keepdims}} : {t(a_shape)} -> {t(out)}")
            vals.append((name, out))
        elif kind == "mm" and len(a_shape) == 2 and a_shape[1] == n:
            out = (a_shape[0], k)
            lines.append(f"  {name} = tensor.matmul {a}, %w : ({t(a_shape)}, {t((n, k))}) -> {t(out)}")
            vals.append((name, out))
        elif kind == "const":
            lines.append(f"  {name}_k = arith.constant {float(rng.choice([0.0, 1.0, 0.5, -2.0]))} : f32")
            lines.append(f"  {name} = tensor.mul {a}, {name}_k : ({t(a_shape)}, f32) -> {t(a_shape)}")
            vals.append((name, a_shape))
    outs = [v for v in vals[len(params):]][-2:] or [("%x", (m, n))]
    outs = [(o if o.startswith("%") else "%" + o, s) for o, s in outs]
    head = ", ".join(f"%{p}: {t(s)}" for p, s in params)
    rets = ", ".join(t(s) for _, s in outs)
    text = (f"func @g({head}) -> ({rets}) attributes {{kernel}} {{\n^entry:\n" + "\n".join(lines)
            + f"\n  return {', '.join(o for o, _ in outs)} : {rets}\n}}\n")
    return text, [s for _, s in params]
