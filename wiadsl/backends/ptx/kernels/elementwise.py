"""Fused elementwise kernels: one grid-stride loop over the domain, any number of outputs.

Invariants:
- Loop-invariant nodes (scalars, constants, loads of fully broadcast views and
  what is computed from them) are evaluated once, before the loop.
- The 128-bit path (``ld.global.v4``/``st.global.v4``) is taken only when every
  varying input and every output is a dense, zero-offset view of 4-byte elements
  (so each quad is 16-byte aligned: buffers are 256-byte aligned); the scalar
  tail loop then covers the last ``n % 4`` elements.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..builder import KernelBuilder
from ..codegen import ExprCodegen, IndexGroup, KernelParams, is_b32
from ..expr import Iota, LoopSpec, walk
from ..isa import info
from ..symbolic import Sym, call, contiguous_strides, product
from .common import BLOCK, MAX_GRID, StridedLoop, global_thread, varies, widen_u32


@dataclass
class EmittedKernel:
    """One device kernel: its PTX entry, plan arguments and launch shape."""

    builder: KernelBuilder
    args: list[dict[str, Any]]
    grid: tuple[Sym, Sym, Sym]
    block: tuple[int, int, int]
    kind: str

    @property
    def name(self) -> str:
        return self.builder.name


def dense(strides: tuple[Sym, ...], domain: tuple[Sym, ...], offset: Sym) -> bool:
    return offset == 0 and list(strides) == contiguous_strides(list(domain))


def vectorizable(spec: LoopSpec) -> bool:
    axes = set(range(len(spec.domain)))
    roots = [n for n, _ in spec.outputs]
    if any(isinstance(n, Iota) for n in walk(roots)) or not spec.domain:
        return False
    ok_in = all(info(t.dtype).size == 4 and dense(t.strides, spec.domain, t.offset)
                or all(s == 0 for s in t.strides) for t in spec.inputs)
    ok_out = all(info(t.dtype).size == 4 and dense(t.strides, spec.domain, t.offset)
                 for _, t in spec.outputs)
    del axes
    return ok_in and ok_out


def elementwise_kernel(spec: LoopSpec) -> EmittedKernel:
    kb = KernelBuilder(spec.name, max_threads=BLOCK)
    params = KernelParams(kb)
    cg = ExprCodegen(kb, params, spec.inputs, spec.scalars, spec.domain)
    cg.outputs_args = [t for _, t in spec.outputs]
    for _, t in spec.outputs:
        params.buffer(t.buffer)
    n_sym = product(list(spec.domain))
    wide = cg.wide  # outputs_args are set: the width covers every view
    n = params.sym(n_sym, "u64" if wide else "u32")
    gid, stride = global_thread(kb)
    axes = set(range(len(spec.domain)))
    cache: dict[int, bool] = {}
    for node in walk([nd for nd, _ in spec.outputs]):  # hoist invariants
        if not varies(node, axes, spec.inputs, cache):
            cg.value(node)
    base = dict(cg.memo)
    vector = vectorizable(spec)
    start = gid
    if vector:
        bits = "b64" if wide else "b32"
        n4 = kb.reg(bits)
        kb.emit(f"shr.{'u64' if wide else 'u32'} {n4}, {n}, 2")
        StridedLoop(kb, "vec", wide).run(gid, n4, stride,
                                         lambda i: _vector_body(cg, spec, base, i))
        tail = kb.reg(bits)
        kb.emit(f"shl.{bits} {tail}, {n4}, 2")
        kb.emit(f"add.{'u64' if wide else 'u32'} {tail}, {tail}, {widen_u32(kb, gid) if wide else gid}")
        start = tail

    def body(i: str) -> None:
        cg.memo = dict(base)
        cg.set_group(0, IndexGroup(tuple(range(len(spec.domain))), spec.domain, i))
        for k, (node, t) in enumerate(spec.outputs):
            cg.store(cg.address(-k - 1), cg.value(node), t.dtype)

    StridedLoop(kb, "elem", wide).run(start, n, stride, body)
    per_block = BLOCK * (4 if vector else 1)
    grid = call("min", call("cdiv", n_sym, per_block), MAX_GRID)
    return EmittedKernel(kb, params.args, (grid, 1, 1), (BLOCK, 1, 1),
                         "elementwise" + ("(v4)" if vector else ""))


def _vector_body(cg: ExprCodegen, spec: LoopSpec, base: dict[int, str], i: str) -> None:
    kb = cg.kb
    lanes: dict[int, list[str]] = {}
    for a, t in enumerate(spec.inputs):
        if all(s == 0 for s in t.strides):
            continue
        addr = _quad_address(cg, t.buffer, i)
        regs = kb.regs(info(t.dtype).reg, 4)
        kb.emit(f"ld.global.v4.{info(t.dtype).mem} {{{', '.join(regs)}}}, [{addr}]")
        lanes[a] = regs
    results: list[list[str]] = [[] for _ in spec.outputs]
    for lane in range(4):
        cg.memo = dict(base)
        cg.load_override = {a: regs[lane] for a, regs in lanes.items()}
        for k, (node, _) in enumerate(spec.outputs):
            results[k].append(cg.value(node))
    cg.load_override = None
    for k, (_, t) in enumerate(spec.outputs):
        addr = _quad_address(cg, t.buffer, i)
        kb.emit(f"st.global.v4.{info(t.dtype).mem} [{addr}], {{{', '.join(results[k])}}}")


def _quad_address(cg: ExprCodegen, buffer: str, i: str) -> str:
    kb = cg.kb
    off, addr = kb.reg("b64"), kb.reg("b64")
    if is_b32(i):
        kb.emit(f"mul.wide.u32 {off}, {i}, 16")
    else:
        kb.emit(f"shl.b64 {off}, {i}, 4")
    kb.emit(f"add.s64 {addr}, {cg.params.buffer(buffer)}, {off}")
    return addr
