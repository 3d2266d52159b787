"""Tiled matmul: 64x64 output tiles, 256 threads, 4x4 outputs per thread, k unrolled by 16.

C[z, m, n] = epilogue(sum_k A[z, m, k] * B[z, k, n]) for a batch index z.

Invariants:
- Shared memory holds A transposed (``As[k][m]``) and B (``Bs[k][n]``), 16 x 64
  elements each, in the accumulator's type (f16/bf16/i8 operands are widened on
  the way in: "f16 inputs, f32 accumulation"; i8 x i8 accumulates in i32).
- Tile loads are bounds-checked (zero fill), so any M, N, K is correct; a
  ``bar.sync`` separates the loads of a tile from its use and that use from the
  next tile's loads.
- Operands are strided views (``a``: strides over (batch..., m, k); ``b``:
  (batch..., k, n)), so transposed operands need no copy.
- The epilogue (bias, activation, residual, quantize...) is an expression over
  the ``Acc`` node and loads of the output domain (batch..., M, N), evaluated
  per output element before its one store.
"""

from __future__ import annotations

from dataclasses import dataclass

from ....dtypes import DType
from ..builder import KernelBuilder
from ..codegen import ExprCodegen, IndexGroup, KernelParams
from ..expr import Acc, LoopSpec, TensorArg, walk
from ..isa import float_literal, info
from ..symbolic import Sym, call, product
from .elementwise import EmittedKernel

TILE, BK, THREADS, PER = 64, 16, 256, 4


@dataclass
class ProductSpec:
    """A batched matmul with an epilogue over the output domain (batch..., M, N)."""

    name: str
    batch: tuple[Sym, ...]
    m: Sym
    n: Sym
    k: Sym
    a: TensorArg
    b: TensorArg
    acc: DType
    epilogue: LoopSpec


def matmul_kernel(spec: ProductSpec) -> EmittedKernel:
    kb = KernelBuilder(spec.name, max_threads=THREADS)
    params = KernelParams(kb)
    epi = spec.epilogue
    cg = ExprCodegen(kb, params, epi.inputs, epi.scalars, epi.domain)
    cg.outputs_args = [t for _, t in epi.outputs]
    for _, t in epi.outputs:
        params.buffer(t.buffer)
    acc_i = info(spec.acc)
    smem_t = "b32" if acc_i.size == 4 else "b64"
    a_s = kb.shared_array("tile_a", smem_t, BK * TILE, 16)
    b_s = kb.shared_array("tile_b", smem_t, BK * TILE, 16)
    m, n, k = params.sym(spec.m), params.sym(spec.n), params.sym(spec.k)
    tid = kb.special("%tid.x")
    tx, ty = kb.reg("b32"), kb.reg("b32")
    kb.prologue.append(f"and.b32 {tx}, {tid}, 15;")
    kb.prologue.append(f"shr.u32 {ty}, {tid}, 4;")
    m0, n0 = kb.reg("b32"), kb.reg("b32")
    cy, cx, z = kb.special("%ctaid.y"), kb.special("%ctaid.x"), kb.special("%ctaid.z")
    kb.prologue.append(f"shl.b32 {m0}, {cy}, 6;")
    kb.prologue.append(f"shl.b32 {n0}, {cx}, 6;")
    nb = len(spec.batch)
    cg.set_group(0, IndexGroup(tuple(range(nb)), spec.batch, z))
    a_off = _batch_offset(cg, spec.a, nb)
    b_off = _batch_offset(cg, spec.b, nb)
    accs = kb.regs(acc_i.reg, PER * PER)
    zero = float_literal(0.0, spec.acc) if spec.acc.is_float else "0"
    for r in accs:
        kb.emit(f"mov.{acc_i.itype} {r}, {zero}")
    k0, p = kb.reg("b32"), kb.reg("pred")
    top, done = kb.new_label("ktile"), kb.new_label("ktile_end")
    kb.emit(f"mov.u32 {k0}, 0")
    kb.label(top)
    kb.emit(f"setp.ge.u32 {p}, {k0}, {k}")
    kb.bra(done, p)
    for j in range(PER):  # each thread moves 4 elements of each 64x16 tile
        e = kb.reg("b32")
        kb.emit(f"add.u32 {e}, {tid}, {j * THREADS}")
        _load_tile(cg, spec.a, spec, e, "a", m0, k0, m, k, a_off, a_s, smem_t)
        _load_tile(cg, spec.b, spec, e, "b", n0, k0, n, k, b_off, b_s, smem_t)
    kb.emit("bar.sync 0")
    _mac_tile(kb, spec, accs, tx, ty, a_s, b_s, smem_t)
    kb.emit("bar.sync 0")
    kb.emit(f"add.u32 {k0}, {k0}, {BK}")
    kb.emit(f"bra.uni {top}")
    kb.label(done)
    _epilogue(cg, spec, accs, tx, ty, m0, n0, m, n)
    grid = (call("cdiv", spec.n, TILE), call("cdiv", spec.m, TILE), product(list(spec.batch)))
    return EmittedKernel(kb, params.args, grid, (THREADS, 1, 1), "matmul")


def _batch_offset(cg: ExprCodegen, t: TensorArg, nb: int) -> str | None:
    off = None
    for axis in range(nb):
        if t.strides[axis] != 0:
            off = cg._mad(cg.coord(axis), t.strides[axis], off)
    if t.offset != 0:
        o, s = cg.params.sym(t.offset, "s32"), cg.kb.reg("b32")
        cg.kb.emit(f"add.s32 {s}, {off or 0}, {o}")
        off = s
    return off


def _load_tile(cg: ExprCodegen, t: TensorArg, spec: ProductSpec, e: str, which: str,
               base: str, k0: str, extent: str, k: str, boff: str | None, smem: str,
               smem_t: str) -> None:
    """One element of the A (or B) tile: global (zero outside) -> shared."""
    kb = cg.kb
    nb = len(spec.batch)
    inner, outer = kb.reg("b32"), kb.reg("b32")
    if which == "a":  # e -> (row = e / 16, kk = e % 16); stored at As[kk][row]
        kb.emit(f"and.b32 {inner}, {e}, 15")
        kb.emit(f"shr.u32 {outer}, {e}, 4")
        kk, mn = inner, outer
        s_mn, s_k = t.strides[nb], t.strides[nb + 1]
    else:  # e -> (kk = e / 64, col = e % 64); stored at Bs[kk][col]
        kb.emit(f"and.b32 {inner}, {e}, 63")
        kb.emit(f"shr.u32 {outer}, {e}, 6")
        kk, mn = outer, inner
        s_k, s_mn = t.strides[nb], t.strides[nb + 1]
    gmn, gk = kb.reg("b32"), kb.reg("b32")
    kb.emit(f"add.u32 {gmn}, {base}, {mn}")
    kb.emit(f"add.u32 {gk}, {k0}, {kk}")
    p1, p2 = kb.reg("pred"), kb.reg("pred")
    kb.emit(f"setp.lt.u32 {p1}, {gmn}, {extent}")
    kb.emit(f"setp.lt.u32 {p2}, {gk}, {k}")
    kb.emit(f"and.pred {p1}, {p1}, {p2}")
    off = cg._mad(gmn, s_mn, boff)
    off = cg._mad(gk, s_k, off)
    wide, addr = kb.reg("b64"), kb.reg("b64")
    kb.emit(f"mul.wide.s32 {wide}, {off}, {info(t.dtype).size}")
    kb.emit(f"add.s64 {addr}, {cg.params.buffer(t.buffer)}, {wide}")
    acc_i = info(spec.acc)
    val = kb.reg(acc_i.reg)
    kb.emit(f"mov.{acc_i.itype} {val}, {float_literal(0.0, spec.acc) if spec.acc.is_float else '0'}")
    skip = kb.new_label("oob")
    kb.bra(skip, p1, negate=True)
    raw = cg.load(addr, t.dtype)
    conv = cg.ops.cast(raw, t.dtype, spec.acc)
    kb.emit(f"mov.{acc_i.itype} {val}, {conv}")
    kb.label(skip)
    slot, saddr = kb.reg("b32"), kb.reg("b32")
    kb.emit(f"mad.lo.u32 {slot}, {kk}, {TILE}, {mn}")
    kb.emit(f"mov.u32 {saddr}, {smem}")
    kb.emit(f"mad.lo.u32 {saddr}, {slot}, {acc_i.size}, {saddr}")
    kb.emit(f"st.shared.{smem_t} [{saddr}], {val}")


def _mac_tile(kb: KernelBuilder, spec: ProductSpec, accs: list[str], tx: str, ty: str,
              a_s: str, b_s: str, smem_t: str) -> None:
    """acc[i][j] += As[kk][ty*4+i] * Bs[kk][tx*4+j] for kk in 0..15 (fully unrolled)."""
    acc_i = info(spec.acc)
    size = acc_i.size
    abase, bbase = kb.reg("b32"), kb.reg("b32")
    kb.emit(f"mov.u32 {abase}, {a_s}")
    kb.emit(f"mad.lo.u32 {abase}, {ty}, {PER * size}, {abase}")
    kb.emit(f"mov.u32 {bbase}, {b_s}")
    kb.emit(f"mad.lo.u32 {bbase}, {tx}, {PER * size}, {bbase}")
    for kk in range(BK):
        av, bv = kb.regs(acc_i.reg, PER), kb.regs(acc_i.reg, PER)
        off = kk * TILE * size
        for regs, base in ((av, abase), (bv, bbase)):
            if size == 4:
                kb.emit(f"ld.shared.v4.{smem_t} {{{', '.join(regs)}}}, [{base}+{off}]")
            else:
                for q in range(0, PER, 2):
                    kb.emit(f"ld.shared.v2.{smem_t} {{{regs[q]}, {regs[q + 1]}}}, "
                            f"[{base}+{off + q * size}]")
        for i in range(PER):
            for j in range(PER):
                r = accs[i * PER + j]
                if spec.acc.is_float:
                    kb.emit(f"fma.rn.{acc_i.itype} {r}, {av[i]}, {bv[j]}, {r}")
                else:
                    kb.emit(f"mad.lo.{acc_i.itype} {r}, {av[i]}, {bv[j]}, {r}")


def _epilogue(cg: ExprCodegen, spec: ProductSpec, accs: list[str], tx: str, ty: str,
              m0: str, n0: str, m: str, n: str) -> None:
    kb, epi, nb = cg.kb, spec.epilogue, len(spec.batch)
    acc_nodes = [x for x in walk([nd for nd, _ in epi.outputs]) if isinstance(x, Acc)]
    base = dict(cg.memo)
    rows, cols = kb.regs("b32", PER), kb.regs("b32", PER)
    for i in range(PER):
        kb.emit(f"mad.lo.u32 {rows[i]}, {ty}, {PER}, {m0}")
        kb.emit(f"add.u32 {rows[i]}, {rows[i]}, {i}")
        kb.emit(f"mad.lo.u32 {cols[i]}, {tx}, {PER}, {n0}")
        kb.emit(f"add.u32 {cols[i]}, {cols[i]}, {i}")
    views = list(range(len(epi.inputs))) + [-q - 1 for q in range(len(epi.outputs))]
    for a in views:  # batch offsets: computed once, outside every guarded region
        cg.partial(a, 0)
    for i in range(PER):
        cg.set_group(1, IndexGroup((nb,), (spec.m,), rows[i]))
        for a in views:
            cg.partial(a, 1)
        for j in range(PER):
            cg.set_group(2, IndexGroup((nb + 1,), (spec.n,), cols[j]))
            for a in views:
                cg.partial(a, 2)
            p1, p2 = kb.reg("pred"), kb.reg("pred")
            kb.emit(f"setp.lt.u32 {p1}, {rows[i]}, {m}")
            kb.emit(f"setp.lt.u32 {p2}, {cols[j]}, {n}")
            kb.emit(f"and.pred {p1}, {p1}, {p2}")
            skip = kb.new_label("edge")
            kb.bra(skip, p1, negate=True)
            cg.memo = dict(base)
            for a in acc_nodes:
                cg.memo[id(a)] = cg.ops.cast(accs[i * PER + j], spec.acc, a.dtype)
            for q, (node, t) in enumerate(epi.outputs):
                cg.store(cg.address(-q - 1), cg.value(node), t.dtype)
            kb.label(skip)
