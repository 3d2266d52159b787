"""The contract between the jit API (wiadsl/runtime) and a backend: what a compiled
kernel offers the jit, and what the jit hands it.

A backend turns the optimized IR of one kernel specialization into something it
can run (``Backend.compile`` -> ``CompiledKernel``). The jit owns everything
around it: argument checking, the specialization cache, output delivery. The
optional protocols (``FastKernel``, ``IntoKernel``) let a backend take over a
steady-state call's checks or compute results in the caller's buffers. Backends
implement this module; they never import the runtime (tests/test_layering.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..diagnostics import WiaCallError

if TYPE_CHECKING:
    from ..ir.module import ModuleOp


class CompiledKernel(Protocol):
    """One kernel compiled for one specialization."""

    stats: dict[str, Any]

    def run(self, inputs: Sequence[np.ndarray]) -> Sequence[object]:
        """Run on checked inputs (declaration order); return outputs in order."""
        ...


class FastKernel(CompiledKernel, Protocol):
    """A compiled kernel that can check a call itself (optional; the CPU's does).

    The jit then skips its general checks on repeated calls (``CallPlan``), so the
    call ``call_for`` gives must take nothing it was not made for.
    """

    def call_for(self, shapes: tuple[tuple[int, ...], ...]
                 ) -> Callable[[Sequence[object]], list[object] | None] | None:
        """For inputs of ``shapes`` (after a ``run`` at them): a call that runs ``args``
        and returns outputs in order when each is exactly an ndarray (not a subclass)
        of the compiled dtype and of ``shapes``, C-contiguous and aligned, and else
        returns None, having run nothing. None when there is no such call."""
        ...

    def fast_for(self, shapes: tuple[tuple[int, ...], ...],
                 delivered: Sequence[tuple[np.dtype, tuple[int, ...]]]
                 ) -> Callable[[tuple[object, ...]], object] | None:
        """Like ``call_for``, but the call takes the argument tuple and returns what the
        jit delivers -- given ``delivered``, the (dtype, shape) of each output the
        checked call delivered: the output, or a tuple of them, a rank-0 one as a
        NumPy scalar -- or ``NOT_RUN``. None when there is no such call."""
        ...


#: What a ``FastKernel.fast_for`` call answers for arguments it does not take.
NOT_RUN = object()


class IntoKernel(CompiledKernel, Protocol):
    """A compiled kernel that can compute results in the caller's output buffers
    (optional; the CPU's does, by destination passing). The jit uses it for calls
    that pass output buffers (``f(x, y=buf)``)."""

    def run_into(self, inputs: Sequence[np.ndarray],
                 buffers: Sequence[np.ndarray | None]) -> Sequence[object]:
        """``run``, with one buffer (or None) per output; an output computed in its
        buffer comes back as that very array, any other as a fresh one."""
        ...


class Backend(Protocol):
    name: str
    #: True when the backend wants every extent static (it compiles per shape).
    specialize_shapes: bool

    def compile(self, module: ModuleOp, kernel: str, options: dict[str, Any]) -> CompiledKernel:
        ...


def check_distinct_buffers(buffers: dict[str, np.ndarray | None], name: str,
                           buffer: np.ndarray) -> None:
    """Refuse ``buffer`` for output ``name`` when it shares memory with the buffer of
    an output already in ``buffers``: both results cannot be delivered in one
    buffer (before issue 17 the call was accepted and one output held the other)."""
    for other, taken in buffers.items():
        # output buffers are C-contiguous, so overlapping bounds are shared memory
        if taken is not None and taken.size and buffer.size and np.may_share_memory(taken, buffer):
            same = "the same buffer" if taken is buffer else "overlapping buffers"
            raise WiaCallError(f"outputs '{other}' and '{name}' were given {same}; "
                               "pass a separate buffer for each output")


__all__ = ["NOT_RUN", "Backend", "CompiledKernel", "FastKernel", "IntoKernel",
           "check_distinct_buffers"]
