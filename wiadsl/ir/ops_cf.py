"""Control flow and calls.

Text forms (terminators print without their dialect prefix, as in MLIR's
generic docs and ARCHITECTURE.md):
    br ^exit(%r : tensor<?xf32>)
    cond_br %c, ^then, ^else(%x, %n : tensor<?xf32>, i64)
    return %x, %y : tensor<?xf32>, f32
    %a, %b = func.call @f(%x, %t) : (tensor<?xf32>, f32) -> (tensor<?xf32>, f32)

Edge arity and types against the target block, return types against the
function signature, and call signatures against the callee are checked by the
verifier, which sees the enclosing function and module.
"""

from __future__ import annotations

from ..dtypes import DType
from .core import Operation, Trait
from .ops_base import expect_counts, register
from .types import ScalarType

TERMINATOR = frozenset({Trait.TERMINATOR})


def _expect_successors(op: Operation, count: int) -> None:
    if len(op.successors) != count:
        raise op.error(f"expects {count} successors, got {len(op.successors)}")


@register
class BranchOp(Operation):
    """``br ^dest(args)``: jump, binding ``args`` to the target's block arguments."""

    name = "cf.br"
    traits = TERMINATOR

    def verify(self) -> None:
        expect_counts(self, 0, 0)
        _expect_successors(self, 1)


@register
class CondBranchOp(Operation):
    """``cond_br %c, ^t(args), ^f(args)``: two-way jump on an i1 scalar."""

    name = "cf.cond_br"
    traits = TERMINATOR

    def verify(self) -> None:
        expect_counts(self, 1, 0)
        _expect_successors(self, 2)
        if self.operand_types[0] != ScalarType(DType.BOOL):
            raise self.error(f"condition must be i1, got {self.operand_types[0]}")


@register
class ReturnOp(Operation):
    """``return %v... : T...``: leave the function with the signature's results."""

    name = "func.return"
    traits = TERMINATOR

    def verify(self) -> None:
        expect_counts(self, (0, None), 0)
        _expect_successors(self, 0)


@register
class CallOp(Operation):
    """``func.call @callee(args) : (T...) -> (R...)``; ``callee`` is a str attribute."""

    name = "func.call"

    def verify(self) -> None:
        _expect_successors(self, 0)
        callee = self.attributes.get("callee")
        if not isinstance(callee, str) or not callee:
            raise self.error(f"attribute 'callee' must be a function name, got {callee!r}")


#: The short spellings the printer uses and the parser accepts for terminators.
SHORT_NAMES = {"cf.br": "br", "cf.cond_br": "cond_br", "func.return": "return"}
