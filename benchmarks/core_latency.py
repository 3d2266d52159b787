"""The round trip of a cache line between two CPUs of this machine, for the tables of
runs at two threads (benchmarks/onnx.py).

Why: on a VM the host may place the two vCPUs in one core complex (a round trip of
~125 ns on the AMD Zen 5 host of stop 58) or in two (~375 ns), and moves them now and
then. A model at two threads hands data and work between the CPUs at every layer, so
its time follows the placement: MobileNetV2 (batch 4) took 150-175 us in the first and
330 in the second, ONNX Runtime 160 and 265 (one thread: 265-290 and 310). A table
of two-thread rows needs the round trip beside it to be read.

How: a C program (compiled with ``cc`` once per process; None where there is no
compiler) pins two threads to CPUs 0 and 1 and passes a counter back and forth
through one cache line for ``seconds``; the median of its quarter-second rounds.
"""

from __future__ import annotations

import functools
import os
import shutil
import statistics
import subprocess
import tempfile

SOURCE = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static _Atomic long flag __attribute__((aligned(64)));
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static void pin(int cpu) { cpu_set_t s; CPU_ZERO(&s); CPU_SET(cpu, &s); sched_setaffinity(0, sizeof s, &s); }
static void *pong(void *arg) {
    (void)arg; pin(1);
    for (long v = 1;; v += 2) {
        long seen;
        while ((seen = atomic_load(&flag)) != v) if (seen < 0) return NULL;
        atomic_store(&flag, v + 1);
    }
}
int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 4;
    pthread_t t; pin(0); pthread_create(&t, NULL, pong, NULL);
    long v = 0;
    for (int r = 0; r < rounds; r++) {
        double t0 = now(); long n = 0;
        while (now() - t0 < 0.25) { atomic_store(&flag, v + 1); while (atomic_load(&flag) != v + 2) {} v += 2; n++; }
        printf("%.1f\n", (now() - t0) / n * 1e9);
    }
    atomic_store(&flag, -1); pthread_join(t, NULL); return 0;
}
"""


@functools.cache
def _program() -> str | None:
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None or (os.cpu_count() or 1) < 2:
        return None
    folder = tempfile.mkdtemp(prefix="wia-pingpong-")
    src, exe = os.path.join(folder, "pingpong.c"), os.path.join(folder, "pingpong")
    with open(src, "w") as f:
        f.write(SOURCE)
    done = subprocess.run([cc, "-O2", "-pthread", src, "-o", exe], capture_output=True)
    return exe if done.returncode == 0 else None


def round_trip_ns(seconds: float = 0.5) -> float | None:
    """The median round trip between CPUs 0 and 1 over ``seconds``, or None."""
    exe = _program()
    if exe is None:
        return None
    done = subprocess.run([exe, str(max(1, round(seconds / 0.25)))], capture_output=True, text=True, timeout=60)
    times = [float(x) for x in done.stdout.split()] if done.returncode == 0 else []
    return statistics.median(times) if times else None


if __name__ == "__main__":
    ns = round_trip_ns(2.0)
    print("no C compiler or one CPU" if ns is None else f"core-to-core round trip: {ns:.0f} ns")
