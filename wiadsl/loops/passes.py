"""Passes on the loop level, their registry and the pipeline the CPU backend runs.

The loop level has its own pass list (``LOOP_PASSES``): its passes assume
loop-level IR (``loop.*`` memory ops, LoopBuilder loops) and must never run on
tensor-level IR, so they are not in the tensor registry ``wiadsl.passes.PASSES``.
They are ``Pass`` dataclasses all the same: options parse from pipeline text
(``parallelize{min_cost=1000}``) and ``PassManager`` runs, verifies, times and
prints them.

Invariants:
- Every pass keeps the module's meaning under the interpreter (tests run the
  loop IR before and after each pass against NumPy).
- ``default_loop_pipeline(threads)`` is what ``backends/llvm/compile.py`` runs on
  every kernel before emitting LLVM IR.
"""

from __future__ import annotations

from typing import ClassVar

from ..diagnostics import WiaUsageError
from ..ir.module import ModuleOp
from ..passes.base import Pass, PassContext, PassManager, _split_top
from ..records import record
from .accumulators import SplitAccumulators
from .contract_rows import call_sites, contract_func
from .fuse_parallel import fuse_func
from .merge_functions import merge_functions
from .parallelize import SERIAL_MIN_OPS, parallelize_func
from .pipeline_loads import PipelineLoads
from .prefetch import prefetch_func
from .stream_stores import stream_stores
from .tile import Tile
from .unroll import Unroll
from .vectorize import vectorize_func

#: Scalar ops below which a loop is not worth a thread hand-off; the backend's
#: run-time check uses it too. 1 << 18 made small models slower on two threads than
#: on one (the ONNX CNN of benchmarks/onnx.py: 145 us at 1 thread, 176 us at 2;
#: 137 us at 2 with 1 << 20): a hand-off, the worker's wake-up and the join cost
#: more than half of a loop of a few hundred thousand operations.
MIN_PARALLEL_WORK = 1 << 20

LOOP_PASSES: dict[str, type[Pass]] = {}


def loop_pass(cls: type[Pass]) -> type[Pass]:
    LOOP_PASSES[cls.name] = cls
    return cls


@loop_pass
@record(frozen=True)
class Parallelize(Pass):
    """Outline outermost ``parallel`` loops into ``func.call {parallel = cost}``
    (parallelize.py); ``min_cost``: static work below which a loop stays inline, or in a
    function of at least ``serial_min_ops`` ops becomes a plain call (it runs on the
    calling thread)."""

    name: ClassVar[str] = "parallelize"
    min_cost: int = MIN_PARALLEL_WORK
    serial_min_ops: int = SERIAL_MIN_OPS

    def run(self, module: ModuleOp, ctx: PassContext) -> None:
        for func in list(module):
            ctx.count("loops outlined", parallelize_func(module, func, self.min_cost, self.serial_min_ops))


@loop_pass
@record(frozen=True)
class FuseParallel(Pass):
    """Fuse consecutive outlined parallel loops over the same range whose shared
    buffers are accessed row by row (fuse_parallel.py): one pass over each row."""

    name: ClassVar[str] = "fuse-parallel"

    def run(self, module: ModuleOp, ctx: PassContext) -> None:
        for func in list(module):
            if func.name in module:  # not fused away by an earlier function's run
                ctx.count("loops fused", fuse_func(module, func))


@loop_pass
@record(frozen=True)
class ContractRows(Pass):
    """Give a parallel loop's callee a row buffer of its own for every buffer only it
    uses, row by row (contract_rows.py): a fused softmax's rows stay in L1."""

    name: ClassVar[str] = "contract-rows"

    def run(self, module: ModuleOp, ctx: PassContext) -> None:
        callers = call_sites(module)  # contracting changes no call site
        for func in list(module):
            ctx.count("buffers contracted", contract_func(module, func, callers))


@loop_pass
@record(frozen=True)
class MergeFunctions(Pass):
    """Keep one of each set of identical outlined functions and call it from every
    call site of the others (merge_functions.py): a model's layers of one shape
    compile their loops once."""

    name: ClassVar[str] = "merge-functions"

    def run(self, module: ModuleOp, ctx: PassContext) -> None:
        ctx.count("functions merged", merge_functions(module))


@loop_pass
@record(frozen=True)
class Vectorize(Pass):
    """Innermost unit-stride loops -> a ``vector<width x T>`` main loop plus the scalar
    remainder (vectorize.py); ``reassoc``: also float add/mul reductions without the
    op's ``reassoc`` attribute; ``interleave``: vector body copies per iteration (one
    accumulator each). Run after ``parallelize,fuse-parallel``."""

    name: ClassVar[str] = "vectorize"
    width: int = 8
    reassoc: bool = True
    interleave: int = 1

    def run(self, module: ModuleOp, ctx: PassContext) -> None:
        for func in list(module):
            missed: list = []
            ctx.count("loops vectorized", vectorize_func(func, module, self.width, self.reassoc, missed,
                                                         self.interleave))
            for why, op in missed:
                ctx.remark("missed", f"loop not vectorized: {why}", op)


@loop_pass
@record(frozen=True)
class StreamStores(Pass):
    """Loops that write a buffer of at least ``bytes`` their function never reads:
    vectorized (``width`` lanes) with ``nontemporal`` stores into it
    (stream_stores.py). The CPU backend adds it with its last-level cache's size."""

    name: ClassVar[str] = "stream-stores"
    bytes: int = 1 << 25
    width: int = 8

    def run(self, module: ModuleOp, ctx: PassContext) -> None:
        for func in list(module):
            ctx.count("loops streaming their stores", stream_stores(func, module, self.bytes, self.width))


@loop_pass
@record(frozen=True)
class Prefetch(Pass):
    """``loop.prefetch`` of the element ``distance`` ahead of every unit-stride vector
    load (scalar loads too with ``scalar=true``) in innermost loops (prefetch.py)."""

    name: ClassVar[str] = "prefetch"
    distance: int = 64
    scalar: bool = False

    def run(self, module: ModuleOp, ctx: PassContext) -> None:
        for func in list(module):
            ctx.count("prefetches", prefetch_func(func, self.distance, self.scalar))


# the seed's loop transformations (one module each; not in the default pipeline)
for _cls in (Unroll, Tile, SplitAccumulators, PipelineLoads):
    loop_pass(_cls)


def parse_loop_pipeline(text: str) -> list[Pass]:
    """``'parallelize{min_cost=1000}'`` -> loop-level pass instances."""
    passes: list[Pass] = []
    for item in (s.strip() for s in _split_top(text)):
        if not item:
            continue
        name, _, rest = item.partition("{")
        cls = LOOP_PASSES.get(name.strip())
        if cls is None:
            raise WiaUsageError(f"unknown loop pass '{name.strip()}' (known: {', '.join(sorted(LOOP_PASSES))})")
        options = {}
        for opt in filter(None, (o.strip() for o in rest.rstrip("}").split(","))):
            key, _, value = opt.partition("=")
            options[key.strip()] = value.strip()
        passes.append(cls.from_options(options))
    return passes


def default_loop_pipeline(threads: int) -> str:
    """Outline parallel loops (threads when > 1; the calls stay serial otherwise),
    fuse row-local neighbours (fewer passes over memory with or without threads),
    keep the rows only a fused loop uses in buffers of one row, and merge the
    outlined loops that are the same code (compiled once)."""
    del threads  # the backend decides at run time whether a region uses threads
    return "parallelize,fuse-parallel,contract-rows,merge-functions"


def run_loop_passes(module: ModuleOp, pipeline: str, verify_each: bool = False) -> ModuleOp:
    """Run ``pipeline`` on the loop-level ``module`` in place; the module."""
    return PassManager(parse_loop_pipeline(pipeline), verify_each=verify_each).run(module)


__all__ = ["LOOP_PASSES", "MIN_PARALLEL_WORK", "default_loop_pipeline", "parse_loop_pipeline",
           "run_loop_passes"]
