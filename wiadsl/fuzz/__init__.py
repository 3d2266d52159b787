"""Differential fuzzing of the whole compiler (issue 11).

- ``genprog.generate(seed)``: a random well-typed program (built as an AST and
  printed with the unparser), its call-time dims and inputs;
- ``differential.check_case``: the interpreter (the oracle) against the CPU JIT at
  -O0 and -O3, the systolic and PTX simulators (and CUDA when present), and the
  -O3 pipeline pass by pass (``passcheck``);
- ``reduce.reduce_case``: delta debugging on the AST to a minimal reproducer;
- ``malformed``: malformed sources and calls must raise only ``WiaError``;
- ``run_fuzz(seed, count, targets, out_dir) -> FuzzReport`` and ``cli.main``
  (``wiac fuzz``, ``python -m wiadsl.fuzz``).
"""

from .driver import FuzzReport, run_fuzz

__all__ = ["FuzzReport", "run_fuzz"]
