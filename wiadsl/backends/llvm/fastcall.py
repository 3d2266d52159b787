"""The steady-state call in native code: check the arguments, pass their data
pointers, call the entry, confirm the results are in the caller's buffers.

Before this (issue 21), a repeated call of a 4-element add took ~10 µs against
NumPy's ~1 µs, nearly all of it Python: a ``ctypes.c_char.from_buffer`` per array
to get its data pointer (~0.5 µs each), the dtype/shape/flags checks, the slot
writes, and the ctypes call itself (~1.3 µs here). Now Python makes the output
arrays (``np.empty``) and calls one builtin function, ``wia_call(slots, args,
outs)``: native code with CPython's ``METH_FASTCALL`` convention, made into a
builtin by ``PyCFunction_NewEx`` (a Python-to-C call as cheap as ``len``'s). It
reads each array's fields from the object (the way NumPy's own C macros
``PyArray_DATA`` / ``PyArray_DIMS`` do) and checks what ``Native.try_run`` checks
in Python: exactly an ndarray (the type object), exactly the dtype (the descriptor
object), the rank and every extent, C-contiguous and aligned. Anything else
answers ``MISS`` before any native work, and the caller goes the checking way.
Around the entry it releases the GIL (``PyEval_SaveThread``), as ctypes does.

Field offsets are not compiled into wiadsl: ``probe()`` derives them from this
interpreter (``object.__basicsize__``, ``tuple.__basicsize__``) and NumPy's
documented struct order, then verifies every one against live objects read
through ctypes. If anything disagrees (another interpreter build, a future
NumPy), there is no fast call and every call takes ``Native.try_run``.

``slots`` is a ctypes i64 array (its buffer found at ``ctypes_buffer``); its words:
    0 entry address          1 inputs n          2 outputs m
    3 ndarray type address   4 word offset of the entry's argument slots
    then per input:  slot, descriptor address, rank r, r extents
    then per output: copy-out slot, first result slot, rank r, r extents
    then the entry's argument slots
Process-local addresses (type objects, descriptors) live only in these words and
the C-API functions are bound by name at load (``C_API``), never in code, so the
helper's object can come from the disk cache.
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import astuple, dataclass

import numpy as np
from llvmlite import ir

from .types import I32, I64, PTR

MISS = -1  #: an argument is not what the entry was made for: nothing ran
UNDELIVERED = -2  #: it ran, but a result is not in its buffer (a shape that varies)
HEADER_WORDS = 5
C_CONTIGUOUS_ALIGNED = 0x0001 | 0x0100  # NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED

#: The CPython functions the helper calls, by the symbol it declares for each.
C_API = {"wia.py.long_from_long": "PyLong_FromLong", "wia.py.save_thread": "PyEval_SaveThread",
         "wia.py.restore_thread": "PyEval_RestoreThread"}
METH_FASTCALL = 0x0080


@dataclass(frozen=True)
class ObjectLayout:
    """Byte offsets of the object fields the helper reads (this interpreter's)."""

    ob_type: int      #: PyObject.ob_type
    tuple_size: int   #: PyVarObject.ob_size of a tuple
    tuple_items: int  #: PyTupleObject.ob_item[0]
    data: int         #: PyArrayObject_fields.data
    nd: int           #: .nd (a C int)
    dims: int         #: .dimensions
    descr: int        #: .descr
    flags: int        #: .flags (a C int)
    ctypes_buffer: int  #: CDataObject.b_ptr (a ctypes array's buffer)

    def label(self) -> str:
        return "o" + "_".join(str(v) for v in astuple(self))


def _expected(head: int) -> ObjectLayout:
    # PyArrayObject_fields: PyObject_HEAD; char *data; int nd; npy_intp *dimensions;
    # npy_intp *strides; PyObject *base; PyArray_Descr *descr; int flags; ...
    return ObjectLayout(ob_type=head - 8, tuple_size=head, tuple_items=tuple.__basicsize__,
                        data=head, nd=head + 8, dims=head + 16, descr=head + 40, flags=head + 48,
                        ctypes_buffer=head)


def _word(address: int) -> int:
    return ctypes.c_ssize_t.from_address(address).value


def _int(address: int) -> int:
    return ctypes.c_int.from_address(address).value


def _agrees(layout: ObjectLayout, a: np.ndarray) -> bool:
    base = id(a)
    flags = _int(base + layout.flags)
    dims = _word(base + layout.dims)
    return (_word(base + layout.ob_type) == id(type(a))
            and _word(base + layout.data) == a.__array_interface__["data"][0]
            and _int(base + layout.nd) == a.ndim
            and all(_word(dims + 8 * k) == n for k, n in enumerate(a.shape))
            and _word(base + layout.descr) == id(a.dtype)
            and bool(flags & 0x0001) == a.flags.c_contiguous
            and bool(flags & 0x0100) == a.flags.aligned)


@functools.cache
def probe() -> ObjectLayout | None:
    """This process's object layout, verified on sample objects; None if it cannot be."""
    layout = _expected(object.__basicsize__)
    raw = np.zeros(64, np.uint8)
    samples = [np.arange(6, dtype=np.float32).reshape(2, 3), np.zeros((3, 1, 4), np.int8),
               np.ones(5)[::2], np.asarray(np.float64(2)), np.zeros((4, 3), order="F"),
               raw[1:33].view(np.int32), np.empty(0, np.int64)]
    try:
        arrays_ok = all(_agrees(layout, a) for a in samples)
        words = (id(samples[0]), id(samples[1]), id(None))
        slots = (ctypes.c_int64 * 3)()
        ctypes_ok = _word(id(slots) + layout.ctypes_buffer) == ctypes.addressof(slots)
        tuple_ok = ctypes_ok and (_word(id(words) + layout.tuple_size) == 3
                    and _word(id(words) + layout.ob_type) == id(tuple)
                    and all(_word(id(words) + layout.tuple_items + 8 * k) == id(o)
                            for k, o in enumerate((words[0], words[1], words[2]))))
    except (ValueError, OverflowError):
        return None
    return layout if arrays_ok and tuple_ok else None


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


__all__ = ["C_API", "HEADER_WORDS", "METH_FASTCALL", "MISS", "UNDELIVERED", "ObjectLayout",
           "call_ir", "probe"]
