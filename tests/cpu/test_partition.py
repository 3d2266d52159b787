"""A kernel's LLVM module cut into parts compiled on separate threads
(backends/llvm/partition.py, issue 21): the parts' text, their results against the
interpreter, and a cache entry of several objects read back from disk."""

from __future__ import annotations

import re

import numpy as np
import pytest
from llvmlite import ir

import wiadsl
from tests.cpu.programs import EXAMPLES, random_inputs
from wiadsl.backends.llvm import compile as cpu_compile
from wiadsl.backends.llvm import partition as part_module
from wiadsl.backends.llvm.compile import lower_kernel
from wiadsl.backends.llvm.partition import partition
from wiadsl.backends.llvm.target import parse_private
from wiadsl.runtime import cache, cache_store

CNN = next(p for p in EXAMPLES if p.name == "cnn.wia")
SHAPES = [(1, 3, 16, 16), (8, 3, 3, 3), (8,), (8,), (8,), (8,), (16, 8, 3, 3),
          (16,), (16,), (16,), (16,), (1024, 10)]
DEFINE = re.compile(r'^define (internal )?\S+ @"([^"]+)"', re.M)


def _lowered():
    module = wiadsl.jit_file(CNN, kernel="forward_pass", target="cpu").ir_for()
    return lower_kernel(cpu_compile.tensor_passes(module, 3), "forward_pass", SHAPES)


@pytest.fixture
def split_small(monkeypatch):
    """Every kernel with an outlined function is cut, in two parts."""
    monkeypatch.setattr(part_module, "MIN_SPLIT_CHARS", 0)
    monkeypatch.setattr(cpu_compile, "PART_THREADS", 2)


def test_the_parts_hold_each_function_once_and_link_by_prefixed_names(split_small):
    lowered = _lowered()
    texts = partition(lowered.ll, lowered.root, "wia_entry_x", 3)
    assert len(texts) >= 2
    defined = [dict((name, internal) for internal, name in DEFINE.findall(t)) for t in texts]
    assert "wia_entry" in defined[0] and not any("wia_entry" in d for d in defined[1:])
    everywhere = [name for d in defined for name in d]
    assert len(everywhere) == len(set(everywhere)) == len(lowered.root) + sum(
        1 for f in lowered.ll.functions if f.blocks and f.name not in lowered.root)
    for d in defined[1:]:
        assert d and all(name.startswith("wia_entry_x.") and not internal for name, internal in d.items())
        for name in d:  # part 0 calls it by the same name, declared
            assert re.search(rf'^declare \S+ @"{re.escape(name)}"', texts[0], re.M)
    for text in texts:
        parse_private(text)  # each part is a module of its own: parses and verifies


def test_a_cut_kernel_computes_what_the_interpreter_does(split_small, fresh_cache):
    rng = np.random.default_rng(3)
    fn = wiadsl.jit_file(CNN, kernel="forward_pass", target="cpu")
    args = random_inputs(fn.signature, rng)
    args[2:6] = [np.abs(a) + 0.5 if i == 1 else a for i, a in enumerate(args[2:6])]
    want = wiadsl.jit_file(CNN, kernel="forward_pass", target="interp")(*args)
    np.testing.assert_allclose(fn(*args), want, rtol=1e-4, atol=1e-6)
    entry = next(e for _, e in cache_store.iter_entries() if e is not None and "objects" in e.meta)
    assert len(entry.meta["objects"]) == 2  # stored one after the other
    assert sum(entry.meta["objects"]) == len(entry.obj)
    cache.clear_memory()
    again = wiadsl.jit_file(CNN, kernel="forward_pass", target="cpu")
    np.testing.assert_allclose(again(*args), want, rtol=1e-4, atol=1e-6)
    assert again.stats["cache"] == "disk"


def _module_with(reference: str) -> tuple[ir.Module, set[str]]:
    """``wia_entry`` calling ``body``, which references ``reference``."""
    mod = ir.Module(name="m")
    i32 = ir.IntType(32)
    var = ir.GlobalVariable(mod, i32, "counter")
    var.initializer = ir.Constant(i32, 0)
    entry = ir.Function(mod, ir.FunctionType(i32, []), "wia_entry")
    body = ir.Function(mod, ir.FunctionType(i32, []), "body")
    body.linkage = "internal"
    b = ir.IRBuilder(body.append_basic_block())
    b.ret(b.load(var) if reference == "counter" else b.call(entry, []))
    b = ir.IRBuilder(entry.append_basic_block())
    b.ret(b.call(body, []))
    return mod, {"wia_entry"}


@pytest.mark.parametrize("reference", ["counter", "wia_entry"])
def test_a_function_that_reaches_back_keeps_the_module_whole(reference, monkeypatch):
    """A module variable (one per part would be two) or the root, referenced from
    outside the root: the module is not cut."""
    monkeypatch.setattr(part_module, "MIN_SPLIT_CHARS", 0)
    mod, root = _module_with(reference)
    assert partition(mod, root, "p", 2) == [str(mod)]


def test_a_small_module_stays_whole():
    lowered = _lowered()
    assert partition(lowered.ll, lowered.root, "p", 4) == [lowered.llvm_ir]
