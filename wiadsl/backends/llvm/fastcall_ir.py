"""The LLVM IR of the native call helper (fastcall.py describes its protocol)."""

from __future__ import annotations

from llvmlite import ir

from .fastcall import C_CONTIGUOUS_ALIGNED, HEADER_WORDS, MISS, UNDELIVERED, ObjectLayout
from .types import I32, I64, PTR


def call_ir(mod: ir.Module, name: str, layout: ObjectLayout) -> ir.Function:
    """``ptr @name(ptr %self, ptr %args, i64 %nargs)`` into ``mod``: a METH_FASTCALL
    function of ``(slots, args, outs)`` returning the code as a Python int."""
    return _CallBuilder(mod, name, layout).fn


def _c_api(mod: ir.Module) -> dict[str, ir.Function]:
    types = {"wia.py.long_from_long": ir.FunctionType(PTR, [I64]),
             "wia.py.save_thread": ir.FunctionType(PTR, []),
             "wia.py.restore_thread": ir.FunctionType(ir.VoidType(), [PTR])}
    return {n: ir.Function(mod, t, n) for n, t in types.items()}


class _CallBuilder:
    def __init__(self, mod: ir.Module, name: str, layout: ObjectLayout):
        self.layout = layout
        self.api = _c_api(mod)
        self.fn = ir.Function(mod, ir.FunctionType(PTR, [PTR, PTR, I64]), name)
        self.fn.linkage = "external"
        _, vector, nargs = self.fn.args
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self.miss = self._returning(MISS, "miss")
        self.undelivered = self._returning(UNDELIVERED, "undelivered")
        b = self.b
        self.expect(b.icmp_signed("==", nargs, ir.Constant(I64, 3)))
        slots_object, self.args, self.outs = (
            b.load(b.gep(vector, [ir.Constant(I64, k)], source_etype=PTR), typ=PTR) for k in range(3))
        self.header = b.inttoptr(self.field(slots_object, layout.ctypes_buffer), PTR)
        self.slots = self.gep(self.header, self.word(self.header, 4))
        n_in, n_out = self.word(self.header, 1), self.word(self.header, 2)
        self.expect(b.icmp_signed("==", self.field(self.args, layout.tuple_size), n_in))
        self.expect(b.icmp_signed("==", self.field(self.outs, layout.tuple_size), n_out))
        p = self.loop(n_in, ir.Constant(I64, HEADER_WORDS), self.input)
        self.loop(n_out, p, self.output)
        entry = b.inttoptr(self.word(self.header, 0), ir.FunctionType(I32, [PTR]).as_pointer())
        state = b.call(self.api["wia.py.save_thread"], [])  # the GIL, as ctypes releases it
        rc = b.call(entry, [self.slots])
        b.call(self.api["wia.py.restore_thread"], [state])
        ran = b.append_basic_block("ran")
        fail = b.append_basic_block("failed")
        b.cbranch(b.icmp_signed("==", rc, ir.Constant(I32, 0)), ran, fail)
        b.position_at_end(fail)
        b.ret(b.call(self.api["wia.py.long_from_long"], [b.sext(rc, I64)]))
        b.position_at_end(ran)
        self.loop(n_out, p, self.delivered)
        b.ret(b.call(self.api["wia.py.long_from_long"], [ir.Constant(I64, 0)]))

    # ---------------------------------------------------------------- helpers
    def _returning(self, code: int, label: str) -> ir.Block:
        block = self.fn.append_basic_block(label)
        b = ir.IRBuilder(block)
        b.ret(b.call(self.api["wia.py.long_from_long"], [ir.Constant(I64, code)]))
        return block

    def gep(self, base: ir.Value, index: ir.Value) -> ir.Value:
        return self.b.gep(base, [index], source_etype=I64)

    def word(self, base: ir.Value, index: int | ir.Value) -> ir.Value:
        i = ir.Constant(I64, index) if isinstance(index, int) else index
        return self.b.load(self.gep(base, i), typ=I64)

    def field(self, obj: ir.Value, offset: int, typ: ir.Type = I64) -> ir.Value:
        at = self.b.gep(obj, [ir.Constant(I64, offset)], source_etype=ir.IntType(8))
        return self.b.load(at, typ=typ)

    def expect(self, ok: ir.Value) -> None:
        """Go on when ``ok``, else answer MISS."""
        go = self.b.append_basic_block("ok")
        self.b.cbranch(ok, go, self.miss)
        self.b.position_at_end(go)

    def loop(self, count: ir.Value, start: ir.Value, body) -> ir.Value:
        """``for i in range(count)``: ``p = body(i, p)`` from ``p = start``; the final p."""
        b = self.b
        pre = b.block
        head = b.append_basic_block("loop")
        after = b.append_basic_block("after")
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(I64)
        p = b.phi(I64)
        i.add_incoming(ir.Constant(I64, 0), pre)
        p.add_incoming(start, pre)
        inside = b.append_basic_block("body")
        b.cbranch(b.icmp_signed("<", i, count), inside, after)
        b.position_at_end(inside)
        p_next = body(i, p)
        i.add_incoming(b.add(i, ir.Constant(I64, 1)), b.block)
        p.add_incoming(p_next, b.block)
        b.branch(head)
        b.position_at_end(after)
        return p

    def extents_match(self, have: ir.Value, p: ir.Value, rank: ir.Value, fail: ir.Block) -> None:
        """Each ``have[k]`` equals header word ``p + k`` for k < rank, else to ``fail``."""
        b = self.b

        def each(k: ir.Value, q: ir.Value) -> ir.Value:
            same = b.icmp_signed("==", self.word(have, k), self.word(self.header, b.add(p, k)))
            go = b.append_basic_block("same")
            b.cbranch(same, go, fail)
            b.position_at_end(go)
            return q
        self.loop(rank, ir.Constant(I64, 0), each)

    # ------------------------------------------------------------ the records
    def item(self, tup: ir.Value, i: ir.Value) -> ir.Value:
        items = self.b.gep(tup, [ir.Constant(I64, self.layout.tuple_items)], source_etype=ir.IntType(8))
        return self.b.load(self.b.gep(items, [i], source_etype=PTR), typ=PTR)

    def input(self, i: ir.Value, p: ir.Value) -> ir.Value:
        b, lay = self.b, self.layout
        obj = self.item(self.args, i)
        one = ir.Constant(I64, 1)
        rank = self.word(self.header, b.add(p, ir.Constant(I64, 2)))
        self.expect(b.icmp_signed("==", self.field(obj, lay.ob_type), self.word(self.header, 3)))
        self.expect(b.icmp_signed("==", self.field(obj, lay.descr), self.word(self.header, b.add(p, one))))
        self.expect(b.icmp_signed("==", b.sext(self.field(obj, lay.nd, I32), I64), rank))
        flags = b.and_(self.field(obj, lay.flags, I32), ir.Constant(I32, C_CONTIGUOUS_ALIGNED))
        self.expect(b.icmp_signed("==", flags, ir.Constant(I32, C_CONTIGUOUS_ALIGNED)))
        dims = b.inttoptr(self.field(obj, lay.dims), PTR)
        first = b.add(p, ir.Constant(I64, 3))
        self.extents_match(dims, first, rank, self.miss)
        b.store(self.field(obj, lay.data), self.gep(self.slots, self.word(self.header, p)))
        return b.add(first, rank)

    def output(self, j: ir.Value, p: ir.Value) -> ir.Value:
        b = self.b
        obj = self.item(self.outs, j)
        b.store(self.field(obj, self.layout.data), self.gep(self.slots, self.word(self.header, p)))
        rank = self.word(self.header, b.add(p, ir.Constant(I64, 2)))
        return b.add(b.add(p, ir.Constant(I64, 3)), rank)

    def delivered(self, j: ir.Value, p: ir.Value) -> ir.Value:
        """The result is in its buffer (copied out or computed there) with its extents."""
        b = self.b
        dst = self.word(self.slots, self.word(self.header, p))
        k = self.word(self.header, b.add(p, ir.Constant(I64, 1)))
        go = b.append_basic_block("in_buffer")
        b.cbranch(b.icmp_signed("==", self.word(self.slots, k), dst), go, self.undelivered)
        b.position_at_end(go)
        rank = self.word(self.header, b.add(p, ir.Constant(I64, 2)))
        first = b.add(p, ir.Constant(I64, 3))
        self.extents_match(self.gep(self.slots, b.add(k, ir.Constant(I64, 1))), first, rank,
                           self.undelivered)
        return b.add(first, rank)


__all__ = ["call_ir"]
