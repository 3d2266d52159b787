"""Loop-level IR -> LLVM IR (``llvmlite.ir``): one LLVM function per IR function.

Calling convention of every emitted function (internal):
    i32 @name(ptr %arena, <params>, ptr %results)
- a tensor parameter is ``ptr`` followed by one i64 per axis (its extents);
  scalars are their register type, ``index`` is i64;
- results are written to ``%results``, an array of i64 slots: a tensor takes
  1 + rank slots (pointer, extents), a scalar one slot (stored with its type);
- the i32 is 0 on success, else the 1-based code of a failed ``loop.check``
  (``ModuleEmitter.messages``), propagated through calls.

Invariants:
- Blocks are emitted in reverse post-order, so definitions precede uses; block
  arguments are phis (a tensor argument is one phi per pointer and extent).
- Every op is handled by the entry for its name in ``OPS``; unknown ops are errors.
- ``vector<NxT>`` values are LLVM vectors ``<N x T>`` (i1 lanes for bools, bytes in
  memory); ``loop.vload``/``loop.vstore`` are unaligned-safe vector loads/stores
  (element alignment), ``loop.vreduce`` is ``llvm.vector.reduce.*`` (float add/mul
  with ``reassoc``: a tree), ``loop.prefetch`` is ``llvm.prefetch`` of an address
  clamped into the buffer.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from llvmlite import ir

from ...diagnostics import WiaIRError
from ...dtypes import DType
from ...ir.core import Block, Operation, OpResult, Value
from ...ir.module import FuncOp, ModuleOp
from ...ir.ops import ELEMENTWISE_FNS
from ...ir.ops_loop import Conv2dOp
from ...ir.types import IndexType, IRType, TensorType
from ...loops.stream_stores import NONTEMPORAL
from . import scalars
from .destinations import result_allocations
from .gemm import Epi, epilogue_field, epilogue_record
from .mathlib import type_suffix
from .prepacked import prepacked_b, prepacked_conv_weight, prepacked_qb, prepacked_winograd_weight
from .runtime import alloc_function, store_fence, stream_store, vector_load, vector_store
from .types import I1, I8, I32, I64, PTR, dtype_of, is_x86, itemsize, mem_type, scalar_type, splat


@dataclass
class Buf:
    """A buffer in registers: its data pointer and its extents (i64)."""

    ptr: ir.Value
    extents: list[ir.Value]


LLValue = ir.Value | Buf


def flat_types(t: IRType) -> list[ir.Type]:
    if isinstance(t, TensorType):
        return [PTR] + [I64] * t.rank
    return [scalar_type(t)]


def slot_count(t: IRType) -> int:
    return 1 + t.rank if isinstance(t, TensorType) else 1


class ModuleEmitter:
    """Declares every function of a loop-level module, then emits their bodies."""

    def __init__(self, module: ModuleOp, name: str, triple: str = "",
                 frozen: frozenset[int] = frozenset(),
                 on_libraries: Callable[[list[dict[str, Any]]], None] | None = None):
        self.ll = ir.Module(name=name)
        if triple:
            self.ll.triple = triple
        #: an x86 target: ``nontemporal`` stores are emitted as such (with SFENCE)
        self.x86 = is_x86(triple)
        self.messages: list[tuple[str, Any]] = []
        #: specs of the precompiled helpers (library.py) this module calls
        self.libraries: list[dict[str, Any]] = []
        self.functions: dict[str, ir.Function] = {}
        for f in module:
            params = [PTR] + [t for a in f.arg_types for t in flat_types(a)] + [PTR]
            fn = ir.Function(self.ll, ir.FunctionType(I32, params), _symbol(f.name))
            fn.linkage = "internal"
            self.functions[f.name] = fn
        mark_distinct_buffers(module, self.functions)
        order, acyclic = callees_first(module)
        #: each function's frozen arguments (positions; ``frozen_arguments``): from
        #: ``frozen``, the kernel's inputs whose contents never change between calls
        #: (weights), whose derived data is kept in the entry's state (prepacked.py)
        self.frozen_args = frozen_arguments(module, frozen if acyclic else None)
        #: the state cells (prepacked.py) each emitted function takes, its callees'
        #: included: every call site of a callee gets cells of its own (a function
        #: merged from several layers is called with each layer's weights)
        self.cell_totals: dict[str, int] = {}
        #: per kernel, its allocations that may take the caller's output buffers
        #: (destinations.py: alloc op id -> tensor result index)
        self.destinations: dict[str, dict[int, int]] = {}
        for f in order:
            told = len(self.libraries)
            emitter = FunctionEmitter(self, f)
            if f.is_kernel:
                self.destinations[f.name] = emitter.destinations
            emitter.emit()
            if straight_line_glue(self.functions[f.name]):
                self.functions[f.name].attributes.update({"optnone", "noinline"})
            self.cell_totals[f.name] = emitter.cells
            if on_libraries is not None and len(self.libraries) > told:
                on_libraries(self.libraries[told:])  # helpers it calls, as soon as known
        #: the cells of the entry's state: the most any kernel's calls take
        self.state_cells = max((self.cell_totals[f.name] for f in module if f.is_kernel), default=0)

    def code_for(self, message: str, loc: Any = None) -> int:
        """The error code of a failed check; the message keeps its source span."""
        entry = (message, loc)
        if entry not in self.messages:
            self.messages.append(entry)
        return self.messages.index(entry) + 1


#: instructions from which a function without loops is left unoptimized (LLVM's
#: ``optnone``): once a model's loops are outlined (loops/parallelize.py: parallel
#: regions, and plain calls for the small ones), its kernel function is glue that runs
#: straight through once per call (allocations and their checks, argument blocks,
#: calls). ResNet-18's, ~5,000 lines, took 200 ms of -O2 and code generation (most of
#: a part of the cold compile), unoptimized 67 ms; with its small pads outlined too,
#: 1,890 instructions, its module's -O2 took 130 ms instead of 206 (the limit was
#: 2,000), for the same run time at 1 and 2 threads.
GLUE_MIN_INSTRUCTIONS = 1000


def straight_line_glue(fn: ir.Function) -> bool:
    """Whether ``fn`` has at least GLUE_MIN_INSTRUCTIONS and no loop (no cycle in its
    control flow: a depth-first walk meets no block that is on its own path)."""
    if not fn.blocks or sum(len(block.instructions) for block in fn.blocks) < GLUE_MIN_INSTRUCTIONS:
        return False
    successors = {id(block): [t for t in block.terminator.operands if isinstance(t, ir.Block)]
                  if block.terminator is not None else [] for block in fn.blocks}
    state: dict[int, int] = {id(fn.blocks[0]): 1}  # 1: on the path, 2: done
    stack = [(fn.blocks[0], iter(successors[id(fn.blocks[0])]))]
    while stack:
        block, rest = stack[-1]
        target = next(rest, None)
        if target is None:
            state[id(block)] = 2
            stack.pop()
        elif state.get(id(target)) == 1:
            return False
        elif id(target) not in state:
            state[id(target)] = 1
            stack.append((target, iter(successors[id(target)])))
    return True


def _calls(func: FuncOp) -> list[Operation]:
    return [op for op in func.walk() if op.name == "func.call"]


def callees_first(module: ModuleOp) -> tuple[list[FuncOp], bool]:
    """The module's functions, each after every function it calls, and whether the
    calls are free of cycles (with a cycle: module order, False)."""
    funcs = {f.name: f for f in module}
    order: list[FuncOp] = []
    state: dict[str, int] = {}  # 1: on the path, 2: placed

    def visit(f: FuncOp) -> bool:
        state[f.name] = 1
        for op in _calls(f):
            callee = funcs.get(op.attributes["callee"])
            if callee is None or state.get(callee.name) == 2:
                continue
            if state.get(callee.name) == 1 or not visit(callee):
                return False
        state[f.name] = 2
        order.append(f)
        return True
    if all(state.get(f.name) == 2 or visit(f) for f in module):
        return order, True
    return list(module), False


def frozen_arguments(module: ModuleOp, frozen: frozenset[int] | None) -> dict[str, frozenset[int]]:
    """The positions of each function's frozen arguments: a kernel's ``frozen``
    inputs, and those of a function that every call passes a frozen argument of its
    caller in (an outlined parallel loop gets the kernel's weights as captured values;
    the pool's workers pass the kernel's state on: parallel.py's ``call_worker``).
    ``frozen`` None (calls in a cycle): only the kernels' own."""
    result = {f.name: frozenset(frozen or ()) if f.is_kernel else frozenset() for f in module}
    if frozen is None:
        return result
    sites: dict[str, list[tuple[FuncOp, Operation]]] = {}
    for f in module:
        for op in _calls(f):
            sites.setdefault(op.attributes["callee"], []).append((f, op))
    for _ in range(len(result)):  # callers first, a nest of calls at a time
        changed = False
        for callee, calls in sites.items():
            if callee not in result:
                continue
            found = frozenset.intersection(*(
                frozenset(j for j, v in enumerate(op.operands) if id(v) in _ids(caller, result))
                for caller, op in calls))
            if found != result[callee]:
                result[callee], changed = found, True
        if not changed:
            break
    return result


def _ids(func: FuncOp, frozen: dict[str, frozenset[int]]) -> set[int]:
    """The ids of ``func``'s arguments at its frozen positions."""
    return {id(a) for i, a in enumerate(func.args) if i in frozen[func.name]}


def mark_distinct_buffers(module: ModuleOp, functions: dict[str, ir.Function]) -> None:
    """``noalias`` on each data pointer of an outlined loop's buffer arguments that no
    other buffer argument of it shares at any call site: their origins (vectorize.py's
    ``buffer_origin``: distinct allocations or kernel parameters, which the vectorize
    pass trusts as well) all known and this one's its own. LLVM then drops the run-time
    overlap checks and the loop versions it made for them: ResNet-18's kernel module
    optimized and compiled in 235 ms instead of 265 (the same run time)."""
    from ...loops.parallelize import OUTLINED
    from ...loops.vectorize import buffer_origin

    sites: dict[str, list[tuple[FuncOp, Operation]]] = {}
    for caller in module:
        for op in caller.walk():
            if op.name == "func.call":
                sites.setdefault(op.attributes.get("callee"), []).append((caller, op))
    for f in module:
        if not OUTLINED.search(f.name):
            continue
        origins = {i: buffer_origin(a, f, module, sites=sites) for i, a in enumerate(f.args)
                   if isinstance(a.type, TensorType)}
        if None in origins.values():
            continue
        k = 1
        for i, t in enumerate(f.arg_types):
            if i in origins and list(origins.values()).count(origins[i]) == 1:
                functions[f.name].args[k].add_attribute("noalias")
            k += len(flat_types(t))


def _symbol(name: str) -> str:
    return "wia." + name


class FunctionEmitter:
    def __init__(self, mod: ModuleEmitter, func: FuncOp):
        self.mod = mod
        self.func = func
        self.fn = mod.functions[func.name]
        self.env: dict[int, LLValue] = {}
        self.blocks: dict[int, ir.Block] = {}
        self.alloca_block = self.fn.append_basic_block("allocas")
        self.b = ir.IRBuilder(self.alloca_block)
        self.arena = self.fn.args[0]
        self.results = self.fn.args[-1]
        #: allocations that may take the caller's output buffer (destinations.py),
        #: and where the entry ABI's copy-out pairs start (kernels only)
        self.destinations = result_allocations(func) if func.is_kernel else {}
        self.copy_out_slot = max(1, sum(slot_count(t) for t in func.result_types))
        #: its frozen arguments (ModuleEmitter.frozen_args), by value id
        self.frozen = _ids(func, mod.frozen_args)
        #: state cells taken so far, from the one the arena's state word points at:
        #: its own (prepacked.py) and each call site's share (``callee_arena``)
        self.cells = 0
        #: whether it has non-temporal stores (x86 only: then a fence before it returns)
        self.streams = mod.x86 and any(op.name == "loop.vstore" and op.attributes.get(NONTEMPORAL)
                                       for op in func.walk())

    # ------------------------------------------------------------- structure

    def emit(self) -> None:
        order = reverse_post_order(self.func)
        for blk in order:
            self.blocks[id(blk)] = self.fn.append_basic_block(blk.name_hint or "bb")
        it = iter(self.fn.args[1:-1])
        for arg in self.func.args:
            self.env[id(arg)] = self._unflatten(arg.type, [next(it) for _ in flat_types(arg.type)])
        for blk in order[1:]:
            self.b.position_at_end(self.blocks[id(blk)])
            for arg in blk.args:
                self.env[id(arg)] = self._unflatten(arg.type, [self.b.phi(t) for t in flat_types(arg.type)])
        for blk in order:
            self.b.position_at_end(self.blocks[id(blk)])
            for op in blk.ops:
                self.emit_op(op)
        self.b.position_at_end(self.alloca_block)
        self.b.branch(self.blocks[id(order[0])])

    def _unflatten(self, t: IRType, values: list[ir.Value]) -> LLValue:
        if isinstance(t, TensorType):
            return Buf(values[0], values[1:])
        return values[0]

    def flatten(self, v: Value) -> list[ir.Value]:
        x = self.env[id(v)]
        return [x.ptr, *x.extents] if isinstance(x, Buf) else [x]

    def get(self, v: Value) -> ir.Value:
        x = self.env[id(v)]
        assert not isinstance(x, Buf)
        return x

    def buf(self, v: Value) -> Buf:
        x = self.env[id(v)]
        assert isinstance(x, Buf)
        return x

    def emit_op(self, op: Operation) -> None:
        handler = OPS.get(op.name)
        if handler is None:
            raise WiaIRError(f"the LLVM backend cannot lower '{op.name}'")
        results = handler(self, op)
        for r, x in zip(op.results, results, strict=True):
            self.env[id(r)] = x

    # ------------------------------------------------------------- helpers

    def fail_unless(self, ok: ir.Value, code: ir.Value | int) -> None:
        """Return ``code`` from the function when ``ok`` is false."""
        cont = self.fn.append_basic_block("ok")
        fail = self.fn.append_basic_block("fail")
        self.b.cbranch(ok, cont, fail, )
        self.b.position_at_end(fail)
        self.b.ret(code if isinstance(code, ir.Value) else ir.Constant(I32, code))
        self.b.position_at_end(cont)

    def slot(self, base: ir.Value, index: int) -> ir.Value:
        return self.b.gep(base, [ir.Constant(I64, index)], source_etype=I64)

    def write_results(self, base: ir.Value, types: list[IRType], values: list[list[ir.Value]]) -> None:
        k = 0
        for t, vals in zip(types, values, strict=True):
            if isinstance(t, TensorType):
                self.b.store(self.b.ptrtoint(vals[0], I64), self.slot(base, k))
                for j, e in enumerate(vals[1:]):
                    self.b.store(e, self.slot(base, k + 1 + j))
            else:
                v = vals[0]
                if v.type == I1:
                    v = self.b.zext(v, I8)
                self.b.store(v, self.slot(base, k))
            k += slot_count(t)

    def read_results(self, base: ir.Value, types: list[IRType]) -> list[LLValue]:
        out: list[LLValue] = []
        k = 0
        for t in types:
            if isinstance(t, TensorType):
                ptr = self.b.inttoptr(self.b.load(self.slot(base, k), typ=I64), PTR)
                out.append(Buf(ptr, [self.b.load(self.slot(base, k + 1 + j), typ=I64) for j in range(t.rank)]))
            else:
                st = scalar_type(t)
                if st == I1:
                    out.append(self.b.trunc(self.b.load(self.slot(base, k), typ=I8), I1))
                else:
                    out.append(self.b.load(self.slot(base, k), typ=st))
            k += slot_count(t)
        return out

    def element_ptr(self, buf: Buf, t: TensorType, offset: ir.Value) -> ir.Value:
        return self.b.gep(buf.ptr, [offset], inbounds=True, source_etype=mem_type(t.dtype))

    def edge(self, target: Block, args: tuple[Value, ...]) -> ir.Block:
        """Add this block's incoming values to ``target``'s phis; its LLVM block."""
        here = self.b.block
        for param, arg in zip(target.args, args, strict=True):
            phis = self.env[id(param)]
            phi_list = [phis.ptr, *phis.extents] if isinstance(phis, Buf) else [phis]
            for phi, v in zip(phi_list, self.flatten(arg), strict=True):
                phi.add_incoming(v, here)
        return self.blocks[id(target)]


def reverse_post_order(func: FuncOp) -> list[Block]:
    seen: set[int] = set()
    post: list[Block] = []

    def visit(b: Block) -> None:
        stack = [(b, iter(b.successors))]
        seen.add(id(b))
        while stack:
            blk, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                post.append(blk)
                stack.pop()
            elif id(nxt) not in seen:
                seen.add(id(nxt))
                stack.append((nxt, iter(nxt.successors)))
    visit(func.entry)
    return post[::-1]


# ------------------------------------------------------------------ op table

Handler = Callable[[FunctionEmitter, Operation], list[LLValue]]
OPS: dict[str, Handler] = {}


def handles(*names: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        for n in names:
            OPS[n] = fn
        return fn
    return register


@handles("arith.constant")
def _constant(e: FunctionEmitter, op: Operation) -> list[LLValue]:
    return [scalars.const(dtype_of(op.result.type), op.attributes["value"])]


@handles(*(f"arith.{fn.name}" for fn in ELEMENTWISE_FNS))
def _arith(e: FunctionEmitter, op: Operation) -> list[LLValue]:
    args = [e.get(v) for v in op.operands]
    fn = op.name.split(".", 1)[1]
    return [scalars.elementwise(e.b, fn, args, dtype_of(op.result.type), bool(op.attributes.get("reassoc")),
                                bool(op.attributes.get("exact")))]


@handles("arith.cmpf", "arith.cmpi")
def _cmp(e: FunctionEmitter, op: Operation) -> list[LLValue]:
    x, y = (e.get(v) for v in op.operands)
    return [scalars.compare(e.b, op.name, op.attributes["predicate"], x, y, dtype_of(op.operand_types[0]))]


@handles("arith.select")
def _select(e: FunctionEmitter, op: Operation) -> list[LLValue]:
    c, x, y = (e.get(v) for v in op.operands)
    return [e.b.select(c, x, y)]


@handles("arith.cast")
def _cast(e: FunctionEmitter, op: Operation) -> list[LLValue]:
    return [scalars.cast(e.b, e.get(op.operands[0]), dtype_of(op.operand_types[0]), dtype_of(op.result.type))]


@handles("tensor.dim")
def _dim(e: FunctionEmitter, op: Operation) -> list[LLValue]:
    buf = e.buf(op.operands[0])
    return [buf.extents[op.attributes["axis"] % len(buf.extents)]]


@handles("loop.retype")
def _retype(e: FunctionEmitter, op: Operation) -> list[LLValue]:
    return [e.buf(op.operands[0])]


#: physical memory: no single buffer may be larger (checked natively before allocating)
MEMORY_BYTES = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


@handles("loop.alloc")
def _alloc(e: FunctionEmitter, op: Operation) -> list[LLValue]:
    t = op.result.type
    assert isinstance(t, TensorType)
    it = iter(e.get(v) for v in op.operands)
    extents = [ir.Constant(I64, d) if d is not None else next(it) for d in t.shape]
    if op.attributes.get("stack"):  # static and small (the verifier; contract_rows.py)
        with e.b.goto_block(e.alloca_block):
            frame = e.b.alloca(mem_type(t.dtype), size=ir.Constant(I64, max(1, math.prod(t.shape))))
            frame.align = 64
        return [Buf(frame, extents)]
    # Refuse, before allocating, a byte count that overflows or exceeds the machine's
    # memory, and report a failed allocation: never a crash (issue 11, hardening).
    # The static extents' product is Python's (exact): a model's kernel has dozens of
    # static allocations, and LLVM would only fold the same checks away.
    static_bytes = itemsize(t.dtype) * math.prod(d for d in t.shape if d is not None)
    n: ir.Value = ir.Constant(I64, min(static_bytes, MEMORY_BYTES + 1))
    ok: ir.Value = ir.Constant(I1, static_bytes <= MEMORY_BYTES)
    for d, x in zip(t.shape, extents, strict=True):
        if d is None:
            product = e.b.umul_with_overflow(n, x)
            n = e.b.extract_value(product, 0)
            ok = e.b.and_(ok, e.b.not_(e.b.extract_value(product, 1)))
    if not (isinstance(ok, ir.Constant) and ok.constant):
        ok = e.b.and_(ok, e.b.icmp_unsigned("<=", n, ir.Constant(I64, MEMORY_BYTES)))
        too_big = f"cannot allocate {t}: the byte count exceeds this machine's memory " \
                  f"({MEMORY_BYTES / 2**30:.1f} GiB) or overflows"
        e.fail_unless(ok, e.mod.code_for(too_big, op.loc))
    def allocate() -> ir.Value:
        ptr = e.b.call(alloc_function(e.mod.ll), [e.arena, n])
        got = e.b.icmp_unsigned("!=", ptr, ir.Constant(ptr.type, None))
        e.fail_unless(got, e.mod.code_for(f"out of memory allocating {t}", op.loc))
        return ptr

    j = e.destinations.get(id(op))
    return [Buf(allocate() if j is None else _in_destination(e, j, n, allocate), extents)]


def _in_destination(e: FunctionEmitter, j: int, nbytes: ir.Value,
                    allocate: Callable[[], ir.Value]) -> ir.Value:
    """The caller's buffer for tensor result ``j`` when it has exactly ``nbytes``, else
    ``allocate()`` (destinations.py); the caller's buffer is not the arena's to free."""
    b = e.b
    target = b.load(e.slot(e.results, e.copy_out_slot + 2 * j), typ=I64)
    size = b.load(e.slot(e.results, e.copy_out_slot + 2 * j + 1), typ=I64)
    use = b.and_(b.icmp_unsigned("!=", target, ir.Constant(I64, 0)), b.icmp_signed("==", size, nbytes))
    given, fresh, join = (e.fn.append_basic_block(n) for n in ("dest.given", "dest.fresh", "dest.join"))
    b.cbranch(use, given, fresh)
    b.position_at_end(given)
    in_place = b.inttoptr(target, PTR)
    b.branch(join)
    b.position_at_end(fresh)
    ptr = allocate()
    allocated_in = b.block
    b.branch(join)
    b.position_at_end(join)
    phi = b.phi(PTR)
    phi.add_incoming(in_place, given)
    phi.add_incoming(ptr, allocated_in)
    return phi


@handles("loop.load")
def _load(e: FunctionEmitter, op: Operation) -> list[LLValue]:
    t = op.operand_types[0]
    assert isinstance(t, TensorType)
    p = e.element_ptr(e.buf(op.operands[0]), t, e.get(op.operands[1]))
    v = e.b.load(p, typ=mem_type(t.dtype))
    return [e.b.trunc(v, I1) if mem_type(t.dtype) != scalar_type(op.result.type) else v]


@handles("loop.store")
def _store(e: FunctionEmitter, op: Operation) -> list[LLValue]:
    t = op.operand_types[1]
    assert isinstance(t, TensorType)
    v = e.get(op.operands[0])
    if v.type == I1:
        v = e.b.zext(v, I8)
    e.b.store(v, e.element_ptr(e.buf(op.operands[1]), t, e.get(op.operands[2])))
    return []


def _vector_mem_type(t: TensorType, lanes: int) -> ir.VectorType:
    return ir.VectorType(mem_type(t.dtype), lanes)


@handles("loop.vload")
def _vload(e: FunctionEmitter, op: Operation) -> list[LLValue]:
    t, vt = op.operand_types[0], op.result.type
    assert isinstance(t, TensorType)
    p = e.element_ptr(e.buf(op.operands[0]), t, e.get(op.operands[1]))
    v = vector_load(e.b, p, _vector_mem_type(t, vt.lanes), itemsize(t.dtype))  # type: ignore[union-attr]
    want = scalar_type(vt)
    return [e.b.trunc(v, want) if v.type != want else v]


@handles("loop.vstore")
def _vstore(e: FunctionEmitter, op: Operation) -> list[LLValue]:
    t = op.operand_types[1]
    assert isinstance(t, TensorType)
    v = e.get(op.operands[0])
    mt = _vector_mem_type(t, v.type.count)
    if v.type != mt:
        v = e.b.zext(v, mt)
    p = e.element_ptr(e.buf(op.operands[1]), t, e.get(op.operands[2]))
    if e.streams and op.attributes.get(NONTEMPORAL):
        stream_store(e.b, v, p, itemsize(t.dtype))
    else:
        vector_store(e.b, v, p, itemsize(t.dtype))
    return []


@handles("loop.broadcast")
def _broadcast(e: FunctionEmitter, op: Operation) -> list[LLValue]:
    vt = scalar_type(op.result.type)
    x = e.get(op.operands[0])
    if isinstance(x, ir.Constant):  # a constant vector: what scalars.py folds on (x ** 3)
        return [ir.Constant(vt, [x.constant] * vt.count)]
    return [splat(e.b, x, vt)]


def _reduce_intrinsic(e: FunctionEmitter, name: str, v: ir.Value, start: ir.Value | None) -> ir.Value:
    elem = v.type.element
    full = f"llvm.vector.reduce.{name}.{type_suffix(v.type)}"
    fn = e.mod.ll.globals.get(full)
    args = [start, v] if start is not None else [v]
    if fn is None:
        fn = ir.Function(e.mod.ll, ir.FunctionType(elem, [a.type for a in args]), full)
    flags = ("reassoc", "contract") if start is not None else ()
    return e.b.call(fn, args, fastmath=flags)


@handles("loop.vreduce")
def _vreduce(e: FunctionEmitter, op: Operation) -> list[LLValue]:
    kind = op.attributes["kind"]
    v = e.get(op.operands[0])
    dtype = dtype_of(op.result.type)
    assert dtype is not None
    if dtype.is_float:
        if kind in ("add", "mul"):
            start = ir.Constant(v.type.element, -0.0 if kind == "add" else 1.0)
            return [_reduce_intrinsic(e, "f" + kind, v, start)]
        return [_reduce_intrinsic(e, "fmaximum" if kind == "max" else "fminimum", v, None)]
    if dtype is DType.BOOL:
        return [_reduce_intrinsic(e, "or" if kind in ("add", "max") else "and", v, None)]
    return [_reduce_intrinsic(e, {"add": "add", "mul": "mul", "max": "smax", "min": "smin"}[kind], v, None)]


@handles("loop.prefetch")
def _prefetch(e: FunctionEmitter, op: Operation) -> list[LLValue]:
    t = op.operand_types[0]
    assert isinstance(t, TensorType)
    buf = e.buf(op.operands[0])
    n: ir.Value = ir.Constant(I64, 1)
    for x in buf.extents:
        n = e.b.mul(n, x)
    last = e.b.sub(n, ir.Constant(I64, 1))
    off = e.get(op.operands[1])
    # unsigned min: a negative offset or one past the end lands on the last element
    # (an empty buffer gives -1 -> the offset itself, never dereferenced: a hint only)
    clamped = e.b.select(e.b.icmp_unsigned("<", off, last), off, last)
    p = e.b.gep(buf.ptr, [clamped], source_etype=mem_type(t.dtype))
    fn = e.mod.ll.globals.get("llvm.prefetch.p0")
    if fn is None:
        fn = ir.Function(e.mod.ll, ir.FunctionType(ir.VoidType(), [PTR, I32, I32, I32]), "llvm.prefetch.p0")
    e.b.call(fn, [p, ir.Constant(I32, 0), ir.Constant(I32, 3), ir.Constant(I32, 1)])
    return []


@handles("loop.check")
def _check(e: FunctionEmitter, op: Operation) -> list[LLValue]:
    e.fail_unless(e.get(op.operands[0]), e.mod.code_for(op.attributes["message"], op.loc))
    return []


@handles("loop.copy")
def _copy(e: FunctionEmitter, op: Operation) -> list[LLValue]:
    t = op.operand_types[0]
    assert isinstance(t, TensorType)
    src, dst = e.buf(op.operands[0]), e.buf(op.operands[1])
    so, do, n = (e.get(v) for v in op.operands[2:])
    size = e.b.mul(n, ir.Constant(I64, itemsize(t.dtype)))
    memcpy = e.mod.ll.declare_intrinsic("llvm.memcpy", [PTR, PTR, I64])
    e.b.call(memcpy, [e.element_ptr(dst, t, do), e.element_ptr(src, t, so), size, ir.Constant(I1, 0)])
    return []


@handles("loop.gemm")
def _gemm(e: FunctionEmitter, op: Operation) -> list[LLValue]:
    from .library_ir import declare
    t = op.operand_types[0]
    assert isinstance(t, TensorType)
    a, b, c = (e.buf(v) for v in op.operands[:3])
    ao, bo, co, m, n, k, lda, ldb, ldc = (e.get(v) for v in op.operands[3:])
    acc = ir.Constant(I1, int(bool(op.attributes.get("accumulate", False))))
    bp = e.element_ptr(b, t, bo)
    if frozen_operand(e, op, 1, B_PLACEMENT):  # B never changes: packed once, kept
        bp = prepacked_b(e, t.dtype, bp, n, k, ldb)
        fn = declare(e.mod.ll, e.mod.libraries, "gemm_packed", t.dtype)
    else:
        fn = declare(e.mod.ll, e.mod.libraries, "gemm", t.dtype)
    e.b.call(fn, [e.element_ptr(a, t, ao), bp, e.element_ptr(c, t, co),
                  m, n, k, lda, ldb, ldc, acc])
    return []


#: the operands of ``loop.gemm``/``loop.qgemm`` that place B: its offset, n, k and ldb
B_PLACEMENT = (4, 7, 8, 10)


def frozen_operand(e: FunctionEmitter, op: Operation, buffer: int, scalars: tuple[int, ...]) -> bool:
    """Whether operand ``buffer`` of ``op`` is a frozen input of the kernel read the
    same way on every call: the ``scalars`` operands that place it (offset, extents,
    stride) are constants, so data derived from it once holds for every call."""
    if id(op.operands[buffer]) not in e.frozen:
        return False
    return all(constant_of(op.operands[i]) is not None for i in scalars)


@handles("loop.qgemm")
def _qgemm(e: FunctionEmitter, op: Operation) -> list[LLValue]:
    from .library_ir import declare_qgemm
    ta, tc = op.operand_types[0], op.operand_types[2]
    assert isinstance(ta, TensorType) and isinstance(tc, TensorType)
    a, b, c = (e.buf(v) for v in op.operands[:3])
    ao, bo, co, m, n, k, lda, ldb, ldc = (e.get(v) for v in op.operands[3:])
    bp = e.element_ptr(b, ta, bo)
    frozen = frozen_operand(e, op, 1, B_PLACEMENT)
    if frozen:  # B never changes: packed once, kept
        bp = prepacked_qb(e, bp, n, k, ldb)
    e.b.call(declare_qgemm(e.mod.ll, e.mod.libraries, "qgemm_packed" if frozen else "qgemm"),
             [e.element_ptr(a, ta, ao), bp, e.element_ptr(c, tc, co), m, n, k, lda, ldb, ldc])
    return []


@handles("loop.conv2d")
def _conv2d(e: FunctionEmitter, op: Operation) -> list[LLValue]:
    from .library_ir import declare
    t = op.operand_types[0]
    assert isinstance(t, TensorType)
    x, w, y = (e.buf(v) for v in op.operands[:3])
    xoff, yoff, *dims = (e.get(v) for v in op.operands[3:15])
    stride = tuple(op.attributes["stride"])
    rows = op.attributes.get("rows") and frozen_operand(e, op, 1, W_PLACEMENT)
    tile = op.attributes.get("winograd")
    if tile in (2, 4) and winograd_applies(e, op, t.dtype):
        # F(tile x tile, 3x3) in the rows layout (conv_winograd.py): its weight transform
        # packed once when frozen, else made per call
        c, o = dims[0], dims[3]
        if rows:
            fn, weight = declare(e.mod.ll, e.mod.libraries, f"conv_wino{tile}", t.dtype), \
                prepacked_winograd_weight(e, t.dtype, tile, w.ptr, o, c)
        else:
            fn, weight = declare(e.mod.ll, e.mod.libraries, f"conv_wino{tile}_raw", t.dtype), w.ptr
        e.b.call(fn, [e.element_ptr(x, t, xoff), weight, e.element_ptr(y, t, yoff), *dims])
        return []
    if rows:  # pixels as the rows of a GEMM, the weight packed once (conv_rows.py)
        c, o, kh, kw = dims[0], dims[3], dims[4], dims[5]
        packed = prepacked_conv_weight(e, t.dtype, w.ptr, o, e.b.mul(c, e.b.mul(kh, kw)))
        fn = declare(e.mod.ll, e.mod.libraries, "conv_rows", t.dtype, stride)
        e.b.call(fn, [e.element_ptr(x, t, xoff), packed, e.element_ptr(y, t, yoff), *dims])
        return []
    assert isinstance(op, Conv2dOp)
    wptr, o_lo = w.ptr, ir.Constant(I64, 0)
    if op.channel_range:  # output channels [o_lo, o_hi): their weight rows and planes
        c, kh, kw, ho, wo = dims[0], dims[4], dims[5], dims[6], dims[7]
        o_lo, o_hi = (e.get(v) for v in op.operands[15:17])
        wptr = e.element_ptr(w, t, e.b.mul(o_lo, e.b.mul(c, e.b.mul(kh, kw))))
        yoff = e.b.add(yoff, e.b.mul(o_lo, e.b.mul(ho, wo)))
        dims[3] = e.b.sub(o_hi, o_lo)
    args = [e.element_ptr(x, t, xoff), wptr, e.element_ptr(y, t, yoff), *dims]
    if not op.pixel_range:
        e.b.call(declare(e.mod.ll, e.mod.libraries, "conv", t.dtype, stride), args)
        return []
    # a pixel range (the last two of ``dims``): that chunk on this thread (the kernel's
    # own loop splits), its epilogue applied by the micro-kernels as they store
    fn = declare(e.mod.ll, e.mod.libraries, "conv_range", t.dtype, stride)
    ldc = e.b.mul(dims[6], dims[7])
    e.b.call(fn, [*args, conv_epilogue(e, op, t, o_lo, args[2], ldc)])
    return []


def conv_epilogue(e: FunctionEmitter, op: Conv2dOp, t: TensorType, o_lo: ir.Value, y: ir.Value,
                  ldc: ir.Value) -> ir.Value:
    """A pointer to the ``TileEpilogue`` record (gemm.py) of a ``loop.conv2d``'s ``clamp``
    epilogue, its operands from channel ``o_lo`` on (``y``: that channel's output plane,
    ``ldc`` apart); null without one."""
    if "clamp" not in op.attributes:
        return ir.Constant(PTR, None)
    et = mem_type(t.dtype)
    with e.b.goto_block(e.alloca_block):
        # as an untyped pointer: llvmlite types a GEP into a struct alloca as the struct
        rec = e.b.inttoptr(e.b.ptrtoint(e.b.alloca(epilogue_record(et)), I64), PTR)

    def field(which: Epi) -> ir.Value:
        return epilogue_field(e.b, rec, et, which)
    lo, hi = op.attributes["clamp"]
    for which, v in ((Epi.LO, lo), (Epi.HI, hi), (Epi.ONE, 1.0), (Epi.MINUS_ZERO, -0.0)):
        e.b.store(ir.Constant(et, v), field(which))
    # a missing scale reads the record's 1.0 and a missing shift its -0.0, step 0
    for value, step, default in ((Epi.SCALE, Epi.SCALE_STEP, Epi.ONE),
                                 (Epi.SHIFT, Epi.SHIFT_STEP, Epi.MINUS_ZERO)):
        e.b.store(field(default), field(value))
        e.b.store(ir.Constant(I64, 0), field(step))
    e.b.store(ir.Constant(I64, 0), field(Epi.HAS_RESIDUAL))
    for name, at in op.affine_groups():
        buf = op.operands[at]
        bt = buf.type
        assert isinstance(bt, TensorType)
        if name == "residual":  # laid out as y: each element ``delta`` elements from y's
            start = e.element_ptr(e.buf(buf), bt, e.b.add(e.get(op.operands[at + 1]), e.b.mul(o_lo, ldc)))
            delta = e.b.sdiv(e.b.sub(e.b.ptrtoint(start, I64), e.b.ptrtoint(y, I64)),
                             ir.Constant(I64, itemsize(t.dtype)))
            e.b.store(ir.Constant(I64, 1), field(Epi.HAS_RESIDUAL))
            e.b.store(delta, field(Epi.DELTA))
            continue
        step = e.get(op.operands[at + 2])
        e.b.store(e.element_ptr(e.buf(buf), bt, e.b.add(e.get(op.operands[at + 1]), e.b.mul(o_lo, step))),
                  field(Epi.SCALE if name == "scale" else Epi.SHIFT))
        e.b.store(step, field(Epi.SCALE_STEP if name == "scale" else Epi.SHIFT_STEP))
    return rec


#: the operands of ``loop.conv2d`` that place its weight: c, o, kh, kw
W_PLACEMENT = (5, 8, 9, 10)


def winograd_applies(e: FunctionEmitter, op: Operation, dtype: DType) -> bool:
    """Whether a ``{winograd = m}`` convolution can run as conv_winograd.py's F(m x m, 3x3):
    a whole image (no pixel or channel range), a 3x3 kernel at stride 1 and whole
    panels of output channels (a hint on any other shape is ignored: the convolution
    runs as it would without it)."""
    from .gemm import GemmBuilder

    o, kh, kw = (constant_of(op.operands[i]) for i in W_PLACEMENT[1:])
    return (len(op.operands) == 13 and tuple(op.attributes["stride"]) == (1, 1)
            and kh == 3 and kw == 3 and isinstance(o, int)
            and o % GemmBuilder(e.mod.ll, dtype).nr == 0)


def constant_of(v: Value) -> object:
    """The value of an ``arith.constant`` result, else None."""
    if isinstance(v, OpResult) and v.op.name == "arith.constant":
        return v.op.attributes["value"]
    return None


def static_extents(values: Sequence[Value]) -> tuple[int, ...]:
    """The plane extents (h, wd, ho, wo) of a depthwise or max-pool op when all four are
    constants (a plane kernel compiled for them, depthwise.py), else ()."""
    found = [constant_of(v) for v in values]
    return tuple(int(v) for v in found) if all(isinstance(v, int) for v in found) else ()


@handles("loop.depthwise2d")
def _depthwise2d(e: FunctionEmitter, op: Operation) -> list[LLValue]:
    from .depthwise import plane_geometry
    from .library_ir import declare
    t = op.operand_types[0]
    assert isinstance(t, TensorType)
    x, w, y = (e.buf(v) for v in op.operands[:3])
    xoff, woff, yoff, *dims = (e.get(v) for v in op.operands[3:])
    # every call has min(block, C - c0) planes (loops/depthwise.py): block, when it
    # divides the channels C (the weight's stride)
    block, channels = op.attributes.get("block"), constant_of(op.operands[6])
    whole = isinstance(block, int) and isinstance(channels, int) and channels % block == 0
    g = replace(plane_geometry(op.attributes), extents=static_extents(op.operands[7:11]),
                planes=block if whole else 0)
    e.b.call(declare(e.mod.ll, e.mod.libraries, "depthwise", t.dtype, geometry=g),
             [e.element_ptr(x, t, xoff), e.element_ptr(w, t, woff), e.element_ptr(y, t, yoff), *dims])
    return []


@handles("loop.maxpool2d")
def _maxpool2d(e: FunctionEmitter, op: Operation) -> list[LLValue]:
    from .depthwise import Geometry
    from .library_ir import declare
    t = op.operand_types[0]
    assert isinstance(t, TensorType)
    x, y = (e.buf(v) for v in op.operands[:2])
    xoff, yoff, *dims = (e.get(v) for v in op.operands[2:])
    g = Geometry(tuple(op.attributes["kernel"]), tuple(op.attributes["stride"]), (1, 1),
                 tuple(op.padding), static_extents(op.operands[4:8]))  # type: ignore[attr-defined]
    fn = declare(e.mod.ll, e.mod.libraries, "maxpool", t.dtype, geometry=g)
    e.b.call(fn, [e.element_ptr(x, t, xoff), e.element_ptr(y, t, yoff), *dims])
    return []


@handles("func.call")
def _call(e: FunctionEmitter, op: Operation) -> list[LLValue]:
    callee = e.mod.functions.get(op.attributes["callee"])
    if callee is None:
        raise WiaIRError(f"call of unknown function @{op.attributes['callee']}")
    name = op.attributes["callee"]
    arena, restore = callee_arena(e, name)
    if op.attributes.get("parallel"):  # an outlined parallel loop (loops/parallelize.py)
        from .parallel import emit_parallel_call
        flat = [x for v in op.operands for x in e.flatten(v)]
        rc = emit_parallel_call(e.b, e.alloca_block, arena, callee, op, flat,
                                e.mod.cell_totals.get(name, 0) > 0)
        restore()
        e.fail_unless(e.b.icmp_signed("==", rc, ir.Constant(I32, 0)), rc)
        return []
    types = list(op.result_types)
    with e.b.goto_block(e.alloca_block):
        slots = e.b.alloca(I64, size=max(1, sum(slot_count(t) for t in types)))
    args = [arena] + [x for v in op.operands for x in e.flatten(v)] + [slots]
    rc = e.b.call(callee, args)
    restore()
    e.fail_unless(e.b.icmp_signed("==", rc, ir.Constant(I32, 0)), rc)
    return e.read_results(slots, types)


def callee_arena(e: FunctionEmitter, callee: str) -> tuple[ir.Value, Callable[[], None]]:
    """The arena to call ``callee`` with, and what to emit after the call. A callee
    that takes state cells gets the next ones of this function's: a copy of the
    arena whose state word points at them (this call site's own: a callee called
    with other weights elsewhere packs those into cells of their own), copied back
    after the call but for that word (the callee may have allocated into it)."""
    from .runtime import ARENA_STATE, ARENA_WORDS
    total = e.mod.cell_totals.get(callee, 0)
    base, e.cells = e.cells, e.cells + total
    if not total or not base:
        return e.arena, lambda: None
    with e.b.goto_block(e.alloca_block):
        moved = e.b.alloca(I64, size=ARENA_WORDS)

    def word(arena: ir.Value, j: int) -> ir.Value:
        return e.b.gep(arena, [ir.Constant(I64, j)], source_etype=I64)
    for j in range(ARENA_WORDS):
        v = e.b.load(word(e.arena, j), typ=I64)
        e.b.store(e.b.add(v, ir.Constant(I64, 8 * base)) if j == ARENA_STATE else v, word(moved, j))

    def restore() -> None:
        for j in range(ARENA_WORDS):
            if j != ARENA_STATE:
                e.b.store(e.b.load(word(moved, j), typ=I64), word(e.arena, j))
    return moved, restore


@handles("cf.br")
def _br(e: FunctionEmitter, op: Operation) -> list[LLValue]:
    (s,) = op.successors
    e.b.branch(e.edge(s.block, s.args))
    return []


@handles("cf.cond_br")
def _cond_br(e: FunctionEmitter, op: Operation) -> list[LLValue]:
    t, f = op.successors
    cond = e.get(op.operands[0])
    if t.block is f.block:
        # One LLVM block cannot have two phi entries from one predecessor: split.
        mid = e.fn.append_basic_block("split")
        e.b.cbranch(cond, e.edge(t.block, t.args), mid)
        e.b.position_at_end(mid)
        e.b.branch(e.edge(f.block, f.args))
        return []
    e.b.cbranch(cond, e.edge(t.block, t.args), e.edge(f.block, f.args))
    return []


@handles("func.return")
def _return(e: FunctionEmitter, op: Operation) -> list[LLValue]:
    e.write_results(e.results, list(op.operand_types), [e.flatten(v) for v in op.operands])
    if e.streams:
        store_fence(e.b)
    e.b.ret(ir.Constant(I32, 0))
    return []


__all__ = ["IndexType", "ModuleEmitter", "OPS"]
