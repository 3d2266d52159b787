"""The disk cache across processes: a warm process compiles nothing; racers are safe."""

from __future__ import annotations

from wiadsl.cache import store as cache_store

from .helpers import finish, kernel_entries, run_child


def test_second_process_compiles_nothing(cache_dir):
    first, log1 = finish(run_child(cache_dir))
    second, log2 = finish(run_child(cache_dir))
    assert first["ok"] and second["ok"]
    # axpy and the arena helper every kernel links against (library.ARENA_SPEC)
    assert first["stats"]["compiles"] == 2 and first["stats"]["stores"] == 2
    assert "JIT 컴파일: axpy" in log1
    assert second["stats"]["compiles"] == 0 and second["stats"]["disk_hits"] == 2
    assert "JIT 컴파일" not in log2 and "JIT 캐시 적중: axpy" in log2 and " disk " in log2


def test_two_processes_racing_on_one_key(cache_dir, tmp_path):
    go = tmp_path / "go"
    racers = [run_child(cache_dir, wait_for=go) for _ in range(2)]
    go.touch()
    results = [finish(p)[0] for p in racers]
    assert all(r["ok"] for r in results)
    entries = kernel_entries()
    assert len(entries) == 1 and entries[0][1] is not None  # one complete, valid entry
    leftovers = [p for p in cache_store.root().rglob("*.tmp")]
    assert leftovers == []
    after, log = finish(run_child(cache_dir))
    assert after["ok"] and after["stats"]["compiles"] == 0
