"""The compile cache, a layer of its own under the runtime and the backends.

- ``key``: what a compiled kernel depends on, part by part (``KeyParts``), and the
  compiler's version;
- ``store``: the checksummed entry files on disk and the cache folder;
- ``entries``: memory, then disk, then compile (``get_or_compile``), once per key
  however many threads ask;
- ``sources``: the source-level index a warm process starts from without the
  compiler (the kernels' signatures, each specialization's key parts);
- ``limit``: the size bound and least-recently-used eviction (``WIADSL_CACHE_MAX``);
- ``log``: per-stage compile times and the ``WIADSL_VERBOSE`` lines;
- ``cli``: ``wiac cache info | clear | prune | why``.

It knows no backend: a backend builds its keys (the CPU's: backends/llvm/keys.py)
and hands ``get_or_compile`` its compile and load functions. It imports the IR
only to digest a kernel's functions (``key.function_digests``).
"""
