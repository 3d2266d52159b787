"""Reduction combiners and the block-wide reduction (warp shuffles + shared memory).

Invariants:
- ``identity(kind, t)`` is neutral for ``combine``: 0 / 1 / -inf / +inf (ints:
  their min/max); arg-reductions carry (value, index) with index INT_MAX, so
  any real element wins.
- max/min propagate NaN (NumPy); argmax/argmin pick the first NaN, else the
  first extreme value (ties go to the smaller index), matching NumPy.
- ``block_reduce`` assumes blockDim.x is a multiple of 32 and at most 1024 and
  returns the row's value in every thread.
"""

from __future__ import annotations

from dataclasses import dataclass

from ....diagnostics import WiaError
from ....dtypes import DType
from ..builder import KernelBuilder
from ..isa import float_literal, info
from ..scalar_ops import ScalarEmitter

INT_LIMITS = {"s32": (-(2**31), 2**31 - 1), "s64": (-(2**63), 2**63 - 1)}
INT_MAX32 = 2**31 - 1


@dataclass
class Reducer:
    kb: KernelBuilder
    ops: ScalarEmitter
    smem: str | None = None
    smem_idx: str | None = None
    #: One thread owns the whole row: no cross-thread step.
    thread_only: bool = False

    def identity(self, kind: str, t: DType) -> tuple[str, str | None]:
        kb, i = self.kb, info(t)
        acc = kb.reg(i.reg)
        kb.emit(f"mov.{i.itype} {acc}, {self._identity_literal(kind, t)}")
        idx = None
        if kind in ("argmax", "argmin"):
            idx = kb.reg("b32")
            kb.emit(f"mov.u32 {idx}, {INT_MAX32}")
        return acc, idx

    def _identity_literal(self, kind: str, t: DType) -> str:
        i = info(t)
        if kind in ("sum", "mean"):
            return float_literal(0.0, t) if t.is_float else "0"
        if kind == "prod":
            return float_literal(1.0, t) if t.is_float else "1"
        low = kind in ("max", "argmax")
        if t.is_float:
            return float_literal(float("-inf") if low else float("inf"), t)
        lo, hi = INT_LIMITS[i.itype]
        return str(lo if low else hi)

    def combine(self, kind: str, t: DType, a: str, b: str) -> str:
        fn = {"sum": "add", "mean": "add", "prod": "mul", "max": "max", "min": "min"}.get(kind)
        if fn is None:
            raise WiaError(f"the PTX backend has no '{kind}' reduction")
        return self.ops.apply(fn, t, [(a, t), (b, t)])

    def better(self, kind: str, t: DType, a: str, ia: str, b: str, ib: str) -> str:
        """Predicate: (b, ib) should replace (a, ia) in an arg-reduction."""
        kb, ty = self.kb, info(t).itype
        strict, tie, lt = kb.reg("pred"), kb.reg("pred"), kb.reg("pred")
        kb.emit(f"setp.{'gt' if kind == 'argmax' else 'lt'}.{ty} {strict}, {b}, {a}")
        kb.emit(f"setp.lt.s32 {lt}, {ib}, {ia}")
        if t.is_float:
            nb, na, both, keep = kb.reg("pred"), kb.reg("pred"), kb.reg("pred"), kb.reg("pred")
            kb.emit(f"setp.nan.{ty} {nb}, {b}, {b}")
            kb.emit(f"setp.nan.{ty} {na}, {a}, {a}")
            # b wins when strictly better or the first NaN, unless a already is a NaN
            kb.emit(f"or.pred {strict}, {strict}, {nb}")
            kb.emit(f"not.pred {keep}, {na}")
            kb.emit(f"and.pred {strict}, {strict}, {keep}")
            # a tie (equal, or both NaN) goes to the smaller index
            kb.emit(f"and.pred {both}, {na}, {nb}")
            kb.emit(f"setp.eq.{ty} {tie}, {a}, {b}")
            kb.emit(f"or.pred {tie}, {tie}, {both}")
            kb.emit(f"and.pred {tie}, {tie}, {lt}")
        else:
            kb.emit(f"setp.eq.{ty} {tie}, {a}, {b}")
            kb.emit(f"and.pred {tie}, {tie}, {lt}")
        out = kb.reg("pred")
        kb.emit(f"or.pred {out}, {strict}, {tie}")
        return out

    def accumulate(self, kind: str, t: DType, acc: str, idx: str | None, v: str, c: str) -> None:
        kb = self.kb
        if kind in ("argmax", "argmin"):
            p = self.better(kind, t, acc, idx, v, c)  # type: ignore[arg-type]
            kb.emit(f"selp.{info(t).itype} {acc}, {v}, {acc}, {p}")
            kb.emit(f"selp.u32 {idx}, {c}, {idx}, {p}")
            return
        r = self.combine(kind, t, acc, v)
        kb.emit(f"mov.{info(t).itype} {acc}, {r}")

    # ------------------------------------------------------------ block-wide
    def _shfl(self, reg: str, t: DType, offset: int) -> str:
        kb = self.kb
        if info(t).reg in ("b64", "f64"):
            lo, hi, lo2, hi2 = kb.regs("b32", 4)
            out = kb.reg(info(t).reg)
            kb.emit(f"mov.b64 {{{lo}, {hi}}}, {reg}")
            kb.emit(f"shfl.sync.bfly.b32 {lo2}, {lo}, {offset}, 31, -1")
            kb.emit(f"shfl.sync.bfly.b32 {hi2}, {hi}, {offset}, 31, -1")
            kb.emit(f"mov.b64 {out}, {{{lo2}, {hi2}}}")
            return out
        out = kb.reg(info(t).reg)
        kb.emit(f"shfl.sync.bfly.b32 {out}, {reg}, {offset}, 31, -1")
        return out

    def _warp_reduce(self, kind: str, t: DType, acc: str, idx: str | None) -> None:
        kb = self.kb
        for off in (16, 8, 4, 2, 1):
            other = self._shfl(acc, t, off)
            if idx is not None:
                oidx = self._shfl(idx, DType.I32, off)
                self.accumulate(kind, t, acc, idx, other, oidx)
            else:
                r = self.combine(kind, t, acc, other)
                kb.emit(f"mov.{info(t).itype} {acc}, {r}")

    def block_reduce(self, kind: str, t: DType, acc: str, idx: str | None, tid: str
                     ) -> tuple[str, str | None]:
        kb = self.kb
        if self.thread_only:
            return acc, idx
        if self.smem is None:
            self.smem = kb.shared_array("red_val", "b64", 32, 8)
            self.smem_idx = kb.shared_array("red_idx", "b32", 32, 4)
        i, st = info(t), "b64" if info(t).reg in ("b64", "f64") else "b32"
        self._warp_reduce(kind, t, acc, idx)
        lane, warp, p, addr, iaddr = (kb.reg("b32"), kb.reg("b32"), kb.reg("pred"),
                                      kb.reg("b32"), kb.reg("b32"))
        kb.emit(f"and.b32 {lane}, {tid}, 31")
        kb.emit(f"shr.u32 {warp}, {tid}, 5")
        kb.emit(f"setp.eq.u32 {p}, {lane}, 0")
        kb.emit(f"mov.u32 {addr}, {self.smem}")
        kb.emit(f"mad.lo.u32 {addr}, {warp}, 8, {addr}")
        kb.emit(f"mov.u32 {iaddr}, {self.smem_idx}")
        kb.emit(f"mad.lo.u32 {iaddr}, {warp}, 4, {iaddr}")
        kb.emit(f"@{p} st.shared.{st} [{addr}], {acc}")
        if idx is not None:
            kb.emit(f"@{p} st.shared.b32 [{iaddr}], {idx}")
        kb.emit("bar.sync 0")
        # warp 0 folds the per-warp partials (lanes beyond the warp count hold identity)
        nw, pin = kb.reg("b32"), kb.reg("pred")
        ntid = kb.reg("b32")
        kb.emit(f"mov.u32 {ntid}, %ntid.x")
        kb.emit(f"shr.u32 {nw}, {ntid}, 5")
        kb.emit(f"setp.lt.u32 {pin}, {tid}, {nw}")
        part, pidx = self.identity(kind, t)
        laddr, liaddr = kb.reg("b32"), kb.reg("b32")
        kb.emit(f"mov.u32 {laddr}, {self.smem}")
        kb.emit(f"mad.lo.u32 {laddr}, {tid}, 8, {laddr}")
        kb.emit(f"@{pin} ld.shared.{st} {part}, [{laddr}]")
        if pidx is not None:
            kb.emit(f"mov.u32 {liaddr}, {self.smem_idx}")
            kb.emit(f"mad.lo.u32 {liaddr}, {tid}, 4, {liaddr}")
            kb.emit(f"@{pin} ld.shared.b32 {pidx}, [{liaddr}]")
        self._warp_reduce(kind, t, part, pidx)
        kb.emit("bar.sync 0")
        p0 = kb.reg("pred")
        kb.emit(f"setp.eq.u32 {p0}, {tid}, 0")
        kb.emit(f"@{p0} st.shared.{st} [{self.smem}], {part}")
        if pidx is not None:
            kb.emit(f"@{p0} st.shared.b32 [{self.smem_idx}], {pidx}")
        kb.emit("bar.sync 0")
        total = kb.reg(i.reg)
        kb.emit(f"ld.shared.{st} {total}, [{self.smem}]")
        tidx = None
        if pidx is not None:
            tidx = kb.reg("b32")
            kb.emit(f"ld.shared.b32 {tidx}, [{self.smem_idx}]")
        kb.emit("bar.sync 0")
        return total, tidx
