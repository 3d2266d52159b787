"""The object loader (backends/llvm/loader.py): what it places, links and refuses.

Every kernel the suite runs is loaded by it; these tests pin the parts a kernel
may not reach on a given host: data and zeroed sections, constant pools, calls
into the process (libc) and into another loaded object, weak symbols, the page
permissions, and each refusal's message.
"""

from __future__ import annotations

import ctypes
import os

import pytest

from wiadsl.backends.llvm import loader
from wiadsl.backends.llvm.host import host
from wiadsl.backends.llvm.target import emit_jit_object, optimize, parse_and_verify

pytestmark = pytest.mark.skipif(not loader.NATIVE, reason="loader.py links ELF x86-64 objects only")


def _object(body: str, name: str) -> bytes:
    text = f'target triple = "{host().triple}"\n' + body.replace("NAME", name)
    mod = parse_and_verify(text)
    optimize(mod, 2)
    return emit_jit_object(mod)


#: A counter in zeroed data, a table in initialized data, constants, a libc call.
COUNTER = """
@NAME.count = internal global i64 0, align 64
@NAME.table = internal global [4 x i64] [i64 10, i64 20, i64 30, i64 40], align 8
declare i64 @labs(i64)

define i64 @NAME.bump(i64 %k) {
  %old = load i64, ptr @NAME.count
  %new = add i64 %old, 1
  store i64 %new, ptr @NAME.count
  %slot = getelementptr [4 x i64], ptr @NAME.table, i64 0, i64 %k
  %v = load i64, ptr %slot
  %neg = sub i64 0, %v
  %abs = call i64 @labs(i64 %neg)
  %r = mul i64 %abs, %new
  ret i64 %r
}

define double @NAME.poly(double %x) {
  %a = fmul double %x, 0x400921FB54442D18
  %b = fadd double %a, 0x3FF8000000000000
  ret double %b
}
"""


def test_data_constants_and_libc_calls():
    obj = _object(COUNTER, "wia_test_counter")
    bump = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(loader.load(obj, "wia_test_counter.bump"))
    # the counter starts at zero (a NOBITS section) and persists between calls
    assert [bump(k) for k in range(4)] == [10, 40, 90, 160]
    poly = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)(
        loader.symbol_address("wia_test_counter.poly"))
    assert poly(2.0) == pytest.approx(2.0 * 3.141592653589793 + 1.5)


def test_a_later_object_links_against_an_earlier_one():
    first = _object("define i64 @NAME(i64 %x) {\n  %y = mul i64 %x, 3\n  ret i64 %y\n}\n",
                    "wia_test_triple")
    loader.load(first, "wia_test_triple")
    second = _object("declare i64 @wia_test_triple(i64)\n"
                     "define i64 @NAME(i64 %x) {\n  %y = call i64 @wia_test_triple(i64 %x)\n"
                     "  %z = add i64 %y, 1\n  ret i64 %z\n}\n", "wia_test_triple_plus_one")
    fn = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(loader.load(second, "wia_test_triple_plus_one"))
    assert fn(14) == 43


def test_a_registered_cell_resolves_and_a_missing_weak_symbol_is_null():
    cell = ctypes.c_int64(41)
    loader.add_symbol("wia.test.cell", ctypes.addressof(cell))
    obj = _object('@"wia.test.cell" = external global i64\n'
                  '@"wia.test.absent" = extern_weak global i64\n'
                  "define i64 @NAME() {\n"
                  '  %v = load i64, ptr @"wia.test.cell"\n  %w = add i64 %v, 1\n'
                  '  store i64 %w, ptr @"wia.test.cell"\n'
                  '  %p = ptrtoint ptr @"wia.test.absent" to i64\n'
                  "  %r = add i64 %w, %p\n  ret i64 %r\n}\n", "wia_test_cell")
    fn = ctypes.CFUNCTYPE(ctypes.c_int64)(loader.load(obj, "wia_test_cell"))
    assert fn() == 42 and cell.value == 42


def _permissions(address: int) -> str:
    with open("/proc/self/maps") as f:
        for line in f:
            span, perms = line.split()[:2]
            lo, hi = (int(x, 16) for x in span.split("-"))
            if lo <= address < hi:
                return perms
    raise AssertionError(f"{address:#x} is not mapped")


def test_code_is_executable_and_never_writable():
    obj = _object(COUNTER, "wia_test_perms")
    code = loader.load(obj, "wia_test_perms.bump")
    perms = _permissions(code)
    assert perms.startswith("r-x"), perms


def test_refusals_name_what_is_wrong():
    with pytest.raises(loader.LoadError, match="not a 64-bit little-endian ELF"):
        loader.load(b"\x00" * 64, "x")
    obj = _object("declare i64 @wia_test_nowhere(i64)\n"
                  "define i64 @NAME(i64 %x) {\n  %y = call i64 @wia_test_nowhere(i64 %x)\n"
                  "  ret i64 %y\n}\n", "wia_test_undefined")
    with pytest.raises(loader.LoadError, match="undefined symbol 'wia_test_nowhere'"):
        loader.load(obj, "wia_test_undefined")
    fine = _object("define i64 @NAME() {\n  ret i64 7\n}\n", "wia_test_named")
    with pytest.raises(loader.LoadError, match="does not define 'wia_test_other'"):
        loader.load(fine, "wia_test_other")


#: A global entry that calls an internal function (kept: noinline).
TWO_FUNCTIONS = """
define internal i64 @NAME.inner(i64 %x) noinline {
  %y = mul i64 %x, 3
  ret i64 %y
}

define i64 @NAME(i64 %x) {
  %y = call i64 @NAME.inner(i64 %x)
  %z = add i64 %y, 1
  ret i64 %z
}
"""


def test_perf_map_names_every_loaded_function(monkeypatch):
    """With WIADSL_PERF_MAP=1 each loaded function, internal ones too, gets a
    ``START SIZE name`` line in /tmp/perf-<pid>.map (what perf reads for JIT code);
    a process's first write drops what an earlier process of the same pid left."""
    path = f"/tmp/perf-{os.getpid()}.map"
    saved = open(path).read() if os.path.exists(path) else None
    obj = _object(TWO_FUNCTIONS, "wia_test_perfmap")
    try:
        with open(path, "w") as f:
            f.write("1000 10 stale_from_another_process\n")
        monkeypatch.delenv("WIADSL_PERF_MAP", raising=False)
        loader.load(obj, "wia_test_perfmap")
        assert open(path).read().split()[2] == "stale_from_another_process"  # off by default
        monkeypatch.setenv("WIADSL_PERF_MAP", "1")
        monkeypatch.setattr(loader, "_PERF_MAP_PIDS", set())  # this process has not written yet
        entry = loader.load(obj, "wia_test_perfmap")
        second = loader.load(obj, "wia_test_perfmap")  # appended after the first
        written = open(path).read()
    finally:
        if saved is None:
            os.remove(path)
        else:
            with open(path, "w") as f:
                f.write(saved)
    rows = [line.split() for line in written.splitlines()]
    assert sorted(r[2] for r in rows) == ["wia_test_perfmap"] * 2 + ["wia_test_perfmap.inner"] * 2, written
    starts = {int(r[0], 16) for r in rows if r[2] == "wia_test_perfmap"}
    assert starts == {entry, second} and all(int(r[1], 16) > 0 for r in rows)
    assert ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(entry)(5) == 16
