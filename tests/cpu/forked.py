"""Waiting for a forked test child: its exit code, or a failure naming the hang."""

from __future__ import annotations

import os
import time

import pytest


def exit_code(pid: int, seconds: float, hang: str) -> int:
    """The exit code of child ``pid``; kill it and fail with ``hang`` after ``seconds``
    (a child that deadlocked must not hang the suite)."""
    deadline = time.monotonic() + seconds
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail(hang)
        time.sleep(0.01)
