"""``keep_freed_memory``: stop glibc from unmapping every freed intermediate buffer.

Compiled kernels allocate their intermediate tensors with ``aligned_alloc`` and
free them before returning, or keep them for their next call (runtime.py's pool,
up to ``POOL_BYTES`` a kernel). glibc serves a block above its mmap
threshold (128 KiB at start, raised dynamically) with a fresh ``mmap`` and gives
it back with ``munmap`` on free, and it trims the top of the heap back to the OS
past its trim threshold: each call then page-faults its buffers in again. On the
MobileNetV2-structured ONNX model (tests/onnx/models.py, 3x64x64, batch 4) that
was 10 ms of a 2 ms call, and which of the two a process got depended on its
allocation history. ONNX Runtime and PyTorch keep freed memory in arenas of their
own; this does the same through glibc's knobs, once per process, when the CPU
backend first loads native code: blocks up to 64 MiB come from the heap, and up
to 256 MiB of freed heap stays mapped for the next call.

``WIADSL_KEEP_FREED_MEMORY=0`` leaves malloc as it is; the knobs are glibc's, so on
another C library nothing is changed. A program that set ``MALLOC_MMAP_THRESHOLD_``
or ``MALLOC_TRIM_THRESHOLD_`` itself keeps its settings.
"""

from __future__ import annotations

import ctypes
import os

#: glibc's ``mallopt`` parameters (malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 64 << 20
TRIM_THRESHOLD_BYTES = 256 << 20


def keep_freed_memory() -> bool:
    """Tune glibc's thresholds (see the module docstring); True when they were set."""
    if os.environ.get("WIADSL_KEEP_FREED_MEMORY", "1") == "0":
        return False
    if any(k in os.environ for k in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")):
        return False
    try:
        # the process's own symbols (the C library the interpreter and the kernels
        # link): ctypes.util.find_library would run ldconfig, milliseconds per start
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc: nothing to tune
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and \
        bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))
