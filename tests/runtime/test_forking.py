"""``wiadsl.forking.child_safe_lock``: a lock another thread holds when the process
forks is free in the child (the child has no such thread to release it)."""

from __future__ import annotations

import os
import threading

import pytest

from tests.cpu.forked import exit_code
from wiadsl.forking import child_safe_lock


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")  # forking a threaded process
@pytest.mark.parametrize("factory", [threading.Lock, threading.RLock])
def test_a_lock_held_by_another_thread_is_free_in_a_forked_child(factory) -> None:
    namespace: dict[str, object] = {}
    lock = child_safe_lock(namespace, "LOCK", factory)
    assert namespace["LOCK"] is lock
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            held.set()
            release.wait(60)
    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(60)
    pid = os.fork()
    if pid == 0:
        fresh = namespace["LOCK"]
        os._exit(0 if fresh is not lock and fresh.acquire(timeout=10) else 1)
    release.set()
    holder.join(60)
    assert exit_code(pid, 60, "the child waited for a lock its parent's thread held") == 0
    assert namespace["LOCK"] is lock  # the parent keeps its own
