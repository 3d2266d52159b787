"""The systolic ISA as data: declarations, operands, instructions, sections, listings.

Each class prints itself in the assembly text form (``text()``) that
``asm.parse_listing`` reads back; ``parse_listing(listing.text()) == listing``.

Invariants:
- Ranges are half-open ``(start, stop)`` with ``0 <= start < stop``.
- A ``Local`` operand names a scratchpad or accumulator buffer; its ``dtype`` is
  how the 32-bit accumulator words are read or written (None on scratchpad
  operands of mvin/preload/matmul, whose buffer dtype says it).
- Weight slots are 0 and 1 (the double-buffered weight registers of the array).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...diagnostics import WiaError
from ...dtypes import DType
from .config import ArrayConfig


class SasmError(WiaError):
    """Malformed or inconsistent systolic assembly (names the line when parsed)."""


Range = tuple[int, int]


def _rng(r: Range) -> str:
    return f"{r[0]}:{r[1]}"


def _ints(xs: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(x) for x in xs) + "]"


@dataclass(frozen=True)
class Local:
    """``name[r0:r1, c0:c1]`` or ``name[r0:r1, c0:c1]:dtype`` (accumulator reads/writes)."""

    buffer: str
    rows: Range
    cols: Range
    dtype: DType | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return (self.rows[1] - self.rows[0], self.cols[1] - self.cols[0])

    def text(self) -> str:
        suffix = f":{self.dtype.ir_name}" if self.dtype is not None else ""
        return f"{self.buffer}[{_rng(self.rows)}, {_rng(self.cols)}]{suffix}"


@dataclass(frozen=True)
class Remote:
    """``view[b, r0:r1, c0:c1]``: a tile of a DRAM view (batch ``b``)."""

    view: str
    batch: int
    rows: Range
    cols: Range

    @property
    def shape(self) -> tuple[int, int]:
        return (self.rows[1] - self.rows[0], self.cols[1] - self.cols[0])

    def text(self) -> str:
        return f"{self.view}[{self.batch}, {_rng(self.rows)}, {_rng(self.cols)}]"


# ----------------------------------------------------------------- declarations

@dataclass(frozen=True)
class Dram:
    """``.dram NAME DTYPE [shape] in|out``: a kernel value in host memory."""

    name: str
    dtype: DType
    shape: tuple[int, ...]
    direction: str  # "in" or "out"

    def text(self) -> str:
        return f".dram {self.name} {self.dtype.ir_name} {_ints(self.shape)} {self.direction}"


@dataclass(frozen=True)
class View:
    """``.view NAME = KIND BASE key=[..] ...``: a 3-D (batch, rows, cols) window on a
    DRAM buffer; the kinds and their parameters live in ``views.VIEW_KINDS``."""

    name: str
    kind: str
    base: str
    params: tuple[tuple[str, tuple[int, ...]], ...]

    def param(self, key: str) -> tuple[int, ...]:
        return dict(self.params)[key]

    @property
    def shape(self) -> tuple[int, int, int]:
        b, r, c = self.param("shape")
        return (b, r, c)

    def text(self) -> str:
        ps = " ".join(f"{k}={_ints(v)}" for k, v in self.params)
        return f".view {self.name} = {self.kind} {self.base} {ps}"


@dataclass(frozen=True)
class Buffer:
    """``.spad NAME DTYPE [rows, cols]`` or ``.acc NAME [rows, cols]`` (32-bit words)."""

    name: str
    space: str  # "spad" or "acc"
    rows: int
    cols: int
    dtype: DType | None = None  # spad only

    @property
    def nbytes(self) -> int:
        itemsize = 4 if self.dtype is None else self.dtype.bits // 8
        return self.rows * self.cols * itemsize

    def text(self) -> str:
        if self.space == "acc":
            return f".acc {self.name} [{self.rows}, {self.cols}]"
        return f".spad {self.name} {self.dtype.ir_name} [{self.rows}, {self.cols}]"  # type: ignore[union-attr]


# ----------------------------------------------------------------- instructions

@dataclass(frozen=True)
class Label:
    name: str

    def text(self) -> str:
        return f"{self.name}:"


@dataclass(frozen=True)
class Mvin:
    """DMA host -> scratchpad (TPU Read_Host_Memory, Gemmini mvin)."""

    dst: Local
    src: Remote

    def text(self) -> str:
        return f"  mvin {self.dst.text()}, {self.src.text()}"


@dataclass(frozen=True)
class Mvout:
    """DMA accumulator -> host, converting to the view's dtype (Write_Host_Memory, mvout)."""

    dst: Remote
    src: Local

    def text(self) -> str:
        return f"  mvout {self.dst.text()}, {self.src.text()}"


@dataclass(frozen=True)
class Preload:
    """ws: shift a (<= R x C) weight tile into weight slot ``slot`` (Read_Weights, preload)."""

    slot: int
    src: Local

    def text(self) -> str:
        return f"  preload w{self.slot}, {self.src.text()}"


@dataclass(frozen=True)
class MatmulWS:
    """ws: stream the rows of ``src`` through the weights in ``slot``; results land in
    ``dst`` (overwritten, or added with ``.acc``). MatrixMultiply / compute_preloaded."""

    dst: Local
    src: Local
    slot: int
    accumulate: bool

    def text(self) -> str:
        op = "matmul.ws.acc" if self.accumulate else "matmul.ws"
        return f"  {op} {self.dst.text()}, {self.src.text()}, w{self.slot}"


@dataclass(frozen=True)
class MatmulOS:
    """os: ``dst (+)= lhs @ rhs`` with lhs <= R rows and rhs <= C columns held in the PEs."""

    dst: Local
    lhs: Local
    rhs: Local
    accumulate: bool

    def text(self) -> str:
        op = "matmul.os.acc" if self.accumulate else "matmul.os"
        return f"  {op} {self.dst.text()}, {self.lhs.text()}, {self.rhs.text()}"


@dataclass(frozen=True)
class MatmulIS:
    """is: the A tile preloaded in ``slot`` (M tile <= C x K tile <= R, held as its
    transpose: K on the array rows, M on its columns) meets the columns of ``src``
    (K x T weights, streamed one column per cycle); ``dst`` (M x T) is overwritten, or
    added to with ``.acc``. SCALE-Sim's input-stationary mapping."""

    dst: Local
    src: Local
    slot: int
    accumulate: bool

    def text(self) -> str:
        op = "matmul.is.acc" if self.accumulate else "matmul.is"
        return f"  {op} {self.dst.text()}, {self.src.text()}, w{self.slot}"


@dataclass(frozen=True)
class Schedule:
    """``; schedule key=value ...``: the scheduler's choice for the GEMM that follows
    (loop order, prefetch distance, accumulators) and its predicted cycle floor. A
    structured comment: it runs as nothing, the simulator reports it."""

    fields: tuple[tuple[str, str], ...]

    def get(self, key: str, default: str = "") -> str:
        return dict(self.fields).get(key, default)

    def text(self) -> str:
        return "  ; schedule " + " ".join(f"{k}={v}" for k, v in self.fields)


@dataclass(frozen=True)
class Vec:
    """Vector unit: ``dst = fn(srcs...)`` elementwise; operands broadcast to dst (Activate)."""

    fn: str
    dst: Local
    srcs: tuple[Local, ...]

    def text(self) -> str:
        return f"  vec.{self.fn} {', '.join(x.text() for x in (self.dst, *self.srcs))}"


@dataclass(frozen=True)
class VecReduce:
    """Vector unit, row reduction: ``dst[h, 1] = KIND over the columns of src[h, w]``
    (``kind``: max, min, sum). ``.acc`` combines with dst's current value, so a row
    longer than one tile reduces over several instructions."""

    kind: str
    dst: Local
    src: Local
    accumulate: bool

    def text(self) -> str:
        op = f"vec.r{self.kind}" + (".acc" if self.accumulate else "")
        return f"  {op} {self.dst.text()}, {self.src.text()}"


Instruction = Label | Mvin | Mvout | Preload | MatmulWS | MatmulOS | MatmulIS | Schedule | Vec | VecReduce


# ----------------------------------------------------------------- containers

@dataclass(frozen=True)
class Section:
    """The code of one IR op group: ``placement`` is array, vector or host.

    A host section has no body: the host runs the op with its reference
    semantics. ``what`` is a one-line description of the IR ops it covers.
    """

    name: str
    placement: str
    what: str
    drams: tuple[Dram, ...] = ()
    views: tuple[View, ...] = ()
    buffers: tuple[Buffer, ...] = ()
    body: tuple[Instruction, ...] = ()

    def text(self) -> str:
        lines = [f'.section {self.name} {self.placement} "{self.what}"']
        lines += [d.text() for d in self.drams]
        lines += [v.text() for v in self.views]
        lines += [b.text() for b in self.buffers]
        lines += [i.text() for i in self.body]
        lines.append(".end")
        return "\n".join(lines)


@dataclass(frozen=True)
class Listing:
    """A whole kernel: the target machine plus its sections in program order."""

    config: ArrayConfig
    sections: tuple[Section, ...] = field(default_factory=tuple)

    def text(self) -> str:
        parts = ["; wiadsl systolic assembly", self.config.header(), ""]
        for s in self.sections:
            parts += [s.text(), ""]
        return "\n".join(parts)


@dataclass(frozen=True)
class Program:
    """The listings of several kernels for one machine (``wiac file.wia -o out.sasm`` on a
    file of several kernels): one ``.target`` line, then ``.kernel NAME`` before each
    kernel's sections."""

    config: ArrayConfig
    kernels: dict[str, Listing]

    def text(self) -> str:
        parts = ["; wiadsl systolic assembly", self.config.header(), ""]
        for name, listing in self.kernels.items():
            parts += [f".kernel {name}", ""]
            for s in listing.sections:
                parts += [s.text(), ""]
        return "\n".join(parts)
