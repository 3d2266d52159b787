"""Data derived once from a kernel's frozen inputs and kept across calls: a gemm's B
packed into the micro-kernel's panels (gemm.py's and qgemm.py's ``prepack``), as
ONNX Runtime packs a model's weights when its session is created.

A kernel compiled with frozen inputs (the ``frozen`` option: the positions of inputs
whose contents never change between calls, such as the weights an imported model
binds) gets a *state*: an array of pointer cells, one per product whose B is a
frozen input read the same way on every call (codegen.py ``frozen_operand``),
owned by the kernel's code (backend.py ``EntryState``: one per kernel instance and
compiled code, shared by the shapes that code serves; two models of the same
architecture never share one) and reached through the arena's fourth word
(runtime.py's entry ABI). The first call that
finds its cell empty packs B into a fresh 64-byte aligned buffer and publishes it
with a compare-and-swap; a thread that loses the race frees its copy and uses the
winner's. The buffers live as long as the state (freed with it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from llvmlite import ir

from ...dtypes import DType
from .runtime import ARENA_STATE, _declare
from .types import I64, PTR, itemsize

if TYPE_CHECKING:
    from .codegen import FunctionEmitter


def _cell(e: FunctionEmitter) -> ir.Value:
    """A new state cell of this function's, counted from the one its arena's state word
    points at (an i64 word holding a pointer, 0 while empty)."""
    slot = e.cells
    e.cells += 1
    state = e.b.load(e.b.gep(e.arena, [ir.Constant(I64, ARENA_STATE)], source_etype=I64), typ=I64)
    return e.b.gep(e.b.inttoptr(state, PTR), [ir.Constant(I64, slot)], source_etype=I64)


def prepacked_b(e: FunctionEmitter, dtype: DType, b_ptr: ir.Value, n: ir.Value, k: ir.Value,
                ldb: ir.Value) -> ir.Value:
    """The float gemm's B packed (``gemm_prepack``'s layout, a library helper)."""
    from .library_ir import declare

    prepack = declare(e.mod.ll, e.mod.libraries, "gemm_prepack", dtype)
    return once(e, _panel_bytes(e, dtype, n, k), lambda out: e.b.call(prepack, [b_ptr, out, n, k, ldb]))


def prepacked_conv_weight(e: FunctionEmitter, dtype: DType, w_ptr: ir.Value, o: ir.Value,
                          k: ir.Value) -> ir.Value:
    """A convolution's O x K weight as W^T's panels (conv_rows.py's ``prepack``): the
    gemm's B layout with the O channels as its columns."""
    from .library_ir import declare

    prepack = declare(e.mod.ll, e.mod.libraries, "conv_rows_prepack", dtype)
    return once(e, _panel_bytes(e, dtype, o, k), lambda out: e.b.call(prepack, [w_ptr, out, o, k, k]))


def prepacked_winograd_weight(e: FunctionEmitter, dtype: DType, tile: int, w_ptr: ir.Value,
                              o: ir.Value, c: ir.Value) -> ir.Value:
    """A 3x3 weight's Winograd F(tile x tile, 3x3) transform as (tile + 2)^2 matrices
    U[e]^T (C x O) in panels, one after the other (conv_winograd.py's ``prepack``)."""
    from .library_ir import declare

    prepack = declare(e.mod.ll, e.mod.libraries, f"conv_wino{tile}_prepack", dtype)
    products = ir.Constant(I64, (tile + 2) ** 2)
    return once(e, _panel_bytes(e, dtype, e.b.mul(o, products), c),
                lambda out: e.b.call(prepack, [w_ptr, out, o, c, c]))


def _panel_bytes(e: FunctionEmitter, dtype: DType, n: ir.Value, k: ir.Value) -> ir.Value:
    """The bytes of ``k`` rows of ``n`` columns in NR-wide panels (the last one padded)."""
    from .gemm import GemmBuilder

    nr = GemmBuilder(e.mod.ll, dtype).nr
    panels = e.b.mul(e.b.sdiv(e.b.add(n, ir.Constant(I64, nr - 1)), ir.Constant(I64, nr)),
                     ir.Constant(I64, nr))
    return e.b.mul(e.b.mul(panels, k), ir.Constant(I64, itemsize(dtype)))


def prepacked_qb(e: FunctionEmitter, b_ptr: ir.Value, n: ir.Value, k: ir.Value,
                 ldb: ir.Value) -> ir.Value:
    """The int8 gemm's B packed (its builder's ``prepack``, a library helper)."""
    from .library_ir import declare_qgemm
    from .qgemm import qgemm_builder

    prepack = declare_qgemm(e.mod.ll, e.mod.libraries, "qgemm_prepack")
    return once(e, qgemm_builder(e.mod.ll).packed_bytes(e.b, n, k),
                lambda out: e.b.call(prepack, [b_ptr, out, n, k, ldb]))


def once(e: FunctionEmitter, nbytes: ir.Value, fill: Callable[[ir.Value], object]) -> ir.Value:
    """A buffer of ``nbytes`` that ``fill`` writes, made by the first call that finds
    its state cell empty and kept in the cell for every later call (a failed
    allocation returns its error: the call raises, the next one tries again)."""
    cell = _cell(e)
    b = e.b
    have = b.load_atomic(cell, "acquire", 8, typ=I64)
    before = b.block
    pack_bb = b.append_basic_block("prepack")
    done_bb = b.append_basic_block("prepacked")
    b.cbranch(b.icmp_signed("!=", have, ir.Constant(I64, 0)), done_bb, pack_bb)
    b.position_at_end(pack_bb)
    size = b.and_(b.add(nbytes, ir.Constant(I64, 127)), ir.Constant(I64, -64))  # 64 | size > 0
    fresh = b.call(_declare(e.mod.ll, "aligned_alloc", PTR, [I64, I64]),
                   [ir.Constant(I64, 64), size])
    e.fail_unless(b.icmp_unsigned("!=", fresh, ir.Constant(PTR, None)),
                  e.mod.code_for("out of memory packing a weight that never changes (frozen)"))
    fill(fresh)
    fresh_word = b.ptrtoint(fresh, I64)
    swapped = b.cmpxchg(cell, ir.Constant(I64, 0), fresh_word, "acq_rel", "acquire")
    won = b.extract_value(swapped, 1)
    with b.if_then(b.not_(won)):  # another thread published first: use its copy
        b.call(_declare(e.mod.ll, "free", ir.VoidType(), [PTR]), [fresh])
    chosen = b.select(won, fresh_word, b.extract_value(swapped, 0))
    after_pack = b.block
    b.branch(done_bb)
    b.position_at_end(done_bb)
    word = b.phi(I64)
    word.add_incoming(have, before)
    word.add_incoming(chosen, after_pack)
    return b.inttoptr(word, PTR)
