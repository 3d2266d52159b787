"""Memory instructions: ld, ldu, st, atom, red, cp.async (+ commit/wait), prefetch, isspacep.

Invariants: every access is bounds-, alignment- and (shared) init-checked by
``memory``; ``.vN`` accesses are aligned to the whole vector; atomics are applied
in lane order, so lanes hitting one address see each other's updates exactly as
a serial execution would, and are not race-tracked; ``cp.async`` data reaches shared
memory only when a ``cp.async.wait_group``/``wait_all`` retires it (``asyncq``).
"""

from __future__ import annotations

import numpy as np

from . import access, fmath
from .ast import Imm, Vec
from .dispatch import Compiled, op, unsupported
from .errors import MemoryFault
from .operands import mods_of, reader, writer
from .ptxtypes import TYPES


def _vec_count(cx, flags: set[str]) -> int:
    for v in ("v2", "v4", "v8"):
        if v in flags:
            flags.discard(v)
            return int(v[1:])
    return 1


@op("ld", "ldu")
def build_ld(ins, cx):
    flags, types = mods_of(ins)
    space = access.space_of(flags)
    count = _vec_count(cx, flags)
    unsupported(cx, flags, set())
    (t,) = types
    dst, src = ins.operands
    items = dst.items if isinstance(dst, Vec) else (dst,)
    if len(items) != count:
        raise cx.error(f"'{ins.opcode}' needs {count} destination registers")
    ws = [writer(cx, d, t) for d in items]
    addr = access.address(cx, src)

    def run(w, idx):
        lanes = access.lanes_of(w, idx)
        vals = access.load(w, space, addr(w, idx), lanes, t, count)
        for k, wr in enumerate(ws):
            wr(w, idx, vals[:, k])

    return Compiled(ins, run)


@op("st")
def build_st(ins, cx):
    flags, types = mods_of(ins)
    space = access.space_of(flags)
    count = _vec_count(cx, flags)
    unsupported(cx, flags, set())
    (t,) = types
    dst, src = ins.operands
    items = src.items if isinstance(src, Vec) else (src,)
    if len(items) != count:
        raise cx.error(f"'{ins.opcode}' needs {count} source values")
    rs = [reader(cx, s, t) for s in items]
    addr = access.address(cx, dst)

    def run(w, idx):
        lanes = access.lanes_of(w, idx)
        n = len(lanes)
        vals = np.empty((n, count), t.np)
        for k, r in enumerate(rs):
            vals[:, k] = r(w, idx)
        access.store(w, space, addr(w, idx), lanes, t, vals)

    return Compiled(ins, run)


def _atom_fn(name: str, t, cx):
    bits = t.bits
    if name == "add":
        if t.is_float:
            return lambda old, b, c: (old + b).astype(t.np)
        return lambda old, b, c: fmath.typed(fmath.uview(old, bits) + fmath.uview(b, bits), t)
    if name in ("min", "max"):
        f: np.ufunc = np.minimum if name == "min" else np.maximum
        if t.is_float:
            f = np.fmin if name == "min" else np.fmax
        return lambda old, b, c: f(old, b)
    if name in ("and", "or", "xor"):
        f = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[name]
        return lambda old, b, c: fmath.typed(f(fmath.uview(old, bits), fmath.uview(b, bits)), t)
    if name == "exch":
        return lambda old, b, c: np.broadcast_to(np.asarray(b, t.np), np.shape(old))
    if name == "cas":
        def cas(old: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
            return np.where(old == b, c, old).astype(t.np)
        return cas
    if name == "inc":
        return lambda old, b, c: np.where(old >= b, 0, old + 1).astype(t.np)
    if name == "dec":
        return lambda old, b, c: np.where((old == 0) | (old > b), b, old - 1).astype(t.np)
    raise cx.error(f"unsupported instruction '{cx.instr.opcode}' at line {cx.instr.line}")


_ATOM_OPS = ("add", "min", "max", "and", "or", "xor", "exch", "cas", "inc", "dec")


@op("atom", "red")
def build_atom(ins, cx):
    flags, types = mods_of(ins)
    space = access.space_of(flags)
    names = [f for f in flags if f in _ATOM_OPS]
    unsupported(cx, flags, set(_ATOM_OPS) | {"noftz"})
    if len(names) != 1 or len(types) != 1:
        raise cx.error(f"unsupported instruction '{ins.opcode}' at line {ins.line}")
    t = types[0]
    if t.kind == "b" and names[0] in ("add", "min", "max", "inc", "dec"):
        t = TYPES[f"u{t.bits}"]
    f = _atom_fn(names[0], t, cx)
    ops = ins.operands
    is_atom = ins.op == "atom"
    d = writer(cx, ops[0], t) if is_atom else None
    addr = access.address(cx, ops[1 if is_atom else 0])
    srcs = [reader(cx, o, t) for o in ops[(2 if is_atom else 1):]]
    if len(srcs) != (2 if names[0] == "cas" else 1):
        raise cx.error(f"'{ins.opcode}' has the wrong number of operands")

    def run(w, idx):
        lanes = access.lanes_of(w, idx)
        n = len(lanes)
        b = np.broadcast_to(np.asarray(srcs[0](w, idx), t.np), (n,))
        c = np.broadcast_to(np.asarray(srcs[1](w, idx), t.np), (n,)) if len(srcs) > 1 else b
        old_all = np.empty(n, t.np)
        # atomics are ordered among themselves: kept out of the race tracker
        for sel, view, index in access.chunks(w, space, addr(w, idx), lanes, t, 1, True, False):
            ix = tuple(np.broadcast_to(i, (len(index[-1]), 1))[:, 0] for i in index)
            bs, cs = b[sel], c[sel]
            key = ix[-1] if len(ix) == 1 else ix[0] * (view.shape[-1] + 1) + ix[1]
            if len(np.unique(key)) == len(key):
                old = view[ix].copy()
                view[ix] = f(old, bs, cs)
            else:
                old = np.empty(len(key), t.np)
                with np.errstate(all="ignore"):
                    for k in range(len(key)):
                        one = tuple(i[k] for i in ix)
                        old[k] = view[one]
                        view[one] = f(view[one], bs[k], cs[k])
            old_all[sel] = old
        if d is not None:
            d(w, idx, old_all)

    return Compiled(ins, run)


@op("cp")
def build_cp_async(ins, cx):
    """``cp.async.{ca,cg}.shared.global [dst], [src], size{, src_size}`` and the group ops.

    The copy reads global memory now and lands in shared memory at a wait (``asyncq``)."""
    mods = ins.mods
    if mods[:2] == ("async", "bulk"):
        from .ops_bulk import build_bulk

        return build_bulk(ins, cx)
    if mods[:1] != ("async",):
        raise cx.error(f"unsupported instruction '{ins.opcode}' at line {ins.line}")
    if mods[1:2] in (("commit_group",), ("wait_group",), ("wait_all",)):
        return _build_cp_group(ins, cx, mods[1])
    flags = set(mods[1:])
    unsupported(cx, flags, {"shared", "shared::cta", "global"})
    ops = ins.operands
    size = int(ops[2].value)
    if size not in (4, 8, 16):
        raise cx.error(f"cp.async size must be 4, 8 or 16, not {size}")
    dst, src = access.address(cx, ops[0]), access.address(cx, ops[1])
    src_size = reader(cx, ops[3], TYPES["u32"]) if len(ops) > 3 else None
    u32, u8 = TYPES["u32"], TYPES["u8"]

    def run(w, idx):
        lanes = access.lanes_of(w, idx)
        da, sa = dst(w, idx), src(w, idx)
        n = len(lanes)
        nbytes = np.full(n, size) if src_size is None else np.broadcast_to(
            np.asarray(src_size(w, idx)).astype(np.int64), (n,))
        data = np.zeros((n, size), np.uint8)
        whole = np.flatnonzero(nbytes >= size)
        if len(whole):
            v = access.load(w, "global", sa[whole], lanes[whole], u32, size // 4)
            data[whole] = v.view(np.uint8).reshape(len(whole), size)
        part = np.flatnonzero((nbytes > 0) & (nbytes < size))
        for k in range(size):
            sel = part[nbytes[part] > k]
            if len(sel):
                data[sel, k] = access.load(w, "global", sa[sel] + np.uint64(k), lanes[sel], u8, 1)[:, 0]
        if (da % np.uint64(size)).any():
            bad = int(np.flatnonzero(da % np.uint64(size))[0])
            raise MemoryFault(f"misaligned cp.async destination (must be a multiple of {size})",
                              int(lanes[bad]), int(da[bad]))
        w.asyncq.issue(lanes, da, data, w.pc_now)

    return Compiled(ins, run)


def _build_cp_group(ins, cx, kind: str):
    """``cp.async.commit_group``, ``cp.async.wait_group N``, ``cp.async.wait_all``."""
    if kind == "commit_group":
        return Compiled(ins, lambda w, idx: w.asyncq.commit(access.lanes_of(w, idx)))
    if kind == "wait_all":
        def wait_all(w, idx):
            lanes = access.lanes_of(w, idx)
            w.asyncq.commit(lanes)
            w.asyncq.wait(lanes, 0)

        return Compiled(ins, wait_all)
    if len(ins.operands) != 1 or not isinstance(ins.operands[0], Imm):
        raise cx.error("cp.async.wait_group needs one integer constant")
    allowed = int(ins.operands[0].value)
    return Compiled(ins, lambda w, idx: w.asyncq.wait(access.lanes_of(w, idx), allowed))


@op("prefetch", "prefetchu")
def build_prefetch(ins, cx):
    return Compiled(ins, lambda w, idx: None)


@op("isspacep")
def build_isspacep(ins, cx):
    flags, _ = mods_of(ins)
    space = access.space_of(flags)
    from .memory import LOCAL_WINDOW, SHARED_WINDOW, WINDOW_SIZE

    a = reader(cx, ins.operands[1], TYPES["u64"])
    d = writer(cx, ins.operands[0], TYPES["pred"])

    def run(w, idx):
        v = np.asarray(a(w, idx), np.uint64)
        sh = (v >= SHARED_WINDOW) & (v < SHARED_WINDOW + WINDOW_SIZE)
        lo = (v >= LOCAL_WINDOW) & (v < LOCAL_WINDOW + WINDOW_SIZE)
        d(w, idx, {"shared": sh, "local": lo}.get(space, ~(sh | lo)))

    return Compiled(ins, run)
