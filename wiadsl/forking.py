"""Locks that a forked child finds free.

``os.fork`` copies only the thread that calls it: a lock another thread held at
that moment (a compile or load in the background) stays held in the child, and the
child's first compile or load would wait for it forever. A module-level lock made
with ``child_safe_lock`` is replaced by a new one in every forked child.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any


def child_safe_lock(namespace: dict[str, Any], name: str,
                    factory: Callable[[], Any] = threading.Lock) -> Any:
    """A new ``factory()`` lock, bound as ``namespace[name]`` (a module's ``globals()``)
    and rebound to a fresh one in each forked child; returns it."""
    namespace[name] = factory()
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=lambda: namespace.__setitem__(name, factory()))
    return namespace[name]
