"""Running a test's work on several threads at once."""

from __future__ import annotations

import threading
from collections.abc import Callable


def run_in_threads(work: Callable[[int], None], count: int, timeout: float = 120.0) -> None:
    """``work(i)`` for each ``i`` below ``count``, each on a thread of its own, all at
    once; raises the first error a thread met, or fails when one is still running
    after ``timeout`` seconds (a deadlock)."""
    errors: list[BaseException] = []

    def guarded(i: int) -> None:
        try:
            work(i)
        except BaseException as exc:  # noqa: BLE001 - raised below, on the test's thread
            errors.append(exc)
    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout)
    assert not any(t.is_alive() for t in threads), "a thread is still running: a deadlock?"
    if errors:
        raise errors[0]
