"""The source-level cache (issue 21): a warm process builds its kernels from stored
signatures and loads their object code without parsing, checking, lowering or
optimizing, and without importing the parser, the passes, the code generator,
llvmlite (backends/llvm/loader.py links the objects; host.py knows the CPU and
llvmlite's version), ``json`` or ``dataclasses`` (~3.5 ms of a ~25 ms start).
Every input of the compile is in the key: editing an imported file, a new file
that shadows an import, or a damaged index entry each take the slow path."""

from __future__ import annotations

import numpy as np
import pytest

import wiadsl
from wiadsl.cache import sources as source_cache
from wiadsl.cache import store as cache_store

from .helpers import finish, run_child

LIB = "func scale(x, k=2.0) {\n    return x * k;\n}\n"
MAIN = """import mylib;
import nn;
kernel k(input x: f32[N], input i: i64, output y: f32[N]) {
    y = nn.softmax(mylib.scale(x)) + cast(2 ** i, f32);
}
"""

#: Child: jit the file at argv-like PATH, call k, report results, stats, loaded modules.
CHILD = """
import sys, numpy as np, wiadsl
from wiadsl.cache import key as cache_key
from wiadsl.cache.entries import STATS
cache_key.compiler_version = lambda: {version!r}
path = PATH_HERE
mod = wiadsl.jit_file(path)
x = np.linspace(-1, 1, 9, dtype=np.float32)
y = mod.k(x, 3)
error = None
try:
    mod.k(x, -1)
except wiadsl.WiaError as exc:
    error = str(exc)
heavy = [m for m in ("lark", "wiadsl.frontend.parser", "wiadsl.frontend.lower_module",
                     "wiadsl.passes.registry", "wiadsl.backends.llvm.codegen",
                     "wiadsl.backends.llvm.compile", "wiadsl.loops.lower", "llvmlite.binding",
                     "llvmlite.ir", "wiadsl.ir.core", "llvmlite", "json", "dataclasses")
         if m in sys.modules]
import json
print(json.dumps({{"y": y.tolist(), "stats": STATS.as_dict(), "heavy": heavy, "error": error}}))
"""


def _child(cache_dir, path):
    return finish(run_child(cache_dir, CHILD.replace("PATH_HERE", repr(str(path)))))[0]


def _want(x_scale: float) -> np.ndarray:
    x = np.linspace(-1, 1, 9, dtype=np.float32) * np.float32(x_scale)
    e = np.exp(x - x.max())
    return e / e.sum() + np.float32(8)


@pytest.fixture
def program(tmp_path):
    (tmp_path / "mylib.wia").write_text(LIB)
    main = tmp_path / "main.wia"
    main.write_text(MAIN)
    return main


def test_warm_process_skips_the_compiler(tmp_path, program):
    # a folder of the children's own: the fixture's may hold the arena helper this
    # process loaded into it (its first test does), which the cold child then reads
    folder = tmp_path / "children"
    cold = _child(folder, program)
    warm = _child(folder, program)
    for run in (cold, warm):
        np.testing.assert_allclose(run["y"], _want(2.0), rtol=1e-6)
    # the kernel, the arena helper it links against (library.ARENA_SPEC) and the
    # native call helper its second (repeated) call loads (backends/llvm/fastcall.py)
    # (the parser's tables come generated: even a cold start never imports Lark)
    assert cold["stats"]["compiles"] == 3 and "wiadsl.frontend.parser" in cold["heavy"]
    assert "lark" not in cold["heavy"]
    assert warm["stats"]["compiles"] == 0 and warm["stats"]["disk_hits"] == 3
    assert warm["heavy"] == [], f"a warm start imported {warm['heavy']}"
    # a runtime error found by native code points at the source, warm as cold
    assert cold["error"] == warm["error"]
    assert "main.wia:4:" in warm["error"] and "2 ** i" in warm["error"]


def test_an_edited_import_is_a_miss(cache_dir, program):
    _child(cache_dir, program)
    (program.parent / "mylib.wia").write_text(LIB.replace("k=2.0", "k=3.0"))
    again = _child(cache_dir, program)
    np.testing.assert_allclose(again["y"], _want(3.0), rtol=1e-6)
    assert again["stats"]["compiles"] == 1


def test_a_file_that_shadows_the_stdlib_is_a_miss(cache_dir, program):
    _child(cache_dir, program)
    # nn.wia next to the file now wins over stdlib/nn.wia (loader.py's search order)
    (program.parent / "nn.wia").write_text("func softmax(x, axis=-1) {\n    return x;\n}\n")
    again = _child(cache_dir, program)
    x = np.linspace(-1, 1, 9, dtype=np.float32) * 2
    np.testing.assert_allclose(again["y"], x + 8, rtol=1e-6)


def test_damaged_index_files_are_misses(cache_dir, program):
    _child(cache_dir, program)
    for path in (cache_store.root() / "sources").rglob(f"*{source_cache.INDEX_SUFFIX}"):
        path.write_bytes(path.read_bytes()[:-3])  # truncated
    for path in (cache_store.root() / "specs").rglob(f"*{source_cache.INDEX_SUFFIX}"):
        # well formed, but not what a spec holds
        cache_store.write(path.stem, {"parts": {"kernel": "k"}, "config": None}, b"", path)
    again = _child(cache_dir, program)
    np.testing.assert_allclose(again["y"], _want(2.0), rtol=1e-6)
    assert again["stats"]["disk_hits"] == 3  # the objects (kernel, arena, call helper) were still good


def test_source_errors_are_never_cached(cache_dir):
    bad = "kernel k(input x: f32[N], output y: f32[N]) { y = x + z; }"
    for _ in range(2):
        with pytest.raises(wiadsl.WiaError, match="unknown name 'z'"):
            wiadsl.jit(bad)
    assert not (cache_store.root() / "sources").exists()


def test_options_without_a_text_form_take_the_slow_path(cache_dir):
    from wiadsl.backends.llvm.gemm import GemmConfig

    src = "kernel mm(input a: f32[M, K], input b: f32[K, N], output c: f32[M, N]) { c = a @ b; }"
    a, b = np.ones((3, 4), np.float32), np.ones((4, 5), np.float32)
    fn = wiadsl.jit(src, kernel="mm", gemm_config=GemmConfig(mr=4, nv=1, vector_bits=128))
    np.testing.assert_allclose(fn(a, b), a @ b)
    assert fn.source_key is None and not (cache_store.root() / "sources").exists()


def test_import_closure_reads_every_candidate(tmp_path):
    (tmp_path / "a.wia").write_text("import b;\n")
    main = tmp_path / "m.wia"
    text = "// import ghost;\nimport a;\n"
    found = source_cache.import_closure(text, str(main))
    assert str(tmp_path.resolve() / "a.wia") in found
    assert any(k.startswith("missing:") and k.endswith("ghost.wia") for k in found)
    assert any(k.startswith("missing:") and k.endswith("b.wia") for k in found)


def test_signatures_round_trip(cache_dir):
    from wiadsl.frontend.compile import compile_source
    from wiadsl.signature import signature_of

    src = ("kernel k(input x: f32[N, 4], input t: tensor, input s: i8, output y: f32[N, 4],"
           " output z: tensor) { y = x; z = t; }")
    sigs = [signature_of(k) for k in compile_source(src).kernels]
    source_cache.store_signatures("ab" * 32, sigs)
    assert source_cache.load_signatures("ab" * 32) == sigs


def test_a_new_tuning_record_changes_the_specialization_key(cache_dir):
    from wiadsl.backends.llvm.gemm import GemmConfig
    from wiadsl.tune.records import records_fingerprint, save

    before = records_fingerprint()
    save("r1", GemmConfig(), 1.0, "matmul", "mm")
    after = records_fingerprint()
    assert before != after
    assert source_cache.spec_key("s", "k", [(2,)], ["float32"], before) != \
        source_cache.spec_key("s", "k", [(2,)], ["float32"], after)
