"""Optimization levels of LLVM pipelines beyond the standard -O0..-O3, named where
cache keys need them without importing llvmlite (library.py's helper keys are
computed on a warm start, which loads cached objects and never compiles)."""

#: A pipeline of its own below -O1 (target.py): SROA (a function's scalar allocas
#: become SSA values), instruction combining and CFG simplification, nothing else.
#: For hand-written glue whose IR keeps a few variables in allocas and has no loop
#: worth vectorizing or unrolling (library.py's thread pool, call helper, arena and
#: scratch buffers): the pool compiles in ~19 ms instead of ~53 at -O3.
CLEANUP = -1

__all__ = ["CLEANUP"]
