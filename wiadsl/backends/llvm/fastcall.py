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
helper's object can come from the disk cache. The helper's LLVM IR is built by
fastcall_ir.py; this module (its layout and protocol) imports no llvmlite.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from ...records import as_dict, record

MISS = -1  #: an argument is not what the entry was made for: nothing ran
UNDELIVERED = -2  #: it ran, but a result is not in its buffer (a shape that varies)
HEADER_WORDS = 5
C_CONTIGUOUS_ALIGNED = 0x0001 | 0x0100  # NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED

#: The CPython functions the helper calls, by the symbol it declares for each.
C_API = {"wia.py.long_from_long": "PyLong_FromLong", "wia.py.save_thread": "PyEval_SaveThread",
         "wia.py.restore_thread": "PyEval_RestoreThread"}
METH_FASTCALL = 0x0080


@record(frozen=True)
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
        return "o" + "_".join(str(v) for v in as_dict(self).values())


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


__all__ = ["C_API", "C_CONTIGUOUS_ALIGNED", "HEADER_WORDS", "METH_FASTCALL", "MISS", "UNDELIVERED",
           "ObjectLayout", "probe"]
