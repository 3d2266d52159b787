"""Two lanes of an elementwise vector loop at once: f16/bf16 values packed in one b32.

The 128-bit loop of an elementwise kernel (``elementwise._vector_body``) evaluates its
expression for lanes (2p, 2p+1) together. A 16-bit float lives packed (``f16x2`` /
``bf16x2``: lane 2p in the low half, as ``ld.global.v4.b32`` delivers the lower address).
Ops with a packed instruction whose result is bit-identical to the language's run on
both halves at once; every other op runs per lane on compute registers
(``ExprCodegen``, f16/bf16 in f32) and is packed by one ``cvt.rn.{f16x2,bf16x2}.f32``,
which is also its rounding to the dtype.

Invariants:
- The language rounds every f16/bf16 op to its dtype (the interpreter: NumPy float16,
  bf16 as f32 then ``round_bf16``). f32 carries more than 2p+2 bits of an f16 (p = 11)
  or bf16 (p = 8) significand, so f32-then-round equals the correctly rounded packed
  ``add/sub/mul.rn`` (subnormal results included: there the f32 result is exact).
  ``a*b+c`` is two packed instructions, each rounded: never one ``fma``.
- bf16 below sm_90 (no ``add/sub/mul.bf16x2``): ``fma.rn.bf16x2`` with 1.0 (add),
  -1.0 (sub) or -0.0 (mul) as the third factor: one rounding of the exact sum or
  product, signed zeros as IEEE add/mul give them (CUDA's ``__hadd2`` does the same).
- ``neg``/``abs`` are sign-bit operations (``xor``/``and``), as NumPy's on every value,
  NaN included; ``max/min/relu`` are ``max/min.NaN`` (NaN-propagating, as for f32).
- A comparison of 16-bit values is a packed mask (``set.<cmp>.u32.f16x2``: 0xFFFF per
  true half; bf16x2 from sm_90) that ``where`` applies with one ``lop3`` and ``and/or/not``
  combine bitwise; any other user sees one predicate per lane.
- Only on sm_80+ (``cvt.rn.f16x2.f32``, ``max.NaN.f16x2``, bf16x2 ``fma``):
  ``packed_arch`` says where; older targets keep the per-lane path.
"""

from __future__ import annotations

from dataclasses import dataclass

from ....dtypes import DType
from ..codegen import ExprCodegen
from ..expr import Apply, Load, Node
from ..isa import sm_number
from ..scalar_ops import FLOAT_CMP

HALF = (DType.F16, DType.BF16)
#: the packed type of a 16-bit float dtype
PACKED = {DType.F16: "f16x2", DType.BF16: "bf16x2"}
#: 1.0, -1.0 and -0.0 in both halves (bf16 add, sub and mul through fma below sm_90)
BF16X2_ONE, BF16X2_MINUS_ONE, BF16X2_MINUS_ZERO = "0x3F803F80", "0xBF80BF80", "0x80008000"
#: ``lop3`` truth table of ``(c & a) | (~c & b)`` (a = 0xF0, b = 0xCC, c = 0xAA)
SELECT_LUT = "0xE4"
ARITH = ("add", "sub", "mul")
MIN_SM = 80


def packed_arch(arch: str) -> bool:
    """Whether ``arch`` has every packed instruction this module emits (sm_80+)."""
    return sm_number(arch) >= MIN_SM


@dataclass
class PairValue:
    """One node's value for a lane pair: ``packed`` (a b32 of two 16-bit floats, or a
    bool mask of 0xFFFF per true half) and/or ``lanes`` (one compute register per lane,
    ``isa.DTYPES``: f16/bf16 in f32, bool as predicates). At least one is set."""

    dtype: DType
    packed: str | None = None
    lanes: tuple[str, str] | None = None


class PairEval:
    """Evaluates expression nodes for one lane pair of the vector loop.

    ``base``: the registers of loop-invariant nodes (hoisted before the loop);
    ``invariant_packed``: packed copies of the 16-bit ones (``hoist_packed``)."""

    def __init__(self, cg: ExprCodegen, base: dict[int, str], invariant_packed: dict[int, str],
                 arch: str):
        self.cg, self.kb, self.base = cg, cg.kb, base
        self.invariant_packed = invariant_packed
        self.sm90 = sm_number(arch) >= 90
        self.memo: dict[int, PairValue] = {}
        #: packed constants of the current ``start`` (a caller may put each pair in a
        #: branch of its own: nothing made for one pair is read by another)
        self.consts: dict[str, str] = {}

    def start(self, loads: dict[int, PairValue]) -> None:
        """A new lane pair whose varying input ``a`` holds ``loads[a]``."""
        self.memo, self.consts = {}, {}
        self.loads = loads

    # ------------------------------------------------------------ forms
    def packed(self, node: Node) -> str:
        v = self.value(node)
        if v.packed is None:
            v.packed = self._pack(v)
        return v.packed

    def lanes(self, node: Node) -> tuple[str, str]:
        v = self.value(node)
        if v.lanes is None:
            v.lanes = self._unpack(v)
        return v.lanes

    def _pack(self, v: PairValue) -> str:
        """Two compute registers as one packed word (a rounding for unrounded f32)."""
        assert v.lanes is not None
        kb, out = self.kb, self.kb.reg("b32")
        lo, hi = v.lanes
        if v.dtype is DType.BOOL:
            m0, m1 = kb.reg("b32"), kb.reg("b32")
            kb.emit(f"selp.b32 {m0}, 65535, 0, {lo}")
            kb.emit(f"selp.b32 {m1}, -65536, 0, {hi}")
            kb.emit(f"or.b32 {out}, {m0}, {m1}")
        else:  # the upper half comes from the first source
            kb.emit(f"cvt.rn.{PACKED[v.dtype]}.f32 {out}, {hi}, {lo}")
        return out

    def _unpack(self, v: PairValue) -> tuple[str, str]:
        """A packed word as one compute register per lane (exact)."""
        assert v.packed is not None
        kb, w = self.kb, v.packed
        if v.dtype is DType.BOOL:
            h0, h1 = kb.regs("b16", 2)
            p0, p1 = kb.regs("pred", 2)
            kb.emit(f"mov.b32 {{{h0}, {h1}}}, {w}")
            kb.emit(f"setp.ne.u16 {p0}, {h0}, 0")
            kb.emit(f"setp.ne.u16 {p1}, {h1}, 0")
            return p0, p1
        if v.dtype is DType.BF16:  # a bf16 is the top half of its f32
            b0, b1 = kb.regs("b32", 2)
            f0, f1 = kb.regs("f32", 2)
            kb.emit(f"shl.b32 {b0}, {w}, 16")
            kb.emit(f"and.b32 {b1}, {w}, -65536")
            kb.emit(f"mov.b32 {f0}, {b0}")
            kb.emit(f"mov.b32 {f1}, {b1}")
            return f0, f1
        h0, h1 = kb.regs("b16", 2)
        kb.emit(f"mov.b32 {{{h0}, {h1}}}, {w}")
        return self.cg.widen16(h0, v.dtype), self.cg.widen16(h1, v.dtype)

    def const(self, bits: str) -> str:
        """A b32 register holding ``bits`` (a hex literal), one per value."""
        if bits not in self.consts:
            r = self.kb.reg("b32")
            self.kb.emit(f"mov.b32 {r}, {bits}")
            self.consts[bits] = r
        return self.consts[bits]

    # ------------------------------------------------------------ evaluation
    def value(self, node: Node) -> PairValue:
        key = id(node)
        if key not in self.memo:
            self.memo[key] = self._compute(node)
        return self.memo[key]

    def _compute(self, node: Node) -> PairValue:
        key = id(node)
        if key in self.base:
            r = self.base[key]
            return PairValue(node.dtype, self.invariant_packed.get(key), (r, r))
        if isinstance(node, Load) and node.arg in self.loads:
            return self.loads[node.arg]
        if isinstance(node, Apply):
            native = self._native(node)
            if native is not None:
                return native
        return self._per_lane(node)

    def _per_lane(self, node: Node) -> PairValue:
        """``node`` computed once per lane by the scalar codegen; a 16-bit float result
        stays unrounded and is packed (rounded) for both lanes by one ``cvt``."""
        cg = self.cg
        args = node.args if isinstance(node, Apply) else []
        unrounded = isinstance(node, Apply) and node.dtype in HALF and node.fn != "cast"
        arg_lanes = [(a, self.lanes(a)) for a in args]  # first: they may recurse here
        out = []
        for k in (0, 1):
            cg.memo = dict(self.base)
            for a, regs in arg_lanes:
                cg.memo[id(a)] = regs[k]
            if unrounded:
                out.append(cg.apply(node, rounded=False))  # type: ignore[arg-type]
            else:
                out.append(cg.value(node))
        v = PairValue(node.dtype, lanes=(out[0], out[1]))
        if unrounded:  # the lanes are not the dtype's values yet: only the packed form is
            return PairValue(node.dtype, self._pack(v))
        return v

    def _native(self, node: Apply) -> PairValue | None:
        """``node`` as packed instructions, or None where it has none here."""
        fn, dt, args = node.fn, node.dtype, node.args
        if fn == "cmp" and args[0].dtype in HALF:
            return self._compare(node)
        if dt is DType.BOOL and fn in ("and", "or", "not"):
            if all(self.value(a).packed is not None for a in args):
                return self._bits(fn, [self.packed(a) for a in args])
            return None
        if dt not in HALF:
            return None
        if fn == "cast" and args[0].dtype in (DType.F32, *HALF):  # exact f32 lanes, one rounding
            return PairValue(dt, self._pack(PairValue(dt, lanes=self.lanes(args[0]))))
        if fn == "select":
            return PairValue(dt, self._select(args[0], self.packed(args[1]), self.packed(args[2])))
        if any(a.dtype is not dt for a in args):
            return None
        regs = [self.packed(a) for a in args] if fn in (*ARITH, "neg", "abs", "max", "min",
                                                        "relu") else None
        if regs is None:
            return None
        kb, out, t = self.kb, self.kb.reg("b32"), PACKED[dt]
        if fn in ARITH:
            self._arith(fn, dt, out, regs[0], regs[1])
        elif fn == "neg":
            kb.emit(f"xor.b32 {out}, {regs[0]}, -2147450880")  # 0x80008000
        elif fn == "abs":
            kb.emit(f"and.b32 {out}, {regs[0]}, 2147450879")  # 0x7FFF7FFF
        elif fn == "relu":
            kb.emit(f"max.NaN.{t} {out}, {regs[0]}, {self.const('0x00000000')}")
        else:
            kb.emit(f"{fn}.NaN.{t} {out}, {regs[0]}, {regs[1]}")
        return PairValue(dt, out)

    def _arith(self, fn: str, dt: DType, out: str, a: str, b: str) -> None:
        kb = self.kb
        if dt is DType.F16 or self.sm90:
            kb.emit(f"{fn}.rn.{PACKED[dt]} {out}, {a}, {b}")
            return
        if fn == "add":  # a * 1 + b
            kb.emit(f"fma.rn.bf16x2 {out}, {a}, {self.const(BF16X2_ONE)}, {b}")
        elif fn == "sub":  # b * -1 + a
            kb.emit(f"fma.rn.bf16x2 {out}, {b}, {self.const(BF16X2_MINUS_ONE)}, {a}")
        else:  # a * b + (-0): the exact product rounded once, its zero's sign kept
            kb.emit(f"fma.rn.bf16x2 {out}, {a}, {b}, {self.const(BF16X2_MINUS_ZERO)}")

    def _compare(self, node: Apply) -> PairValue | None:
        a, b = node.args
        dt = a.dtype
        if b.dtype is not dt or (dt is DType.BF16 and not self.sm90):
            return None
        out = self.kb.reg("b32")
        cmp = FLOAT_CMP[node.attrs["predicate"]]
        self.kb.emit(f"set.{cmp}.u32.{PACKED[dt]} {out}, {self.packed(a)}, {self.packed(b)}")
        return PairValue(DType.BOOL, out)

    def _bits(self, fn: str, regs: list[str]) -> PairValue:
        out = self.kb.reg("b32")
        if fn == "not":
            self.kb.emit(f"not.b32 {out}, {regs[0]}")
        else:
            self.kb.emit(f"{fn}.b32 {out}, {regs[0]}, {regs[1]}")
        return PairValue(DType.BOOL, out)

    def _select(self, cond: Node, a: str, b: str) -> str:
        """``where(cond, a, b)`` of packed words: one ``lop3`` by a mask, else per half."""
        kb, out = self.kb, self.kb.reg("b32")
        c = self.value(cond)
        if c.packed is not None:
            kb.emit(f"lop3.b32 {out}, {a}, {b}, {c.packed}, {SELECT_LUT}")
            return out
        p0, p1 = self.lanes(cond)
        a0, a1, b0, b1, r0, r1 = kb.regs("b16", 6)
        kb.emit(f"mov.b32 {{{a0}, {a1}}}, {a}")
        kb.emit(f"mov.b32 {{{b0}, {b1}}}, {b}")
        kb.emit(f"selp.b16 {r0}, {a0}, {b0}, {p0}")
        kb.emit(f"selp.b16 {r1}, {a1}, {b1}, {p1}")
        kb.emit(f"mov.b32 {out}, {{{r0}, {r1}}}")
        return out


def hoist_packed(cg: ExprCodegen, base: dict[int, str], nodes: list[Node]) -> dict[int, str]:
    """Packed copies (both halves) of the loop-invariant 16-bit floats among ``nodes``,
    emitted once before the loop (exact: their f32 registers hold 16-bit values)."""
    out: dict[int, str] = {}
    for n in nodes:
        if id(n) in base and n.dtype in HALF:
            r = base[id(n)]
            w = cg.kb.reg("b32")
            cg.kb.emit(f"cvt.rn.{PACKED[n.dtype]}.f32 {w}, {r}, {r}")
            out[id(n)] = w
    return out
