"""Tiled GEMM on CUDA cores: 64x64 output tiles, 256 threads, 4x4 outputs per thread, k by 16.

C[z, m, n] = epilogue(sum_k A[z, m, k] * B[z, k, n]) for a batch index z. The
operands are ``GemmOperand`` index maps, so the same kernel runs a matmul
(strided views, transposes free) and a conv2d as implicit GEMM (im2col
computed while loading the A tile, zero padding by predicated loads).

Invariants:
- Shared memory holds A transposed (``As[k][m]``) and B (``Bs[k][n]``), 16 x 64
  elements each, in the accumulator's type (f16/bf16/i8 operands are widened on
  the way in: "f16 inputs, f32 accumulation"; i8 x i8 accumulates in i32).
- Thread t loads A elements (row t/16 + 16j, k t%16) and B elements
  (k t/64 + 4j, column t%64), j < 4: row offsets and guards are computed once
  before the k loop, the k side once per tile.
- Tile loads are bounds-checked (zero fill), so any M, N, K is correct; a
  ``bar.sync`` separates the loads of a tile from its use and that use from the
  next tile's loads.
- The epilogue (bias, activation, residual, quantize...) is evaluated per output
  element before its one store (``gemm_epilogue``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ....dtypes import DType
from ..builder import KernelBuilder
from ..codegen import ExprCodegen, IndexGroup, KernelParams
from ..expr import LoopSpec
from ..isa import float_literal, info
from ..symbolic import Sym, call, product
from .common import TileGrid
from .elementwise import EmittedKernel
from .gemm_epilogue import EpilogueMap, emit_epilogue
from .operands import GemmOperand, OperandLoader

TILE, BK, THREADS, PER = 64, 16, 256, 4


@dataclass
class ProductSpec:
    """A batched GEMM (rows x cols, depth k) with an epilogue over the output domain."""

    name: str
    batch: tuple[Sym, ...]
    m: Sym
    n: Sym
    k: Sym
    a: GemmOperand
    b: GemmOperand
    acc: DType
    epilogue: LoopSpec
    emap: EpilogueMap
    kind: str = "matmul"


def setup(kb: KernelBuilder, spec: ProductSpec, tile_m: int,
          tile_n: int) -> tuple[KernelParams, ExprCodegen, tuple[str, str, str]]:
    """Params, the epilogue's codegen (batch group bound to the batch block index), and
    the block indices (column tile, row tile, batch) of the launch grid (``TileGrid``)."""
    params = KernelParams(kb)
    epi = spec.epilogue
    cg = ExprCodegen(kb, params, epi.inputs, epi.scalars, epi.domain)
    cg.outputs_args = [t for _, t in epi.outputs]
    for _, t in epi.outputs:
        params.buffer(t.buffer)
    blocks = tile_grid(spec, tile_m, tile_n).block_ids(kb, params)
    cg.set_group(0, IndexGroup(spec.emap.batch_axes, spec.emap.batch_dims, blocks[2]))
    return params, cg, blocks


def batch_coords(cg: ExprCodegen, spec: ProductSpec) -> list[str]:
    return [cg.coord(a) for a in spec.emap.batch_axes]


def tile_grid(spec: ProductSpec, tile_m: int, tile_n: int) -> TileGrid:
    return TileGrid(call("cdiv", spec.n, tile_n), call("cdiv", spec.m, tile_m),
                    product(list(spec.batch)))


def launch_grid(spec: ProductSpec, tile_m: int, tile_n: int) -> tuple[Sym, Sym, Sym]:
    return tile_grid(spec, tile_m, tile_n).launch()


def matmul_kernel(spec: ProductSpec) -> EmittedKernel:
    kb = KernelBuilder(spec.name, max_threads=THREADS)
    params, cg, (cx, cy, _) = setup(kb, spec, TILE, TILE)
    acc_i = info(spec.acc)
    smem_t = "b32" if acc_i.size == 4 else "b64"
    a_s = kb.shared_array("tile_a", smem_t, BK * TILE, 16)
    b_s = kb.shared_array("tile_b", smem_t, BK * TILE, 16)
    m, n = params.sym(spec.m), params.sym(spec.n)
    k = params.sym(spec.k)
    tid = kb.special("%tid.x")
    tx, ty, m0, n0 = kb.regs("b32", 4)
    kb.prologue.append(f"and.b32 {tx}, {tid}, 15;")
    kb.prologue.append(f"shr.u32 {ty}, {tid}, 4;")
    kb.prologue.append(f"shl.b32 {m0}, {cy}, 6;")
    kb.prologue.append(f"shl.b32 {n0}, {cx}, 6;")
    zc = batch_coords(cg, spec)
    la = OperandLoader(kb, params, spec.a, zc, spec.batch)
    lb = OperandLoader(kb, params, spec.b, zc, spec.batch)
    # fixed per thread: A's k lane and rows, B's column
    a_kk, b_col = kb.reg("b32"), kb.reg("b32")
    kb.emit(f"and.b32 {a_kk}, {tid}, 15")
    kb.emit(f"and.b32 {b_col}, {tid}, 63")
    a_rows, b_kks = [], []
    for j in range(PER):
        r, g, kk = kb.reg("b32"), kb.reg("b32"), kb.reg("b32")
        kb.emit(f"add.u32 {r}, {ty}, {16 * j}")
        kb.emit(f"add.u32 {g}, {m0}, {r}")
        a_rows.append((r, la.row(g)))
        kb.emit(f"shr.u32 {kk}, {tid}, 6")
        kb.emit(f"add.u32 {kk}, {kk}, {4 * j}")
        b_kks.append(kk)
    gcol = kb.reg("b32")
    kb.emit(f"add.u32 {gcol}, {n0}, {b_col}")
    b_row = lb.row(gcol)
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
    gk = kb.reg("b32")
    kb.emit(f"add.u32 {gk}, {k0}, {a_kk}")
    ak = la.kidx(gk)
    for r, row in a_rows:  # As[kk][r]
        _stage(cg, spec, la, row, ak, a_s, a_kk, r, smem_t)
    for kk in b_kks:  # Bs[kk][col]
        g = kb.reg("b32")
        kb.emit(f"add.u32 {g}, {k0}, {kk}")
        _stage(cg, spec, lb, b_row, lb.kidx(g), b_s, kk, b_col, smem_t)
    kb.emit("bar.sync 0")
    _mac_tile(kb, spec, accs, tx, ty, a_s, b_s, smem_t)
    kb.emit("bar.sync 0")
    kb.emit(f"add.u32 {k0}, {k0}, {BK}")
    kb.emit(f"bra.uni {top}")
    kb.label(done)
    rows, cols = kb.regs("b32", PER), kb.regs("b32", PER)
    for i in range(PER):
        kb.emit(f"mad.lo.u32 {rows[i]}, {ty}, {PER}, {m0}")
        kb.emit(f"add.u32 {rows[i]}, {rows[i]}, {i}")
        kb.emit(f"mad.lo.u32 {cols[i]}, {tx}, {PER}, {n0}")
        kb.emit(f"add.u32 {cols[i]}, {cols[i]}, {i}")
    emit_epilogue(cg, spec.epilogue, spec.emap, spec.acc, rows, cols, m, n,
                  lambda i, j: accs[i * PER + j])
    return EmittedKernel(kb, params.args, launch_grid(spec, TILE, TILE), (THREADS, 1, 1), spec.kind)


def _stage(cg: ExprCodegen, spec: ProductSpec, ld: OperandLoader, row, kinfo, smem: str,
           kk: str, mn: str, smem_t: str) -> None:
    """One tile element: global (zero where it does not exist) -> shared[kk][mn], widened."""
    kb = cg.kb
    ok, addr = ld.element(row, kinfo)
    acc_i = info(spec.acc)
    val = kb.reg(acc_i.reg)
    kb.emit(f"mov.{acc_i.itype} {val}, {float_literal(0.0, spec.acc) if spec.acc.is_float else '0'}")
    skip = kb.new_label("oob")
    kb.bra(skip, ok, negate=True)
    raw = cg.load(addr, ld.op.dtype)
    kb.emit(f"mov.{acc_i.itype} {val}, {cg.ops.cast(raw, ld.op.dtype, spec.acc)}")
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
