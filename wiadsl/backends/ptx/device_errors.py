"""Run-time errors found on the device: one flag buffer per error kind and launch.

The interpreter raises WiaRuntimeError for some element values (an integer to a
negative power); a kernel reports them so:

- it declares a pointer parameter whose plan argument is the placeholder
  ``{"buffer": placeholder(kind)}`` (``ScalarEmitter.device_error``), and every
  thread that meets the error stores 1 through it (all store the same value, so
  the race is harmless);
- the planner replaces the placeholder by a fresh one-element i32 buffer, zeroed
  by a ``write`` step before the launch and read back by a ``read`` step after it;
  a ``check`` step then raises the kind's message, as the interpreter would.

A launch skipped for an empty grid leaves its flag 0: no element, no error.
"""

from __future__ import annotations

from typing import Any

from ...diagnostics import WiaError

PREFIX = "$device_error:"

#: error kind -> the interpreter's message for it
MESSAGES: dict[str, str] = {
    "negative_power": "integers to negative integer powers are not allowed",
}


def placeholder(kind: str) -> str:
    """The plan buffer name a kernel uses for the flag of ``kind``."""
    if kind not in MESSAGES:
        raise WiaError(f"unknown device error kind '{kind}'")
    return PREFIX + kind


def kind_of(arg: dict[str, Any]) -> str | None:
    """The error kind of a launch argument that is a flag placeholder, else None."""
    name = arg.get("buffer")
    if isinstance(name, str) and name.startswith(PREFIX):
        return name[len(PREFIX):]
    return None
