"""``depthwise``: a sum over taps of windows of one zero-padded input, each times a
per-channel weight, becomes ``tensor.depthwise_conv2d`` (ir/ops_depthwise.py).

A depthwise convolution has no DSL builtin; it is written (and imported from ONNX,
onnx/ops/conv.py) as what it computes:

    padded = full([N, C, H + pt + pb, W + pl + pr], 0.0, f32);
    padded[:, :, pt:pt + H, pl:pl + W] = x;
    y = padded[:, :, a0:..:sh, b0:..:sw] * taps[0] + padded[:, :, a0:.., b0 + dw:..] * taps[1] + ...

Lowered as written, that is a padded copy of the input and an elementwise loop of
``kh * kw`` window operands (split over several kernels past fusion's input limit).
The op this pass makes is one kernel that reads the input in place, the padding
by masked loads (backends/llvm/depthwise.py), so the CPU backend runs this pass
before ``fuse`` (which then fuses the bias, batch norm and activation after it).

What is matched (anything else is left as it is):
- the root: a ``tensor.add`` tree (inner adds of the root's type and with a single
  use are part of it) whose leaves include one ``window * tap`` term per tap;
- a window: ``tensor.extract_slice`` of ``P`` selecting all of axes 0 and 1 and a
  constant slice of axes 2 and 3 (step >= 1), of the root's type;
  ``P`` is the input ``x`` itself or ``insert_slice(x, full(0.0))`` (the zero padding:
  ``x`` fills a constant step-1 box of the last two axes, its batch and channel
  extents provably ``P``'s);
- a tap: ``tensor.extract_slice`` of one static tensor ``T`` [K, C, 1, 1] at a
  constant index k; the K taps form a kh x kw grid (k = i * kw + j) of window starts
  ``(a0 + i * dh, b0 + j * dw)`` with one common step and output extent;
- f32 or f64, static spatial extents of ``P`` and of the output.
Leaves that are not tap terms stay: the result is ``depthwise_conv2d(x, T as
[kh, kw, C]) + other leaves`` (float addition reassociated: rounding may differ).

Invariants: the new ops take the root's ``loc``; the replaced ops are removed when
dead; the function's meaning is kept (padding reads are zeros in both forms).
"""

from __future__ import annotations

from ..ir.builder import Builder
from ..ir.core import Operation, OpResult, Value
from ..ir.module import ModuleOp
from ..ir.ops import constant_of
from ..ir.ops_depthwise import DTYPES
from ..ir.ops_index import AxisSpec
from ..ir.types import TensorType
from ..records import record
from .base import Pass, PassContext, register_pass
from .extents import Extents


def _producer(v: Value, name: str) -> Operation | None:
    return v.op if isinstance(v, OpResult) and v.op.name == name else None


def _spatial_slices(op: Operation, source: TensorType) -> tuple[tuple[int, int, int], ...] | None:
    """((start, step, count) of axis 2, of axis 3) of a slice op that keeps axes 0 and 1
    whole and cuts the last two with constants; None otherwise."""
    raw = op.attributes.get("layout")
    if not isinstance(raw, list) or source.rank != 4:
        return None
    specs = [AxisSpec.parse(x) for x in raw] + [AxisSpec(False)] * (4 - len(raw))
    if None in specs or any(s is None or s.is_index for s in specs):
        return None
    parts = [constant_of(v) for v in op.operands[op.base:]]  # type: ignore[attr-defined]
    if any(p is None for p in parts) or specs[0] != AxisSpec(False) or specs[1] != AxisSpec(False):
        return None
    it = iter(int(p) for p in parts if p is not None)
    out = []
    for axis in (2, 3):
        spec, extent = specs[axis], source.shape[axis]
        if extent is None:
            return None
        s = slice(next(it) if spec.start else None, next(it) if spec.stop else None,  # type: ignore[union-attr]
                  next(it) if spec.step else None)  # type: ignore[union-attr]
        start, stop, step = s.indices(extent)
        count = len(range(start, stop, step))
        if step < 1 or count < 1:
            return None
        out.append((start, step, count))
    return tuple(out)


@record(frozen=True)
class Padded:
    """The input ``x`` a window source ``P`` zero-pads by (top, left) (0, 0 for x itself)."""

    x: Value
    top: int
    left: int


def padded(p: Value, extents: Extents, fill: float = 0.0) -> Padded:
    """``p`` as ``insert_slice(x, full(fill))``: x inside a band of ``fill`` on the last
    two axes (its batch and channel extents provably ``p``'s); else ``p`` itself."""
    ins = _producer(p, "tensor.insert_slice")
    if ins is None:
        return Padded(p, 0, 0)
    x, dest = ins.operands[0], ins.operands[1]
    full = _producer(dest, "tensor.full")
    if full is None or constant_of(full.operands[0]) != fill or not isinstance(x.type, TensorType):
        return Padded(p, 0, 0)
    box = _spatial_slices(ins, dest.type)  # type: ignore[arg-type]
    xt = x.type
    if box is None or xt.rank != 4 or any(step != 1 for _, step, _ in box) \
            or tuple(n for _, _, n in box) != xt.shape[2:] \
            or extents.of(x)[:2] != extents.of(p)[:2]:
        return Padded(p, 0, 0)
    return Padded(x, box[0][0], box[1][0])


@record(frozen=True)
class Term:
    """One ``window * tap`` leaf."""

    value: Value
    source: Value  # the window's P
    taps: Value  # T
    k: int
    start: tuple[int, int]
    step: tuple[int, int]


def _term(v: Value, root_type: TensorType) -> Term | None:
    mul = _producer(v, "tensor.mul")
    if mul is None or len(v.uses) != 1 or mul.parent is None:
        return None
    for win_v, tap_v in (mul.operands, reversed(mul.operands)):
        win, tap = _producer(win_v, "tensor.extract_slice"), _producer(tap_v, "tensor.extract_slice")
        if win is None or tap is None or win_v.type != root_type:
            continue
        cut = _spatial_slices(win, win.operands[0].type)  # type: ignore[arg-type]
        t = tap.operands[0].type
        k = constant_of(tap.operands[1]) if len(tap.operands) == 2 else None
        if cut is None or k is None or tap.attributes.get("layout") != ["i"] \
                or not isinstance(t, TensorType) or t.rank != 4 or not t.is_static \
                or t.shape[2:] != (1, 1) or t.shape[1] != root_type.shape[1] \
                or not 0 <= int(k) < t.shape[0]:  # type: ignore[operator]
            continue
        return Term(v, win.operands[0], tap.operands[0], int(k), (cut[0][0], cut[1][0]),
                    (cut[0][1], cut[1][1]))
    return None


def _leaves(root: Operation) -> list[Value]:
    """The leaves of the add tree at ``root`` (inner adds: single use, the root's type)."""
    out: list[Value] = []

    def walk(v: Value, top: bool) -> None:
        add = _producer(v, "tensor.add")
        if add is not None and add.parent is root.parent and v.type == root.result.type \
                and (top or len(v.uses) == 1):
            for x in add.operands:
                walk(x, False)
        else:
            out.append(v)
    walk(root.result, True)
    return out


@record(frozen=True)
class Grid:
    kernel: tuple[int, int]
    dilation: tuple[int, int]
    start: tuple[int, int]


def _grid(terms: list[Term]) -> Grid | None:
    """The kh x kw layout of the taps (k = i * kw + j at start + (i*dh, j*dw)), if any."""
    by_k = {t.k: t for t in terms}
    taps = terms[0].taps.type
    assert isinstance(taps, TensorType) and taps.shape[0] is not None  # static (_term)
    n = taps.shape[0]
    if len(by_k) != len(terms) or sorted(by_k) != list(range(n)) or n < 2:
        return None
    a0, b0 = by_k[0].start
    for kw in range(1, n + 1):
        if n % kw:
            continue
        kh = n // kw
        dh = by_k[kw].start[0] - a0 if kh > 1 else 1
        dw = by_k[1].start[1] - b0 if kw > 1 else 1
        if dh < 1 or dw < 1:
            continue
        if all(by_k[i * kw + j].start == (a0 + i * dh, b0 + j * dw)
               for i in range(kh) for j in range(kw)):
            return Grid((kh, kw), (dh, dw), (a0, b0))
    return None


def rewrite_root(root: Operation, extents: Extents) -> bool:
    """Replace the tap terms of the add tree at ``root`` by one depthwise convolution."""
    rt = root.result.type
    if not isinstance(rt, TensorType) or rt.rank != 4 or rt.dtype not in DTYPES \
            or None in rt.shape[1:]:
        return False
    leaves = _leaves(root)
    terms = [t for t in (_term(v, rt) for v in leaves) if t is not None]
    if len(terms) < 2 or len({(t.source, t.taps, t.step) for t in terms}) != 1:
        return False
    grid = _grid(terms)
    if grid is None:
        return False
    src = padded(terms[0].source, extents)
    xt = src.x.type  # its batch and channel extents are the windows' (padded)
    if not isinstance(xt, TensorType) or xt.dtype is not rt.dtype:
        return False
    (kh, kw), channels = grid.kernel, rt.shape[1]
    b = Builder.before(root)
    b.loc = root.loc
    weight = b.value("tensor.reshape", [terms[0].taps], TensorType(rt.dtype, (kh, kw, channels)))
    attrs = {"stride": list(terms[0].step), "dilation": list(grid.dilation),
             "padding": [src.top - grid.start[0], src.left - grid.start[1]]}
    acc = b.value("tensor.depthwise_conv2d", [src.x, weight], rt, attrs, root.result.name_hint)
    taken = {id(t.value) for t in terms}
    for v in leaves:
        if id(v) not in taken:
            acc = b.value("tensor.add", [acc, v], rt)
    root.result.replace_all_uses_with(acc)
    _erase_replaced(root, terms)
    return True


def _erase_replaced(root: Operation, terms: list[Term]) -> None:
    """Erase the replaced tree and what only it read: DCE keeps ops of dynamic shapes
    (their run-time shape checks), but these cannot fail -- every window and tap is a
    constant in-range slice of one tensor, and every add sums equal shapes."""
    doomed: list[Operation] = []

    def tree(op: Operation) -> None:
        doomed.append(op)
        for x in op.operands:
            add = _producer(x, "tensor.add")
            if add is not None and len(x.uses) == 1 and x.type == root.result.type:
                tree(add)
    tree(root)
    for t in terms:
        mul = _producer(t.value, "tensor.mul")
        assert mul is not None  # a term is a product (_term)
        doomed.append(mul)
        doomed += [x.op for x in mul.operands if isinstance(x, OpResult)]  # window, tap
    pad = _producer(terms[0].source, "tensor.insert_slice")
    if pad is not None:
        doomed.append(pad)
        doomed += [x.op for x in pad.operands[1:2] if isinstance(x, OpResult)]  # the full
    for op in doomed:  # users come before their operands in this list
        if op.parent is not None and not any(r.uses for r in op.results):
            op.erase()


@register_pass
@record(frozen=True)
class Depthwise(Pass):
    """Sums of per-channel-weighted windows of one zero-padded input -> depthwise_conv2d."""

    name = "depthwise"

    def run(self, module: ModuleOp, ctx: PassContext) -> None:
        from .dce import remove_dead_ops
        for func in module:
            extents = Extents()
            found = 0
            for block in func.blocks:
                for op in reversed(list(block.ops)):
                    if op.name == "tensor.add" and op.parent is not None and op.result.uses \
                            and rewrite_root(op, extents):
                        found += 1
                        ctx.remark("fused", f"a sum of windows times per-channel taps became "
                                            f"{op.result.type} depthwise_conv2d", op)
            if found:
                ctx.count("depthwise convolutions", found)
                remove_dead_ops(func)
