"""A tiny expect over a real pseudo-terminal (stdlib ``pty``; no pexpect needed).

``PtyProcess`` starts ``python -m wiadsl`` with stdin, stdout and stderr on the
slave side of a pty, so the REPL sees a terminal: prompts, readline editing, tab
completion and history are all live. ``expect(regex)`` reads until the regex
matches the output seen since the last match (escape sequences removed).
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

    def expect(self, pattern: str, timeout: float = 30.0) -> re.Match:
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
                raise AssertionError(f"did not see {pattern!r}; output so far:\n{self.seen}")

    def send(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def sendline(self, text: str = "") -> None:
        self.send(text + "\r")

    def close(self) -> int:
        """End the session with Ctrl-D; the exit status."""
        try:
            for _ in range(3):
                if self.proc.poll() is not None:
                    break
                self.send("\x04")
                try:
                    return self.proc.wait(timeout=3)
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
