"""A tiny expect over a real pseudo-terminal (stdlib ``pty``; no pexpect needed).

``PtyProcess`` starts ``python -m wiadsl`` with stdin, stdout and stderr on the
slave side of a pty, so the REPL sees a terminal: prompts, readline editing, tab
completion and history are all live. ``expect(regex)`` reads until the regex
matches the output seen since the last match (escape sequences removed).

Nothing here depends on how fast the machine is: every wait is for something the
child shows (output, or -- ``wait_until_reading`` -- being blocked in the kernel
waiting for input) under a generous deadline, never a fixed sleep.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[=>]|\r")


def _controlling_tty() -> None:
    """In the child: make the pty its controlling terminal, so Ctrl-C sends SIGINT."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class PtyProcess:
    def __init__(self, args: list[str], env: dict[str, str] | None = None):
        master, slave = pty.openpty()
        full = {k: v for k, v in os.environ.items() if k != "WIADSL_DEBUG"}
        full.update({"PYTHONPATH": str(ROOT), "TERM": "dumb", "INPUTRC": os.devnull,
                     **(env or {})})
        self.proc = subprocess.Popen([sys.executable, "-m", "wiadsl", *args], stdin=slave,
                                     stdout=slave, stderr=slave, env=full, cwd=str(ROOT),
                                     start_new_session=True, close_fds=True,
                                     preexec_fn=_controlling_tty)
        os.close(slave)
        self.fd = master
        self.seen = ""     # everything read so far (for failure messages)
        self.pending = ""  # read but not yet consumed by a match

    def _read(self, deadline: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return False
        try:
            data = os.read(self.fd, 65536).decode("utf-8", "replace")
        except OSError:  # the child closed the terminal
            return False
        text = _ANSI.sub("", data)
        self.seen += text
        self.pending += text
        return bool(data)

    def expect(self, pattern: str, timeout: float = 120.0) -> re.Match:
        m = self.search(pattern, timeout)
        if m is None:
            raise AssertionError(f"did not see {pattern!r}; output so far:\n{self.seen}")
        return m

    def search(self, pattern: str, timeout: float) -> re.Match | None:
        """``expect`` that gives None at the deadline instead of failing."""
        regex = re.compile(pattern, re.M)
        deadline = time.monotonic() + timeout
        while True:
            m = regex.search(self.pending)
            if m:
                self.pending = self.pending[m.end():]
                return m
            if time.monotonic() > deadline or not self._read(deadline):
                if regex.search(self.pending):
                    continue
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    return None

    def _state(self) -> str | None:
        """The child's scheduler state (``S``: blocked in the kernel), or None without /proc."""
        try:
            with open(f"/proc/{self.proc.pid}/stat") as f:
                stat = f.read()
        except OSError:
            return None
        return stat[stat.rindex(")") + 2]  # the state follows the parenthesized name

    def wait_until_reading(self, timeout: float = 120.0) -> None:
        """Return once the child is blocked (in ``select`` on the terminal, after a
        prompt): a signal sent earlier can land between readline's prompt and its
        ``select``, and then waits for the next key (CPython's readline checks signals
        only when ``select`` is interrupted). Without /proc, a pause instead."""
        if self._state() is None:
            time.sleep(1.0)
            return
        deadline = time.monotonic() + timeout
        streak = 0
        while streak < 5:  # blocked in five samples in a row, 20 ms apart
            if self.proc.poll() is not None:  # it exited: nothing waits for input
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the child never waited for input; output so far:\n{self.seen}")
            streak = streak + 1 if self._state() == "S" else 0
            time.sleep(0.02)

    def interrupt(self, pattern: str, timeout: float = 120.0) -> re.Match:
        """Ctrl-C once the child waits for input, then ``expect(pattern)``. Should the
        child stay blocked without answering for 5 s (the interrupt landed just
        before its ``select``: a lost wake-up), Ctrl-C again."""
        start = time.monotonic()
        deadline = start + timeout
        sent = 0
        while True:
            self.wait_until_reading(max(1.0, deadline - time.monotonic()))
            self.send("\x03")
            sent += 1
            m = self.search(pattern, min(5.0, max(0.0, deadline - time.monotonic())))
            if m is not None:
                return m
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(
                    f"did not see {pattern!r} after {sent} Ctrl-C in {time.monotonic() - start:.0f} s "
                    f"(child exit status {self.proc.poll()}, state {self._state()!r}); "
                    f"output so far:\n{self.seen}")

    def send(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def sendline(self, text: str = "") -> None:
        self.send(text + "\r")

    def close(self) -> int:
        """End the session with Ctrl-D; the exit status."""
        try:
            for _ in range(6):
                if self.proc.poll() is not None:
                    break
                # Ctrl-D once readline waits for it: one typed while the child is still
                # writing can be lost (a 30 s wait for it, seen in a full-suite run)
                self.wait_until_reading(30.0)
                self.send("\x04")
                try:
                    return self.proc.wait(timeout=10)  # generous: a loaded machine is slow
                except subprocess.TimeoutExpired:
                    continue
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
            return self.proc.wait()
        except OSError:
            os.killpg(self.proc.pid, signal.SIGKILL)
            return self.proc.wait()
        finally:
            os.close(self.fd)
