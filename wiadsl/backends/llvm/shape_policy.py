"""Which code serves a call's shapes on the CPU: a static specialization or
shape-generic code (issue 21: a server with varying batch or sequence lengths
must not recompile per request).

A *pattern* is the shapes a compile fixes: per input, per axis, the extent
compiled in, or None for one read at run time (runtime.py's entry ABI). Static
code knows every extent (trip counts, offsets and allocations fold, small loops
unroll); generic code serves every shape that agrees with its fixed extents.

The ``auto`` policy is PyTorch's "automatic dynamic shapes": the first shapes a
kernel sees compile static; a call with other shapes compiles once more, with
every axis that has ever differed from the first call's extent read at run
time, and that code serves every later call whose other extents match. An axis
that starts varying later widens the generic code once more. So a kernel
compiles at most 1 + (its number of input axes) times, however many distinct
extents it sees, and a program that calls it with one shape keeps static code.
``static`` compiles every distinct shape (the behaviour before issue 21);
``generic`` compiles one pattern with every axis dynamic from the first call.
"""

from __future__ import annotations

from ...diagnostics import WiaUsageError
from ...records import field, record

Shapes = tuple[tuple[int, ...], ...]
Pattern = tuple[tuple[int | None, ...], ...]

POLICIES = ("auto", "static", "generic")


def check_policy(name: object) -> str:
    """``name`` when it names a policy, else a WiaUsageError naming the option."""
    if name not in POLICIES:
        raise WiaUsageError(f"option 'shapes' of target 'cpu' must be one of "
                            f"{', '.join(map(repr, POLICIES))}, got {name!r}")
    return str(name)


@record
class ShapePolicy:
    """The pattern to compile (or reuse) for each new call shape (see the module doc)."""

    name: str = "auto"
    first: Shapes | None = None
    #: (input, axis) of every extent seen to differ from ``first``'s
    varying: set[tuple[int, int]] = field(default_factory=set)

    def pattern_for(self, shapes: Shapes) -> Pattern:
        if self.name == "static":
            return shapes
        if self.name == "generic":
            return tuple((None,) * len(s) for s in shapes)
        if self.first is None or len(self.first) != len(shapes):
            self.first = shapes
        first = self.first
        if any(len(s) != len(f) for s, f in zip(shapes, first, strict=True)):
            return shapes  # another rank is another kernel (never reached via the jit)
        self.varying |= {(i, axis) for i, (s, f) in enumerate(zip(shapes, first, strict=True))
                         for axis, (d, e) in enumerate(zip(s, f, strict=True)) if d != e}
        return tuple(tuple(None if (i, axis) in self.varying else d for axis, d in enumerate(f))
                     for i, f in enumerate(first))

