"""Hopper GEMM (sm_90a): TMA loads into a ring of 128B-swizzled stages, warp-specialized
``wgmma.mma_async``, ``mbarrier`` full/empty pairs per stage.

Block tile 128 x ``tn`` (256 when the grid still fills two waves of an H100's 132 SMs,
``tile_n``; else 128), k tile 128 bytes (64 halves, 128 int8, 32 tf32), ``STAGES`` = 4,
384 threads in three warpgroups:

- warpgroup 0, the producer: ``setmaxnreg.dec`` to 40 registers; one elected thread
  of warp 0 walks the k tiles: wait for the stage's *empty* barrier, arm its *full*
  barrier with the stage's bytes (``mbarrier.arrive.expect_tx``), issue the TMA
  copies of the A and B tiles (``cp.async.bulk.tensor``, which complete the bytes);
- warpgroups 1 and 2, the consumers: ``setmaxnreg.inc`` to 232 registers; each owns
  64 rows of the tile (``wgmma.mma_async.m64n{tn}`` k16 f16/bf16, k32 s8, k8 tf32 with
  f32 or s32 accumulators, zeroed before the loop so that every wgmma accumulates,
  scale-d 1): wait for the stage's full barrier, ``wgmma.fence``, 4 wgmma (one per 32
  bytes of k, descriptor start advanced 32 bytes (K-major) or 2 KiB (MN-major: 16 k
  rows of 16-bit operands)), commit, ``wgmma.wait_group 1`` (the
  previous tile's group is complete), then thread 0 of the warpgroup arrives on the
  *previous* stage's empty barrier; after the loop ``wgmma.wait_group 0`` and the
  fused epilogue (``gemm_epilogue``) stores the accumulators under row/column
  guards (ragged M and N; the k tail and edge tiles are zero-filled by TMA).

Shared memory (``.extern``, 1024-aligned): A stages (16 KiB each), B stages
(``tn`` x 128 bytes each), then the full and empty barriers (8 bytes each).
Barriers: full[s] expects 1 arrival (+ the stage's bytes), empty[s] 2 (one per
consumer warpgroup); the producer's first pass waits on parity 1 of fresh empty
barriers (complete at once), phases then alternate with each pass of the ring.
Descriptors (``wgmma`` matrix descriptors, 128B swizzle): K-major SBO 1024 (8 rows of
128 bytes), LBO field 1 (unused); MN-major SBO 1024 (8 k rows), LBO 8 KiB (next 64
mn box). Operand tiles per ``tma_operands``.

Invariants: the kernel is launched with ``THREADS`` threads and ``dynamic_shared``
bytes; K = 0 gives zeros; every shared byte a wgmma reads was written by a TMA
whose full-barrier phase the reading warps observed, and is rewritten only after
both consumer warpgroups released it through the empty barrier after the
``wgmma.wait_group`` that retired its reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from ....dtypes import DType
from ..builder import KernelBuilder
from ..isa import SM_COUNT
from ..options import current
from ..symbolic import call, product
from .elementwise import EmittedKernel
from .gemm_epilogue import emit_epilogue
from .matmul import ProductSpec, launch_grid, setup
from .mma import c_element, c_fragment_cols, c_fragment_rows, zero_accumulators
from .tma_operands import BK_BYTES, BOX_BYTES_MN, MN_BOX, TmaOperand, tma_operand

TM, STAGES, THREADS = 128, 4, 384
PRODUCER_REGS, CONSUMER_REGS, MAX_REGS = 40, 232, 168
KSTEPS = 4                           # wgmma k steps (32 bytes of k each) of one 128-byte k tile


@dataclass(frozen=True)
class MmaKind:
    """The wgmma form for an operand dtype: its PTX types, k, the operands after the
    descriptors (scale-d 1, then the immediates the form takes), the accumulator."""

    types: str
    k: int
    tail: str
    acc: DType
    transposable: bool


#: operand dtype -> wgmma form (tf32 only under the ``allow_tf32`` codegen option)
MMA_KINDS = {
    DType.F16: MmaKind("f32.f16.f16", 16, "1, 1, 1, {ta}, {tb}", DType.F32, True),
    DType.BF16: MmaKind("f32.bf16.bf16", 16, "1, 1, 1, {ta}, {tb}", DType.F32, True),
    DType.F32: MmaKind("f32.tf32.tf32", 8, "1, 1, 1", DType.F32, False),
    DType.I8: MmaKind("s32.s8.s8", 32, "1", DType.I32, False),
}
#: descriptor high word: SBO 1024 >> 4, swizzle 128B (bits 62-63 = 1)
DESC_HI = (1024 >> 4) | (1 << 30)
#: descriptor LBO field (bits 16-29 of the low word): K-major 1 (unused), MN-major 8 KiB
LBO_K, LBO_MN = 1 << 16, (BOX_BYTES_MN >> 4) << 16
#: descriptor start-address step per k step (>> 4): 32 bytes (K-major), 16 rows (MN)
STEP_K, STEP_MN = 32 >> 4, (16 * BK_BYTES) >> 4


#: waves of blocks over an H100's SMs (``isa.SM_COUNT``) a 128 x 256 grid must fill to be chosen
WIDE_TILE_WAVES = 2
#: the sm number that has wgmma (sm_90 / sm_90a; not sm_100 and later, whose tensor
#: cores differ)
WGMMA_SM = 90


@dataclass(frozen=True)
class WgmmaPlan:
    """The Hopper kernel's view of a product: both operands' TMA maps, the tile width, and
    ``when``: the launch-time condition (a plan expression) under which the operands'
    strides suit TMA when some size is symbolic; None when they always do."""

    a: TmaOperand
    b: TmaOperand
    tn: int
    when: str | None


def wgmma_plan(spec: ProductSpec, sm: int, allow_tf32: bool | None = None) -> WgmmaPlan | None:
    """The plan for ``spec`` on ``sm_<sm>`` when the Hopper kernel can run it (else None):
    sm_90(a); f16 x f16 or bf16 x bf16 in f32, i8 x i8 in i32, or f32 x f32 in f32 as tf32
    when ``allow_tf32`` (default: the codegen option, ``options.py``); both operands
    TMA-loadable, K-major for i8 and tf32 (wgmma transposes only 16-bit operands)."""
    kind = MMA_KINDS.get(spec.a.dtype)
    if sm != WGMMA_SM or kind is None or spec.b.dtype is not spec.a.dtype \
            or spec.acc is not kind.acc:
        return None
    if spec.a.dtype is DType.F32 and not (current().allow_tf32 if allow_tf32 is None
                                          else allow_tf32):
        return None
    la = tma_operand(spec.a, spec.batch, mn_major_ok=kind.transposable)
    lb = tma_operand(spec.b, spec.batch, mn_major_ok=kind.transposable)
    if la is None or lb is None:
        return None
    conds = tuple(dict.fromkeys(la.conditions + lb.conditions))  # K's appear twice
    return WgmmaPlan(la, lb, tile_n(spec), " and ".join(f"({c})" for c in conds) or None)


def tile_n(spec: ProductSpec) -> int:
    """256 when the grid of 128 x 256 tiles still fills ``WIDE_TILE_WAVES`` waves of an
    H100's SMs (static sizes; a wider tile re-reads A half as often), else 128."""
    dims = (spec.m, spec.n, product(list(spec.batch)))
    if all(isinstance(d, int) for d in dims):
        m, n, z = (int(d) for d in dims)
        if n >= 256 and -(-m // TM) * -(-n // 256) * z >= WIDE_TILE_WAVES * SM_COUNT[WGMMA_SM]:
            return 256
    return 128


def smem_layout(tn: int) -> tuple[int, int, int, int]:
    """(A stage bytes, B stage bytes, barrier offset, total dynamic shared bytes)."""
    a_bytes, b_bytes = TM * BK_BYTES, tn * BK_BYTES
    bars = STAGES * (a_bytes + b_bytes)
    return a_bytes, b_bytes, bars, bars + 16 * STAGES


def wgmma_kernel(spec: ProductSpec, la: TmaOperand, lb: TmaOperand, tn: int = 128,
                 name: str | None = None) -> EmittedKernel:
    """The Hopper kernel for ``spec`` whose operands TMA loads as ``la`` and ``lb``."""
    kb = KernelBuilder(name or spec.name, max_threads=THREADS, max_regs=MAX_REGS, target="sm_90a")
    a_bytes, b_bytes, bars_off, total = smem_layout(tn)
    kb.dynamic_shared = total
    kb.module_decls["wg_smem"] = ".extern .shared .align 1024 .b8 wg_smem[];"
    params, cg, (cx, cy, bz) = setup(kb, spec, TM, tn)
    tmaps = [params.tensor_map(la.plan_arg(TM)), params.tensor_map(lb.plan_arg(tn))]
    m, n = params.sym(spec.m), params.sym(spec.n)
    ktiles = params.sym(call("cdiv", spec.k, la.bk))
    tid = kb.special("%tid.x")
    base, bars, m0, n0 = kb.regs("b32", 4)
    kb.prologue += [f"mov.u32 {base}, wg_smem;", f"add.u32 {bars}, {base}, {bars_off};",
                    f"shl.b32 {m0}, {cy}, 7;", f"mul.lo.u32 {n0}, {cx}, {tn};"]
    _init_barriers(kb, tid, bars)
    wg, p = kb.reg("b32"), kb.reg("pred")
    producer, done = kb.new_label("producer"), kb.new_label("done")
    kb.emit(f"shr.u32 {wg}, {tid}, 7")
    kb.emit(f"setp.eq.u32 {p}, {wg}, 0")
    kb.bra(producer, p)
    accs = _consumer(kb, spec, (la, lb), tn, tid, wg, base, bars, ktiles, (a_bytes, b_bytes))
    _epilogue(cg, spec, accs, tid, wg, m0, n0, m, n, tn)
    kb.emit(f"bra.uni {done}")
    kb.label(producer)
    _producer(kb, (la, lb), tn, tid, base, bars, ktiles, (a_bytes, b_bytes), tmaps,
              (m0, n0, bz), done)
    kb.label(done)
    return EmittedKernel(kb, params.args, launch_grid(spec, TM, tn), (THREADS, 1, 1),
                         "matmul(wgmma)")


def _init_barriers(kb: KernelBuilder, tid: str, bars: str) -> None:
    """Thread 0: full[s] (count 1), empty[s] (count 2); the fence makes them visible to
    the TMA unit; the bar.sync to every thread."""
    p, skip = kb.reg("pred"), kb.new_label("inited")
    kb.emit(f"setp.ne.u32 {p}, {tid}, 0")
    kb.bra(skip, p)
    for s in range(STAGES):
        kb.emit(f"mbarrier.init.shared::cta.b64 [{bars}+{8 * s}], 1")
        kb.emit(f"mbarrier.init.shared::cta.b64 [{bars}+{8 * (STAGES + s)}], 2")
    kb.emit("fence.mbarrier_init.release.cluster")
    kb.label(skip)
    kb.emit("bar.sync 0")


class _Ring:
    """Stage index and phase bit of a walk over the k tiles (``kt`` counts tiles)."""

    def __init__(self, kb: KernelBuilder):
        self.kb = kb
        self.kt, self.s, self.ph = kb.regs("b32", 3)
        for r in (self.kt, self.s, self.ph):
            kb.emit(f"mov.u32 {r}, 0")

    def advance(self) -> None:
        kb, p = self.kb, self.kb.reg("pred")
        kb.emit(f"add.u32 {self.kt}, {self.kt}, 1")
        kb.emit(f"add.u32 {self.s}, {self.s}, 1")
        kb.emit(f"setp.eq.u32 {p}, {self.s}, {STAGES}")
        kb.emit(f"@{p} mov.u32 {self.s}, 0")
        kb.emit(f"@{p} xor.b32 {self.ph}, {self.ph}, 1")

    def wait(self, bar: str, parity: str) -> None:
        """Spin on ``try_wait.parity`` until the phase of ``bar`` with ``parity`` completed."""
        kb, q, top = self.kb, self.kb.reg("pred"), self.kb.new_label("wait")
        kb.label(top)
        kb.emit(f"mbarrier.try_wait.parity.shared::cta.b64 {q}, [{bar}], {parity}")
        kb.bra(top, q, negate=True)


def _producer(kb, ops, tn, tid, base, bars, ktiles, sizes, tmaps, coords, done) -> None:
    la, lb = ops
    a_bytes, b_bytes = sizes
    m0, n0, bz = coords
    kb.emit(f"setmaxnreg.dec.sync.aligned.u32 {PRODUCER_REGS}")
    p, leader, lane = kb.reg("pred"), kb.reg("pred"), kb.reg("b32")
    kb.emit(f"setp.ge.u32 {p}, {tid}, 32")
    kb.bra(done, p)
    kb.emit(f"elect.sync {lane}|{leader}, 0xffffffff")
    kb.bra(done, leader, negate=True)
    ring = _Ring(kb)
    top = kb.new_label("produce")
    kb.label(top)
    kb.emit(f"setp.ge.u32 {p}, {ring.kt}, {ktiles}")
    kb.bra(done, p)
    empty, full, par = kb.reg("b32"), kb.reg("b32"), kb.reg("b32")
    kb.emit(f"mad.lo.u32 {full}, {ring.s}, 8, {bars}")
    kb.emit(f"add.u32 {empty}, {full}, {8 * STAGES}")
    kb.emit(f"xor.b32 {par}, {ring.ph}, 1")
    ring.wait(empty, par)
    kb.emit(f"mbarrier.arrive.expect_tx.shared::cta.b64 _, [{full}], {a_bytes + b_bytes}")
    k0, dst = kb.reg("b32"), kb.reg("b32")
    kb.emit(f"mul.lo.u32 {k0}, {ring.kt}, {la.bk}")
    kb.emit(f"mad.lo.u32 {dst}, {ring.s}, {a_bytes}, {base}")
    _copy(kb, la, TM, tmaps[0], dst, m0, k0, bz, full)
    kb.emit(f"mad.lo.u32 {dst}, {ring.s}, {b_bytes}, {base}")
    kb.emit(f"add.u32 {dst}, {dst}, {STAGES * a_bytes}")
    _copy(kb, lb, tn, tmaps[1], dst, n0, k0, bz, full)
    ring.advance()
    kb.emit(f"bra.uni {top}")


def _copy(kb, op: TmaOperand, rows: int, tmap: str, dst: str, mn0: str, k0: str, bz: str,
          full: str) -> None:
    """The TMA copies of one operand tile (``rows`` mn rows from ``mn0``, k from ``k0``)."""
    rank = 3 if op.batched else 2
    for h in range(op.boxes(rows)):
        mn, to = mn0, dst
        if h:
            mn, to = kb.reg("b32"), kb.reg("b32")
            kb.emit(f"add.u32 {mn}, {mn0}, {h * MN_BOX}")
            kb.emit(f"add.u32 {to}, {dst}, {h * BOX_BYTES_MN}")
        coords = [k0, mn] if op.k_major else [mn, k0]
        coords += [bz] if op.batched else []
        kb.emit(f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile.mbarrier::complete_tx"
                f"::bytes [{to}], [{tmap}, {{{', '.join(coords)}}}], [{full}]")


def _consumer(kb, spec, ops, tn, tid, wg, base, bars, ktiles, sizes) -> list[str]:
    """The main loop of a consumer warpgroup; returns its accumulator registers."""
    la, lb = ops
    a_bytes, b_bytes = sizes
    kind = MMA_KINDS[la.op.dtype]
    kb.emit(f"setmaxnreg.inc.sync.aligned.u32 {CONSUMER_REGS}")
    accs = zero_accumulators(kb, tn // 2, kind.acc is DType.I32)
    t, lead, rows = kb.reg("b32"), kb.reg("pred"), kb.reg("b32")
    kb.emit(f"and.b32 {t}, {tid}, 127")
    kb.emit(f"setp.eq.u32 {lead}, {t}, 0")
    kb.emit(f"sub.u32 {rows}, {wg}, 1")   # this warpgroup's 64 rows: A bytes 8 KiB * (wg - 1)
    kb.emit(f"shl.b32 {rows}, {rows}, 13")
    hi = kb.reg("b32")
    kb.emit(f"mov.u32 {hi}, {DESC_HI}")
    ring = _Ring(kb)
    prev = kb.reg("b32")
    kb.emit(f"mov.u32 {prev}, 0")
    top, end = kb.new_label("consume"), kb.new_label("consumed")
    kb.label(top)
    p = kb.reg("pred")
    kb.emit(f"setp.ge.u32 {p}, {ring.kt}, {ktiles}")
    kb.bra(end, p)
    full = kb.reg("b32")
    kb.emit(f"mad.lo.u32 {full}, {ring.s}, 8, {bars}")
    ring.wait(full, ring.ph)
    lo_a, lo_b = kb.reg("b32"), kb.reg("b32")
    kb.emit(f"mad.lo.u32 {lo_a}, {ring.s}, {a_bytes}, {base}")
    kb.emit(f"add.u32 {lo_a}, {lo_a}, {rows}")
    kb.emit(f"mad.lo.u32 {lo_b}, {ring.s}, {b_bytes}, {base}")
    kb.emit(f"add.u32 {lo_b}, {lo_b}, {STAGES * a_bytes}")
    for lo, op in ((lo_a, la), (lo_b, lb)):
        kb.emit(f"shr.u32 {lo}, {lo}, 4")
        kb.emit(f"or.b32 {lo}, {lo}, {LBO_K if op.k_major else LBO_MN}")
    kb.emit("wgmma.fence.sync.aligned")
    d = ", ".join(accs)
    tail = kind.tail.format(ta=int(not la.k_major), tb=int(not lb.k_major))
    for ks in range(KSTEPS):
        da, db = kb.reg("b64"), kb.reg("b64")
        for desc, lo, op in ((da, lo_a, la), (db, lo_b, lb)):
            step = lo
            if ks:
                step = kb.reg("b32")
                kb.emit(f"add.u32 {step}, {lo}, {ks * (STEP_K if op.k_major else STEP_MN)}")
            kb.emit(f"mov.b64 {desc}, {{{step}, {hi}}}")
        kb.emit(f"wgmma.mma_async.sync.aligned.m64n{tn}k{kind.k}.{kind.types} {{{d}}}, {da}, "
                f"{db}, {tail}")
    kb.emit("wgmma.commit_group.sync.aligned")
    kb.emit("wgmma.wait_group.sync.aligned 1")
    rel, empty = kb.reg("pred"), kb.reg("b32")   # release the previous tile's stage
    kb.emit(f"setp.ne.u32 {rel}, {ring.kt}, 0")
    kb.emit(f"and.pred {rel}, {rel}, {lead}")
    kb.emit(f"mad.lo.u32 {empty}, {prev}, 8, {bars}")
    kb.emit(f"@{rel} mbarrier.arrive.shared::cta.b64 _, [{empty}+{8 * STAGES}]")
    kb.emit(f"mov.u32 {prev}, {ring.s}")
    ring.advance()
    kb.emit(f"bra.uni {top}")
    kb.label(end)
    kb.emit("wgmma.wait_group.sync.aligned 0")
    return accs


def _epilogue(cg, spec: ProductSpec, accs: list[str], tid: str, wg: str, m0: str, n0: str,
              m: str, n: str, tn: int) -> None:
    """Rows 16*warp + lane/4 (+8), columns 8j + 2(lane%4) (+1) of this warpgroup's 64 rows
    (ISA wgmma D fragment: value i at row +8*((i/2)%2), column 8*(i/4) + i%2: per warp the
    mma.sync C fragment of ``tn / 8`` n8 tiles, ``c_fragment_rows``)."""
    kb = cg.kb
    t, r0, c0, x = kb.regs("b32", 4)
    kb.emit(f"and.b32 {t}, {tid}, 127")
    kb.emit(f"shr.u32 {x}, {t}, 2")                 # 8*warp + lane/4 ...
    kb.emit(f"and.b32 {r0}, {x}, 7")                # lane/4
    kb.emit(f"shr.u32 {x}, {t}, 5")                 # warp
    kb.emit(f"mad.lo.u32 {r0}, {x}, 16, {r0}")
    kb.emit(f"sub.u32 {x}, {wg}, 1")
    kb.emit(f"mad.lo.u32 {r0}, {x}, 64, {r0}")
    kb.emit(f"add.u32 {r0}, {r0}, {m0}")
    kb.emit(f"and.b32 {c0}, {t}, 3")
    kb.emit(f"mad.lo.u32 {c0}, {c0}, 2, {n0}")
    rows, cols = c_fragment_rows(kb, r0, 1), c_fragment_cols(kb, c0, tn // 8)

    def acc_at(i: int, j: int) -> str:
        _, ni, c = c_element(i, j)
        return accs[4 * ni + c]

    emit_epilogue(cg, spec.epilogue, spec.emap, spec.acc, rows, cols, m, n, acc_at)
