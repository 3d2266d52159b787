"""Fused elementwise kernels: one grid-stride loop over the domain, any number of outputs.

Invariants:
- Loop-invariant nodes (scalars, constants, loads of fully broadcast views and
  what is computed from them) are evaluated once, before the loop.
- The 128-bit path (``ld.global.v4``/``st.global.v4``) is taken only when every
  varying input and every output is a dense, zero-offset view of 2- or 4-byte
  elements (so each 16-byte access is aligned: buffers are 256-byte aligned). A
  group is 8 elements when some view is 16-bit (f16/bf16 move as packed b32
  pairs, one access per group; 4-byte views take two), else 4. The scalar tail
  loop covers the last ``n % lanes`` elements and is not emitted when ``n`` is a
  static multiple of the lanes.
- On sm_80+ a group of 8 is computed a lane pair at a time (``packed``): 16-bit
  values stay in their loaded b32 words and are stored as computed.
- The scalar loop computes an element's value before its store address (ptxas keeps
  the order: an address made first stays live, two registers, across the math).
- A spec with an input that is a transposed view of its outputs is a tiled
  transpose instead (``transpose``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ....dtypes import DType
from ..builder import KernelBuilder
from ..codegen import ExprCodegen, IndexGroup, KernelParams, is_b32
from ..expr import Iota, LoopSpec, walk
from ..isa import info
from ..options import current
from ..symbolic import Sym, call, contiguous_strides, product
from .common import BLOCK, MAX_GRID, StridedLoop, global_thread, varies, widen_u32
from .packed import PairEval, PairValue, hoist_packed, packed_arch


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


#: bytes of one vector access (``ld/st.global.v4.b32``)
VECTOR_BYTES = 16


def vector_lanes(spec: LoopSpec) -> int:
    """Elements per iteration of the 128-bit loop: 8 when a varying view holds 16-bit
    elements (one 16-byte access for it, two for a 4-byte view), 4 when all are 4-byte,
    0 when the loop cannot be vectorized (a non-dense view, another size, an iota)."""
    roots = [n for n, _ in spec.outputs]
    if any(isinstance(n, Iota) for n in walk(roots)) or not spec.domain:
        return 0
    varying = [t for t in spec.inputs if not all(s == 0 for s in t.strides)]
    varying += [t for _, t in spec.outputs]
    sizes = {info(t.dtype).size for t in varying}
    if not sizes <= {2, 4} or not all(dense(t.strides, spec.domain, t.offset) for t in varying):
        return 0
    return VECTOR_BYTES // min(sizes) if sizes else 4


def elementwise_kernel(spec: LoopSpec) -> EmittedKernel:
    """The kernel of an elementwise ``spec``: a tiled transpose when an input is a
    transposed view of the outputs (``transpose``), else the grid-stride loop."""
    from .transpose import transpose_kernel, transpose_plan  # it builds on this module

    tiled = transpose_plan(spec, current().arch)
    if tiled is not None:
        return transpose_kernel(spec, tiled)
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
    lanes = vector_lanes(spec)
    if isinstance(n_sym, int) and n_sym < lanes:
        lanes = 0  # not one whole group: the vector loop would be dead code
    start = gid
    if lanes:
        bits, ut = ("b64", "u64") if wide else ("b32", "u32")
        shift = lanes.bit_length() - 1
        groups = kb.reg(bits)
        kb.emit(f"shr.{ut} {groups}, {n}, {shift}")
        pairs = None
        if lanes == 8 and packed_arch(kb.options.arch):  # 16-bit views: two lanes a word
            nodes = walk([nd for nd, _ in spec.outputs])
            pairs = PairEval(cg, base, hoist_packed(cg, base, nodes), kb.options.arch)
        StridedLoop(kb, "vec", wide).run(
            gid, groups, stride, lambda i: _vector_body(cg, spec, base, i, lanes, pairs))
        tail = kb.reg(bits)
        kb.emit(f"shl.{bits} {tail}, {groups}, {shift}")
        kb.emit(f"add.{ut} {tail}, {tail}, {widen_u32(kb, gid) if wide else gid}")
        start = tail

    def body(i: str) -> None:
        cg.memo = dict(base)
        cg.set_group(0, IndexGroup(tuple(range(len(spec.domain))), spec.domain, i))
        for k, (node, t) in enumerate(spec.outputs):
            value = cg.value(node)  # before the address: it is not live across the math
            cg.store(cg.address(-k - 1), value, t.dtype)

    if not (lanes and isinstance(n_sym, int) and n_sym % lanes == 0):
        # the scalar tail: every element when not vectorized, else the last n % lanes
        # (none when n is a static multiple of the lanes: the loop is not emitted)
        StridedLoop(kb, "elem", wide).run(start, n, stride, body)
    per_block = BLOCK * (lanes or 1)
    grid = call("min", call("cdiv", n_sym, per_block), MAX_GRID)
    kind = "elementwise" + ({0: "", 4: "(v4)"}.get(lanes, f"(v{lanes})"))
    return EmittedKernel(kb, params.args, (grid, 1, 1), (BLOCK, 1, 1), kind)


def _vector_body(cg: ExprCodegen, spec: LoopSpec, base: dict[int, str], i: str,
                 lanes: int, pairs: PairEval | None) -> None:
    """Group ``i`` of ``lanes`` elements: 16-byte loads of each varying input, the
    expression once per lane (or per lane pair: ``pairs``), 16-byte stores (16-bit
    data moves as packed b32 pairs)."""
    if pairs is not None:
        _pair_body(cg, spec, i, lanes, pairs)
        return
    loaded: dict[int, list[str]] = {}
    for a, t in enumerate(spec.inputs):
        if not all(s == 0 for s in t.strides):
            loaded[a] = _vector_load(cg, t.buffer, t.dtype, i, lanes)
    results: list[list[str]] = [[] for _ in spec.outputs]
    for lane in range(lanes):
        cg.memo = dict(base)
        cg.load_override = {a: regs[lane] for a, regs in loaded.items()}
        for k, (node, _) in enumerate(spec.outputs):
            results[k].append(cg.value(node))
    cg.load_override = None
    for k, (_, t) in enumerate(spec.outputs):
        _vector_store(cg, t.buffer, t.dtype, i, results[k])


def _pair_body(cg: ExprCodegen, spec: LoopSpec, i: str, lanes: int, pairs: PairEval) -> None:
    """Group ``i`` evaluated a lane pair at a time (``packed``): 16-bit inputs stay in
    their loaded words, 16-bit results are stored as the packed words computed."""
    words: dict[int, list[str]] = {}
    for a, t in enumerate(spec.inputs):
        if not all(s == 0 for s in t.strides):
            words[a] = _vector_words(cg, t.buffer, t.dtype, i, lanes)
    results: list[list[str]] = [[] for _ in spec.outputs]
    for p in range(lanes // 2):
        loads = {}
        for a, regs in words.items():
            dt = spec.inputs[a].dtype
            loads[a] = (PairValue(dt, packed=regs[p]) if info(dt).size == 2
                        else PairValue(dt, lanes=(regs[2 * p], regs[2 * p + 1])))
        pairs.start(loads)
        for k, (node, t) in enumerate(spec.outputs):
            if info(t.dtype).size == 2:
                results[k].append(pairs.packed(node))
            else:
                results[k] += list(pairs.lanes(node))
    for k, (_, t) in enumerate(spec.outputs):
        _store_words(cg, t.buffer, t.dtype, i, results[k], lanes)


def _vector_words(cg: ExprCodegen, buffer: str, dtype: DType, i: str, lanes: int) -> list[str]:
    """Group ``i`` of ``buffer`` as loaded: b32 words of two 16-bit elements (the lower
    address in the low half), or one register per 4-byte element."""
    kb, d = cg.kb, info(dtype)
    addr = _group_address(cg, buffer, i, lanes * d.size)
    out: list[str] = []
    for c in range(lanes * d.size // VECTOR_BYTES):
        at = f"{addr}+{c * VECTOR_BYTES}" if c else addr
        regs = kb.regs("b32" if d.size == 2 else d.reg, 4)
        kb.emit(f"ld.global.v4.{'b32' if d.size == 2 else d.mem} {{{', '.join(regs)}}}, [{at}]")
        out += regs
    return out


def _vector_load(cg: ExprCodegen, buffer: str, dtype: DType, i: str, lanes: int) -> list[str]:
    """The compute registers of ``lanes`` consecutive elements of group ``i``."""
    words = _vector_words(cg, buffer, dtype, i, lanes)
    if info(dtype).size != 2:
        return words
    out: list[str] = []
    for w in words:
        lo, hi = cg.kb.regs("b16", 2)
        cg.kb.emit(f"mov.b32 {{{lo}, {hi}}}, {w}")
        out += [cg.widen16(lo, dtype), cg.widen16(hi, dtype)]
    return out


def _vector_store(cg: ExprCodegen, buffer: str, dtype: DType, i: str, values: list[str]) -> None:
    """Store one compute register per element of group ``i``."""
    kb, words = cg.kb, values
    if info(dtype).size == 2:
        halves = [cg.narrow16(v, dtype) for v in values]
        words = kb.regs("b32", len(values) // 2)
        for w, lo, hi in zip(words, halves[::2], halves[1::2], strict=True):
            kb.emit(f"mov.b32 {w}, {{{lo}, {hi}}}")
    _store_words(cg, buffer, dtype, i, words, len(values))


def _store_words(cg: ExprCodegen, buffer: str, dtype: DType, i: str, regs: list[str],
                 lanes: int) -> None:
    """16-byte stores of group ``i`` (``lanes`` elements) from b32 words of two 16-bit
    elements or one register per 4-byte element."""
    d = info(dtype)
    addr = _group_address(cg, buffer, i, lanes * d.size)
    suffix = "b32" if d.size == 2 else d.mem
    for c in range(0, len(regs), 4):
        at = f"{addr}+{c // 4 * VECTOR_BYTES}" if c else addr
        cg.kb.emit(f"st.global.v4.{suffix} [{at}], {{{', '.join(regs[c:c + 4])}}}")


def _group_address(cg: ExprCodegen, buffer: str, i: str, group_bytes: int) -> str:
    """The address of group ``i`` (``group_bytes`` each, a power of two) of ``buffer``."""
    kb = cg.kb
    off, addr = kb.reg("b64"), kb.reg("b64")
    if is_b32(i):
        kb.emit(f"mul.wide.u32 {off}, {i}, {group_bytes}")
    else:
        kb.emit(f"shl.b64 {off}, {i}, {group_bytes.bit_length() - 1}")
    kb.emit(f"add.s64 {addr}, {cg.params.buffer(buffer)}, {off}")
    return addr
