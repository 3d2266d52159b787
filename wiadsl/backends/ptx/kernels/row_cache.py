"""Single-pass row kernels: a row's inputs are read from global memory once, kept in shared memory.

A row kernel runs its phases one after another over the same columns: stage 0
(e.g. softmax's max), stage 1 (the sum of exp), ..., then the full-row outputs.
Without a cache every phase re-reads its inputs from global memory (three reads
of each softmax row). ``RowCache`` keeps each input that is read by two or more
phases in a shared-memory row buffer: the first phase that reads it loads from
global memory and stores the value to ``cache[arg][c]``; later phases read
``cache[arg][c]``.

Invariants:
- Column c of a row is always handled by the same thread (every phase loops
  ``c = tid, tid + ntid, ...``), so a thread only reads cache slots it wrote
  itself: no barrier is needed between phases, nor between rows.
- Only 4-byte compute values are cached (f32, and f16/bf16 widened to f32, i32,
  i8 widened to s32) of unguarded views; other inputs are re-read. Index math of
  an uncached read is emitted before its branch, so no register defined inside
  a branch is read after it.
- The cache holds ``ROW_CACHE_BYTES`` (32 KiB) at most: with static columns it
  is sized to the row and used when the row fits (e.g. up to 8192 f32 columns
  for softmax/layer_norm); with dynamic columns it is allocated at full size and
  a predicate ``cols <= capacity`` chooses, per launch, between the cached path
  and re-reading global memory (the multi-pass kernel).
"""

from __future__ import annotations

from ..codegen import ExprCodegen
from ..expr import Load, LoopSpec, walk
from ..isa import info

ROW_CACHE_BYTES = 32 * 1024
CACHE_REGS = ("f32", "b32")


class RowCache:
    """Which inputs are cached, where, and the per-column load/store code."""

    def __init__(self, cg: ExprCodegen, spec: LoopSpec, inner_axes: tuple[int, ...], cols_reg: str):
        self.cg, self.kb = cg, cg.kb
        self.first: dict[int, int] = {}   # arg -> index of the first phase reading it
        self.slots: dict[int, str] = {}   # arg -> shared array name
        self.phases = self._phases(spec, inner_axes)
        users: dict[int, list[int]] = {}
        for p, args in enumerate(self.phases):
            for a in args:
                users.setdefault(a, []).append(p)
        cached = [a for a, ps in sorted(users.items())
                  if len(ps) > 1 and info(spec.inputs[a].dtype).reg in CACHE_REGS
                  and not spec.inputs[a].guards]
        self.capacity = ROW_CACHE_BYTES // (4 * len(cached)) if cached else 0
        cols = _static_cols(spec)
        self.mode = "off" if not cached else (
            "dyn" if cols is None else ("on" if cols <= self.capacity else "off"))
        self.pred: str | None = None
        if self.mode == "off":
            return
        width = self.capacity if cols is None else max(cols, 1)
        for a in cached:
            self.first[a] = users[a][0]
            self.slots[a] = self.kb.shared_array(f"row_cache{a}", "b32", width, 16)
        if self.mode == "dyn":
            self.pred = self.kb.reg("pred")
            self.kb.prologue.append(f"setp.le.u32 {self.pred}, {cols_reg}, {self.capacity};")

    @staticmethod
    def _phases(spec: LoopSpec, inner_axes: tuple[int, ...]) -> list[set[int]]:
        """Per phase (each stage, then the full outputs): the inputs varying along the row."""
        def loads(roots) -> set[int]:
            return {n.arg for n in walk(roots) if isinstance(n, Load)
                    and any(spec.inputs[n.arg].strides[a] != 0 for a in inner_axes)}
        full = [n for n, t in spec.outputs if any(t.strides[a] != 0 for a in inner_axes)]
        return [loads([s.expr]) for s in spec.stages] + [loads(full)]

    @property
    def active(self) -> bool:
        return self.mode != "off"

    def bind(self, phase: int, col: str) -> None:
        """At column ``col`` of ``phase``: load or store cached inputs; set the overrides."""
        cg, kb = self.cg, self.kb
        over: dict[int, str] = {}
        for a, first in self.first.items():
            if first > phase:
                continue
            slot = kb.reg("b32")
            kb.emit(f"mov.u32 {slot}, {self.slots[a]}")
            kb.emit(f"mad.lo.u32 {slot}, {col}, 4, {slot}")
            t = cg.inputs[a]
            ty = info(t.dtype).itype
            if first == phase:
                v = self._global(a)
                guard = f"@{self.pred} " if self.pred else ""
                kb.emit(f"{guard}st.shared.b32 [{slot}], {v}")
                over[a] = v
                continue
            v = kb.reg(info(t.dtype).reg)
            if self.pred is None:
                kb.emit(f"ld.shared.b32 {v}, [{slot}]")
            else:
                addr = cg.address(a)  # outside the branch: its index registers stay valid
                far, join = kb.new_label("uncached"), kb.new_label("cached")
                kb.bra(far, self.pred, negate=True)
                kb.emit(f"ld.shared.b32 {v}, [{slot}]")
                kb.emit(f"bra.uni {join}")
                kb.label(far)
                kb.emit(f"mov.{ty} {v}, {self._global(a, addr)}")
                kb.label(join)
            over[a] = v
        cg.load_override = over or None

    def _global(self, a: int, addr: str | None = None) -> str:
        cg = self.cg
        return cg.load(addr or cg.address(a), cg.inputs[a].dtype)

    def unbind(self) -> None:
        self.cg.load_override = None


def _static_cols(spec: LoopSpec) -> int | None:
    n = 1
    for d in spec.domain[spec.n_outer:]:
        if not isinstance(d, int):
            return None
        n *= d
    return n
