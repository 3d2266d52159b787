"""Pieces shared by the loop kernels: launch shape, loop skeletons, invariant analysis.

Invariants:
- Loop kernels launch ``BLOCK`` threads per block (a multiple of 32, so every warp
  is full and ``shfl.sync`` with a full mask is valid).
- Grid-stride loops are correct for any grid size; the plan's grid is only a
  performance choice (capped at ``MAX_GRID`` blocks).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ....dtypes import DType
from ..builder import KernelBuilder
from ..codegen import is_b32
from ..isa import info
from ..symbolic import Sym, mul

if TYPE_CHECKING:
    from ..codegen import KernelParams
from ..expr import Apply, Iota, Load, Node, Stage, TensorArg

BLOCK = 256
MAX_GRID = 65535
#: the launch limit of gridDim.y and gridDim.z (x: 2^31 - 1); tests lower it to make
#: small grids fold
GRID_YZ_MAX = 65535


def varies(node: Node, axes: set[int], inputs: list[TensorArg],
           cache: dict[int, bool] | None = None, stage_varies: bool = False) -> bool:
    """Whether ``node``'s value changes along any domain axis in ``axes``.

    ``stage_varies``: count reduced row values (``Stage``) as varying (they change
    from row to row, so they are not kernel-invariant)."""
    cache = {} if cache is None else cache
    key = id(node)
    if key in cache:
        return cache[key]
    if isinstance(node, Load):
        out = any(inputs[node.arg].strides[a] != 0 for a in axes)
    elif isinstance(node, Iota):
        out = node.axis in axes
    elif isinstance(node, Apply):
        out = any(varies(a, axes, inputs, cache, stage_varies) for a in node.args)
    else:
        out = isinstance(node, Stage) and stage_varies
    cache[key] = out
    return out


@dataclass
class StridedLoop:
    """``for (i = start; i < end; i += step) body(i)`` with u32 registers (``wide``:
    u64; ``start`` and ``step`` may then be b32 registers, widened once)."""

    kb: KernelBuilder
    stem: str
    wide: bool = False

    def run(self, start: str, end: str, step: str, body: Callable[[str], None]) -> None:
        kb, t = self.kb, "u64" if self.wide else "u32"
        i, p = kb.reg("b64" if self.wide else "b32"), kb.reg("pred")
        top, done = kb.new_label(self.stem), kb.new_label(self.stem + "_end")
        if self.wide:
            start, step = widen_u32(kb, start), widen_u32(kb, step)
        kb.emit(f"mov.{t} {i}, {start}")
        kb.label(top)
        kb.emit(f"setp.ge.{t} {p}, {i}, {end}")
        kb.bra(done, p)
        body(i)
        kb.emit(f"add.{t} {i}, {i}, {step}")
        kb.emit(f"bra.uni {top}")
        kb.label(done)


def widen_u32(kb: KernelBuilder, reg: str) -> str:
    """A b32 register zero-extended to b64 (immediates and b64 registers as they are)."""
    if not is_b32(reg):
        return reg
    out = kb.reg("b64")
    kb.emit(f"cvt.u64.u32 {out}, {reg}")
    return out


def global_thread(kb: KernelBuilder) -> tuple[str, str]:
    """(global thread index, total threads in the grid) as u32 registers."""
    tid, ntid = kb.special("%tid.x"), kb.special("%ntid.x")
    cta, ncta = kb.special("%ctaid.x"), kb.special("%nctaid.x")
    gid, stride = kb.reg("b32"), kb.reg("b32")
    kb.prologue.append(f"mad.lo.u32 {gid}, {cta}, {ntid}, {tid};")
    kb.prologue.append(f"mul.lo.u32 {stride}, {ncta}, {ntid};")
    return gid, stride


@dataclass(frozen=True)
class TileGrid:
    """A logical grid of ``x * y * z`` blocks (tile kernels: column tiles, row tiles,
    batch). Launched as it is when y and z are known to fit GRID_YZ_MAX; otherwise
    (a large or symbolic y or z) folded into x, ``(x*y*z, 1, 1)``, and the kernel
    recovers (bx, by, bz) from ``%ctaid.x`` -- x stays the fastest-varying index, so
    blocks run in the same order either way."""

    x: Sym
    y: Sym
    z: Sym

    @property
    def folded(self) -> bool:
        return not all(isinstance(e, int) and e <= GRID_YZ_MAX for e in (self.y, self.z))

    def launch(self) -> tuple[Sym, Sym, Sym]:
        if self.folded:
            return (mul(mul(self.x, self.y), self.z), 1, 1)
        return (self.x, self.y, self.z)

    def block_ids(self, kb: KernelBuilder, params: KernelParams) -> tuple[str, str, str]:
        """(bx, by, bz) as b32 registers, computed in the prologue."""
        if not self.folded:
            return kb.special("%ctaid.x"), kb.special("%ctaid.y"), kb.special("%ctaid.z")
        lin = kb.special("%ctaid.x")
        gx, gy = params.sym(self.x), params.sym(self.y)
        bx, rest, by, bz = kb.regs("b32", 4)
        kb.prologue += [f"rem.u32 {bx}, {lin}, {gx};", f"div.u32 {rest}, {lin}, {gx};",
                        f"rem.u32 {by}, {rest}, {gy};", f"div.u32 {bz}, {rest}, {gy};"]
        return bx, by, bz


def slot_bytes(dtype: DType) -> int:
    """Bytes of one slot of a shared array holding a compute register of ``dtype``: 8
    for 64-bit registers, else 4 (16-bit values as f32, bool as a 0/1 word)."""
    return 8 if info(dtype).reg in ("b64", "f64") else 4


def _slot_address(kb: KernelBuilder, array: str, slot: str, size: int) -> str:
    addr = kb.reg("b32")
    kb.emit(f"mov.u32 {addr}, {array}")
    kb.emit(f"mad.lo.u32 {addr}, {slot}, {size}, {addr}")
    return addr


def st_shared_slot(kb: KernelBuilder, array: str, slot: str, value: str, dtype: DType) -> None:
    """Store compute register ``value`` of ``dtype`` at slot ``slot`` (a b32 register) of
    the shared ``array`` (``slot_bytes`` per slot)."""
    size = slot_bytes(dtype)
    if dtype is DType.BOOL:
        word = kb.reg("b32")
        kb.emit(f"selp.u32 {word}, 1, 0, {value}")
        value = word
    kb.emit(f"st.shared.b{size * 8} [{_slot_address(kb, array, slot, size)}], {value}")


def ld_shared_slot(kb: KernelBuilder, array: str, slot: str, dtype: DType) -> str:
    """The compute register of ``dtype`` stored at slot ``slot`` of ``array`` (``st_shared_slot``)."""
    size = slot_bytes(dtype)
    addr = _slot_address(kb, array, slot, size)
    if dtype is DType.BOOL:
        word, p = kb.reg("b32"), kb.reg("pred")
        kb.emit(f"ld.shared.b32 {word}, [{addr}]")
        kb.emit(f"setp.ne.u32 {p}, {word}, 0")
        return p
    out = kb.reg(info(dtype).reg)
    kb.emit(f"ld.shared.b{size * 8} {out}, [{addr}]")
    return out
