"""A generator of well-typed random IR programs (f32) for the meaning tests.

``generate(seed)`` -> (IR text, input shapes). Programs mix what fusion and the
other passes care about: elementwise chains with broadcasting, reductions with
keepdims, matmuls, scaled values, shared subexpressions and values with several
consumers, an if/else on a reduced scalar (a block argument joins the arms) and
a counted loop whose state is a tensor. Every third seed declares every
parameter extent dynamic (``?``), and some parameters then get a run-time extent
of 1 that the program broadcasts up - the case fusion must not mistake for an
equal extent.

Invariants: each value carries its static type shape (``None`` = ``?``) and its
run-time shape; an op is emitted only when the run-time shapes broadcast, and
its type is ``types.broadcast_shapes`` of the operand types, so the program
verifies and runs. Values defined inside an if arm or a loop body are not used
after it (dominance); the join/exit block arguments are.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from wiadsl.ir.types import broadcast_shapes

UNARY = ("neg", "abs", "relu", "tanh", "sigmoid", "exp")
BINARY = ("add", "sub", "mul", "max", "min")


def t(shape: tuple[int | None, ...]) -> str:
    return "tensor<" + "".join(f"{'?' if d is None else d}x" for d in shape) + "f32>"


@dataclass
class Val:
    name: str
    ty: tuple[int | None, ...]
    rt: tuple[int, ...]


@dataclass
class Gen:
    rng: np.random.Generator
    lines: list[str] = field(default_factory=list)
    vals: list[Val] = field(default_factory=list)
    n: int = 0
    blocks: int = 0

    def fresh(self, hint: str = "t") -> str:
        self.n += 1
        return f"%{hint}{self.n}"

    def pick(self, pool: list[Val] | None = None) -> Val:
        pool = self.vals if pool is None else pool
        return pool[int(self.rng.integers(len(pool)))]

    def emit(self, text: str) -> None:
        self.lines.append("  " + text)

    def unary(self, a: Val) -> Val:
        fn = str(self.rng.choice(UNARY))
        src = a.name
        if fn == "exp":  # keep magnitudes tame
            src = self.fresh("in")
            self.emit(f"{src} = tensor.tanh {a.name} : {t(a.ty)}")
        out = Val(self.fresh(), a.ty, a.rt)
        self.emit(f"{out.name} = tensor.{fn} {src} : {t(a.ty)}")
        return out

    def binary(self, a: Val, b: Val, fn: str | None = None) -> Val | None:
        try:
            rt = tuple(int(d) for d in np.broadcast_shapes(a.rt, b.rt))
            ty = broadcast_shapes(a.ty, b.ty)
        except ValueError:
            return None
        fn = fn or str(self.rng.choice(BINARY))
        sig = t(a.ty) if a.ty == b.ty == ty else f"({t(a.ty)}, {t(b.ty)}) -> {t(ty)}"
        out = Val(self.fresh(), ty, rt)
        self.emit(f"{out.name} = tensor.{fn} {a.name}, {b.name} : {sig}")
        return out

    def reduce(self, a: Val) -> Val:
        fn = str(self.rng.choice(["reduce_sum", "reduce_max", "reduce_mean"]))
        ty, rt = (a.ty[0], 1), (a.rt[0], 1)
        out = Val(self.fresh(), ty, rt)
        self.emit(f"{out.name} = tensor.{fn} {a.name} {{axes = [1], keepdims}} : {t(a.ty)} -> {t(ty)}")
        return out

    def matmul(self, a: Val, w: Val) -> Val:
        ty, rt = (a.ty[0], w.ty[1]), (a.rt[0], w.rt[1])
        out = Val(self.fresh(), ty, rt)
        self.emit(f"{out.name} = tensor.matmul {a.name}, {w.name} : ({t(a.ty)}, {t(w.ty)}) -> {t(ty)}")
        return out

    def scale(self, a: Val) -> Val:
        k = self.fresh("k")
        self.emit(f"{k} = arith.constant {float(self.rng.choice([0.0, 1.0, 0.5, -2.0]))} : f32")
        out = Val(self.fresh(), a.ty, a.rt)
        self.emit(f"{out.name} = tensor.mul {a.name}, {k} : ({t(a.ty)}, f32) -> {t(a.ty)}")
        return out

    def label(self, hint: str) -> str:
        self.blocks += 1
        return f"^{hint}{self.blocks}"

    def if_else(self, a: Val) -> Val:
        """``a`` goes through one of two arms picked by the sign of a reduced scalar."""
        s, zero, c = self.fresh("s"), self.fresh("z"), self.fresh("c")
        src = self.pick()
        self.emit(f"{s} = tensor.reduce_sum {src.name} {{axes = [{', '.join(map(str, range(len(src.ty))))}]}} "
                  f": {t(src.ty)} -> f32")
        self.emit(f"{zero} = arith.constant 0.0 : f32")
        self.emit(f"{c} = arith.cmpf ogt, {s}, {zero} : f32")
        then, other, join = self.label("then"), self.label("else"), self.label("join")
        self.emit(f"cond_br {c}, {then}, {other}")
        arg = Val(self.fresh("j"), a.ty, a.rt)
        for lbl in (then, other):
            self.lines.append(f"{lbl}:")
            r = self.unary(a)
            extra = self.binary(r, self.pick([v for v in self.vals if _fits(v.rt, a.rt)]))
            r = extra if extra is not None and extra.ty == a.ty and extra.rt == a.rt else r
            self.emit(f"br {join}({r.name} : {t(a.ty)})")
        self.lines.append(f"{join}({arg.name}: {t(a.ty)}):")
        return arg

    def loop(self, a: Val) -> Val:
        """``acc = tanh(acc) * 0.5 + a``, three times (a header with block arguments)."""
        i0, one, n, half = self.fresh("i"), self.fresh("one"), self.fresh("n"), self.fresh("h")
        self.emit(f"{i0} = arith.constant 0 : i64")
        self.emit(f"{one} = arith.constant 1 : i64")
        self.emit(f"{n} = arith.constant 3 : i64")
        self.emit(f"{half} = arith.constant 0.5 : f32")
        head, body, done = self.label("head"), self.label("body"), self.label("done")
        i, acc, cond = self.fresh("iv"), self.fresh("acc"), self.fresh("lt")
        out = Val(self.fresh("l"), a.ty, a.rt)
        self.emit(f"br {head}({i0}, {a.name} : i64, {t(a.ty)})")
        self.lines.append(f"{head}({i}: i64, {acc}: {t(a.ty)}):")
        self.emit(f"{cond} = arith.cmpi slt, {i}, {n} : i64")
        self.emit(f"cond_br {cond}, {body}, {done}({acc} : {t(a.ty)})")
        self.lines.append(f"{body}:")
        th, m, nx, inext = self.fresh(), self.fresh(), self.fresh(), self.fresh("inext")
        self.emit(f"{th} = tensor.tanh {acc} : {t(a.ty)}")
        self.emit(f"{m} = tensor.mul {th}, {half} : ({t(a.ty)}, f32) -> {t(a.ty)}")
        self.emit(f"{nx} = tensor.add {m}, {a.name} : {t(a.ty)}")
        self.emit(f"{inext} = arith.add {i}, {one} : i64")
        self.emit(f"br {head}({inext}, {nx} : i64, {t(a.ty)})")
        self.lines.append(f"{done}({out.name}: {t(a.ty)}):")
        return out


def _fits(small: tuple[int, ...], big: tuple[int, ...]) -> bool:
    return len(small) <= len(big) and all(
        s in (1, b) for s, b in zip(reversed(small), reversed(big), strict=False))


def generate(seed: int) -> tuple[str, list[tuple[int, ...]]]:
    rng = np.random.default_rng(seed)
    m, n, k = (int(x) for x in rng.choice([3, 5, 7], 3))
    dynamic = seed % 3 == 2
    one_v, one_c = dynamic and bool(rng.integers(2)), dynamic and bool(rng.integers(2))
    runtime = {"x": (m, n), "v": (1 if one_v else n,), "w": (n, k), "c": (m, 1 if one_c else n)}
    static = {"x": (m, n), "v": (n,), "w": (n, k), "c": (m, 1)}
    g = Gen(rng)
    for p in ("x", "v", "w", "c"):
        ty = tuple(None for _ in runtime[p]) if dynamic else static[p]
        g.vals.append(Val("%" + p, ty, runtime[p] if dynamic else static[p]))
    params = list(g.vals)
    for _ in range(int(rng.integers(5, 13))):
        kind = str(rng.choice(["un", "bin", "bin", "red", "mm", "const", "if", "loop"],
                              p=[.15, .18, .18, .14, .1, .1, .075, .075]))
        a = g.pick()
        out: Val | None = None
        if kind == "un":
            out = g.unary(a)
        elif kind == "bin":
            out = g.binary(a, g.pick())
        elif kind == "red" and len(a.ty) == 2:
            out = g.reduce(a)
        elif kind == "mm" and len(a.ty) == 2 and a.rt[1] == n:
            out = g.matmul(a, params[2])
        elif kind == "const":
            out = g.scale(a)
        elif kind == "if":
            out = g.if_else(a)
        elif kind == "loop":
            out = g.loop(a)
        if out is not None:
            g.vals.append(out)
    outs = g.vals[len(params):][-2:] or [params[0]]
    head = ", ".join(f"{p.name}: {t(p.ty)}" for p in params)
    rets = ", ".join(t(o.ty) for o in outs)
    text = (f"func @g({head}) -> ({rets}) attributes {{kernel}} {{\n^entry:\n" + "\n".join(g.lines)
            + f"\n  return {', '.join(o.name for o in outs)} : {rets}\n}}\n")
    return text, [p.rt for p in params]
