"""Every op kind of the IR, registered by name in ``OPS``.

Importing this module fills the registry; the kinds live in one module per
family (see docs/ir.md for each op's text form and semantics).
"""

from __future__ import annotations

from . import (  # noqa: F401
           ops_arith,
           ops_cf,
           ops_depthwise,
           ops_elementwise,
           ops_fused,
           ops_index,
           ops_loop,
           ops_shape,
           ops_tensor,
           ops_vector,
)
from .ops_base import OPS, constant_of, create_op, op_class, register
from .ops_cf import SHORT_NAMES
from .ops_elementwise import ELEMENTWISE_BY_NAME, ELEMENTWISE_FNS, ElementwiseFn
from .ops_index import AxisSpec

#: Ops whose first operand list starts with a bare predicate word.
CMP_OPS = frozenset({"arith.cmpf", "arith.cmpi", "tensor.cmpf", "tensor.cmpi"})

__all__ = ["OPS", "CMP_OPS", "SHORT_NAMES", "ELEMENTWISE_FNS", "ELEMENTWISE_BY_NAME",
           "ElementwiseFn", "AxisSpec", "constant_of", "create_op", "op_class", "register"]
