"""Semantic checks of an assembled section against its machine (beyond syntax).

Invariant: a section that passes ``check_section`` can be simulated without
shape, name, bounds or capacity errors; everything wrong raises ``SasmError``
naming the section and the offending item.
"""

from __future__ import annotations

from .config import ArrayConfig
from .isa import (
    Buffer,
    Local,
    MatmulIS,
    MatmulOS,
    MatmulWS,
    Mvin,
    Mvout,
    Preload,
    Remote,
    SasmError,
    Section,
    Vec,
    VecReduce,
)
from .vector import reduce_dtypes, vec_fn
from .views import view_kind


def _fits(outer: tuple[int, int], rng: tuple[int, int]) -> bool:
    return 0 <= rng[0] and rng[1] <= outer[1]


class _Checker:
    def __init__(self, section: Section, config: ArrayConfig):
        self.s, self.config = section, config
        self.buffers = {b.name: b for b in section.buffers}
        self.drams = {d.name: d for d in section.drams}
        self.views = {v.name: v for v in section.views}
        names = [*self.buffers, *self.drams, *self.views]
        if len(set(names)) != len(names):
            raise self.error("declares a name twice")

    def error(self, msg: str) -> SasmError:
        return SasmError(f"section {self.s.name}: {msg}")

    def typed(self, x: Local, space: str | None = None) -> Buffer:
        """A vec/mvout operand: accumulator words need a :dtype to be read as."""
        b = self.local(x, space)
        if b.space == "acc" and x.dtype is None:
            raise self.error(f"{x.text()}: accumulator operands of vec and mvout need a :dtype")
        return b

    def local(self, x: Local, space: str | None = None) -> Buffer:
        b = self.buffers.get(x.buffer)
        if b is None:
            raise self.error(f"unknown buffer '{x.buffer}'")
        if space is not None and b.space != space:
            raise self.error(f"{x.text()} must be in the {space}, '{b.name}' is in the {b.space}")
        if not (_fits((0, b.rows), x.rows) and _fits((0, b.cols), x.cols)):
            raise self.error(f"{x.text()} is outside {b.name} [{b.rows}, {b.cols}]")
        if b.space == "spad" and x.dtype not in (None, b.dtype):
            raise self.error(f"{x.text()}: {b.name} holds {b.dtype}")
        return b

    def remote(self, r: Remote) -> None:
        v = self.views.get(r.view)
        if v is None:
            raise self.error(f"unknown view '{r.view}'")
        b, rows, cols = v.shape
        if not (0 <= r.batch < b and _fits((0, rows), r.rows) and _fits((0, cols), r.cols)):
            raise self.error(f"{r.text()} is outside view {v.name} {list(v.shape)}")

    def run(self) -> None:
        for v in self.s.views:
            if v.base not in self.drams:
                raise self.error(f"view {v.name} of unknown buffer '{v.base}'")
            view_kind(v).check(v, self.drams[v.base])
        for space, cap in (("spad", self.config.spad_capacity), ("acc", self.config.acc_capacity)):
            used = sum(b.nbytes for b in self.s.buffers if b.space == space)
            if used > cap:
                raise self.error(f"{space} buffers need {used} bytes, the machine has {cap}")
        for ins in self.s.body:
            getattr(self, type(ins).__name__.lower(), lambda _i: None)(ins)

    def mvin(self, i: Mvin) -> None:
        b = self.local(i.dst, "spad")
        self.remote(i.src)
        dram = self.drams[self.views[i.src.view].base]
        if dram.dtype is not b.dtype or i.dst.shape != i.src.shape:
            raise self.error(f"mvin {i.dst.text()} <- {i.src.text()}: dtype or shape differ")

    def mvout(self, i: Mvout) -> None:
        self.typed(i.src, "acc")
        self.remote(i.dst)
        dram = self.drams[self.views[i.dst.view].base]
        if dram.direction != "out" or dram.dtype is not i.src.dtype or i.dst.shape != i.src.shape:
            raise self.error(f"mvout {i.dst.text()} <- {i.src.text()}: not an output of that "
                             f"dtype and shape")

    def preload(self, i: Preload) -> None:
        self.local(i.src, "spad")
        r, c = i.src.shape
        # ws holds a K x N weight tile as is; is holds an M x K input tile transposed
        rmax, cmax = {"ws": (self.config.rows, self.config.cols),
                      "is": (self.config.cols, self.config.rows)}.get(self.config.dataflow, (0, 0))
        if r > rmax or c > cmax:
            raise self.error(f"preload of a {r}x{c} tile on a {self.config.rows}x"
                             f"{self.config.cols} {self.config.dataflow} array")

    def matmulws(self, i: MatmulWS) -> None:
        self.local(i.dst, "acc")
        self.local(i.src, "spad")
        if self.config.dataflow != "ws" or i.src.shape[1] > self.config.rows:
            raise self.error(f"matmul.ws streams at most {self.config.rows} columns")

    def matmulis(self, i: MatmulIS) -> None:
        self.local(i.dst, "acc")
        self.local(i.src, "spad")
        k, n = i.src.shape
        if self.config.dataflow != "is" or k > self.config.rows or i.dst.shape[1] != n \
                or i.dst.shape[0] > self.config.cols:
            raise self.error(f"matmul.is {i.dst.text()}, {i.src.text()} does not fit a "
                             f"{self.config.rows}x{self.config.cols} is array")

    def matmulos(self, i: MatmulOS) -> None:
        self.local(i.dst, "acc")
        a, b = self.local(i.lhs, "spad"), self.local(i.rhs, "spad")
        (m, k), (k2, n) = i.lhs.shape, i.rhs.shape
        if (self.config.dataflow != "os" or m > self.config.rows or n > self.config.cols
                or k != k2 or i.dst.shape != (m, n) or a.dtype is not b.dtype):
            raise self.error(f"matmul.os {i.dst.text()}, {i.lhs.text()}, {i.rhs.text()} does "
                             f"not fit a {self.config.rows}x{self.config.cols} os array")

    def vec(self, i: Vec) -> None:
        self.typed(i.dst, "acc")
        for x in i.srcs:
            self.typed(x)
            if any(n not in (1, d) for n, d in zip(x.shape, i.dst.shape)):
                raise self.error(f"vec.{i.fn}: {x.text()} does not broadcast to {i.dst.text()}")
        dtypes = [x.dtype or self.buffers[x.buffer].dtype for x in i.srcs]
        try:
            vec_fn(i.fn, dtypes, i.dst.dtype)  # type: ignore[arg-type]
        except SasmError as e:
            raise self.error(e.message) from None

    def vecreduce(self, i: VecReduce) -> None:
        self.typed(i.dst, "acc")
        self.typed(i.src)
        if i.dst.shape != (i.src.shape[0], 1):
            raise self.error(f"vec.r{i.kind}: {i.dst.text()} must be one column of "
                             f"{i.src.shape[0]} rows (one per row of {i.src.text()})")
        try:
            reduce_dtypes(i.kind, i.src.dtype or self.buffers[i.src.buffer].dtype,  # type: ignore[arg-type]
                          i.dst.dtype)  # type: ignore[arg-type]
        except SasmError as e:
            raise self.error(e.message) from None


def check_section(section: Section, config: ArrayConfig) -> None:
    """Raise SasmError unless ``section`` is consistent and fits ``config``."""
    _Checker(section, config).run()
