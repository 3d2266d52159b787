"""The ``loop.gemm`` kernel: packed B panels, cache blocking, an explicit-vector
register-blocked micro-kernel, and a column (or row) split over the thread pool.

Structure (BLIS's loop order, seed 5.5-5.6):
    for jc in N by NC:                 column block: its packed B slab stays in L2
      for pc in K by kc:               pack B[pc:pc+kc, jc:jc+NC] into NR-wide panels (vector copies);
                                       kc: K cut into equal blocks of at most KC
        for ic in M by MC:
          for jr in jc..jc+NC by NR:   one packed panel: KC x NR, stays in L1
            for ir in ic..ic+MC by MR: micro-kernel: MR x NR accumulators in registers
The micro-kernel holds MR rows x (NR / W) vectors of W lanes (8 x 2 x <16 x float>
with AVX-512, 6 x 2 x <8 x float> with AVX2: every accumulator stays in a
register), broadcasts one A element per row and issues ``llvm.fmuladd`` on
vectors, so the k loop is pure FMAs on independent accumulators. Column tails
use masked loads/stores; leftover rows run 4-, 2- and 1-row micro-kernels.
Few rows of A (fewer than ``DIRECT_ROW_TILES`` x MR: inference at small batch) would
not repay packing B, which each row block reuses: then the micro-kernel reads B's
rows in place (only a ragged last panel is packed, and a panel whose rows crowd one
L1 set is copied), and one row is a matrix-vector product (``gemv``) that streams B
row by row into C.
Above ``PARALLEL_FLOPS`` the columns (the rows, when there are too few columns)
are cut into ``CHUNKS`` chunks per thread for ``parallel.parallel_for``: a column
chunk packs only its own B panels, so nothing is packed twice, and there is no
synchronization but the pool's join. Full C tiles move with plain vector loads and
stores; only ragged column tails use masked ones. The driver is compiled once
per process (library.py), not into every kernel module.

Tunable parameters (the autotuner's search space, ``wiadsl.tune``) form a
``GemmConfig``: MR, NR / W (vectors per row), W (vector width in bits), KC, MC
and the unroll factor of the micro-kernel's k loop. The config in force is a
context variable (``use_config``) read when a module's gemm is emitted; with
none set, ``default_config()`` gives the hand-picked values above.
Invariant: a config's parameters are valid (``GemmConfig.check``) before any
IR is emitted; every valid config computes the same product.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from enum import IntEnum

from llvmlite import ir

from ...dtypes import DType
from .caches import SET_BYTES, in_place_tiles, set_rows
from .gemm_config import (  # noqa: F401  (re-exported: the gemm's parameters)
    CHUNKS,
    KC,
    MC,
    NC,
    PARALLEL_FLOPS,
    GemmConfig,
    current_config,
    default_config,
    gemv_symbol,
    ukernel_rows,
    ukernel_symbol,
    use_config,
)
from .parallel import THREADS, new_worker, parallel_for
from .runtime import _i, for_range, offset_align, vector_load, vector_store
from .scratch import SLOT_GEMM_PACK, SLOT_GEMV_PARTIAL, scratch, scratch_done
from .types import F32, F64, I1, I32, I64, PREPACK_TYPE, PTR, Callee, splat, zeros

#: columns of C a matrix-vector product keeps in L1 while it streams B's rows
GEMV_COLS = 2048
#: rows of B a matrix-vector product adds into C per pass over it
GEMV_ROWS = 4
#: ``rows`` reads B in place instead of packing it for fewer rows of A than this many
#: tiles of MR: packing costs a read and a write of all of B, which few rows do not
#: repay (each tile re-reads a panel from L1 or L2). One AMD Zen 3 thread, alternating
#: runs, packed -> in place: 8x768x768 258-317 -> 186-215 us, 12x768x768 329-403 ->
#: 216, 16x768x768 308-335 -> 260-304, 16x512x1000 282-308 -> 231-235, 12x512x2048
#: 551-580 -> 481-484, 12x1024x1024 and 8x512x2048 the same within the noise; but
#: three whole tiles, 18x512x2048, 641-698 -> 731-732: so three tiles pack. B's rows
#: a multiple of 4 KiB apart all fall in one L1 set: when a K block has more of them
#: than the L1 keeps (caches.py's ``set_rows``) and more tiles read them than
#: ``in_place_tiles`` (one on this 8-way L1; four on a 12-way one), each panel is copied
#: before its tiles. One Zen 3 thread, medians of 4 alternating processes (each a
#: minimum of 60 pairs of calls), in place -> copied: 7x256x2048
#: 351 -> 226 us, 7x512x2048 598 -> 411, 8x512x2048 662 -> 449, 12x256x2048 245 -> 240,
#: 12x512x2048 521 -> 519, 16x256x2048 351 -> 283, 16x512x2048 711 -> 610,
#: 16x1024x4096 3514 -> 3373; 16x64x1024 40-64 -> 33-37 (three runs). In place is
#: bimodal (the L2 is physically indexed: some runs' pages do not collide there), its
#: best runs 5-22 % under the copy's at 7, 8, 12 and 16 rows of 512-deep blocks.
DIRECT_ROW_TILES = 3
#: rows below which a micro-kernel tile keeps too few accumulator chains (2 x rows) to
#: cover the FMA latency: 4 cycles x 2 FMA pipes on the hosts we run on
LATENCY_ROWS = 4
#: multiply-adds from which a matrix-vector product is split over the threads, by
#: rows of B: each thread streams a contiguous part of B into a vector of its own,
#: summed after (a split by columns read every row of B in strided pieces: 1 x 2048
#: x 2048 ran 233 -> 212 us on 2 threads, where OpenBLAS's 215 -> 129)
GEMV_PARALLEL = 1 << 18
#: elements of a prepacked B (columns rounded up x rows) from which it is packed on
#: the pool's threads (``parallel_prepack``): ~100 us of work and more
PREPACK_PARALLEL = 1 << 15


#: a micro-kernel call without an epilogue (its ``epi`` argument)
NO_EPILOGUE = ir.Constant(PTR, None)
#: ``gemv`` and ``gemv_split``: (a, B, c, n, k, ldb, acc)
GEMV_TYPE = ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR, I64, I64, I64, I1])


def epilogue_record(et: ir.Type) -> ir.LiteralStructType:
    """The ``TileEpilogue`` record a micro-kernel's ``epi`` points to: row r of a tile
    whose first row is output row ``row`` becomes ``clamp(acc * scale[(row + r) *
    scale_step] + shift[(row + r) * shift_step] + residual, lo, hi)``:
    ``{ptr scale, i64 scale_step, ptr shift, i64 shift_step, i64 has_residual, i64 delta,
    et lo, et hi, et one, et minus_zero}``, the residual of an output element ``delta``
    elements from it (laid out as the output). A missing scale points
    at ``one`` with step 0 and a missing shift at ``minus_zero`` (x * 1 and x + -0.0 are
    x for every x), missing bounds are -inf and inf (the clamp's compares keep every
    x): one form for all but the residual, which is read only where there is one."""
    return ir.LiteralStructType([PTR, I64, PTR, I64, I64, I64, et, et, et, et])


class Epi(IntEnum):
    """The fields of ``epilogue_record``, in order."""

    SCALE, SCALE_STEP, SHIFT, SHIFT_STEP, HAS_RESIDUAL, DELTA, LO, HI, ONE, MINUS_ZERO = range(10)


def epilogue_field(b: ir.IRBuilder, record: ir.Value, et: ir.Type, field: Epi) -> ir.Value:
    """A pointer to ``field`` of the ``epilogue_record`` of element type ``et`` at ``record``."""
    return b.gep(record, [ir.Constant(I32, 0), ir.Constant(I32, int(field))],
                 source_etype=epilogue_record(et))


def phis(b: ir.IRBuilder, incoming: list[tuple[ir.Block, list[ir.Value]]]) -> list[ir.Value]:
    """One phi per position of the value lists, each block's list its incoming values."""
    out = []
    for j, first in enumerate(incoming[0][1]):
        phi = b.phi(first.type)
        for block, values in incoming:
            phi.add_incoming(values[j], block)
        out.append(phi)
    return out


def choose(b: ir.IRBuilder, xs: list[ir.Value],
           forms: list[tuple[ir.Value, Callable[[ir.Value], ir.Value]]],
           otherwise: Callable[[ir.Value], ir.Value]) -> list[ir.Value]:
    """Each of ``xs`` mapped by the first form whose condition holds (``otherwise`` when
    none does): a block per form, one branch each, phis after."""
    done = b.function.append_basic_block("form.done")
    incoming, rest = [], b.block
    for condition, form in forms:
        taken, rest = b.function.append_basic_block("form"), b.function.append_basic_block("form.next")
        b.cbranch(condition, taken, rest)
        b.position_at_end(taken)
        incoming.append((taken, [form(x) for x in xs]))
        b.branch(done)
        b.position_at_end(rest)
    incoming.append((rest, [otherwise(x) for x in xs]))
    b.branch(done)
    b.position_at_end(done)
    return phis(b, incoming)


def one_set(b: ir.IRBuilder, row_bytes: ir.Value) -> ir.Value:
    """Whether rows ``row_bytes`` apart all fall in one L1 set (caches.py)."""
    return b.icmp_signed("==", b.srem(row_bytes, _i(SET_BYTES)), _i(0))


def imin(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed("<", x, y), x, y)


def imax(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed(">", x, y), x, y)


def k_loop(b: ir.IRBuilder, p0: ir.Value, init: list[ir.Value], kc: ir.Value, count: int,
           steps: Callable[[ir.Value, list[ir.Value], int], list[ir.Value]], name: str
           ) -> tuple[ir.Value, list[ir.Value]]:
    """``while p + count <= kc: accs = steps(p, accs, count); p += count``: a micro-kernel's
    loop over k with its accumulators as loop values (phis of the types of ``init``);
    returns the exit values of p and of the accumulators."""
    fn = b.function
    head, loop, done = (fn.append_basic_block(f"{name}.{s}") for s in ("head", "body", "done"))
    pre = b.block
    b.branch(head)
    b.position_at_end(head)
    p = b.phi(I64)
    accs = [b.phi(v0.type) for v0 in init]
    p.add_incoming(p0, pre)
    for acc, v0 in zip(accs, init, strict=True):
        acc.add_incoming(v0, pre)
    b.cbranch(b.icmp_signed("<=", b.add(p, _i(count)), kc), loop, done)
    b.position_at_end(loop)
    nexts = steps(p, list(accs), count)
    p.add_incoming(b.add(p, _i(count)), b.block)
    for acc, nx in zip(accs, nexts, strict=True):
        acc.add_incoming(nx, b.block)
    b.branch(head)
    b.position_at_end(done)
    return p, list(accs)


def tail_rows(b: ir.IRBuilder, start: ir.Value, end: ir.Value, mr: int,
              kernel: Callable[[int], ir.Function], call: Callable[[ir.Function, ir.Value], None]) -> None:
    """The fewer-than-``mr`` rows ``[start, end)`` with few micro-kernel calls from few
    kernels (``kernel(8)``, then 4, 2 and 1 rows, each below ``mr``), for the int8 VNNI
    gemm, which compiles its kernels into its own module (the float gemm's shared ones
    cover every row count: ``GemmBuilder.row_tiles``). The sizes add up to 15, every
    tail of an ``mr`` up to 16 (GemmConfig's limit)."""
    at: ir.Value = start
    for rows in (8, 4, 2, 1):
        if rows >= mr:
            continue
        take = b.icmp_signed(">=", b.sub(end, at), _i(rows))
        with b.if_then(take):
            call(kernel(rows), at)
        at = b.add(at, b.select(take, _i(rows), _i(0)))


class GemmBuilder:
    def __init__(self, mod: ir.Module, dtype: DType, config: GemmConfig | None = None,
                 define_ukernels: bool = False, define_gemv: bool = False):
        cfg = config or current_config()
        self.mod = mod
        self.config = cfg
        #: whether ``ukernel`` defines the micro-kernels in ``mod`` (the "ukernels"
        #: helper) or declares them (every other helper: they call that one's)
        self.define_ukernels = define_ukernels
        #: whether ``gemv`` and ``gemv_split`` are defined in ``mod`` (the "gemv" helper)
        #: or declared (the gemm driver, which calls that one's)
        self.define_gemv = define_gemv
        self.et = F32 if dtype is DType.F32 else F64
        self.size = 4 if dtype is DType.F32 else 8
        self.w = cfg.vector_bits // (self.size * 8)
        self.nr = cfg.nv * self.w
        self.mr = cfg.mr
        self.kc, self.mc, self.unroll = cfg.kc, cfg.mc, cfg.unroll
        # panel rows start at multiples of NR elements from a 64-byte aligned buffer
        self.panel_align = math.gcd(self.nr * self.size, 64)
        self.vt = ir.VectorType(self.et, self.w)
        #: a vector that starts ``w`` lanes into a panel row (conv packs whole vectors)
        self.vector_align = offset_align(self.panel_align, self.w * self.size)
        self.suffix = f"{'f32' if dtype is DType.F32 else 'f64'}"

    def lane_align(self, v: int) -> int:
        """The alignment of vector ``v`` of a packed panel row (lanes ``v*W`` on)."""
        return offset_align(self.panel_align, v * self.w * self.size)

    def intrinsic(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        fn = self.mod.globals.get(name)
        return fn if fn is not None else ir.Function(self.mod, ir.FunctionType(ret, args), name)

    # --------------------------------------------------------- micro-kernel

    def ukernel(self, mr: int) -> ir.Function:
        """``uk(a, lda, panel, c, ldc, kc, valid, load_c, ldp, epi, row)``: C[mr x NR] (+)=
        A.panel, the panel's rows ``ldp`` elements apart: NR for a packed panel, ``ldb`` for
        the rows of B itself (few rows of A: no packing). ``epi``: null, or a
        ``TileEpilogue`` record applied to the tile as it is stored (``tile_epilogue``; by
        the kernels of fewer than MR rows after, ``stored_tile_epilogue``), the tile's rows
        being output rows ``row ..``. Its loads claim only the element
        alignment (one kernel for both: an unaligned vector load of aligned data costs
        the same, and one variant per row count compiles in half the time).
        Declared unless ``define_ukernels``: one copy per process, called from every
        loop nest of every gemm and conv helper (its k loop dwarfs a call); a copy in
        each helper was a quarter to a half of each one's compile time."""
        name = ukernel_symbol(self.suffix, self.config, mr)
        if name in self.mod.globals:
            return self.mod.globals[name]
        params = [PTR, I64, PTR, PTR, I64, I64, I64, I1, I64, PTR, I64]
        fn = ir.Function(self.mod, ir.FunctionType(ir.VoidType(), params), name)
        if not self.define_ukernels:
            return fn
        fn.attributes.add("noinline")  # linked into AOT output, still one copy
        a, lda, bp, c, ldc, kc, valid, load_c, row_stride, epi, row = fn.args
        for p in (a, bp, c):
            p.add_attribute("noalias")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        nv = self.nr // self.w
        masks = self.valid_masks(b, valid)
        zero = zeros(self.vt)

        c_ptr = self.tile_vectors(b, c, ldc)
        # C tile in (``tile_in``), nothing read when not accumulating
        full = b.icmp_signed(">=", valid, _i(self.nr))
        before = b.block
        want, start = (b.function.append_basic_block(f"c.{s}") for s in ("load", "start"))
        b.cbranch(load_c, want, start)
        b.position_at_end(want)
        tile = self.tile_in(b, c_ptr, full, masks, mr)
        loaded = b.block
        b.branch(start)
        b.position_at_end(start)
        init = phis(b, [(before, [zero] * (mr * nv)), (loaded, tile)])
        fma = self.intrinsic(f"llvm.fmuladd.v{self.w}{self.suffix}", self.vt, [self.vt] * 3)

        def steps(p: ir.Value, accs: list[ir.Value], count: int) -> list[ir.Value]:
            for u in range(count):
                pu = b.add(p, _i(u)) if u else p
                brow = b.gep(bp, [b.mul(pu, row_stride)], source_etype=self.et)
                bvecs = [vector_load(b, b.gep(brow, [_i(v * self.w)], source_etype=self.et), self.vt,
                                     self.size) for v in range(nv)]
                nexts = []
                for r in range(mr):
                    x = b.load(b.gep(a, [b.add(b.mul(_i(r), lda), pu)], source_etype=self.et),
                               typ=self.et)
                    xs = splat(b, x, self.vt)
                    for v in range(nv):
                        nexts.append(b.call(fma, [xs, bvecs[v], accs[r * nv + v]]))
                accs = nexts
            return accs
        p0: ir.Value = _i(0)
        accs = init
        if self.unroll > 1:  # the unrolled main loop, then the remainder one step at a time
            p0, accs = k_loop(b, p0, accs, kc, self.unroll, steps, "k.unrolled")
        _, accs = k_loop(b, p0, accs, kc, 1, steps, "k")
        if mr == self.config.mr:
            accs = self.tile_epilogue(b, epi, row, accs, mr, (c_ptr, full, masks))
        self.tile_out(b, accs, c_ptr, full, masks)
        if mr != self.config.mr:
            self.stored_tile_epilogue(b, (c, ldc, valid), epi, row, mr)
        b.ret_void()
        return fn

    def valid_masks(self, b: ir.IRBuilder, valid: ir.Value) -> list[ir.Value]:
        """The lane masks of a tile row's vectors whose first ``valid`` lanes are in C."""
        vi = ir.VectorType(I64, self.w)
        splat_valid = splat(b, valid, vi)
        return [b.icmp_signed(">", splat_valid, ir.Constant(vi, [v * self.w + lane for lane in range(self.w)]))
                for v in range(self.nr // self.w)]

    def tile_out(self, b: ir.IRBuilder, accs: list[ir.Value], at: Callable[[int, int], ir.Value],
                 full: ir.Value, masks: list[ir.Value]) -> None:
        """Store the tile ``accs`` (its vector (r, v) to ``at(r, v)``) as ``tile_in`` loads
        it: plain stores for a whole tile (``full``), else masked ones."""
        nv = self.nr // self.w
        mstore = self.intrinsic(f"llvm.masked.store.v{self.w}{self.suffix}.p0", ir.VoidType(),
                                [self.vt, PTR, I32, ir.VectorType(I1, self.w)])
        with b.if_else(full) as (plain, ragged):
            with plain:
                for j, acc in enumerate(accs):
                    vector_store(b, acc, at(j // nv, j % nv), self.size)
            with ragged:
                for j, acc in enumerate(accs):
                    b.call(mstore, [acc, at(j // nv, j % nv), ir.Constant(I32, self.size), masks[j % nv]])

    def stored_tile_epilogue(self, b: ir.IRBuilder, tile: tuple[ir.Value, ir.Value, ir.Value],
                             epi: ir.Value, row: ir.Value, mr: int) -> None:
        """The epilogue of a micro-kernel of fewer than MR rows: ``tile_epilogue`` applied
        in place to its stored tile ``tile`` = (C, ldc, valid columns), when ``epi`` is not
        null, by one out-of-line loop over its rows (``epilogue_rows``). Inline, the
        epilogue was two thirds of every micro-kernel's code: the edge kernels' copies
        made the "ukernels" helper 276 KB of IR (and "dukernels" 215; now 141 and 102,
        built in 60-65 ms instead of ~100 each). They run only on the last rows of a
        convolution whose output channels MR does not divide, where reading the tile
        back from L1 once costs little beside its K loop."""
        apply, done = (b.function.append_basic_block(f"epi.{s}") for s in ("rows", "after"))
        b.cbranch(b.icmp_unsigned("!=", epi, ir.Constant(PTR, None)), apply, done)
        b.position_at_end(apply)
        b.call(self.epilogue_rows(), [*tile, epi, row, _i(mr)])
        b.branch(done)
        b.position_at_end(done)

    def epilogue_rows(self) -> ir.Function:
        """``epilogue_rows(c, ldc, valid, epi, row, rows)``: the ``rows`` x NR tile at ``c``
        (its first ``valid`` columns in C) through the ``TileEpilogue`` record at ``epi``,
        a row at a time, in place (``stored_tile_epilogue``); internal to the helper
        that defines the micro-kernels."""
        name = f"wia.tile_epilogue.{self.suffix}"
        if name in self.mod.globals:
            return self.mod.globals[name]
        fn = ir.Function(self.mod, ir.FunctionType(ir.VoidType(), [PTR, I64, I64, PTR, I64, I64]), name)
        fn.linkage = "internal"
        c, ldc, valid, epi, row, rows = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        masks = self.valid_masks(b, valid)
        full = b.icmp_signed(">=", valid, _i(self.nr))

        def per_row(r: ir.Value) -> None:
            at = self.tile_vectors(b, b.gep(c, [b.mul(r, ldc)], source_etype=self.et), ldc)
            tile = self.tile_in(b, at, full, masks, 1)
            self.tile_out(b, self.tile_epilogue(b, epi, b.add(row, r), tile, 1, (at, full, masks)),
                          at, full, masks)
        for_range(b, _i(0), rows, 1, per_row, "er")
        b.ret_void()
        return fn

    def tile_vectors(self, b: ir.IRBuilder, c: ir.Value, ldc: ir.Value) -> Callable[[int, int], ir.Value]:
        """``at(r, v)``: where vector ``v`` of row ``r`` of the C tile at ``c`` (rows ``ldc``
        apart) is, each row's start computed once per block where it is used (the
        micro-kernels get -O0's IR pipeline: no common subexpressions removed), so a
        vector costs one GEP, not a multiply, an add and a GEP: the "ukernels" helper's
        IR 301 -> 276 KB, its build ~4 ms shorter; the same run time (matmuls of 7 to
        255 rows, a 3x3 convolution, one and two threads, alternating processes)."""
        rows: dict[tuple[int, int], ir.Value] = {}  # (block, row) -> the row's start

        def at(r: int, v: int) -> ir.Value:
            key = (id(b.block), r)
            if key not in rows:
                rows[key] = b.gep(c, [b.mul(_i(r), ldc)], source_etype=self.et) if r else c
            return b.gep(rows[key], [_i(v * self.w)], source_etype=self.et) if v else rows[key]
        return at

    def tile_in(self, b: ir.IRBuilder, at: Callable[[int, int], ir.Value], full: ir.Value,
                masks: list[ir.Value] | None, mr: int,
                combine: Callable[[int, ir.Value], ir.Value] = lambda j, x: x) -> list[ir.Value]:
        """The ``mr`` x NR tile whose vector (r, v) is at ``at(r, v)``, each vector j as
        ``combine(j, vector)`` (applied as it is loaded: a tile's worth of loads is not
        held in registers at once): plain vector loads for a whole tile (``full``;
        always, without ``masks``), else masked loads of the lanes ``masks`` keep, zero in
        the others: a masked load costs twice a plain one on AMD (measured: 52-55 -> 74-79
        GFLOP/s per core at n = 768, one thread)."""
        nv = self.nr // self.w
        if masks is None:
            return [combine(r * nv + v, vector_load(b, at(r, v), self.vt, self.size))
                    for r in range(mr) for v in range(nv)]
        mload = self.intrinsic(f"llvm.masked.load.v{self.w}{self.suffix}.p0", self.vt,
                               [PTR, I32, ir.VectorType(I1, self.w), self.vt])
        zero = zeros(self.vt)
        plain, ragged, done = (b.function.append_basic_block(f"tile.{s}") for s in ("full", "ragged", "in"))
        b.cbranch(full, plain, ragged)
        b.position_at_end(plain)
        incoming = [(plain, [combine(r * nv + v, vector_load(b, at(r, v), self.vt, self.size))
                             for r in range(mr) for v in range(nv)])]
        b.branch(done)
        b.position_at_end(ragged)
        incoming.append((ragged, [combine(r * nv + v, b.call(mload, [at(r, v), ir.Constant(I32, self.size),
                                                                     masks[v], zero]))
                                  for r in range(mr) for v in range(nv)]))
        b.branch(done)
        b.position_at_end(done)
        return phis(b, incoming)

    def tile_epilogue(self, b: ir.IRBuilder, epi: ir.Value, row: ir.Value, accs: list[ir.Value], mr: int,
                      tile: tuple[Callable[[int, int], ir.Value], ir.Value, list[ir.Value] | None]
                      ) -> list[ir.Value]:
        """The ``mr`` x NR tile ``accs`` (rows ``row ..`` of the output) through the
        ``TileEpilogue`` record at ``epi``, or unchanged when ``epi`` is null: row r is
        ``clamp(acc * scale[r] + shift[r] + residual, lo, hi)``, the bounds as the loop
        IR's ``arith.max`` / ``arith.min`` against a constant (``bounded``). ``tile``: where
        the tile's C vectors are (``at(r, v)``), whether the tile is whole and its lane
        masks (``tile_in``); the residual's vector (r, v) is ``delta`` elements from C's."""
        at, full, masks = tile
        nv = self.nr // self.w
        before = b.block
        on, done = (b.function.append_basic_block(f"epi.{s}") for s in ("on", "done"))
        b.cbranch(b.icmp_unsigned("!=", epi, ir.Constant(PTR, None)), on, done)
        b.position_at_end(on)

        def field(which: Epi, typ: ir.Type) -> ir.Value:
            return b.load(epilogue_field(b, epi, self.et, which), typ=typ)
        scale, scale_step = field(Epi.SCALE, PTR), field(Epi.SCALE_STEP, I64)
        shift, shift_step = field(Epi.SHIFT, PTR), field(Epi.SHIFT_STEP, I64)
        has_residual, delta = field(Epi.HAS_RESIDUAL, I64), field(Epi.DELTA, I64)
        lo, hi = field(Epi.LO, self.et), field(Epi.HI, self.et)
        fma = self.intrinsic(f"llvm.fmuladd.v{self.w}{self.suffix}", self.vt, [self.vt] * 3)

        def per_row(base: ir.Value, step: ir.Value, channel: ir.Value) -> ir.Value:
            at = b.gep(base, [b.mul(channel, step)], source_etype=self.et)
            return splat(b, b.load(at, typ=self.et), self.vt)
        out = []
        for r in range(mr):
            channel = b.add(row, _i(r))
            s, t = per_row(scale, scale_step, channel), per_row(shift, shift_step, channel)
            out += [b.call(fma, [accs[r * nv + v], s, t]) for v in range(nv)]

        def residual_at(r: int, v: int) -> ir.Value:
            return b.gep(at(r, v), [delta], source_etype=self.et)
        plain = b.block
        adding, added = (b.function.append_basic_block(f"epi.{s}") for s in ("residual", "sum"))
        b.cbranch(b.icmp_signed("!=", has_residual, _i(0)), adding, added)
        b.position_at_end(adding)
        summed = self.tile_in(b, residual_at, full, masks, mr, lambda j, x, out=out: b.fadd(out[j], x))
        from_residual = b.block
        b.branch(added)
        b.position_at_end(added)
        out = phis(b, [(plain, out), (from_residual, summed)])
        out = self.bounded(b, self.bounded(b, out, lo, larger=True), hi, larger=False)
        b.branch(done)
        last = b.block
        b.position_at_end(done)
        return phis(b, [(before, accs), (last, out)])

    def bounded(self, b: ir.IRBuilder, xs: list[ir.Value], bound: ir.Value, larger: bool) -> list[ir.Value]:
        """``max(x, bound)`` (``larger``) or ``min(x, bound)`` of each vector, as scalars.py's
        ``arith.max`` / ``arith.min`` against a constant: ``x`` where it is beyond the
        bound or NaN, else the bound. The bound is known only at run time, so this picks
        the cheapest form with the same bits at run time: nothing for an infinite bound
        on the open side, one MAXPS / MINPS for a bound that is not zero (an x equal to
        it is the same value), a compare and a mask for +0.0, a compare and a blend for
        -0.0 (where the sign of an equal x matters)."""
        beyond = ">" if larger else "<"
        limit = splat(b, bound, self.vt)
        zero = zeros(self.vt)
        bits = ir.IntType(self.size * 8)
        open_end = ir.Constant(self.et, -math.inf if larger else math.inf)
        forms: list[tuple[ir.Value, Callable[[ir.Value], ir.Value]]] = [
            (b.fcmp_ordered("==", bound, open_end), lambda x: x),
            (b.icmp_unsigned("==", b.bitcast(bound, bits), ir.Constant(bits, 0)),
             lambda x: b.select(b.fcmp_unordered(beyond, x, zero), x, zero)),
            # the bound where it is strictly beyond x, else x (NaN too): MAXPS / MINPS
            (b.fcmp_ordered("!=", bound, ir.Constant(self.et, 0.0)),
             lambda x: b.select(b.fcmp_ordered(beyond, limit, x), limit, x)),
        ]
        return choose(b, xs, forms, lambda x: b.select(b.fcmp_unordered(beyond, x, limit), x, limit))

    def row_tiles(self, b: ir.IRBuilder, lo: ir.Value, hi: ir.Value,
                  kernel: Callable[[int], ir.Function],
                  call: Callable[[ir.Function | Callee, ir.Value], None], name: str) -> None:
        """Rows ``[lo, hi)`` of C as micro-kernel calls (``kernel(rows)``: the kernel of
        that many rows, ``ukernel`` or conv.py's ``direct_ukernel``): whole tiles of MR
        rows, then the rest in one call of exactly its rows (``ukernel_rows``). A rest below
        LATENCY_ROWS (and at most MR - 2) joins the last whole tile, and the two run as
        halves (6 + 2 -> 4 + 4, 6 + 1 -> 4 + 3): as many calls, none latency-bound.
        A tile keeps 2 x rows accumulator chains, and below LATENCY_ROWS rows they
        cannot cover the FMA latency, so such a call costs what LATENCY_ROWS rows do.
        Measured (AMD Zen 3, one thread, k = 256, n = 1024, one process), tails of
        4 + 2 + 1 -> one kernel per tail: with B read in place (``rows``' direct path:
        each call streams the B panel again) 3 rows 228-296 -> 104 us, 5 rows 216-273
        -> 100, 9 rows 338-408 -> 185, 11 rows 299-370 -> 174 (12 rows: 160-175);
        packed, 33 and 35 rows cost 5-17 % more per row than 36 before and 1-6 %
        after. The price: the "ukernels" helper compiles in 207 ms instead of 118
        (once per host; it is cached). Then the borrowed halves, same host and shape,
        alternating worktrees: 7 rows (6 + 1 -> 4 + 3) 221-234 -> 178-194 us, 15 ->
        20-22 GFLOP/s by gemm_blocking.py; 8 rows (6 + 2 -> 4 + 4) 185-215 -> 169-172
        us; 9, 31, 32 and 33 rows within the noise."""
        mr = self.mr
        count = b.sub(hi, lo)
        rest = b.srem(count, _i(mr))
        borrow = b.and_(b.and_(b.icmp_signed(">", rest, _i(0)),
                               b.icmp_signed("<", rest, _i(min(LATENCY_ROWS, mr - 1)))),
                        b.icmp_signed(">=", count, _i(mr)))
        tail = b.select(borrow, b.add(rest, _i(mr)), rest)
        whole_end = b.sub(hi, tail)
        big = kernel(mr)
        for_range(b, lo, whole_end, mr, lambda row: call(big, row), name)
        first = b.select(borrow, b.sdiv(b.add(tail, _i(1)), _i(2)), tail)
        self.call_rows(b, first, whole_end, kernel, call)
        with b.if_then(borrow):
            self.call_rows(b, b.sub(tail, first), b.add(whole_end, first), kernel, call)

    def call_rows(self, b: ir.IRBuilder, rows: ir.Value, at: ir.Value,
                  kernel: Callable[[int], ir.Function],
                  call: Callable[[ir.Function | Callee, ir.Value], None]) -> None:
        """One call of ``kernel`` of exactly ``rows`` rows (1 to MR - 1; none for 0),
        through the pointer that ``rows`` selects: one call site, not one per row count
        with its own argument set-up (the f32 gemm driver had 60 call sites and took
        60-65 ms of code generation, a process's first matmul waiting for it)."""
        counts = ukernel_rows(self.mr)[1:]
        if not counts:
            return
        target: ir.Value = kernel(counts[-1])
        for r in counts[:-1]:
            target = b.select(b.icmp_signed("==", rows, _i(r)), kernel(r), target)
        with b.if_then(b.icmp_signed(">", rows, _i(0))):
            call(Callee(target, kernel(counts[0]).function_type), at)

    # --------------------------------------------------------- blocked rows

    def rows_prepacked(self) -> ir.Function:
        """``gemm.rows.packed(A, P, C, m, n, k, lda, ldb, ldc, acc)``: ``rows`` on B given
        packed (``prepack``: NR-wide panels of all k rows, panel-major), so nothing is
        packed per call; every row count uses the micro-kernels (one row as well: a
        1-row kernel streams each panel once, as gemv streams B)."""
        name = f"wia.gemm.rows.packed.{self.suffix}"
        if name in self.mod.globals:
            return self.mod.globals[name]
        fn = ir.Function(self.mod, ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR] + [I64] * 6 + [I1]), name)
        fn.linkage = "internal"
        a, pk, c, m, n, k, lda, _ldb, ldc, acc = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        kcb = self.k_block(b, k)
        nc_max = max(self.nr, NC // self.nr * self.nr)

        def per_jc(jc: ir.Value) -> None:
            jend = imin(b, b.add(jc, _i(nc_max)), n)

            def per_pc(pc: ir.Value) -> None:
                kc = imin(b, b.sub(k, pc), kcb)
                load_c = b.or_(acc, b.icmp_signed(">", pc, _i(0)))

                # panel col / NR from row pc: at pk + col * k + pc * NR
                origin = b.gep(pk, [b.mul(pc, _i(self.nr))], source_etype=self.et)
                self.multiply_panels(b, a, lda, pc, kc, pk, jc, jend, n, c, ldc, m, load_c, (origin, k))
            for_range(b, _i(0), k, kcb, per_pc, "pc")
        with b.if_then(b.icmp_signed(">", k, _i(0))):
            for_range(b, _i(0), n, nc_max, per_jc, "jc")
        with b.if_then(b.icmp_signed("==", k, _i(0))):
            self.zero_fill(b, c, m, n, ldc, acc)
        b.ret_void()
        return fn

    def prepack(self, name: str | None = None) -> ir.Function:
        """``gemm.prepack(B, P, n, k, ldb)``: B[0:k, 0:n] into the layout
        ``rows_prepacked`` reads: panel ``j`` (columns NR*j..) at P + j*NR*k, row p of
        it at + p*NR, zero past column n. P holds ceil(n / NR) * NR * k elements,
        64-byte aligned. (``pack`` of one block: all k rows, every column.)"""
        def panels(b: ir.IRBuilder, args: list[ir.Value], lo: ir.Value, hi: ir.Value) -> None:
            bm, pk, n, k, ldb = args
            self.pack(b, bm, ldb, _i(0), k, lo, hi, n, b.gep(pk, [b.mul(lo, k)], source_etype=self.et))
        return self.parallel_prepack(name or f"wia.gemm.prepack.{self.suffix}", panels)

    def parallel_prepack(self, name: str, panels: Callable[[ir.IRBuilder, list[ir.Value],
                                                                 ir.Value, ir.Value], None]
                         ) -> ir.Function:
        """A prepack ``name(src, P, n, k, ld)`` (``PREPACK_TYPE``) whose ``panels(b, args,
        lo, hi)`` writes the panels of columns [lo, hi) (multiples of NR, up to n rounded
        up): on the pool's threads, from ``PREPACK_PARALLEL`` elements. A model's weights
        are packed on its first call, into fresh memory: ResNet-18's ~90 MB of Winograd
        panels, their arithmetic and their page faults, were half of that call."""
        if name in self.mod.globals:
            return self.mod.globals[name]
        body = ir.Function(self.mod, ir.FunctionType(ir.VoidType(), [*PREPACK_TYPE.args, I64, I64]),
                           f"{name}.range")
        body.linkage = "internal"
        b = ir.IRBuilder(body.append_basic_block("entry"))
        panels(b, list(body.args[:5]), body.args[5], body.args[6])
        b.ret_void()
        worker, b, vals, lo, hi = new_worker(self.mod, f"{name}.worker", 5)
        b.call(body, [b.inttoptr(vals[0], PTR), b.inttoptr(vals[1], PTR), *vals[2:], lo, hi])
        b.ret(ir.Constant(I32, 0))
        fn = ir.Function(self.mod, PREPACK_TYPE, name)
        fn.linkage = "internal"
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        args, n, k = list(fn.args), fn.args[2], fn.args[3]
        end = self.round_up(b, n)
        big = b.icmp_signed(">=", b.mul(end, k), _i(PREPACK_PARALLEL))
        with b.if_else(b.and_(big, ir.Constant(I1, int(THREADS > 1)))) as (par, ser):
            with par:
                ctx = b.alloca(I64, size=5)
                for j, v in enumerate(args):
                    b.store(b.ptrtoint(v, I64) if j < 2 else v, b.gep(ctx, [_i(j)], source_etype=I64))
                b.call(parallel_for(self.mod), [worker, ctx, _i(0), end, _i(self.nr),
                                                self.chunks(b, end, self.nr)])
            with ser:
                b.call(body, [*args, _i(0), end])
        b.ret_void()
        return fn

    def packed_block(self) -> ir.Function:
        """``gemm.block(A, lda, B, ldb, pc, kc, lo, hi, n, packed, C, ldc, m, load_c)``:
        ``C[0:m, lo:hi] (+)= A[0:m, pc:pc+kc] @ B[pc:pc+kc, lo:hi]``, B's panels packed
        into ``packed`` first (``pack``, then ``multiply_panels``; columns valid up to
        ``n``). ``rows`` does this in three places: one copy of the loops, called from
        each (see ``panel_multiplier``)."""
        name = f"wia.gemm.block.{self.suffix}"
        if name in self.mod.globals:
            return self.mod.globals[name]
        fn = ir.Function(self.mod, ir.FunctionType(ir.VoidType(), [PTR, I64, PTR] + [I64] * 6
                                                   + [PTR, PTR, I64, I64, I1]), name)
        fn.linkage = "internal"
        a, lda, bm, ldb, pc, kc, lo, hi, n, packed, c, ldc, m, load_c = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.pack(b, bm, ldb, pc, kc, lo, hi, n, packed)
        self.multiply_panels(b, a, lda, pc, kc, packed, lo, hi, n, c, ldc, m, load_c)
        b.ret_void()
        return fn

    def rows(self) -> ir.Function:
        """``gemm.rows(A, B, C, m, n, k, lda, ldb, ldc, acc)``: single-threaded blocked gemm."""
        name = f"wia.gemm.rows.{self.suffix}"
        if name in self.mod.globals:
            return self.mod.globals[name]
        fn = ir.Function(self.mod, ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR] + [I64] * 6 + [I1]), name)
        fn.linkage = "internal"
        a, bm, c, m, n, k, lda, ldb, ldc, acc = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        nc_max = max(self.nr, NC // self.nr * self.nr)
        kcb = self.k_block(b, k)
        few = b.icmp_signed("<", m, _i(DIRECT_ROW_TILES * self.mr))
        # B's rows in one L1 set, more than it keeps, and more tiles to read them than
        # read such a panel in place (caches.py's in_place_tiles)
        crowded = b.and_(b.and_(one_set(b, b.mul(ldb, _i(self.size))),
                                b.icmp_signed(">", kcb, _i(set_rows()))),
                         b.icmp_signed(">", m, _i(in_place_tiles() * self.mr)))
        # as many panels as the call packs (few rows: the tail one), not a whole NC x KC
        # block: glibc consolidates its free lists on every free of 64 KiB or more
        cols = b.select(few, _i(self.nr), imin(b, self.round_up(b, n), _i(nc_max)))
        packed = scratch(self.mod, b, None, SLOT_GEMM_PACK,
                         b.add(b.mul(b.mul(cols, kcb), _i(self.size)), _i(64)))
        block = self.packed_block()

        def direct(pc: ir.Value) -> None:  # few rows: B read in place, its tail panel packed
            # (each tile of MR rows reads the panel again, from L1 or L2; a panel whose
            # rows crowd one L1 set is copied first, ``crowded``)
            kc = imin(b, b.sub(k, pc), kcb)
            load_c = b.or_(acc, b.icmp_signed(">", pc, _i(0)))
            whole = b.sub(n, b.srem(n, _i(self.nr)))

            def per_col(col: ir.Value) -> None:
                panel = b.gep(bm, [b.add(b.mul(pc, ldb), col)], source_etype=self.et)

                def call(kernel: ir.Function | Callee, row: ir.Value) -> None:
                    ap = b.gep(a, [b.add(b.mul(row, lda), pc)], source_etype=self.et)
                    cp = b.gep(c, [b.add(b.mul(row, ldc), col)], source_etype=self.et)
                    b.call(kernel, [ap, lda, panel, cp, ldc, kc, _i(self.nr), load_c, ldb, NO_EPILOGUE, row])
                with b.if_else(crowded) as (copied, in_place):
                    with copied:
                        b.call(block, [a, lda, bm, ldb, pc, kc, col, b.add(col, _i(self.nr)), n, packed,
                                       c, ldc, m, load_c])
                    with in_place:
                        self.row_tiles(b, _i(0), m, self.ukernel, call, "dr")
            for_range(b, _i(0), whole, self.nr, per_col, "jd")
            with b.if_then(b.icmp_signed("<", whole, n)):
                b.call(block, [a, lda, bm, ldb, pc, kc, whole, n, n, packed, c, ldc, m, load_c])
        one = b.icmp_signed("==", m, _i(1))

        def per_jc(jc: ir.Value) -> None:
            jend = imin(b, b.add(jc, _i(nc_max)), n)

            def per_pc(pc: ir.Value) -> None:
                kc = imin(b, b.sub(k, pc), kcb)
                load_c = b.or_(acc, b.icmp_signed(">", pc, _i(0)))
                b.call(block, [a, lda, bm, ldb, pc, kc, jc, jend, n, packed, c, ldc, m, load_c])
            for_range(b, _i(0), k, kcb, per_pc, "pc")
        with b.if_then(b.icmp_signed(">", k, _i(0))):
            with b.if_else(few) as (in_place, packing):
                with in_place:
                    with b.if_else(one) as (row, rows):
                        with row:  # a matrix-vector product: B streamed row by row
                            b.call(self.gemv(), [a, bm, c, n, k, ldb, acc])
                        with rows:
                            for_range(b, _i(0), k, kcb, direct, "pd")
                with packing:
                    for_range(b, _i(0), n, nc_max, per_jc, "jc")
        with b.if_then(b.icmp_signed("==", k, _i(0))):
            self.zero_fill(b, c, m, n, ldc, acc)
        scratch_done(self.mod, b, SLOT_GEMM_PACK, packed)
        b.ret_void()
        return fn

    def gemv(self) -> ir.Function:
        """``gemv(a, B, c, n, k, ldb, acc)``: ``c[0:n] (+)= a[0:k] @ B[0:k, 0:n]``, one row
        of A. Nothing to reuse across rows, so B is streamed in place, four rows at a
        time, into C (in L1: columns in blocks of GEMV_COLS), with vector FMAs along
        the rows: sequential reads of B, where the micro-kernel's panels stride by ldb.
        Declared unless ``define_gemv``: the "gemv" helper defines it (and
        ``gemv_split``), apart from the gemm driver, so that the two build at once on a
        process's first matmul (the driver was ~30 % smaller without them, 36 -> 25 ms
        of LLVM work, and the caller waits for the driver)."""
        name = gemv_symbol(self.suffix, self.config)
        if name in self.mod.globals:
            return self.mod.globals[name]
        fn = ir.Function(self.mod, GEMV_TYPE, name)
        if not self.define_gemv:
            return fn
        a, bm, c, n, k, ldb, acc = fn.args
        for p in (a, bm, c):
            p.add_attribute("noalias")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        with b.if_then(b.not_(acc)):
            for_range(b, _i(0), n, 1, lambda j: b.store(
                ir.Constant(self.et, 0.0), b.gep(c, [j], source_etype=self.et)), "gz")
        k4 = b.sub(k, b.srem(k, _i(GEMV_ROWS)))

        def block(jc: ir.Value) -> None:
            jend = imin(b, b.add(jc, _i(GEMV_COLS)), n)

            def rows_from(p: ir.Value, count: int) -> None:
                terms = [(splat(b, b.load(b.gep(a, [b.add(p, _i(t))], source_etype=self.et),
                                               typ=self.et), self.vt),
                          b.gep(bm, [b.mul(b.add(p, _i(t)), ldb)], source_etype=self.et))
                         for t in range(count)]
                self.sweep(b, terms, c, jc, jend)
            for_range(b, _i(0), k4, GEMV_ROWS, lambda p: rows_from(p, GEMV_ROWS), "g4")
            for_range(b, k4, k, 1, lambda p: rows_from(p, 1), "g1")
        for_range(b, _i(0), n, GEMV_COLS, block, "gc")
        b.ret_void()
        return fn

    def sweep(self, b: ir.IRBuilder, terms: list[tuple[ir.Value, ir.Value]], c: ir.Value,
              lo: ir.Value, hi: ir.Value) -> None:
        """``c[j] += sum(splat * row[j])`` over ``terms`` (splat, row pointer) for j in
        [lo, hi): whole vectors, then one masked vector for the rest."""
        fma = self.intrinsic(f"llvm.fmuladd.v{self.w}{self.suffix}", self.vt, [self.vt] * 3)
        whole = b.sub(hi, b.srem(b.sub(hi, lo), _i(self.w)))

        def at(j: ir.Value, load, store) -> None:  # type: ignore[no-untyped-def]
            x = load(b.gep(c, [j], source_etype=self.et))
            for broadcast, row in terms:
                x = b.call(fma, [broadcast, load(b.gep(row, [j], source_etype=self.et)), x])
            store(x, b.gep(c, [j], source_etype=self.et))
        for_range(b, lo, whole, self.w, lambda j: at(
            j, lambda p: vector_load(b, p, self.vt, self.size),
            lambda v, p: vector_store(b, v, p, self.size)), "gv")
        with b.if_then(b.icmp_signed("<", whole, hi)):
            mask_t, vi = ir.VectorType(I1, self.w), ir.VectorType(I64, self.w)
            mask = b.icmp_signed(">", splat(b, b.sub(hi, whole), vi),
                                 ir.Constant(vi, list(range(self.w))))
            mload = self.intrinsic(f"llvm.masked.load.v{self.w}{self.suffix}.p0", self.vt,
                                   [PTR, I32, mask_t, self.vt])
            mstore = self.intrinsic(f"llvm.masked.store.v{self.w}{self.suffix}.p0", ir.VoidType(),
                                    [self.vt, PTR, I32, mask_t])
            align = ir.Constant(I32, self.size)
            zero = zeros(self.vt)
            at(whole, lambda p: b.call(mload, [p, align, mask, zero]),
               lambda v, p: b.call(mstore, [v, p, align, mask]))

    def multiply_panels(self, b: ir.IRBuilder, a: ir.Value, lda: ir.Value, pc: ir.Value, kc: ir.Value,
                        packed: ir.Value, col_lo: ir.Value, col_hi: ir.Value, valid_end: ir.Value,
                        c: ir.Value, ldc: ir.Value, m: ir.Value, load_c: ir.Value,
                        panels: tuple[ir.Value, ir.Value] | None = None,
                        row_stride: ir.Value | None = None, epi: ir.Value | None = None) -> None:
        """``C[0:m, col_lo:col_hi] (+)= A[0:m, pc:pc+kc] @ packed``, the packed panels of
        those columns (``kc`` rows each, NR wide; a panel's columns are valid up to
        ``valid_end``): a call of ``panel_multiplier``. Shared by gemm (B panels) and
        conv2d (patch panels).
        ``panels`` = (origin, step): column ``col``'s panel starts ``col * step`` elements
        from ``origin`` (default: the panels of ``packed`` in order, ``kc`` rows each);
        ``row_stride``: elements between its rows (default NR, a packed panel's);
        ``epi``: a ``TileEpilogue`` record for every tile (row r of C is its row r), or null."""
        if panels is None:
            panels = (b.gep(packed, [b.neg(b.mul(col_lo, kc))], source_etype=self.et), kc)
        b.call(self.panel_multiplier(), [a, lda, pc, kc, *panels, col_lo, col_hi, valid_end, c, ldc, m,
                                         load_c, row_stride or _i(self.nr), epi or NO_EPILOGUE])

    def panel_multiplier(self) -> ir.Function:
        """``panels(A, lda, pc, kc, origin, step, col_lo, col_hi, valid_end, C, ldc, m,
        load_c, ldp, epi)``: ``multiply_panels``' loops, MC-row blocks of micro-kernel
        calls (``row_tiles``) per panel, one copy per module and row count MR (conv_rows.py
        also multiplies 7 rows at a time). The drivers get no IR passes that would share
        code, and they multiply in up to five places (conv.py's ``pixels``); a copy at
        each was most of their code. Outlined (with ``packer`` and ``packed_block``),
        the f32 helpers' LLVM work took, in alternating processes (AMD Zen 5): gemm
        48-50 -> 34-40 ms, conv_range 57-61 -> 42-50, conv 60-70 -> 44-46; the same
        run time (matmuls of 7 to 1024 rows, MobileNetV2 and ResNet-18 exports)."""
        name = f"wia.gemm.panels.{self.suffix}.mr{self.mr}"
        if name in self.mod.globals:
            return self.mod.globals[name]
        fn = ir.Function(self.mod, ir.FunctionType(ir.VoidType(), [PTR, I64, I64, I64, PTR] + [I64] * 4
                                                   + [PTR, I64, I64, I1, I64, PTR]), name)
        fn.linkage = "internal"
        a, lda, pc, kc, origin, step, col_lo, col_hi, valid_end, c, ldc, m, load_c, row_stride, epi = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))

        def per_ic(ic: ir.Value) -> None:
            iend = imin(b, b.add(ic, _i(self.mc)), m)

            def per_col(col: ir.Value) -> None:
                panel = b.gep(origin, [b.mul(col, step)], source_etype=self.et)
                valid = b.sub(valid_end, col)

                def call(kernel: ir.Function | Callee, row: ir.Value) -> None:
                    ap = b.gep(a, [b.add(b.mul(row, lda), pc)], source_etype=self.et)
                    cp = b.gep(c, [b.add(b.mul(row, ldc), col)], source_etype=self.et)
                    b.call(kernel, [ap, lda, panel, cp, ldc, kc, valid, load_c, row_stride, epi, row])
                self.row_tiles(b, ic, iend, self.ukernel, call, "ir")
            for_range(b, col_lo, col_hi, self.nr, per_col, "jr")
        for_range(b, _i(0), m, self.mc, per_ic, "ic")
        b.ret_void()
        return fn

    def round_up(self, b: ir.IRBuilder, n: ir.Value) -> ir.Value:
        """``n`` rounded up to whole NR-wide panels."""
        return b.mul(b.sdiv(b.add(n, _i(self.nr - 1)), _i(self.nr)), _i(self.nr))

    def k_block(self, b: ir.IRBuilder, k: ir.Value) -> ir.Value:
        """The k block for depth ``k``: ``k`` cut into equal blocks of at most KC
        (576 = 3 x 192 rather than 256 + 256 + 64: no short last block, whose
        C tile loads and stores cost as much as a long one's). 1 when k == 0."""
        nkb = b.sdiv(b.add(k, _i(self.kc - 1)), _i(self.kc))
        nkb = b.select(b.icmp_signed("<", nkb, _i(1)), _i(1), nkb)
        kcb = b.sdiv(b.add(k, b.sub(nkb, _i(1))), nkb)
        return b.select(b.icmp_signed("<", kcb, _i(1)), _i(1), kcb)

    def zero_fill(self, b: ir.IRBuilder, c: ir.Value, m: ir.Value, n: ir.Value, ldc: ir.Value,
                  acc: ir.Value) -> None:
        """k == 0: the product is all zeros (C is left alone when accumulating)."""
        with b.if_then(b.not_(acc)):
            def row(i: ir.Value) -> None:
                def col(j: ir.Value) -> None:
                    b.store(ir.Constant(self.et, 0.0),
                            b.gep(c, [b.add(b.mul(i, ldc), j)], source_etype=self.et))
                for_range(b, _i(0), n, 1, col, "zc")
            for_range(b, _i(0), m, 1, row, "zr")

    def pack(self, b: ir.IRBuilder, bm: ir.Value, ldb: ir.Value, pc: ir.Value, kc: ir.Value,
             jc: ir.Value, jend: ir.Value, n: ir.Value, packed: ir.Value) -> None:
        """packed[(jr - jc) * kc + p * NR + j] = B[pc + p, jr + j] for the NR-wide panels
        jr of [jc, jend), zero past column n: a call of ``packer``, the module's one copy
        of the loops (a driver packs in three places, and its helpers get no IR passes
        that would share the code)."""
        b.call(self.packer(), [bm, ldb, pc, kc, jc, jend, n, packed])

    def packer(self) -> ir.Function:
        """``pack(B, ldb, pc, kc, jc, jend, n, packed)``: ``pack``'s loops, one masked
        vector load per NR / W lanes (a panel row is contiguous in B), aligned stores."""
        name = f"wia.gemm.pack.{self.suffix}"
        if name in self.mod.globals:
            return self.mod.globals[name]
        fn = ir.Function(self.mod, ir.FunctionType(ir.VoidType(), [PTR] + [I64] * 6 + [PTR]), name)
        fn.linkage = "internal"
        bm, ldb, pc, kc, jc, jend, n, packed = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        nv = self.nr // self.w
        mload = self.intrinsic(f"llvm.masked.load.v{self.w}{self.suffix}.p0", self.vt,
                               [PTR, I32, ir.VectorType(I1, self.w), self.vt])
        zero = zeros(self.vt)

        def per_jr(jr: ir.Value) -> None:
            masks = self.valid_masks(b, b.sub(n, jr))
            panel = b.gep(packed, [b.mul(b.sub(jr, jc), kc)], source_etype=self.et)

            def rows(load: Callable[[ir.Value, int], ir.Value]) -> None:
                def per_p(p: ir.Value) -> None:
                    src = b.gep(bm, [b.add(b.mul(b.add(pc, p), ldb), jr)], source_etype=self.et)
                    dst = b.gep(panel, [b.mul(p, _i(self.nr))], source_etype=self.et)
                    for v in range(nv):
                        x = load(b.gep(src, [_i(v * self.w)], source_etype=self.et), v)
                        vector_store(b, x, b.gep(dst, [_i(v * self.w)], source_etype=self.et),
                                     self.lane_align(v))
                for_range(b, _i(0), kc, 1, per_p, "pp")
            # a whole panel's rows are plain loads: a masked one costs twice as much on AMD
            # (VMASKMOVPS), which made copying 1x1 convolutions' panels (conv.py) slow
            with b.if_else(b.icmp_signed(">=", b.sub(n, jr), _i(self.nr))) as (whole, ragged):
                with whole:
                    rows(lambda ptr, v: vector_load(b, ptr, self.vt, self.size))
                with ragged:
                    rows(lambda ptr, v: b.call(mload, [ptr, ir.Constant(I32, self.size), masks[v], zero]))
        for_range(b, jc, jend, self.nr, per_jr, "pj")
        b.ret_void()
        return fn

    # --------------------------------------------------------- threads

    def driver(self, name: str | None = None, prepacked: bool = False) -> ir.Function:
        """``gemm(A, B, C, m, n, k, lda, ldb, ldc, acc)``, split over the pool when large:
        by columns (multiples of NR) when there are enough, else by rows (multiples
        of MR). Each chunk packs the B panels of its own part, so a column split
        packs every panel once (A is read, never packed, so sharing it costs
        nothing), while a row split packs all of B once per chunk. ``CHUNKS``
        chunks per thread, claimed dynamically: a thread that starts late (a
        busy core on a shared machine) leaves its chunks to the others.
        ``prepacked``: the B argument is ``prepack``'s layout (nothing packed here)."""
        name = name or f"wia.gemm.{'packed.' if prepacked else ''}{self.suffix}"
        if name in self.mod.globals:
            return self.mod.globals[name]
        rows = self.rows_prepacked() if prepacked else self.rows()
        fn = ir.Function(self.mod, ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR] + [I64] * 6 + [I1]), name)
        fn.linkage = "internal"
        args = list(fn.args)
        m, n, k = args[3], args[4], args[5]
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        flops = b.mul(b.mul(m, n), k)
        if not prepacked and THREADS > 1:  # (a prepacked B's column panels are contiguous)
            vector = b.and_(b.icmp_signed("==", m, _i(1)),
                            b.icmp_signed(">=", flops, _i(GEMV_PARALLEL)))
            with b.if_then(b.and_(vector, b.icmp_signed(">=", k, _i(2 * GEMV_ROWS * THREADS)))):
                a, bm, c = args[:3]
                b.call(self.gemv_split(), [a, bm, c, n, k, args[7], args[9]])
                b.ret_void()
        by_cols = b.icmp_signed(">=", n, _i(2 * self.nr * THREADS))
        by_rows = b.icmp_signed(">=", m, _i(2 * self.mr * THREADS))
        go = b.and_(b.icmp_signed(">=", flops, _i(PARALLEL_FLOPS)), b.or_(by_cols, by_rows))
        with b.if_else(b.and_(go, ir.Constant(I1, int(THREADS > 1)))) as (par, ser):
            with par:
                ctx = b.alloca(I64, size=10)
                for j, v in enumerate(args):
                    raw = b.ptrtoint(v, I64) if j < 3 else b.zext(v, I64) if j == 9 else v
                    b.store(raw, b.gep(ctx, [_i(j)], source_etype=I64))
                with b.if_else(by_cols) as (split_cols, split_rows):
                    with split_cols:
                        chunks = self.chunks(b, n, 2 * self.nr)
                        b.call(parallel_for(self.mod), [self.worker(rows, False, prepacked),
                                                        ctx, _i(0), n, _i(self.nr), chunks])
                    with split_rows:
                        chunks = self.chunks(b, m, 8 * self.mr)
                        b.call(parallel_for(self.mod), [self.worker(rows, True, prepacked),
                                                        ctx, _i(0), m, _i(self.mr), chunks])
            with ser:
                b.call(rows, args)
        b.ret_void()
        return fn

    def gemv_split(self) -> ir.Function:
        """``gemv.split(a, B, c, n, k, ldb, acc)``: ``gemv`` with B's rows cut into THREADS
        parts, one per pool chunk: part ``p`` streams rows [p*kp, (p+1)*kp) into its
        own vector of n partial sums, and the parts are added into C in part order
        after the pool's join. The cut is fixed by THREADS (compile time), so the sums
        come out the same at every run-time thread count. Declared unless ``define_gemv``."""
        name = gemv_symbol(self.suffix, self.config, split=True)
        if name in self.mod.globals:
            return self.mod.globals[name]
        fn = ir.Function(self.mod, GEMV_TYPE, name)
        if not self.define_gemv:
            return fn
        a, bm, c, n, k, ldb, acc = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        parts = THREADS
        rows = b.sdiv(b.add(k, _i(parts - 1)), _i(parts))
        rows = b.mul(b.sdiv(b.add(rows, _i(GEMV_ROWS - 1)), _i(GEMV_ROWS)), _i(GEMV_ROWS))
        stride = b.mul(b.sdiv(b.add(n, _i(15)), _i(16)), _i(16))  # each part's vector 64-byte aligned
        partial = scratch(self.mod, b, None, SLOT_GEMV_PARTIAL,
                          b.mul(b.mul(stride, _i(parts)), _i(self.size)))
        ctx = b.alloca(I64, size=8)
        for j, v in enumerate([a, bm, partial, n, k, ldb, rows, stride]):
            b.store(b.ptrtoint(v, I64) if j < 3 else v, b.gep(ctx, [_i(j)], source_etype=I64))
        b.call(parallel_for(self.mod), [self.gemv_part(), ctx, _i(0), _i(parts), _i(1),
                                        _i(parts)])

        def column(j: ir.Value) -> None:
            at = b.gep(c, [j], source_etype=self.et)
            total = b.select(acc, b.load(at, typ=self.et), ir.Constant(self.et, 0.0))
            for p in range(parts):
                x = b.load(b.gep(partial, [b.add(b.mul(_i(p), stride), j)], source_etype=self.et),
                           typ=self.et)
                total = b.fadd(total, x)
            b.store(total, at)
        for_range(b, _i(0), n, 1, column, "gs")
        scratch_done(self.mod, b, SLOT_GEMV_PARTIAL, partial)
        b.ret_void()
        return fn

    def gemv_part(self) -> ir.Function:
        """The pool worker of ``gemv_split``: parts [lo, hi), each into its own vector."""
        name = f"wia.gemm.gemv.part.{self.suffix}"
        if name in self.mod.globals:
            return self.mod.globals[name]
        fn, b, vals, lo, hi = new_worker(self.mod, name, 8)
        a, bm, partial = (b.inttoptr(v, PTR) for v in vals[:3])
        n, k, ldb, rows, stride = vals[3:]

        def part(p: ir.Value) -> None:
            k0 = imin(b, b.mul(p, rows), k)
            count = b.sub(imin(b, b.add(k0, rows), k), k0)
            out = b.gep(partial, [b.mul(p, stride)], source_etype=self.et)
            # gemv without accumulate zero-fills its vector first (an empty part: zeros)
            b.call(self.gemv(), [b.gep(a, [k0], source_etype=self.et),
                                 b.gep(bm, [b.mul(k0, ldb)], source_etype=self.et), out, n, count,
                                 ldb, ir.Constant(I1, 0)])
        for_range(b, lo, hi, 1, part, "gp")
        b.ret(ir.Constant(I32, 0))
        return fn

    @staticmethod
    def chunks(b: ir.IRBuilder, extent: ir.Value, least: int) -> ir.Value:
        """``CHUNKS * THREADS`` chunks, fewer when a chunk would be under ``least`` wide
        (at least THREADS)."""
        most = b.sdiv(extent, _i(least))
        most = b.select(b.icmp_signed("<", most, _i(CHUNKS * THREADS)), most, _i(CHUNKS * THREADS))
        return b.select(b.icmp_signed("<", most, _i(THREADS)), _i(THREADS), most)

    def worker(self, rows: ir.Function, by_rows: bool, prepacked: bool = False) -> ir.Function:
        """``i32 worker(ptr ctx, i64 lo, i64 hi)`` for ``parallel_for``: rows [lo, hi)
        of A and C, or (``by_rows`` False) columns [lo, hi) of B and C (of a prepacked
        B: its panels from column lo, a multiple of NR, at lo * k)."""
        name = (f"wia.gemm.worker.{'rows' if by_rows else 'cols'}."
                f"{'packed.' if prepacked else ''}{self.suffix}")
        if name in self.mod.globals:
            return self.mod.globals[name]
        fn, b, vals, lo, hi = new_worker(self.mod, name, 10)
        a, bm, c = (b.inttoptr(v, PTR) for v in vals[:3])
        m, n = vals[3], vals[4]
        lda, ldc = vals[6], vals[8]
        if by_rows:
            a = b.gep(a, [b.mul(lo, lda)], source_etype=self.et)
            c = b.gep(c, [b.mul(lo, ldc)], source_etype=self.et)
            m = b.sub(hi, lo)
        else:
            bm = b.gep(bm, [b.mul(lo, vals[5]) if prepacked else lo], source_etype=self.et)
            c = b.gep(c, [lo], source_etype=self.et)
            n = b.sub(hi, lo)
        b.call(rows, [a, bm, c, m, n, *vals[5:9], b.trunc(vals[9], I1)])
        b.ret(ir.Constant(I32, 0))
        return fn
