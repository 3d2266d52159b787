"""The online-softmax steps of the flash-attention kernels, on f32 registers.

Per query row a kernel keeps the running max ``m`` and the running sum of
``exp(x - m)``; each key tile's scores are scaled (``scaled``), masked to -inf
(``mask``), reduced to the tile max (``max_of``, then ``quad`` over the 4 lanes
sharing a row), and ``rescale`` moves ``m`` and returns the factor the old sum and
outputs are multiplied by.

Invariants:
- ``exp`` is the emitter's (``ScalarEmitter``): ~1 ulp, ``ex2.approx`` only under
  fast math; ``exp(-inf)`` is exactly 0.
- While every score of a row seen so far is -inf, the max subtracted is 0, so no
  ``-inf - -inf`` NaN appears (FlashAttention's check); the row's sum stays 0 and
  its output ends as 0 / 0 = NaN, as NumPy's softmax of an all -inf row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ....dtypes import DType

if TYPE_CHECKING:
    from ..builder import KernelBuilder
    from ..codegen import ExprCodegen

NEG_INF = "0fFF800000"
FULL_MASK = "0xffffffff"


class OnlineSoftmax:
    """Mixed into ``flash.Frame``: emits into ``kb``; ``factor`` is the score scale
    register (None: unscaled)."""

    if TYPE_CHECKING:
        kb: KernelBuilder
        cg: ExprCodegen
        factor: str | None

    def mask(self, x: str, rem: str, offset: int) -> str:
        """``x`` where the key at tile offset ``offset`` is kept (``rem >= offset``), else -inf."""
        kb, p, out = self.kb, self.kb.reg("pred"), self.kb.reg("f32")
        kb.emit(f"setp.ge.s32 {p}, {rem}, {offset}")
        kb.emit(f"selp.f32 {out}, {x}, {NEG_INF}, {p}")
        return out

    def scaled(self, acc: str) -> str:
        if self.factor is None:
            return acc
        out = self.kb.reg("f32")
        self.kb.emit(f"mul.rn.f32 {out}, {acc}, {self.factor}")
        return out

    def max_of(self, regs: list[str]) -> str:
        kb, out = self.kb, self.kb.reg("f32")
        kb.emit(f"mov.f32 {out}, {regs[0]}")
        for r in regs[1:]:
            kb.emit(f"max.f32 {out}, {out}, {r}")
        return out

    def quad(self, reg: str, op: str) -> str:
        """``reg`` combined (``max`` / ``add``) over the 4 lanes of this lane's quad;
        every lane gets the same bits (both operations are commutative)."""
        kb = self.kb
        for delta in (1, 2):
            other, out = kb.reg("f32"), kb.reg("f32")
            kb.emit(f"shfl.sync.bfly.b32 {other}, {reg}, {delta}, 31, {FULL_MASK}")
            kb.emit(f"{op}.f32 {out}, {reg}, {other}" if op == "max" else
                    f"add.rn.f32 {out}, {reg}, {other}")
            reg = out
        return reg

    def rescale(self, m: str, tile_max: str) -> tuple[str, str]:
        """Update running max register ``m`` with ``tile_max``; returns (the max to
        subtract this tile: 0 while every score seen is -inf, so exp never sees
        -inf - -inf; the factor ``exp(m_old - that)`` for the old sum and outputs)."""
        kb = self.kb
        new, use, p = kb.reg("f32"), kb.reg("f32"), kb.reg("pred")
        kb.emit(f"max.f32 {new}, {m}, {tile_max}")
        kb.emit(f"setp.eq.f32 {p}, {new}, {NEG_INF}")
        kb.emit(f"selp.f32 {use}, 0f00000000, {new}, {p}")
        d = kb.reg("f32")
        kb.emit(f"sub.rn.f32 {d}, {m}, {use}")
        alpha = self.exp(d)
        kb.emit(f"mov.f32 {m}, {new}")
        return use, alpha

    def exp(self, x: str) -> str:
        return self.cg.ops.apply("exp", DType.F32, [(x, DType.F32)])

    def exp_shifted(self, x: str, m: str) -> str:
        d = self.kb.reg("f32")
        self.kb.emit(f"sub.rn.f32 {d}, {x}, {m}")
        return self.exp(d)


__all__ = ["FULL_MASK", "NEG_INF", "OnlineSoftmax"]
