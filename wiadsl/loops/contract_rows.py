"""Shrink a buffer that lives in one iteration of a parallel loop to one row of its own.

After ``fuse-parallel``, a softmax is one loop over rows whose iteration i writes
row i of ``e = exp(x - max)`` into a ``T x D`` buffer and reads it back at once
for the sum and the division:

    %e = loop.alloc : tensor<4096x1024xf32>           // 16 MiB, written once, read once
    func.call @k.par0(%c0, %rows, %x, %m, %e, %s, %y) {parallel = ...}

Every byte of ``e`` goes to memory and back although each row is dead once its
iteration ends. When a buffer is used by nothing but that one call, and the callee
touches it only by loads and stores at offsets ``a * i + r`` with ``0 <= r < a``
(the row-locality ``fuse-parallel`` proves; ``a`` a constant), the callee gets a
buffer of ``a`` elements of its own instead, in its stack frame (``loop.alloc
{stack}``: one per call, that is per chunk of rows on its thread), and reads and
writes ``r``; the caller's allocation goes away. A row's values then stay in L1
between the passes over it, and the call allocates nothing for them (issue 19:
memory planning; one pass over memory per row operation).

Legality: ``loop.alloc`` contents are unspecified until stored, so iteration i may
find anything in its row before it writes it, as in the big buffer (the lowering
never reads a row element before writing it). Nothing outside the call sees the
buffer. The chunks of a parallel call run on different threads, each with its own
row buffer (one per call of the callee).

Invariant: a contracted callee reads and writes the same elements, relative to its
row, as before; only where they live changes.
"""

from __future__ import annotations

from ..ir.core import BlockArgument, Operation, OpResult, Value
from ..ir.module import FuncOp, ModuleOp
from ..ir.ops import create_op
from ..ir.types import INDEX, TensorType
from .fuse_parallel import Range, accesses, inner_bounds, loop_parts, root_buffer

#: bytes of row buffers a callee gets at most, in its stack frame (``loop.alloc
#: {stack}``: nothing allocated per call; a worker thread's stack is megabytes). Rows
#: beyond it keep their big buffer (and would not stay in L1 between passes anyway).
STACK_BYTES = 128 << 10


def _only_user(alloc: OpResult, call: Operation, k: int) -> bool:
    """Whether ``alloc``, directly or through ``loop.retype``, reaches nothing but
    operand ``k`` of ``call``."""
    todo: list[Value] = [alloc]
    while todo:
        v = todo.pop()
        for user in v.users:
            if user.name == "loop.retype":
                todo.append(user.result)
            elif user is not call or [i for i, o in enumerate(call.operands) if o is v] != [k]:
                return False
    return True


def _alloc_root(v: Value) -> OpResult | None:
    root = root_buffer(v)
    return root if isinstance(root, OpResult) and root.op.name == "loop.alloc" else None


def _row_stride(param: BlockArgument, k: int, found: list[tuple[int, bool, Range | None]]) -> int | None:
    """The stride ``a`` of every access of parameter ``k`` (``param``) of a callee whose
    accesses are ``found`` (fuse_parallel.accesses): loads and stores only, all of them
    at ``a * i + r`` with ``0 <= r < a``; else None."""
    if any(u.name not in ("loop.load", "loop.store") for u in param.users):
        return None
    if any(u.name == "loop.store" and u.operands[0] is param for u in param.users):
        return None  # the buffer itself stored as a value: not an access
    mine = [r for index, _, r in found if index == k]
    if not mine or any(r is None for r in mine):
        return None
    strides = {r[0] for r in mine}
    if len(strides) != 1:
        return None
    (a,) = strides
    if a <= 0 or not all(r[1] >= 0 and r[2] < a for r in mine):
        return None
    return int(a)


def _contract(g: FuncOp, param: BlockArgument, iv: Value, a: int) -> None:
    """Give ``g`` a buffer of ``a`` elements for ``param``'s rows, indexed relative to row iv."""
    t = param.type
    assert isinstance(t, TensorType)
    entry_term = g.entry.terminator
    assert entry_term is not None
    row = create_op("loop.alloc", [], [TensorType(t.dtype, (a,))], {"stack": True})
    entry_term.insert_before(row)
    for user in list(param.users):
        at = 1 if user.name == "loop.load" else 2
        stride = create_op("arith.constant", [], [INDEX], {"value": a})
        start = create_op("arith.mul", [iv, stride.result], [INDEX])
        offset = create_op("arith.sub", [user.operands[at], start.result], [INDEX])
        for op in (stride, start, offset):
            user.insert_before(op)
        user.set_operand(at, offset.result)
        user.set_operand(at - 1, row.result)


def call_sites(module: ModuleOp) -> dict[str, int]:
    """Callee name -> its number of call sites in ``module``."""
    count: dict[str, int] = {}
    for f in module:
        for b in f.blocks:
            for op in b.ops:
                if op.name == "func.call":
                    count[op.attributes["callee"]] = count.get(op.attributes["callee"], 0) + 1
    return count


def _drop_parameters(call: Operation, g: FuncOp, ks: list[int]) -> None:
    """Remove parameters ``ks`` of ``g`` (unused now) and the call's operands for them."""
    call.set_operands([v for i, v in enumerate(call.operands) if i not in ks])
    for k in sorted(ks, reverse=True):
        del g.entry.args[k]
    for i, arg in enumerate(g.entry.args):
        arg.index = i


def _erase_dead(v: OpResult) -> None:
    """Erase ``v``'s op, and the ``loop.retype`` chain it came through, once unused."""
    while not v.has_uses:
        op = v.op
        source = op.operands[0] if op.name == "loop.retype" else None
        op.erase()
        if not isinstance(source, OpResult):
            return
        v = source


def contract_func(module: ModuleOp, func: FuncOp, callers: dict[str, int]) -> int:
    """Contract the row-local buffers of ``func``'s parallel calls; how many.
    ``callers``: ``call_sites(module)`` (only a callee with one call site changes)."""
    calls = [op for b in func.blocks for op in b.ops
             if op.name == "func.call" and op.attributes.get("parallel")]
    count = 0
    for call in calls:
        name = call.attributes["callee"]
        g = module.get(name)
        parts = loop_parts(g) if g is not None and callers.get(name) == 1 else None
        if g is None or parts is None:
            continue
        header, iv, _, _ = parts
        found = accesses(g, iv, inner_bounds(g, header))
        done: list[int] = []
        room = STACK_BYTES
        for k in range(2, len(call.operands)):
            alloc = _alloc_root(call.operands[k])
            param = g.args[k]
            t = param.type
            if alloc is None or not isinstance(t, TensorType) or not _only_user(alloc, call, k):
                continue
            a = _row_stride(param, k, found)
            row_bytes = 0 if a is None else a * ((t.dtype.bits + 7) // 8)
            if a is None or row_bytes > room:
                continue
            room -= row_bytes
            _contract(g, param, iv, a)
            done.append(k)
        passed = [call.operands[k] for k in done]
        _drop_parameters(call, g, done)
        for v in passed:
            _erase_dead(v)  # type: ignore[arg-type]
        count += len(done)
    return count
