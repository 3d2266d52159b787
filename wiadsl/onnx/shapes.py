"""Symbolic extents for the ONNX importer: each dim is a monomial ``coef * a * b``.

ONNX graphs with dynamic axes (``dim_param = "batch"``) reshape through products
of dims (``[batch, seq, 8, 32] -> [batch * seq, 256]``). The importer must know
every intermediate shape to write reshape targets and output declarations, so a
dim is a ``Dim``: an integer coefficient times a multiset of symbolic names.

Invariants:
- A ``Dim`` is immutable and normalized (names sorted); ``Dim(4)`` is static.
- Products and exact quotients of Dims stay Dims; a quotient that does not
  divide exactly, or a sum of different monomials, raises ``DimError`` (the
  importer turns it into an error naming the node), never a wrong extent.
- ``text()`` is a WIA DSL expression of the extent (``batch * seq``, ``2 * batch``),
  legal where LANGUAGE.md allows a dim in a shape list.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


class DimError(Exception):
    """An extent that a monomial cannot express (the caller names the node)."""


@dataclass(frozen=True)
class Dim:
    coef: int
    names: tuple[str, ...] = ()

    @staticmethod
    def of(x: int | str | Dim) -> Dim:
        if isinstance(x, Dim):
            return x
        if isinstance(x, str):
            return Dim(1, (x,))
        return Dim(int(x))

    @property
    def is_static(self) -> bool:
        return not self.names

    @property
    def value(self) -> int:
        """The extent of a static dim."""
        if self.names:
            raise DimError(f"extent {self.text()} is not known statically")
        return self.coef

    def __mul__(self, other: Dim | int) -> Dim:
        o = Dim.of(other)
        return Dim(self.coef * o.coef, tuple(sorted(self.names + o.names)))

    def __floordiv__(self, other: Dim | int) -> Dim:
        """The exact quotient; raises DimError when it is not a monomial."""
        o = Dim.of(other)
        rest = Counter(self.names)
        rest.subtract(Counter(o.names))
        if any(n < 0 for n in rest.values()) or o.coef == 0 or self.coef % o.coef:
            raise DimError(f"{self.text()} is not a multiple of {o.text()}")
        return Dim(self.coef // o.coef, tuple(sorted(rest.elements())))

    def __add__(self, other: Dim | int) -> Dim:
        o = Dim.of(other)
        if self.coef == 0:
            return o
        if o.coef == 0:
            return self
        if self.names != o.names:
            raise DimError(f"{self.text()} + {o.text()} is not a single symbolic extent")
        return Dim(self.coef + o.coef, self.names)

    def text(self) -> str:
        """A WIA DSL expression for this extent."""
        parts = ([str(self.coef)] if self.coef != 1 or not self.names else []) + list(self.names)
        return " * ".join(parts)

    def declared(self) -> str | None:
        """The spelling in a parameter type (an int or one name), or None."""
        if not self.names:
            return str(self.coef)
        if self.coef == 1 and len(self.names) == 1:
            return self.names[0]
        return None

    def __str__(self) -> str:
        return self.text()


Shape = tuple[Dim, ...]


def shape_of(dims: Iterable[int | str | Dim]) -> Shape:
    return tuple(Dim.of(d) for d in dims)


def numel(shape: Sequence[Dim]) -> Dim:
    total = Dim(1)
    for d in shape:
        total = total * d
    return total


def is_static(shape: Sequence[Dim]) -> bool:
    return all(d.is_static for d in shape)


def static(shape: Sequence[Dim]) -> tuple[int, ...]:
    return tuple(d.value for d in shape)


def broadcast(*shapes: Sequence[Dim]) -> Shape:
    """NumPy (= ONNX multidirectional) broadcasting of symbolic shapes."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[Dim] = []
    for axis in range(rank):
        dims = {s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0}
        dims.discard(Dim(1))
        if len(dims) > 1:
            raise DimError("cannot broadcast shapes "
                           + ", ".join("[" + ", ".join(map(str, s)) + "]" for s in shapes))
        out.append(dims.pop() if dims else Dim(1))
    return tuple(out)


def substitute(shape: Sequence[Dim], fixed: dict[str, int]) -> Shape:
    """``shape`` with the names in ``fixed`` replaced by their extents."""
    out = []
    for d in shape:
        coef, names = d.coef, []
        for n in d.names:
            if n in fixed:
                coef *= fixed[n]
            else:
                names.append(n)
        out.append(Dim(coef, tuple(names)))
    return tuple(out)


def shape_text(shape: Sequence[Dim]) -> str:
    return "[" + ", ".join(d.text() for d in shape) + "]"
