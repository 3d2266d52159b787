"""The one error the PTX simulator raises: ``PtxSimError``.

Invariant: every failure the simulator detects (a parse error, an unsupported
instruction, an out-of-range or misaligned access, a divergent barrier, a bad
launch) is a ``PtxSimError``; when known it names the kernel, the PTX line and
instruction text, the thread (block and thread coordinates) and the address.
"""

from __future__ import annotations

from wiadsl.diagnostics import WiaRuntimeError


class PtxSimError(WiaRuntimeError):
    """A PTX program failed to parse, is unsupported, or misbehaved while simulated."""

    def __init__(
        self,
        message: str,
        *,
        kernel: str | None = None,
        line: int | None = None,
        instr: str | None = None,
        thread: str | None = None,
        address: int | None = None,
    ):
        self.detail = message
        self.kernel = kernel
        self.line = line
        self.instr = instr
        self.thread = thread
        self.address = address
        parts = [message]
        if kernel is not None:
            parts.append(f"in kernel '{kernel}'")
        if line is not None:
            parts.append(f"at line {line}" + (f" ({instr!r})" if instr else ""))
        if thread is not None:
            parts.append(f"thread {thread}")
        if address is not None:
            parts.append(f"address 0x{address:x}")
        super().__init__(", ".join(parts))


class MemoryFault(Exception):
    """Internal: raised by memory accesses; the executor adds instruction and thread context.

    ``lane`` is the index of the offending thread within the executing wave.
    """

    def __init__(self, message: str, lane: int | None = None, address: int | None = None):
        super().__init__(message)
        self.message = message
        self.lane = lane
        self.address = address
