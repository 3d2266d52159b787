"""Planning a recognized attention pattern (``attention.match_attention``) as one flash kernel.

At the start of a block the planner finds the patterns (``begin_block``); their
absorbed ops (the scores, the softmax, the causal mask's index tensors) are
*deferred*: ``plan_op`` skips them. When the final ``P @ V`` is reached every leaf
(Q, K^T, V, the scale, the mask offset) has been planned, and ``prepare_attention``
decides:
- the flash kernel applies (float dtype, static head dims <= ``MAX_HEAD``, the
  mask's ``arange`` extents proven to be T and S): P gets a placeholder shape and
  the matmul, when it is materialized (alone or as the sink of an elementwise
  consumer, like any matmul), becomes ``flash_attention``'s one kernel;
- otherwise the deferred ops are planned now, in block order, exactly as they
  would have been (today's three kernels).

Invariants:
- A deferred op is only ever read by other deferred ops of its match or by the
  final matmul (``AttentionMatch.absorbed`` is closed under uses), so skipping it
  leaves no reader without a value, and planning it late changes no result.
- The flash path checks what the unfused path checks: equal inner extents and a
  non-empty key axis (NumPy has no max of zero elements).
"""

from __future__ import annotations

from ....ir.core import Block, Operation, Value, defining_op
from ....ir.types import TensorType
from ..expr import ScalarArg
from ..isa import sm_number
from ..kernels.flash import AttentionSpec, flash_kernel, flash_supported
from ..kernels.gemm_epilogue import EpilogueMap
from ..kernels.operands import strided_operand
from ..symbolic import Sym, add, mul
from .attention import AttentionMatch, Leaf, Num, Term, find_attention
from .products import PlannerBase
from .values import Lazy, View, broadcast_shapes, broadcast_stride


class AttentionMixin(PlannerBase):
    """The planner's attention rule; state: ``attention`` (final matmul id -> match),
    ``deferred`` (ids of ops not planned yet), ``flash_ready`` (final matmul id -> views)."""

    attention: dict[int, AttentionMatch]
    deferred: set[int]

    def begin_block(self, block: Block) -> None:
        self.attention = find_attention(block)
        self.deferred = {id(op) for m in self.attention.values() for op in m.absorbed}

    def prepare_attention(self, op: Operation) -> None:
        """At the final matmul ``op`` of a match: keep it for the flash kernel, or plan
        the deferred ops now (the unfused path)."""
        match = self.attention[id(op)]
        views = self._flash_views(match)
        if views is None:
            for absorbed in match.absorbed:
                self.deferred.discard(id(absorbed))
            for absorbed in match.absorbed:
                self.plan_op(absorbed)  # type: ignore[attr-defined]
            return
        q, kt, _ = views
        p = op.operands[0]
        p_op = defining_op(p)
        assert p_op is not None
        batch = broadcast_shapes([q.shape[:-2], kt.shape[:-2]], self.unify)
        self.env[id(p)] = Lazy(p_op, (*batch, q.shape[-2], kt.shape[-1]))  # shape only
        self.flash_ready[id(op)] = views

    def _flash_views(self, m: AttentionMatch) -> tuple[View, View, View] | None:
        q, kt, v = (self.materialize(x) for x in (m.q, m.kt, m.v))
        if not flash_supported(q.dtype, q.shape[-1], v.shape[-1]):
            return None
        if m.causal is not None and not (
                self._extent_is(m.causal.rows, q.shape[-2])
                and self._extent_is(m.causal.cols, kt.shape[-1], v.shape[-2])):
            return None
        return q, kt, v

    def _extent_is(self, term: Term, *want: Sym) -> bool:
        """Whether an ``arange``'s extent is provably one of ``want``: a literal equal to
        one, or (through integer casts) ``tensor.dim`` of an axis planned as one."""
        if isinstance(term, Num):
            return term.value in want
        assert isinstance(term, Leaf)
        host = self.host(term.value)
        if host.is_literal:
            return host.value in want
        v: Value = term.value
        while (op := defining_op(v)) is not None and op.name == "arith.cast":
            v = op.operands[0]
        if op is None or op.name != "tensor.dim" or \
                not isinstance(op.operands[0].type, TensorType):
            return False
        shape = self.shape(op.operands[0])
        return shape[op.attributes["axis"] % len(shape)] in want

    def flash_attention(self, op: Operation, sink: Operation | None) -> View:
        """The one kernel of a prepared match; returns the output (or ``sink``'s)."""
        match = self.attention[id(op)]
        q, kt, v = self.flash_ready[id(op)]
        t, d, s, e = q.shape[-2], q.shape[-1], kt.shape[-1], v.shape[-1]
        self.check(f"{d} == {kt.shape[-2]}",
                   f"'tensor.matmul': inner extents {d} and {kt.shape[-2]} differ")
        self.check(f"{s} == {v.shape[-2]}",
                   f"'tensor.matmul': inner extents {s} and {v.shape[-2]} differ")
        self.check(f"{s} > 0", "'tensor.reduce_max' of an empty tensor")
        batch = broadcast_shapes([q.shape[:-2], kt.shape[:-2], v.shape[:-2]], self.unify)
        nb = len(batch)
        domain = (*batch, t, e)
        spec, out = self.product_output(op, sink, self.kernel_name("attention"), domain,  # type: ignore[attr-defined]
                                        tuple(range(nb + 2)))

        def strides(view: View) -> tuple[Sym, ...]:
            lead = nb - (len(view.shape) - 2)
            return (0,) * lead + tuple(broadcast_stride(x, batch[lead + i], st) for i, (x, st)
                                       in enumerate(zip(view.shape[:-2], view.strides[:-2], strict=True)))

        qo = strided_operand(q.buffer, q.dtype, q.offset, strides(q), t, q.strides[-2], d,
                             q.strides[-1])
        ko = strided_operand(kt.buffer, kt.dtype, kt.offset, strides(kt), s, kt.strides[-1], d,
                             kt.strides[-2])
        vo = strided_operand(v.buffer, v.dtype, v.offset, strides(v), s, v.strides[-2], e,
                             v.strides[-1])
        emap = EpilogueMap(tuple(range(nb)), batch, (nb,), (t,), (nb + 1,), (e,))
        causal = None if match.causal is None else self._offset(match.causal.offset)
        aspec = AttentionSpec(spec.name, batch, t, s, int(d), int(e), qo, ko, vo,  # type: ignore[arg-type]
                              self._scale(match), causal, spec, emap)
        self.add_kernel(flash_kernel(aspec, sm_number(self.arch)))
        return out

    def _scale(self, m: AttentionMatch) -> tuple[str, ScalarArg | float] | None:
        if m.scale is None:
            return None
        term = m.scale.value
        if isinstance(term, Num):
            return m.scale.op, _rounded(float(term.value), m)
        assert isinstance(term, Leaf)
        host = self.host(term.value)
        if host.is_literal:
            return m.scale.op, _rounded(float(host.value), m)
        return m.scale.op, ScalarArg(str(host.value), host.dtype)  # type: ignore[arg-type]

    def _offset(self, terms: tuple[tuple[int, Term], ...]) -> Sym:
        total: Sym = 0
        for sign, term in terms:
            value: Sym = int(term.value) if isinstance(term, Num) else \
                self.host(term.value).sym  # type: ignore[attr-defined]
            total = add(total, mul(sign, value))
        return total


def _rounded(value: float, m: AttentionMatch) -> float:
    """A literal scale in the scores' dtype (a weak literal takes it, LANGUAGE.md §3)."""
    from ..isa import round16
    from .fuse import value_dtype

    dt = value_dtype(m.q)
    if dt is not None and dt.bits == 16:
        return round16(value, dt)
    import numpy as np

    return float(np.float32(value))


__all__ = ["AttentionMixin"]
