"""Random well-typed programs: helper funcs, one kernel, its call-time dims and inputs.

``generate(seed)`` is deterministic: the same seed gives the same ``FuzzCase``
(program, dims and input arrays), so a failure is reproduced from its seed alone.

Coverage (each drawn at random per program): inputs of rank 0-3 over symbolic and
static dims in every dtype but bf16 (bf16 values come from casts); elementwise
chains with broadcasting and weak literals; reductions (with axis, keepdims,
argmax/argmin); matmuls (1-D and 2-D); static slices and indices; casts;
``where``; shape builtins (transpose, concat, broadcast_to, flatten, zeros/ones/
full, arange, array literals); ``if``/``else if``/``else`` on reduced scalars;
``for`` loops (with start/stop/step, carried values, loop-variable indexing and
slice updates); ``while`` loops with a counter; slice updates; augmented
assignment; generic helper ``func``s (also with ``if``/``return``) inlined at
each call.

Invariants: the kernel's outputs are declared with the types the model predicts
(``model.VType``), and every symbolic dim is >= 1 unless ``empty`` (a rare draw
that binds one dim to 0 to probe empty tensors).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

from ..dtypes import DType
from ..frontend import ast
from .genexpr import ExprGen, FuncSig, apply_sig
from .model import (
    SPAN,
    VType,
    assign,
    binary_type,
    binop,
    block,
    call,
    dim_expr,
    lit,
    name,
    type_expr,
)

INPUT_DTYPES = (DType.F32, DType.F32, DType.F64, DType.F16, DType.I32, DType.I64, DType.I8,
                DType.BOOL)
SYMBOLS = ("M", "N", "K")
#: The share of programs with a pair of matmul inputs of odd extents, and the cap on
#: their product's m * k * n (the simulators run it element by element).
GEMM_SHARE = 0.3
GEMM_VOLUME = 24_000
KERNEL = "fz"


@dataclass
class FuzzCase:
    """One generated program and the call that exercises it."""

    seed: int
    program: ast.Program
    kernel: str
    dims: dict[str, int]
    inputs: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def source(self) -> str:
        from ..frontend.unparse import unparse

        return unparse(self.program)


#: The special values a float input may hold (issue 17); huge is positive only, so
#: a sum of huge values overflows in every summation order or in none.
SPECIALS = (np.nan, np.inf, -np.inf, -0.0, "huge")
SPECIAL_SHARE = 0.15


def random_array(dtype: DType, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Inputs: floats ~ N(0, 1) rounded to 1/8 (exact in every float dtype), small ints, bools.

    A float input of at least 2 elements gets, with probability ``SPECIAL_SHARE``, one to
    three elements replaced by NaN, +-inf, -0.0 or a huge value (0.75 of the dtype's max).
    """
    if dtype.is_float:
        x = np.round(rng.standard_normal(shape) * 8) / 8
        if x.size >= 2 and rng.random() < SPECIAL_SHARE:
            flat = x.reshape(-1)
            huge = 0.75 * float(np.finfo(np.float16 if dtype is DType.F16 else np.float32).max)
            for _ in range(int(rng.integers(1, 4))):
                v = SPECIALS[int(rng.integers(len(SPECIALS)))]
                flat[int(rng.integers(flat.size))] = huge if v == "huge" else float(v)
        return x.astype(dtype.numpy)
    if dtype.is_int:
        return rng.integers(-5, 6, size=shape).astype(dtype.numpy)
    return rng.random(shape) < 0.5


def make_inputs(program: ast.Program, kernel: str, dims: dict[str, int], seed: int
                ) -> dict[str, np.ndarray]:
    """Arrays for the kernel's inputs, from the declaration alone (stable under reduction)."""
    k = next(d for d in program.kernels if d.name == kernel)
    out: dict[str, np.ndarray] = {}
    for p in k.params:
        if p.direction != "input":
            continue
        rng = np.random.default_rng([seed, sum(map(ord, p.name))])
        t = p.type
        shape = () if isinstance(t, ast.ScalarType) else tuple(
            dims[d.value] if isinstance(d.value, str) else d.value for d in t.dims)  # type: ignore[union-attr]
        out[p.name] = random_array(DType(t.dtype), shape, rng)  # type: ignore[union-attr]
    return out


class ProgramGen:
    """Builds one program; statements append to ``self.out`` (the current block)."""

    def __init__(self, seed: int, size: int = 6):
        self.seed = seed
        self.rng = random.Random(seed)
        self.size = size
        self.counter = 0
        self.depth_in = 0  # > 0 inside an if/loop body
        self.env: dict[str, VType] = {}
        #: while-loop counters: no statement but the loop's own increment may change them
        self.counters: set[str] = set()
        self.funcs: list[FuncSig] = []
        self.decls: list[ast.Decl] = []
        self.x = ExprGen(self.rng, self.env, self.funcs)

    def fresh(self, prefix: str = "t") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    # ------------------------------------------------------------ top level

    def case(self) -> FuzzCase:
        rng = self.rng
        empty = rng.random() < 0.03
        dims = {s: rng.randint(1, 5) for s in SYMBOLS}
        if empty:
            dims[rng.choice(SYMBOLS)] = 0
        for _ in range(rng.randint(0, 2)):
            self.make_func()
        params = self.make_inputs()
        body = self.stmts(self.size, depth=2)
        params += self.make_outputs(body)
        self.decls.append(ast.Kernel(KERNEL, tuple(params), block(body), span=SPAN))
        program = ast.Program(tuple(self.decls), filename=f"<fuzz seed {self.seed}>")
        return FuzzCase(self.seed, program, KERNEL, dims,
                        make_inputs(program, KERNEL, dims, self.seed))

    def make_inputs(self) -> list[ast.Param]:
        rng = self.rng
        base = [rng.choice(("M", "N", "K", 1, 2, 3, 4)) for _ in range(3)]
        params = []
        for i in range(rng.randint(1, 4)):
            rank = rng.choice((0, 1, 1, 2, 2, 2, 3))
            shape = tuple(base[3 - rank:]) if rng.random() < 0.7 else tuple(
                rng.choice(("M", "N", 1, 3)) for _ in range(rank))
            if rank and rng.random() < 0.2:
                shape = (1,) + shape[1:]
            t = VType(rng.choice(INPUT_DTYPES), shape)
            n = f"in{i}"
            self.env[n] = t
            params.append(ast.Param("input", n, type_expr(t), span=SPAN))
        if rng.random() < GEMM_SHARE:
            params += self.gemm_inputs(len(params))
        return params

    def gemm_inputs(self, first: int) -> list[ast.Param]:
        """Two inputs whose inner extents agree: ``[m, k]`` and ``[k, n]`` (or ``[n, k]``),
        extents from 1..67 with odd ones favoured (unaligned rows in every backend)."""
        rng = self.rng
        m, k, n = (_extent(rng) for _ in range(3))
        while m * k * n > GEMM_VOLUME:
            m, n = max(1, m // 2), max(1, n // 2)
        dtype = rng.choice((DType.I8, DType.I8, DType.I8, DType.F32, DType.F16, DType.I32))
        second = (k, n) if rng.random() < 0.7 else (n, k)
        params = []
        for i, shape in enumerate(((m, k), second)):
            t = VType(dtype if i == 0 or rng.random() < 0.8 else DType.I8, shape)
            nm = f"in{first + i}"
            self.env[nm] = t
            params.append(ast.Param("input", nm, type_expr(t), span=SPAN))
        return params

    def make_outputs(self, body: list[ast.Stmt]) -> list[ast.Param]:
        outs = []
        candidates = sorted(n for n, t in self.env.items() if t.known)
        self.rng.shuffle(candidates)
        for i, n in enumerate(candidates[:self.rng.randint(1, 2)]):
            t = self.env[n]
            value: ast.Expr = name(n)
            if t.weak:
                t = t.with_(weak=False, dtype=DType.F64 if t.dtype.is_float else t.dtype)
                value = call("cast", value, name(t.dtype.value))
            o = f"out{i}"
            body.append(assign(o, value))
            outs.append(ast.Param("output", o, type_expr(t), span=SPAN))
        return outs

    def make_func(self) -> None:
        rng = self.rng
        f = FuncSig(f"f{len(self.funcs)}", rng.choice((1, 2)), (), rng.random() < 0.3)
        ops = [(rng.choice(("+", "-", "*", "max", "min")), rng.choice(("a", "b", "1", "2")))
               for _ in range(rng.randint(1, 3))]
        f.ops = tuple((op, "a" if (x == "b" and f.arity == 1) else x) for op, x in ops)
        expr: ast.Expr = name("a")
        for op, x in f.ops:
            rhs = name(x) if x in ("a", "b") else lit(int(x))
            expr = call(op, expr, rhs) if op in ("max", "min") else binop(op, expr, rhs)
        params = tuple(ast.FuncParam(p, span=SPAN) for p in ("a", "b")[:f.arity])
        if f.conditional:
            # both branches have the type of ``expr`` (a weak literal keeps it)
            cond = binop(">", call("reduce_max", name("a")), lit(0))
            body: list[ast.Stmt] = [ast.If(cond, block([ast.Return(expr, span=SPAN)]),
                           block([ast.Return(binop("*", expr, lit(2)), span=SPAN)]), span=SPAN)]
        else:
            body = [ast.Return(expr, span=SPAN)]
        self.decls.append(ast.Func(f.name, params, block(body), span=SPAN))
        self.funcs.append(f)

    # ------------------------------------------------------------ statements

    def stmts(self, n: int, depth: int) -> list[ast.Stmt]:
        out: list[ast.Stmt] = []
        kinds = ["assign"] * 5 + ["aug", "slice"]
        if depth > 0:
            kinds += ["if", "for", "while"]
        for _ in range(n):
            kind = self.rng.choice(kinds)
            try:
                out += getattr(self, f"s_{kind}")(depth)
            except LookupError:
                continue
        return out

    def nested(self, n: int, depth: int) -> list[ast.Stmt]:
        """The statements of an inner block: names it binds are dropped afterwards, and
        the outer values it updates (types unchanged) keep only their exactness."""
        saved = dict(self.env)
        self.depth_in += 1
        try:
            body = self.stmts(n, depth - 1)
        finally:
            self.depth_in -= 1
        inner = dict(self.env)
        self.env.clear()
        self.env.update({k: t.with_(exact=t.exact and inner[k].exact) if k in inner else t
                         for k, t in saved.items()})
        return body

    def s_assign(self, depth: int) -> list[ast.Stmt]:
        e, t = self.x.expr(self.rng.randint(1, 3))
        n = self.fresh()
        self.env[n] = t
        return [assign(n, e)]

    def s_aug(self, depth: int) -> list[ast.Stmt]:
        target = self.x.var(lambda t: t.dtype is not DType.BOOL)
        if target is None:
            return []
        n = target[0].id  # type: ignore[union-attr]
        if n in self.counters:
            return []  # `wc -= 3` in its own while loop would never end (seed 7001695)
        t = target[1]
        op = self.rng.choice(("+", "-", "*", "/"))

        def keeps_shape(u: VType) -> bool:
            r = binary_type(t, u, op)
            return r is not None and r.shape == t.shape

        e, te = self.x.literal_for(t) if self.rng.random() < 0.5 else self.x.expr(1, keeps_shape)
        new = binary_type(t, te, op)
        if new is None or new.shape != t.shape:
            return []
        if self.depth_in and (new.dtype, new.weak) != (t.dtype, t.weak):
            return []  # a name rebound in an inner block keeps its type
        if op == "/" and new.dtype.is_float:
            if te.dtype is DType.BOOL:
                return []
            e = binop("+", call("abs", e), lit(1))
        self.env[n] = new
        return [ast.AugAssign(n, op, e, span=SPAN)]

    def s_slice(self, depth: int) -> list[ast.Stmt]:
        target = self.x.var(lambda t: t.rank >= 1 and t.known and not t.weak)
        if target is None:
            return []
        n, t = target[0].id, target[1]  # type: ignore[union-attr]
        items, region = [], []
        for d in t.shape:
            item, extent, kept = self.x._item(d)
            items.append(item)
            if kept:
                region.append(extent)
        value, tv = self.x.expr(1, lambda u: u.rank == 0 and (u.exact or not _narrows(t, u)))
        if region and self.rng.random() < 0.5:
            src = self.x.var(lambda u: u.shape == tuple(region) and (u.exact or not _narrows(t, u)))
            if src is not None:
                value, tv = src
        self.env[n] = t.with_(exact=t.exact and tv.exact)
        return [ast.SliceAssign(n, tuple(items), value, span=SPAN)]

    def s_if(self, depth: int) -> list[ast.Stmt]:
        if self.rng.random() < 0.2:
            # a branch on a float sum: rounding may decide it, and then either branch is
            # right (the judge asks the NumPy evaluator for every allowed path)
            x = self.x.var(lambda t: t.dtype.is_float and t.rank >= 1)
            red_fn = "reduce_sum"
        else:
            x = self.x.var(lambda t: t.exact and t.dtype is not DType.BOOL)
            red_fn = self.rng.choice(("reduce_max", "reduce_min"))
        if x is None:
            return []
        e, t = x
        red = call(red_fn, e) if t.rank else e
        cond = binop(self.rng.choice(("<", ">", ">=")), red, self.x.literal_for(t)[0])
        v, tv = self.x.expr(2)
        n = self.fresh("cv")
        arms = []
        for _ in range(2):
            lit_e, lt = self.x.literal_for(tv)
            op = self.rng.choice(("+", "*", "-")) if tv.dtype is not DType.BOOL else "*"
            arms.append(assign(n, binop(op, v, lit_e) if binary_type(tv, lt, op) == tv else v))
        then = self.nested(self.rng.randint(0, 2), depth) + [arms[0]]
        other: list[ast.Stmt] = [arms[1]]
        if self.rng.random() < 0.3:  # else if
            inner = ast.If(binop("<", red, lit(-1)), block([arms[0]]), block([arms[1]]), span=SPAN)
            other = [inner]
        self.env[n] = tv
        return [ast.If(cond, block(then), block(other), span=SPAN)]

    def s_for(self, depth: int) -> list[ast.Stmt]:
        acc = self.x.var(lambda t: t.dtype is not DType.BOOL and t.known and not t.weak)
        if acc is None:
            return []
        n, t = acc[0].id, acc[1]  # type: ignore[union-attr]
        i = self.fresh("ix")
        stop: ast.Expr = lit(self.rng.randint(0, 3))
        start = step = None
        if t.rank and self.rng.random() < 0.5:
            stop = dim_expr(t.shape[0])
        if self.rng.random() < 0.3:
            start, step = lit(0), lit(self.rng.choice((1, 2)))
        self.env[i] = VType(DType.I64, (), True)
        body = self.nested(self.rng.randint(0, 1), depth)
        upd, tu = self.x.expr(1, lambda u: _fits(t, u))
        if t.rank and isinstance(stop, ast.Name | ast.IntLit) and stop == dim_expr(t.shape[0]) \
                and self.rng.random() < 0.5:
            row = ast.Index(name(n), (name(i),), span=SPAN)
            body.append(ast.SliceAssign(n, (name(i),), binop("*", row, lit(2)), span=SPAN))
        op = self.rng.choice(("+", "-", "*"))
        body.append(assign(n, binop(op, name(n), call("cast", upd, name(t.dtype.value)))))
        del self.env[i]
        self.env[n] = t.with_(exact=t.exact and tu.exact)
        return [ast.For(i, start, stop, step, block(body), span=SPAN)]

    def s_while(self, depth: int) -> list[ast.Stmt]:
        j = self.fresh("wc")
        self.counters.add(j)
        limit = self.rng.randint(0, 3)
        pre: list[ast.Stmt] = [assign(j, lit(0))]
        self.env[j] = VType(DType.I64, (), True)
        body = self.nested(1, depth)
        body.append(assign(j, binop("+", name(j), lit(1))))
        return pre + [ast.While(binop("<", name(j), lit(limit)), block(body), span=SPAN)]


def _extent(rng: random.Random) -> int:
    r = rng.random()
    if r < 0.15:
        return 1
    if r < 0.7:
        return rng.randrange(3, 68, 2)
    return rng.randint(2, 67)


def _fits(t: VType, u: VType) -> bool:
    """``u`` (cast to ``t``'s dtype) broadcasts into ``t``'s shape, and casting is safe."""
    shape = binary_type(t, u.with_(dtype=t.dtype, weak=False), "+")
    return shape is not None and shape.shape == t.shape and (u.exact or not _narrows(t, u))


def _narrows(t: VType, u: VType) -> bool:
    """Casting ``u`` to ``t``'s dtype is discontinuous (float to integer or bool)."""
    return u.dtype.is_float and not t.dtype.is_float


def generate(seed: int, size: int = 6) -> FuzzCase:
    """The program for ``seed`` (deterministic)."""
    return ProgramGen(seed, size).case()


__all__ = ["FuzzCase", "FuncSig", "ProgramGen", "apply_sig", "generate", "make_inputs"]
