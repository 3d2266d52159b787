"""Step 1 of ``fuse``: epilogues into ``tensor.conv2d`` / ``tensor.matmul`` /
``tensor.depthwise_conv2d``.

The chain of single-use fusible ops after the product (bias, batch norm,
activation, residual add, cast, quantize/dequantize - a requantize) becomes the
body of one ``tensor.fused_conv2d`` / ``tensor.fused_matmul`` /
``tensor.fused_depthwise_conv2d``.

Legality, besides single use (``escape_reason``):
- every operand an epilogue op reads besides the chain value must broadcast
  *into* the product without growing it on every execution: each of its
  extents is a static 1 or provably equal to the product's (``extents.fits``).
  Two unrelated ``?`` extents are not assumed equal: a run-time extent of 1 in
  the product would make the unfused program broadcast *up* (a larger result)
  where the fused op cannot, so such an op ends the chain with a remark;
- the epilogue's result keeps the product's shape (its dtype may change);
- at most ``max_inputs`` operands and ``max_ops`` body ops.
The fused op takes the product's ``loc`` (remarks point at the product).
"""

from __future__ import annotations

from ..ir.core import Operation, Value
from ..ir.ops import op_class
from ..ir.types import ScalarType, TensorType
from .fusion_body import cluster_inputs, kernel_name, make_body
from .fusion_state import (
    FusionState,
    adopt_loc,
    escape_reason,
    op_names,
    replace_and_erase,
    short_name,
    vname,
)

PRODUCTS = ("tensor.conv2d", "tensor.matmul", "tensor.depthwise_conv2d")
#: the kernel-name prefix of each product's fused op
PREFIX = {"tensor.conv2d": "conv", "tensor.matmul": "matmul", "tensor.depthwise_conv2d": "dwconv"}


def fuse_products(st: FusionState) -> None:
    for prod in list(st.block.ops):
        if prod.parent is None or prod.name not in PRODUCTS:
            continue
        if isinstance(prod.result.type, TensorType):
            fuse_one_product(st, prod)


def grow_chain(st: FusionState, prod: Operation) -> list[Operation]:
    """The longest legal epilogue chain after ``prod`` (remarks say where it stops)."""
    t = prod.result.type
    assert isinstance(t, TensorType)
    target = st.extents().of(prod.result)
    chain: list[Operation] = []
    cur: Value = prod.result
    while len(chain) < st.opts.max_ops:
        users = cur.users
        if not users:
            break
        why = escape_reason(cur, {id(users[0])} if len(users) == 1 else set())
        if why is not None:
            st.ctx.remark("missed", f"not fused into {short_name(prod)}: {why}", prod)
            break
        u = users[0]
        if not st.same_block_fusible(u) or u.result.type.shape != t.shape:  # type: ignore[union-attr]
            break
        ext = st.extents()
        bad = [v for v in u.operands if v is not cur and not ext.fits(v, target)]
        if bad:
            st.ctx.remark("missed", f"not fused into {short_name(prod)}: {vname(bad[0])} "
                                    f"({bad[0].type}) may not broadcast into the product "
                                    f"{t} at run time", u)
            break
        inputs = cluster_inputs([*chain, u], t.rank, [prod.result])
        if len(inputs) > st.opts.max_inputs:
            st.ctx.remark("missed", f"not fused: epilogue would need {len(inputs)} inputs "
                                    f"(max_inputs={st.opts.max_inputs})", u)
            break
        chain.append(u)
        cur = u.result
    return chain


def fuse_one_product(st: FusionState, prod: Operation) -> Operation | None:
    chain = grow_chain(st, prod)
    if not chain:
        return None
    t = prod.result.type
    assert isinstance(t, TensorType)
    last = chain[-1]
    inputs = cluster_inputs(chain, t.rank, [prod.result])
    region, _, _ = make_body(inputs, chain, [last.result], [ScalarType(t.dtype)], [prod.result])
    kname = kernel_name(PREFIX[prod.name], chain, t.shape)
    attrs = {**prod.attributes, "kernel": kname}
    new = op_class("tensor.fused_" + short_name(prod))(
        [*prod.operands, *inputs], [last.result.type], attrs, (), [region], [last.result.name_hint])
    adopt_loc(new, prod.loc)
    names = op_names(chain)
    last.insert_before(new)
    replace_and_erase([prod, *chain], [last.result], [new.result])
    st.ctx.count("ops fused", len(chain) + 1)
    st.ctx.remark("fused", f"fused {names} into {kname}", new)
    return new
