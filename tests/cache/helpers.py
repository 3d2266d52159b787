"""Small kernels and a child-process runner shared by the cache tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import wiadsl
from wiadsl.cache import store as cache_store
from wiadsl.cache.key import compiler_version

ROOT = Path(__file__).resolve().parents[2]

AXPY = """
kernel axpy(input x: f32[N], input y: f32[N], input a: f32, output z: f32[N]) {
    z = x * a + y;
}
"""

SOFTMAX = """
import nn;
kernel probs(input x: f32[R, C], output y: f32[R, C]) {
    y = nn.softmax(x);
}
"""

def kernel_entries() -> list:
    """The disk cache's (path, entry) pairs but the helpers' (library.py: the arena, the
    call helper, gemm drivers...), which a process compiles once whatever it runs;
    damaged entries (None) included."""
    return [(path, entry) for path, entry in cache_store.iter_entries()
            if entry is None or "helper" not in entry.meta]


#: Child process: compile and run axpy on the CPU, print its outputs and cache stats.
CHILD = """
import json, sys, numpy as np, wiadsl
from wiadsl.cache import key as cache_key
from wiadsl.cache.entries import STATS
cache_key.compiler_version = lambda: {version!r}  # other engineers edit the tree meanwhile
sys.path.insert(0, {tests!r})
from cache.helpers import AXPY
x = np.arange(37, dtype=np.float32); y = np.ones(37, np.float32)
z = wiadsl.jit(AXPY, kernel="axpy", target="cpu")(x, y, np.float32(2.0))
print(json.dumps({{"ok": bool(np.allclose(z, 2 * x + 1)), "stats": STATS.as_dict()}}))
"""


#: One compiler version for every child of a test session: the key must not change
#: when files of the (shared, live) source tree change between two children.
PINNED_VERSION = compiler_version()


def run_child(cache_dir: Path, script: str = CHILD, wait_for: Path | None = None
              ) -> subprocess.Popen[str]:
    """Start a child Python with ``cache_dir`` as its cache and ``WIADSL_VERBOSE=1``."""
    env = dict(os.environ, WIADSL_CACHE_DIR=str(cache_dir), WIADSL_VERBOSE="1",
               PYTHONPATH=str(ROOT))
    code = script.format(tests=str(ROOT / "tests"), version=PINNED_VERSION)
    if wait_for is not None:  # start both racers first, then release them together
        code = (f"import os, time\nwhile not os.path.exists({str(wait_for)!r}): "
                f"time.sleep(0.001)\n") + code
    return subprocess.Popen([sys.executable, "-c", code], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finish(proc: subprocess.Popen[str]) -> tuple[dict, str]:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1]), err


def axpy_call(kernel=None):
    fn = kernel or wiadsl.jit(AXPY, kernel="axpy", target="cpu")
    x = np.linspace(-1, 1, 19, dtype=np.float32)
    y = np.full(19, 0.5, np.float32)
    z = fn(x, y, np.float32(3.0))
    np.testing.assert_allclose(z, x * 3 + 0.5, rtol=1e-6)
    return fn
