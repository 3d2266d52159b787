"""The tensor-core GEMM's vectorized epilogue: accumulators staged through shared memory,
the fused expression evaluated on runs of consecutive columns, 128-bit stores.

Used when the GEMM columns are one output axis along which every output is contiguous
(a matmul) and every output is f16, bf16, f32 or i32; otherwise the kernel stores from
registers (``gemm_epilogue.emit_epilogue``: conv outputs, i8/bool outputs...).

Per pass (1, or one per warp row when the f32 block tile is larger than the pipeline's
shared memory): the warps of the pass write their accumulators to an f32/s32 staging
tile ``[rows][bn]``, ``bar.sync``, then every thread takes ``V`` consecutive columns of
one row (``V`` = 16 bytes of the narrowest output: 8 for f16/bf16, 4 for f32/i32),
loads the run of each input that is contiguous along the columns (bias, residual: one
or two ``ld.global.v4`` when whole and aligned, else per element), evaluates each
output expression (``ExprCodegen``: bias, activation, residual,
casts...) per element, and stores each output's run with ``st.global.v4.b32`` when the
run is inside the matrix and 16-byte aligned (checked at run time: any N, any view
offset), else element by element. f16/bf16 results are packed with one
``cvt.rn.{f16,bf16}x2.f32`` per pair; an output that is the product itself is
converted once from the f32 accumulator (no f16 -> f32 -> f16 round trip).

Invariants:
- A ``bar.sync`` precedes the first staging write (other warps may still be reading
  the last pipeline stage there), separates each pass's writes from its reads, and the
  next pass's writes from this pass's reads.
- Staging chunk ``c`` of row ``r`` is stored at chunk ``c ^ ((c >> 3) & 1) ^ ((r & 3) << 1)``:
  the fragment writes (8-byte, rows g..g+3 of a half warp, two chunks each) and the
  run reads (each 8-thread phase reading one row's chunks ``2i`` or ``2i+1``, or 8
  consecutive chunks) each hit 8 distinct chunk slots: no bank conflicts.
- Every element is evaluated and stored only inside the matrix (``row < M``,
  ``col < N``); registers defined under those guards are copied to registers set
  before them, so nothing undefined is read after a skipped element.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ....dtypes import DType
from ..codegen import ExprCodegen, IndexGroup
from ..expr import Acc, Load, walk
from ..isa import float_literal, info
from .gemm_epilogue import is_direct
from .packed import PACKED

if TYPE_CHECKING:
    from .matmul import ProductSpec
    from .mma import Warp
    from .mma_config import MmaConfig

#: output dtypes the vector epilogue stores (bytes each)
VEC_DTYPES = {DType.F16: 2, DType.BF16: 2, DType.F32: 4, DType.I32: 4}


def vector_epilogue_ok(spec: ProductSpec) -> bool:
    """Columns are one axis, every output is contiguous along it and of a vector dtype."""
    cols = spec.emap.col_axes
    return len(cols) == 1 and all(
        t.dtype in VEC_DTYPES and t.strides[cols[0]] == 1 for _, t in spec.epilogue.outputs)


def _staging_chunk(kb, chunk: str, y: str) -> str:
    """The swizzled chunk of logical ``chunk`` in a row whose ``(r & 3) << 1`` is ``y``."""
    z, out = kb.reg("b32"), kb.reg("b32")
    kb.emit(f"bfe.u32 {z}, {chunk}, 3, 1")
    kb.emit(f"xor.b32 {out}, {chunk}, {z}")
    kb.emit(f"xor.b32 {out}, {out}, {y}")
    return out


def staged_epilogue(cg: ExprCodegen, spec: ProductSpec, cfg: MmaConfig, w: Warp, base: str,
                    accs: list[str], m: str, n: str) -> None:
    kb = cg.kb
    vec = 16 // min(VEC_DTYPES[t.dtype] for _, t in spec.epilogue.outputs)
    passes = 1 if cfg.bm * cfg.bn * 4 <= cfg.smem_bytes else cfg.warps_m
    assert cfg.warps_m % passes == 0 and cfg.bm * cfg.bn * 4 // passes <= cfg.smem_bytes
    rows = cfg.bm // passes
    pitch = cfg.bn * 4
    per_row = cfg.bn // vec
    row_step = cfg.threads // per_row
    assert row_step % 4 == 0 and rows % row_step == 0
    views = list(range(len(spec.epilogue.inputs))) + [-q - 1 for q in range(len(spec.epilogue.outputs))]
    for a in views:  # batch offsets: before any loop or guard
        cg.partial(a, 0)
    write = _fragment_writes(kb, cfg, w, base, pitch, passes == 1)
    reads = _run_reads(kb, cfg, w, base, pitch, vec)
    kb.emit("bar.sync 0")
    if passes == 1:
        write(accs)
        kb.emit("bar.sync 0")
        _store_runs(cg, spec, cfg, w, reads, rows, "0", vec, m, n, pitch, row_step)
        return
    # one warp row per pass, as a loop: write (that warp row only), sync, store, sync
    p, row0, mine = kb.reg("b32"), kb.reg("b32"), kb.reg("pred")
    top, skip, done = kb.new_label("pass"), kb.new_label("not_my_rows"), kb.new_label("pass_end")
    kb.emit(f"mov.u32 {p}, 0")
    kb.label(top)
    kb.emit(f"setp.ne.u32 {mine}, {w.wm}, {p}")
    kb.bra(skip, mine)
    write(accs)
    kb.label(skip)
    kb.emit("bar.sync 0")
    kb.emit(f"mul.lo.u32 {row0}, {p}, {rows}")
    _store_runs(cg, spec, cfg, w, reads, rows, row0, vec, m, n, pitch, row_step)
    kb.emit(f"add.u32 {p}, {p}, 1")
    last = kb.reg("pred")
    kb.emit(f"setp.ge.u32 {last}, {p}, {passes}")
    kb.bra(done, last)
    kb.emit("bar.sync 0")
    kb.emit(f"bra.uni {top}")
    kb.label(done)


def _fragment_writes(kb, cfg: MmaConfig, w: Warp, base: str, pitch: int, all_rows: bool):
    """The staging writes of this thread's accumulators (8 bytes per C row pair): at
    row ``wm * wtm + 16mi + 8h + g`` when the staging tile holds the whole block tile
    (``all_rows``), else at ``16mi + 8h + g`` (one warp row per pass)."""
    g, t, th, y, rowoff = kb.regs("b32", 5)
    kb.emit(f"shr.u32 {g}, {w.lane}, 2")
    kb.emit(f"and.b32 {t}, {w.lane}, 3")
    kb.emit(f"shr.u32 {th}, {t}, 1")
    kb.emit(f"and.b32 {y}, {g}, 3")
    kb.emit(f"shl.b32 {y}, {y}, 1")
    kb.emit(f"mad.lo.u32 {rowoff}, {g}, {pitch}, {base}")
    if all_rows:
        kb.emit(f"mad.lo.u32 {rowoff}, {w.wm}, {cfg.wtm * pitch}, {rowoff}")
    half = kb.reg("b32")
    kb.emit(f"and.b32 {half}, {t}, 1")
    kb.emit(f"mad.lo.u32 {rowoff}, {half}, 8, {rowoff}")
    cols = []
    for ni in range(cfg.ni):  # chunk wn*wtn/4 + 2ni + t/2 (8-byte half t&1)
        c, addr = kb.reg("b32"), kb.reg("b32")
        kb.emit(f"mad.lo.u32 {c}, {w.wn}, {cfg.wtn // 4}, {th}")
        kb.emit(f"add.u32 {c}, {c}, {2 * ni}")
        kb.emit(f"mad.lo.u32 {addr}, {_staging_chunk(kb, c, y)}, 16, {rowoff}")
        cols.append(addr)

    def write(accs: list[str]) -> None:
        from .mma import acc_index

        st = "b32" if cfg.op.integer else "f32"
        for mi in range(cfg.mi):
            for h in range(2):
                imm = (16 * mi + 8 * h) * pitch
                for ni in range(cfg.ni):
                    c0 = acc_index(cfg, mi, ni, 2 * h)
                    kb.emit(f"st.shared.v2.{st} [{cols[ni]}+{imm}], {{{accs[c0]}, {accs[c0 + 1]}}}")
    return write


def _run_reads(kb, cfg: MmaConfig, w: Warp, base: str, pitch: int, vec: int) -> list[str]:
    """Per 16-byte chunk of this thread's run: its staging address in row 0 of the pass."""
    per_row = cfg.bn // vec
    col, r, y, rowoff = kb.regs("b32", 4)
    kb.emit(f"and.b32 {col}, {w.tid}, {per_row - 1}")
    kb.emit(f"shr.u32 {r}, {w.tid}, {per_row.bit_length() - 1}")
    kb.emit(f"and.b32 {y}, {r}, 3")
    kb.emit(f"shl.b32 {y}, {y}, 1")
    kb.emit(f"mad.lo.u32 {rowoff}, {r}, {pitch}, {base}")
    out = []
    for q in range(vec // 4):
        c, addr = kb.reg("b32"), kb.reg("b32")
        kb.emit(f"mad.lo.u32 {c}, {col}, {vec // 4}, {q}")
        kb.emit(f"mad.lo.u32 {addr}, {_staging_chunk(kb, c, y)}, 16, {rowoff}")
        out.append(addr)
    return out


def _store_runs(cg: ExprCodegen, spec: ProductSpec, cfg: MmaConfig, w: Warp, reads: list[str],
                rows: int, row0: str, vec: int, m: str, n: str, pitch: int, row_step: int) -> None:
    """Rows ``row0 .. row0+rows-1`` of the block tile from the staging tile, ``row_step``
    rows per step of a loop (each thread one run of ``vec`` columns per step)."""
    kb = cg.kb
    per_row = cfg.bn // vec
    lrow, col = kb.reg("b32"), kb.reg("b32")
    kb.emit(f"shr.u32 {lrow}, {w.tid}, {per_row.bit_length() - 1}")
    kb.emit(f"and.b32 {col}, {w.tid}, {per_row - 1}")
    kb.emit(f"mad.lo.u32 {col}, {col}, {vec}, {w.n0}")
    kb.emit(f"add.u32 {lrow}, {lrow}, {row0}")
    kb.emit(f"add.u32 {lrow}, {lrow}, {w.m0}")
    it, grow = kb.reg("b32"), kb.reg("b32")
    top, done = kb.new_label("runs"), kb.new_label("runs_end")
    kb.emit(f"mov.u32 {it}, 0")
    kb.label(top)
    p = kb.reg("pred")
    kb.emit(f"setp.ge.u32 {p}, {it}, {rows}")
    kb.bra(done, p)
    kb.emit(f"add.u32 {grow}, {lrow}, {it}")
    acc_t = "b32" if cfg.op.integer else "f32"
    staged = kb.regs(acc_t, vec)
    sbase = kb.reg("b32")
    kb.emit(f"mul.lo.u32 {sbase}, {it}, {pitch}")
    for q, addr in enumerate(reads):
        a = kb.reg("b32")
        kb.emit(f"add.u32 {a}, {addr}, {sbase}")
        kb.emit(f"ld.shared.v4.{acc_t} {{{', '.join(staged[4 * q:4 * q + 4])}}}, [{a}]")
    _run(cg, spec, staged, DType.I32 if cfg.op.integer else DType.F32, grow, col, vec, m, n)
    kb.emit(f"add.u32 {it}, {it}, {row_step}")
    kb.emit(f"bra.uni {top}")
    kb.label(done)


def _run(cg: ExprCodegen, spec: ProductSpec, staged: list[str], acc_dtype: DType, grow: str,
         col: str, vec: int, m: str, n: str) -> None:
    """Evaluate and store every output at (grow, col .. col+vec-1) from the accumulators
    ``staged`` (of ``acc_dtype``)."""
    kb, epi, emap = cg.kb, spec.epilogue, spec.emap
    views = list(range(len(epi.inputs))) + [-q - 1 for q in range(len(epi.outputs))]
    cg.set_group(1, IndexGroup(emap.row_axes, emap.row_dims, grow))
    for a in views:
        cg.partial(a, 1)
    row_ok = kb.reg("pred")
    kb.emit(f"setp.lt.u32 {row_ok}, {grow}, {m}")
    cols, oks = [col], []
    for j in range(vec):
        if j:
            cols.append(kb.reg("b32"))
            kb.emit(f"add.u32 {cols[j]}, {col}, {j}")
        oks.append(kb.reg("pred"))
        kb.emit(f"setp.lt.u32 {oks[j]}, {cols[j]}, {n}")
        kb.emit(f"and.pred {oks[j]}, {oks[j]}, {row_ok}")
    full = kb.reg("pred")  # the whole run is inside the matrix
    kb.emit(f"and.pred {full}, {oks[-1]}, {row_ok}")
    cg.set_group(2, IndexGroup(emap.col_axes, emap.col_dims, col))
    for a in views:
        cg.partial(a, 2)
    addrs = [cg.address(-q - 1) for q in range(len(epi.outputs))]
    loaded = _vector_inputs(cg, spec, vec, full, oks)
    acc_nodes = [x for x in walk([nd for nd, _ in epi.outputs]) if isinstance(x, Acc)]
    direct = [is_direct(node, t.dtype, acc_dtype) for node, t in epi.outputs]
    base, override = dict(cg.memo), cg.load_override
    outs = [[kb.reg(info(t.dtype).reg) for _ in range(vec)] for _, t in epi.outputs]
    for j in range(vec):
        if j:
            cg.set_group(2, IndexGroup(emap.col_axes, emap.col_dims, cols[j]))
            for a in views:
                cg.partial(a, 2)
        for (_, t), regs in zip(epi.outputs, outs, strict=True):
            zero = float_literal(0.0, DType.F32) if t.dtype.is_float else "0"
            kb.emit(f"mov.{info(t.dtype).itype} {regs[j]}, {zero}")
        skip = kb.new_label("edge")
        kb.bra(skip, oks[j], negate=True)
        cg.memo = dict(base)
        cg.load_override = {arg: regs[j] for arg, regs in loaded.items()}
        if not all(direct):
            for acc in acc_nodes:
                cg.memo[id(acc)] = cg.ops.cast(staged[j], acc_dtype, acc.dtype)
        for (node, t), regs, d in zip(epi.outputs, outs, direct, strict=True):
            v = staged[j] if d else cg.value(node)
            kb.emit(f"mov.{info(t.dtype).itype} {regs[j]}, {v}")
        kb.label(skip)
    cg.memo, cg.load_override = dict(base), override
    for (_, t), regs, addr in zip(epi.outputs, outs, addrs, strict=True):
        _store(cg, t.dtype, regs, addr, full, oks)


def _vector_inputs(cg: ExprCodegen, spec: ProductSpec, vec: int, full: str,
                   oks: list[str]) -> dict[int, list[str]]:
    """The run's values of every input the epilogue reads that is contiguous along the
    columns (a bias, a residual): 16-byte loads when the run is whole and aligned, else
    element by element (0 outside the matrix). Input index -> ``vec`` compute registers."""
    kb, epi = cg.kb, spec.epilogue
    axis = spec.emap.col_axes[0]
    used = sorted({x.arg for x in walk([nd for nd, _ in epi.outputs]) if isinstance(x, Load)})
    out: dict[int, list[str]] = {}
    for arg in used:
        t = epi.inputs[arg]
        size = VEC_DTYPES.get(t.dtype, 0)
        if t.guards or not size or t.strides[axis] != 1 or vec * size % 16:
            continue
        i = info(t.dtype)
        regs = [kb.reg(i.reg) for _ in range(vec)]
        zero = float_literal(0.0, DType.F32) if t.dtype.is_float else "0"
        for r in regs:
            kb.emit(f"mov.{i.itype} {r}, {zero}")
        addr = cg.address(arg)
        low, ok = kb.reg("b64"), kb.reg("pred")
        kb.emit(f"and.b64 {low}, {addr}, 15")
        kb.emit(f"setp.eq.and.u64 {ok}, {low}, 0, {full}")
        scalar, done = kb.new_label("in_scalar"), kb.new_label("in_done")
        kb.bra(scalar, ok, negate=True)
        words = kb.regs("b32", vec * size // 4) if size == 2 else regs
        for s in range(len(words) // 4):
            src = f"[{addr}+{16 * s}]" if s else f"[{addr}]"
            kb.emit(f"ld.global.v4.{'b32' if size == 2 else i.mem} "
                    f"{{{', '.join(words[4 * s:4 * s + 4])}}}, {src}")
        if size == 2:   # two halves per word, the first element in the low half
            for w, word in enumerate(words):
                lo, hi = kb.reg("b16"), kb.reg("b16")
                kb.emit(f"mov.b32 {{{lo}, {hi}}}, {word}")
                kb.emit(f"mov.f32 {regs[2 * w]}, {cg.widen16(lo, t.dtype)}")
                kb.emit(f"mov.f32 {regs[2 * w + 1]}, {cg.widen16(hi, t.dtype)}")
        kb.emit(f"bra.uni {done}")
        kb.label(scalar)
        for j, r in enumerate(regs):
            skip = kb.new_label("edge")
            kb.bra(skip, oks[j], negate=True)
            kb.emit(f"mov.{i.itype} {r}, {cg.load(f'{addr}+{j * size}' if j else addr, t.dtype)}")
            kb.label(skip)
        kb.label(done)
        out[arg] = regs
    return out


def _store(cg: ExprCodegen, dtype: DType, regs: list[str], addr: str, full: str,
           oks: list[str]) -> None:
    """One output's run: 16-byte stores when whole and aligned, else per element."""
    kb, size = cg.kb, VEC_DTYPES[dtype]
    low, vec_ok = kb.reg("b64"), kb.reg("pred")
    kb.emit(f"and.b64 {low}, {addr}, 15")
    kb.emit(f"setp.eq.and.u64 {vec_ok}, {low}, 0, {full}")
    scalar, done = kb.new_label("run_scalar"), kb.new_label("run_done")
    kb.bra(scalar, vec_ok, negate=True)
    words = regs
    if dtype in PACKED:
        words = kb.regs("b32", len(regs) // 2)
        for i, wd in enumerate(words):
            kb.emit(f"cvt.rn.{PACKED[dtype]}.f32 {wd}, {regs[2 * i + 1]}, {regs[2 * i]}")
    st = "f32" if dtype is DType.F32 else "b32"
    for s in range(len(words) // 4):
        dst = f"[{addr}+{16 * s}]" if s else f"[{addr}]"
        kb.emit(f"st.global.v4.{st} {dst}, {{{', '.join(words[4 * s:4 * s + 4])}}}")
    kb.emit(f"bra.uni {done}")
    kb.label(scalar)
    for j, (r, ok) in enumerate(zip(regs, oks, strict=True)):
        skip = kb.new_label("edge")
        kb.bra(skip, ok, negate=True)
        cg.store(f"{addr}+{j * size}" if j else addr, r, dtype)
        kb.label(skip)
    kb.label(done)
