"""A kernel's LLVM module cut into parts compiled on separate threads
(backends/llvm/partition.py, issue 21): the parts' text, their results against the
interpreter, and a cache entry of several objects read back from disk."""

from __future__ import annotations

import re

import numpy as np
import pytest
from llvmlite import ir

import wiadsl
from tests.cpu.programs import EXAMPLES
from wiadsl.backends.llvm import compile as cpu_compile
from wiadsl.backends.llvm import partition as part_module
from wiadsl.backends.llvm.compile import lower_kernel
from wiadsl.backends.llvm.partition import partition
from wiadsl.backends.llvm.target import parse_private
from wiadsl.cache import entries as cache
from wiadsl.cache import store as cache_store

#: a kernel with outlined functions (its parallel rows) besides the entry and itself
EXAMPLE = next(p for p in EXAMPLES if p.name == "layernorm_softmax.wia")
KERNEL, SHAPES = "ln_softmax", [(512, 256), (256,), (256,)]
DEFINE = re.compile(r'^define (internal )?\S+ @"([^"]+)"', re.M)


def _lowered():
    module = wiadsl.jit_file(EXAMPLE, kernel=KERNEL, target="cpu").ir_for()
    return lower_kernel(cpu_compile.tensor_passes(module, 3), KERNEL, SHAPES)


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
    fn = wiadsl.jit_file(EXAMPLE, kernel=KERNEL, target="cpu")
    args = [rng.standard_normal(shape).astype(np.float32) for shape in SHAPES]
    want = wiadsl.jit_file(EXAMPLE, kernel=KERNEL, target="interp")(*args)
    np.testing.assert_allclose(fn(*args), want, rtol=1e-4, atol=1e-6)
    entry = next(e for _, e in cache_store.iter_entries() if e is not None and "objects" in e.meta)
    assert len(entry.meta["objects"]) == 2  # stored one after the other
    assert sum(entry.meta["objects"]) == len(entry.obj)
    cache.clear_memory()
    again = wiadsl.jit_file(EXAMPLE, kernel=KERNEL, target="cpu")
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


def _function(name: str, blocks: int, loop: bool) -> tuple[ir.Module, ir.Function]:
    """A function of ``blocks`` blocks in a chain (each a few instructions), the last
    branching back to the first when ``loop``."""
    mod = ir.Module(name="m")
    fn = ir.Function(mod, ir.FunctionType(ir.IntType(32), [ir.IntType(64)]), name)
    bbs = [fn.append_basic_block(f"b{k}") for k in range(blocks)]
    for k, bb in enumerate(bbs):
        b = ir.IRBuilder(bb)
        x = b.add(fn.args[0], ir.Constant(ir.IntType(64), k))
        if k + 1 < blocks:
            b.cbranch(b.icmp_signed("<", x, ir.Constant(ir.IntType(64), 9)), bbs[k + 1], bbs[-1])
        elif loop:
            b.cbranch(b.icmp_signed("<", x, ir.Constant(ir.IntType(64), 9)), bbs[0], bbs[0])
        else:
            b.ret(ir.Constant(ir.IntType(32), 0))
    return mod, fn


def test_only_large_loop_free_functions_are_left_unoptimized(monkeypatch):
    from wiadsl.backends.llvm import codegen
    monkeypatch.setattr(codegen, "GLUE_MIN_INSTRUCTIONS", 100)
    assert codegen.straight_line_glue(_function("glue", 40, loop=False)[1])
    assert not codegen.straight_line_glue(_function("loop", 40, loop=True)[1])
    assert not codegen.straight_line_glue(_function("small", 20, loop=False)[1])


MLP = ("kernel k(input x: f32[64, 256], input w1: f32[256, 512], input b1: f32[512], "
       "input w2: f32[512, 128], output z: f32[64, 128]) { z = relu(x @ w1 + b1) @ w2; }")


def test_a_loop_free_kernel_function_is_left_unoptimized_and_weighs_a_third(monkeypatch, fresh_cache):
    """Two gemms with their epilogues fused: the kernel function is glue (allocations,
    checks, helper calls), left unoptimized (``optnone``) from GLUE_MIN_INSTRUCTIONS
    (lowered here to its size), counted a third of its text when parts are filled,
    and it computes what NumPy does."""
    from wiadsl.backends.llvm import codegen
    monkeypatch.setattr(codegen, "GLUE_MIN_INSTRUCTIONS", 1)
    shapes = [(64, 256), (256, 512), (512,), (512, 128)]
    module = wiadsl.jit(MLP, kernel="k", target="cpu").ir_for()
    lowered = lower_kernel(cpu_compile.tensor_passes(module, 3), "k", shapes)
    kernel = lowered.ll.get_global("wia.k")
    assert {"optnone", "noinline"} <= set(kernel.attributes)
    parse_private(str(lowered.ll))  # optnone with noinline verifies
    f = part_module._Function("k", str(kernel), set())
    assert f.cost == len(f.text) // part_module.UNOPTIMIZED_CHARS
    rng = np.random.default_rng(0)
    x, w1, b1, w2 = (rng.standard_normal(s, np.float32) for s in shapes)
    z = wiadsl.jit(MLP, kernel="k", target="cpu")(x, w1, b1, w2)
    np.testing.assert_allclose(z, np.maximum(x @ w1 + b1, 0) @ w2, rtol=1e-4, atol=1e-3)
