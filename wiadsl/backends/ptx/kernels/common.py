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

from ..builder import KernelBuilder
from ..expr import Apply, Iota, Load, Node, Stage, TensorArg

BLOCK = 256
MAX_GRID = 65535


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
    """``for (i = start; i < end; i += step) body(i)`` with u32 registers."""

    kb: KernelBuilder
    stem: str

    def run(self, start: str, end: str, step: str, body: Callable[[str], None]) -> None:
        kb = self.kb
        i, p = kb.reg("b32"), kb.reg("pred")
        top, done = kb.new_label(self.stem), kb.new_label(self.stem + "_end")
        kb.emit(f"mov.u32 {i}, {start}")
        kb.label(top)
        kb.emit(f"setp.ge.u32 {p}, {i}, {end}")
        kb.bra(done, p)
        body(i)
        kb.emit(f"add.u32 {i}, {i}, {step}")
        kb.emit(f"bra.uni {top}")
        kb.label(done)


def global_thread(kb: KernelBuilder) -> tuple[str, str]:
    """(global thread index, total threads in the grid) as u32 registers."""
    tid, ntid = kb.special("%tid.x"), kb.special("%ntid.x")
    cta, ncta = kb.special("%ctaid.x"), kb.special("%nctaid.x")
    gid, stride = kb.reg("b32"), kb.reg("b32")
    kb.prologue.append(f"mad.lo.u32 {gid}, {cta}, {ntid}, {tid};")
    kb.prologue.append(f"mul.lo.u32 {stride}, {ncta}, {ntid};")
    return gid, stride
