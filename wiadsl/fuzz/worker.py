"""Worker processes that run fuzz cases, so a dying or hanging backend is contained.

Protocol: the parent sends ``("check", (seed, targets))`` or ``("reduce", (seed,
target, kind, budget_s))`` and receives ``("ok", value)`` or ``("error", text)``.
A worker that dies (a signal, e.g. SIGSEGV in native code) or does not answer
within ``timeout_s`` is killed and replaced; its program is recorded as a crash.

Invariant: workers use the ``spawn`` start method, so no LLVM or NumPy state is
shared with the parent through ``fork``.
"""

from __future__ import annotations

import multiprocessing as mp
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from .differential import CaseResult, Verdict


def check_seed(seed: int, targets: tuple[str, ...]) -> CaseResult:
    """Generate the program of ``seed`` and check it (in this process)."""
    from .differential import check_case
    from .genprog import generate

    try:
        case = generate(seed)
    except Exception:  # noqa: BLE001 - a generator bug is reported, not raised
        result = CaseResult(seed, "", {})
        result.verdicts.append(Verdict("generator", "crash", traceback.format_exc(limit=3)))
        return result
    return check_case(case, targets)


def run_forked(fn: Callable[[], object], timeout_s: float = 120.0) -> tuple[bool, object]:
    """``(died, value)``: ``fn()`` run in a forked child of this process; ``died``
    when the child was killed by a signal or hung (then ``value`` is None)."""
    import os
    import pickle
    import signal

    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run, send the pickled value, leave without cleanup
        os.close(rfd)
        import faulthandler

        faulthandler.disable()  # a crash here is the expected finding, not news
        try:
            data = pickle.dumps(fn())
            with os.fdopen(wfd, "wb") as w:
                w.write(data)
        finally:
            os._exit(0)
    os.close(wfd)
    deadline = time.monotonic() + timeout_s
    chunks = []
    with os.fdopen(rfd, "rb") as r:
        os.set_blocking(rfd, False)
        while True:
            try:
                chunk = r.read()
            except BlockingIOError:
                chunk = None
            if chunk:
                chunks.append(chunk)
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                rest = r.read()
                chunks.append(rest or b"")
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return True, None
            time.sleep(0.01)
    if os.WIFSIGNALED(status):
        return True, None
    data = b"".join(chunks)
    return False, pickle.loads(data) if data else None


def dies(fn: Callable[[], object], timeout_s: float = 120.0) -> bool:
    """Whether ``fn()`` kills (or hangs) a forked child of this process."""
    return run_forked(fn, timeout_s)[0]


def still_fails(target: str, kind: str) -> Callable[[Any], bool]:
    """The reducer's predicate: ``target`` still gives a verdict of ``kind``
    (``process``: running every target still kills the process)."""
    from .differential import ALL_TARGETS, check_case

    if target == "process":
        def killed(case: Any) -> bool:
            from ..frontend.compile import compile_source

            try:
                compile_source(case.source, "<fuzz>")
            except Exception:  # noqa: BLE001 - an invalid variant does not reproduce
                return False
            return dies(lambda: check_case(case, ALL_TARGETS[:-1]))
        return killed

    def pred(case: Any) -> bool:
        result = check_case(case, (target,))
        if not result.valid:
            return False
        if target == "interp":
            return bool(result.verdicts) and result.verdicts[0].kind == kind
        return any(v.target == target and v.kind == kind for v in result.verdicts)
    return pred


def reduce_seed(seed: int, target: str, kind: str, budget_s: float) -> str:
    """The reproducer text of the reduced program of ``seed``."""
    from .genprog import generate
    from .reduce import reduce_case, reproducer_text

    case = generate(seed)
    small = reduce_case(case, still_fails(target, kind), budget_s)
    final = check_case_detail(small, target)
    return reproducer_text(small, target, final)


def check_case_detail(case: Any, target: str) -> str:
    from .differential import check_case

    if target == "process":
        return "running the program kills the process (e.g. SIGSEGV in native code)"
    result = check_case(case, () if target == "interp" else (target,))
    return "; ".join(v.detail for v in result.verdicts) or result.oracle_error


def _serve(conn: Connection) -> None:
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        op, args = msg
        try:
            value = check_seed(*args) if op == "check" else reduce_seed(*args)
            conn.send(("ok", value))
        except Exception:  # noqa: BLE001
            conn.send(("error", traceback.format_exc(limit=5)))


class _Worker:
    def __init__(self, ctx: Any):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        self.job: tuple[int, tuple[str, ...]] | None = None
        self.since = 0.0

    def send(self, op: str, args: tuple) -> None:
        self.conn.send((op, args))
        self.since = time.monotonic()

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except (BrokenPipeError, OSError):
            pass
        self.proc.join(timeout=2)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()


class WorkerPool:
    """``jobs`` workers; ``imap`` yields one CaseResult per job (in completion order)."""

    def __init__(self, jobs: int, timeout_s: float):
        self.ctx = mp.get_context("spawn")
        self.timeout_s = timeout_s
        self.workers = [_Worker(self.ctx) for _ in range(jobs)]

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        for w in self.workers:
            w.stop()

    def _replace(self, k: int) -> None:
        w = self.workers[k]
        w.proc.kill()
        w.proc.join()
        self.workers[k] = _Worker(self.ctx)

    def imap(self, jobs: Iterable[tuple[int, tuple[str, ...]]],
             stop: Callable[[], bool]) -> Iterator[CaseResult]:
        pending = iter(jobs)
        busy: set[int] = set()

        def start(k: int) -> None:
            job = None if stop() else next(pending, None)
            if job is not None:
                w = self.workers[k]
                w.job = job
                w.send("check", job)
                busy.add(k)

        for k in range(len(self.workers)):
            start(k)
        while busy:
            ws = [self.workers[k] for k in busy]
            ready = wait([w.conn for w in ws] + [w.proc.sentinel for w in ws], timeout=1.0)
            for k in sorted(busy):
                result = self._collect(k, ready)
                if result is None:
                    continue
                busy.discard(k)
                yield result
                start(k)

    def _collect(self, k: int, ready: list) -> CaseResult | None:
        w = self.workers[k]
        seed, targets = w.job  # type: ignore[misc]
        if w.conn in ready:
            try:
                status, value = w.conn.recv()
            except (EOFError, OSError):
                status, value = "died", f"worker died (exit code {w.proc.exitcode})"
            if status == "ok":
                return value
            return self._crashed(k, seed, value)
        if w.proc.sentinel in ready or not w.proc.is_alive():
            w.proc.join()
            return self._crashed(k, seed, f"the process died (exit code {w.proc.exitcode})")
        if time.monotonic() - w.since > self.timeout_s:
            return self._crashed(k, seed, f"no answer within {self.timeout_s:.0f}s (hang?)")
        return None

    def _crashed(self, k: int, seed: int, text: str) -> CaseResult:
        self._replace(k)
        result = CaseResult(seed, "", {})
        result.verdicts.append(Verdict("process", "crash", text))
        return result

    def reduce(self, failure: Any, budget_s: float, out: Path) -> str:
        """Reduce ``failure`` in a fresh worker; write the reproducer; return its path."""
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"seed{failure.seed}-{failure.target}.wia"
        target = "interp" if failure.target == "generator" else failure.target
        w = _Worker(self.ctx)
        try:
            w.send("reduce", (failure.seed, target, failure.kind, budget_s))
            if w.conn.poll(budget_s + self.timeout_s):
                status, value = w.conn.recv()
                if status == "ok":
                    path.write_text(value)
                    return str(path)
        except (EOFError, OSError):
            pass
        finally:
            w.stop()
        from .genprog import generate

        path.write_text(f"// fuzz: seed={failure.seed} target={failure.target} (not reduced)\n"
                        f"// failure: {failure.detail[:300]}\n" + generate(failure.seed).source)
        return str(path)
