"""``no_cyclic_gc``: pause Python's cycle collector while a phase builds large trees

A parse or a check allocates millions of tokens, nodes and types, none in a cycle,
that stay alive until the phase ends: each full collection rescans all of them (a
fifth of the parse time and half the check time of a large file). Reference counting
still frees what the phase drops; a caller that had disabled the collector keeps it
disabled.

Re-enabling alone is not enough: everything the phase allocated still sits in the
youngest generation, so the first allocation after it runs a collection that scans
the whole tree (a quarter of a 16k-line parse). On the way out the phase's objects
are moved to the oldest generation without a scan (``gc.freeze`` then ``gc.unfreeze``
move whole generation lists), where the collector visits them only in its rare full
collections. Skipped when the process froze objects of its own (a pre-fork server):
unfreezing would undo that.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """Run the body with the cycle collector off, restoring its state after."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        gc.enable()
