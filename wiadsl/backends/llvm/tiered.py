"""Tiered start (the CPU target's ``tiered`` option): while a shape's native code is
being compiled, calls at that shape run on the reference interpreter.

Why: a model's first result should not wait for its compile. ResNet-18 from ONNX
takes over a second of lowering and LLVM work on an empty cache, while the IR run
op by op on NumPy (``ir/interpreter.py``: BLAS for matmuls and convolutions) gives
the same result in about a tenth of that. This is the eager-then-compiled split of
JIT runtimes (a baseline tier first, optimized code once it is ready).

Protocol, one ``TierUp`` per (kernel, shape):
- A worker thread obtains the native code (``CpuKernel._native_for``). Once its
  cache key is known it either finds the code cached (a load takes milliseconds:
  the caller waits for it and never interprets) or reports a miss through
  ``on_miss`` and waits there until the first interpreted call is done, so the
  compile does not compete with that call for the CPUs and the GIL.
- Calls while the compile runs are interpreted; calls after it use native code.
  An interpreted call that runs more than MAX_STEPS ops (a scalar loop) stops and
  waits for the native code, and so do the later calls while it compiles.
- The worker compiles at a lower CPU priority (``background_priority``), so calls
  interpreted meanwhile are not slowed by it.
- A compile that fails is reported to the next call, which raises its error.
- The worker is not a daemon thread: a process that exits mid-compile finishes it,
  and the code lands in the cache for the next process.
- A child forked mid-compile does not inherit the worker: its kernels' locks, their
  tiers and the compile cache's locks and flights start afresh there (backend.py,
  cache/entries.py), and its own calls start their own compiles.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable

#: ops an interpreted call may run before it gives up and waits for the native code.
#: Models run op by op at the tensor level: ResNet-18, MobileNetV2, BERT and GPT-2
#: exports ran 400-1,900 ops (BERT's embedding gathers grow with the tokens: 1,544 at
#: 33). A scalar loop runs its body's ops per iteration, each ~10 us on the
#: interpreter: a 100,000-step prefix sum took 9.9 s interpreted against 0.12 s to
#: compile. This bound costs such a kernel ~0.2 s once.
MAX_STEPS = 20_000


#: the worker's niceness (Linux): calls interpreted meanwhile come first
NICENESS = 10


def background_priority() -> None:
    """Lower this thread's CPU priority (Linux, where a thread is a task with a
    niceness of its own). ResNet-18's interpreted calls while it compiled took
    125-440 ms at the same priority (the compile's threads and its GIL holding against
    the call's), 60-90 ms with the worker at +10; the compile takes the time the
    calls leave. Threads this one starts inherit the niceness: the pool that builds
    helpers, when a background compile is the first to need it. Elsewhere (another
    OS, no permission) nothing changes."""
    if not sys.platform.startswith("linux"):
        return
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICENESS)
    except OSError:
        pass


class TierUp:
    """One shape's background compile. (A plain class: this module is imported on
    every start, and a dataclass costs half a millisecond to define.)"""

    def __init__(self) -> None:
        #: set once the worker knows whether it compiles (``missed``) or loads
        self.decided = threading.Event()
        self.missed = False
        #: set when the first interpreted call is done: the worker may compile
        self.go = threading.Event()
        self.error: BaseException | None = None
        #: False once a call ran out of steps (MAX_STEPS): calls wait for the code
        self.interpret = True
        self.thread: threading.Thread | None = None

    @classmethod
    def start(cls, obtain: Callable[[Callable[[], None]], object], name: str) -> TierUp:
        """Run ``obtain(on_miss)`` on a worker thread; ``obtain`` calls ``on_miss``
        (under its kernel's lock, before compiling) when the code is not cached."""
        tier = cls()

        def on_miss() -> None:
            tier.missed = True
            tier.decided.set()
            tier.go.wait()
            background_priority()  # not before: a caller waits for the decision

        def work() -> None:
            try:
                obtain(on_miss)
            except BaseException as exc:  # noqa: BLE001 - handed to the next call
                tier.error = exc
            finally:
                tier.decided.set()

        tier.thread = threading.Thread(target=work, name=f"wia-compile-{name}")
        tier.thread.start()
        return tier

    @property
    def compiling(self) -> bool:
        """The worker reported a miss and has not finished."""
        self.decided.wait()
        return self.missed and self.thread is not None and self.thread.is_alive()

    @property
    def interpreting(self) -> bool:
        """Calls run on the interpreter: the worker compiles, and no call gave up."""
        return self.compiling and self.interpret

    def join(self) -> None:
        if self.thread is not None:
            self.thread.join()
