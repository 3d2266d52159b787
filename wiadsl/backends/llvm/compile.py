"""One kernel specialization: tensor IR + concrete input shapes -> LLVM module.

Pipeline: ``wiadsl.loops.lower_module`` with the kernel's parameter extents as
constants (shape specialization) ->
``ModuleEmitter`` -> entry wrapper -> LLVM text, parsed and verified.

``compile_object`` runs the whole JIT path for the compile cache: tensor passes,
lowering, LLVM optimization and code generation, timed per stage, giving object
code plus the JSON-able ``Layout`` a caller needs to run it without the IR.
Invariant: the object exports exactly one external function, ``Layout.symbol``
(the entry, renamed per cache key), with ``runtime.entry_wrapper``'s ABI.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from ...cache.log import Stages
from ...diagnostics import Span, WiaIRError
from ...gcpause import no_cyclic_gc
from ...ir.module import ModuleOp
from ...ir.types import IRType, ScalarType, TensorType
from ...ir.verifier import verify
from ...loops import lower_module
from ...loops.passes import default_loop_pipeline, run_loop_passes
from .batch_split import SLICE_ENTRY, BatchSplit, plan, split_entry
from .caches import last_level_bytes
from .codegen import ModuleEmitter, slot_count
from .gemm import GemmConfig, current_config, default_config, use_config
from .host import host
from .layout import Layout
from .library import ARENA_SPEC, POOL_SPEC, Spec, prefetch, ukernels_spec
from .parallel import SLOT_SYMBOL, THREADS
from .partition import partition
from .runtime import ENTRY, dynamic_axes, entry_wrapper, extent_base, uses_arena
from .target import emit_unlocked, optimize, optimize_unlocked, parse_and_verify, parse_private


@dataclass
class LoweredKernel:
    """The LLVM module of one specialization and what the caller needs to run it."""

    ll: ir.Module
    messages: list[tuple[str, Any]]  # (message, source span or None) per error code
    param_types: list[IRType]
    result_types: list[IRType]
    loop_ir: ModuleOp
    #: precompiled helpers (library.py) the module calls: loaded before its object
    libraries: list[dict[str, Any]] = field(default_factory=list)
    #: (input, axis) per extent the entry reads at run time (runtime.dynamic_axes)
    dynamic: list[tuple[int, int]] = field(default_factory=list)
    #: cells of the entry's state (prepacked.py; 0: the entry takes none)
    state_cells: int = 0
    #: tensor results computed in the caller's buffer when given (destinations.py)
    in_place: list[int] = field(default_factory=list)
    #: the LLVM functions of the entry and the kernel (partition.py's root)
    root: set[str] = field(default_factory=set)
    #: the slices of the batch the entry runs (batch_split.py; 1: the whole batch at once)
    slices: int = 1

    @functools.cached_property
    def llvm_ir(self) -> str:
        """The module's text (printed once: ~50 ms for a model's kernel)."""
        return str(self.ll)

    @property
    def result_slots(self) -> int:
        return sum(slot_count(t) for t in self.result_types)


def lower_kernel(module: ModuleOp, kernel: str, shapes: Sequence[Sequence[int | None]],
                 loop_pipeline: str = "", frozen: frozenset[int] = frozenset(),
                 on_libraries: Callable[[list[Spec]], None] | None = None,
                 split: BatchSplit | None = None) -> LoweredKernel:
    """Lower ``kernel`` for ``shapes`` and run the loop passes: the default pipeline,
    then the user's ``loop_pipeline`` (e.g. ``"tile{size=64},unroll{factor=4}"``).
    A None extent in ``shapes`` stays a run-time value (a shape-generic entry: its
    extent comes in an argument slot, runtime.py). ``frozen``: positions of inputs
    whose contents never change between calls (prepacked.py). ``on_libraries``: told
    of the helpers the module calls as each function is emitted (compile_object
    starts building them then, beside the rest of the lowering). ``split``: lower at
    one slice's shapes, under an entry that runs the batch's slices (batch_split.py).

    The user's passes run after ``parallelize``/``fuse-parallel`` on purpose: those
    outline parallel loops into new functions and need LoopBuilder's loop shapes;
    afterwards every function (outlined bodies included) is transformed, and the
    parallel regions (hence thread hand-offs) stay what the default gives."""
    at = split.slice_shapes(shapes) if split is not None else shapes
    config = current_config()  # its tile rows: the direct convolution's pixel lanes
    loops = lower_module(module, {kernel: list(at)}, {kernel: frozen}, config.nv * config.vector_bits)
    pipeline = ",".join(p for p in (cpu_loop_pipeline(), loop_pipeline) if p)
    if pipeline:
        run_loop_passes(loops, pipeline)
    verify(loops)
    emitter = ModuleEmitter(loops, f"wia_{kernel}", host().triple, frozen, on_libraries)
    func = loops[kernel]
    kfn = emitter.functions[kernel]
    k = 1
    for t in func.arg_types:
        if isinstance(t, TensorType):
            kfn.args[k].add_attribute("noalias")  # inputs are read-only: never written
        k += 1 + (t.rank if isinstance(t, TensorType) else 0)
    params, results = list(func.arg_types), list(func.result_types)
    stateful = emitter.state_cells > 0
    in_place = sorted(set(emitter.destinations.get(kernel, {}).values()))
    if split is None:
        entry_wrapper(emitter.ll, kfn, params, list(at), results, stateful=stateful)
    else:
        entry_wrapper(emitter.ll, kfn, params, list(at), results, stateful, name=SLICE_ENTRY)
        split_entry(emitter.ll, split, params, at, results, stateful,
                    emitter.code_for("out of memory allocating the results of a batch"),
                    emitter.code_for("internal error: a slice of the batch gave a result of "
                                     "another shape than planned (please report it)"))
        in_place = list(range(len(results)))  # every result lands in the caller's buffer
    libraries = ([ARENA_SPEC] if uses_arena(emitter.ll) else []) + emitter.libraries
    return LoweredKernel(emitter.ll, emitter.messages, params, results, loops, libraries,
                         dynamic_axes(params, at), emitter.state_cells, in_place,
                         {ENTRY, SLICE_ENTRY, kfn.name} if split else {ENTRY, kfn.name},
                         1 if split is None else split.slices)


def batch_split(module: ModuleOp, kernel: str, shapes: Sequence[Sequence[int | None]],
                frozen: frozenset[int], threads: int = THREADS, min_work: int | None = None
                ) -> BatchSplit | None:
    """How ``kernel`` runs its batch at the pattern ``shapes`` on ``threads`` threads
    (batch_split.py), from the IR as the frontend lowered it (None: all at once).
    ``min_work``: per slice, by default what a parallel loop needs (``MIN_PARALLEL_WORK``)."""
    from ...loops.passes import MIN_PARALLEL_WORK

    func = module.get(kernel)
    if func is None:
        return None
    return plan(func, frozen, shapes, threads, MIN_PARALLEL_WORK if min_work is None else min_work)


def cpu_loop_pipeline() -> str:
    """The default loop passes, then the CPU's ``stream-stores`` (loops that write a
    buffer larger than this host's last-level cache, with its vector width)."""
    lanes = host().vector_bits // 32
    return f"{default_loop_pipeline(THREADS)},stream-stores{{bytes={last_level_bytes()},width={lanes}}}"


#: LLVM speed level for kernel modules at -O3: the O2 pipeline (loop and SLP
#: vectorization still on, the loop unroller off: the vectorizer interleaves)
#: gave the same run time on every benchmark kernel (softmax, layer_norm, fused
#: elementwise, conv; CPU-time medians) at a fraction of O3's optimization and
#: code generation time; the gemm/conv helpers (library.py) get the full -O3.
KERNEL_SPEED_LEVEL = 2


def build(lowered: LoweredKernel, level: int = 3) -> llvm.ModuleRef:
    """Parse, verify and optimize the module (ready for object code or assembly)."""
    mod = parse_and_verify(lowered.llvm_ir)
    optimize(mod, min(level, KERNEL_SPEED_LEVEL), unroll=False)
    return mod


def build_text(text: str, level: int = 3) -> llvm.ModuleRef:
    """``build`` of a module's text in a private LLVM context, for ``emit_unlocked``:
    other parts of the kernel and the helpers it calls compile meanwhile."""
    mod = parse_private(text)
    optimize_unlocked(mod, min(level, KERNEL_SPEED_LEVEL), unroll=False)
    return mod


def _span_data(span: Any) -> dict[str, Any] | None:
    if not isinstance(span, Span):
        return None
    return {"file": span.filename, "line": span.line, "column": span.column,
            "end_line": span.end_line, "end_column": span.end_column}


def storage(t: IRType) -> np.dtype:
    return np.dtype(np.int64) if not isinstance(t, (ScalarType, TensorType)) else t.dtype.numpy


def layout_of(lowered: LoweredKernel, symbol: str) -> Layout:
    n_in = len(lowered.param_types)
    results, k = [], n_in
    for t in lowered.result_types:
        results.append([k, t.rank if isinstance(t, TensorType) else -1, str(storage(t))])
        k += slot_count(t)
    messages = [[str(m), _span_data(span)] for m, span in lowered.messages]
    # inputs, result slots, a copy-out (pointer, bytes) pair per tensor result, then
    # the run-time extents, then the state's address if it has one (runtime.py's entry ABI)
    base = extent_base(lowered.param_types, lowered.result_types)
    dynamic = [list(a) for a in lowered.dynamic]
    n_slots = base + len(dynamic) + (1 if lowered.state_cells else 0)
    return Layout(symbol, messages, [str(storage(t)) for t in lowered.param_types],
                  results, n_slots, lowered.libraries, dynamic, lowered.state_cells,
                  lowered.in_place, lowered.slices)


def compile_object(module: ModuleOp, kernel: str, shapes: Sequence[Sequence[int | None]],
                   level: int, symbol: str, config: GemmConfig | None, stages: Stages,
                   passes: bool = True, loop_pipeline: str = "",
                   frozen: frozenset[int] = frozenset()) -> tuple[list[bytes], Layout]:
    """Object code of ``kernel`` of ``module`` (optimized in place by the tensor passes
    unless ``passes`` is False), specialized to ``shapes``, with the entry named ``symbol``;
    ``loop_pipeline``: extra loop-level passes, ``frozen``: inputs that never change
    (``lower_kernel``). The objects are the parts of ``partition`` (one for a small
    kernel), compiled at once on ``PART_THREADS`` threads; the entry's is the first and is
    loaded last."""
    prefetch(early_helpers(module, config, frozen))  # built while this kernel is lowered
    with no_cyclic_gc():  # the IR is acyclic trees of objects that live until the text is made
        # decided on the IR as the frontend made it (the analysis knows its ops)
        split = batch_split(module, kernel, shapes, frozen) if passes else None
        if passes:
            with stages.stage("passes"):
                module = tensor_passes(module, level)
        with stages.stage("lower"), use_config(config):
            # its helpers compile beside the rest of the lowering and the kernel's LLVM work
            lowered = lower_kernel(module, kernel, shapes, loop_pipeline, frozen, prefetch, split)
            texts = partition(lowered.ll, lowered.root, symbol, PART_THREADS)
    if any(SLOT_SYMBOL in t for t in texts):
        prefetch([POOL_SPEC])  # the thread pool: it has a parallel region
    others = [_part_pool().submit(_part_object, t, level) for t in texts[1:]]
    with stages.stage("llvm-opt"):
        mod = build_text(texts[0], level)
        mod.get_function(ENTRY).name = symbol
    with stages.stage("codegen"):
        objects = [emit_unlocked(mod)] + [f.result() for f in others]
    return objects, layout_of(lowered, symbol)


#: The tensor ops whose code calls the gemm or conv helpers, and the dtypes of those
#: helpers that link against the shared micro-kernels (library.py's "ukernels")
_PRODUCT_OPS = ("tensor.matmul", "tensor.conv2d")
_UKERNEL_DTYPES = ("f32", "f64")


def early_helpers(module: ModuleOp, config: GemmConfig | None,
                  frozen: frozenset[int] = frozenset()) -> list[Spec]:
    """The helpers to start building before ``module`` is even lowered (each once per
    host, then cached): the arena, which every entry calls, the micro-kernels of
    each float dtype of a matrix product or convolution, which every gemm and conv
    helper links against, the longest build of all (queued only when code generation
    reached the product, a process's first matmul waited for it), and the one-row
    products ("gemv") of each float dtype of a product of matrices when no input is
    frozen: its gemm driver (not the one on a B packed once) links against them.
    Queued with the driver, they came after the arena, which the builder thread took
    first, while the caller built the driver and then them. With them apart from the
    driver and queued here, a first call, imports aside, took: attention.attn 120-122 ms
    against 125-140 with them in the driver, mlp_relu 106-124 against 107-131 (four
    alternating runs)."""
    specs = [ARENA_SPEC]
    products = [(op.name, t) for f in module.funcs for op in f.walk() if op.name in _PRODUCT_OPS
                for t in op.result_types if isinstance(t, TensorType)]
    dtypes = sorted({str(t.dtype.value) for _, t in products} & set(_UKERNEL_DTYPES))
    cfg = (config or default_config()).as_dict()
    specs += [ukernels_spec(d, cfg) for d in dtypes]
    if not frozen:
        rows = {str(t.dtype.value) for name, t in products if name == "tensor.matmul" and t.rank >= 2}
        specs += [{"kind": "gemv", "dtype": d, "config": cfg} for d in dtypes if d in rows]
    return specs


#: threads a kernel's LLVM work is cut for (partition.py)
PART_THREADS = min(THREADS, 4)


@functools.cache
def _part_pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max(1, PART_THREADS - 1), thread_name_prefix="wia-part")


if hasattr(os, "register_at_fork"):  # a forked child has none of the parent's threads
    os.register_at_fork(after_in_child=_part_pool.cache_clear)


def _part_object(text: str, level: int) -> bytes:
    return emit_unlocked(build_text(text, level))


#: CPU-only tensor passes and the pass of the default pipeline each runs right before
#: (their ops lower only here): ``depthwise`` makes the direct depthwise convolution
#: (passes/depthwise.py) whose epilogue ``fuse`` then fuses; ``fold-pool-padding``
#: lets a max pool read its input in place (passes/pool_padding.py)
CPU_PASSES = (("depthwise", "fuse"), ("fold-pool-padding", "fuse"))


def cpu_pipeline(level: int) -> str:
    """The tensor passes of ``-O<level>`` on the CPU: the default pipeline with
    ``CPU_PASSES`` inserted (where their anchor pass runs)."""
    from ...passes import default_pipeline

    items = [p.strip() for p in default_pipeline(level).split(",") if p.strip()]
    for name, before in CPU_PASSES:
        if before in items:
            items.insert(items.index(before), name)
    return ",".join(items)


def tensor_passes(module: ModuleOp, level: int) -> ModuleOp:
    """The tensor-level passes of ``-O<level>`` for the CPU (``cpu_pipeline``; in place,
    the module is returned), the result verified once: verifying after every pass was
    a sixth of a cold compile (the CNN example: 27 of 196 ms). ``WIADSL_VERIFY_EACH=1``
    verifies after each pass again, to name the pass that broke the IR (as ``wiac``
    always does)."""
    from ...passes import optimize as optimize_ir

    each = os.environ.get("WIADSL_VERIFY_EACH", "") not in ("", "0")
    module = optimize_ir(module, level, pipeline=cpu_pipeline(level), verify_each=each) or module
    if not each:
        try:
            verify(module)
        except WiaIRError as e:
            raise WiaIRError(f"IR does not verify after the -O{level} passes (WIADSL_VERIFY_EACH=1 "
                             f"names the pass):\n{e.message}") from None
    return module


__all__ = ["CPU_PASSES", "Layout", "build", "compile_object", "cpu_pipeline", "lower_kernel",
           "tensor_passes"]
