"""Cycle-true mode of the systolic simulator: the PE array as registers, per cycle.

``run_section_cycle_true(section, config, inputs)`` runs a listing's section like
``simulator.run_section`` but executes the array instructions (preload, matmul.ws,
matmul.os, matmul.is) on a register-transfer model of the R x C PE grid (R, C <= 16):
skewed operands, partial sums moving down (ws/is) or accumulators held per PE (os),
weights shifting into double-buffered slots, results de-skewed into the
accumulators. DMA and vector instructions keep the event model's costs.

Modules: ``skew`` (edge delay lines), ``grid`` (what the grids share),
``stationary`` (ws/is grid), ``output`` (os grid), ``scoreboard`` (hazards),
``costs`` (the event model's per-instruction costs), ``machine`` (the cycle loop).
"""

from .machine import MAX_SIDE, CycleMachine, run_section_cycle_true

__all__ = ["MAX_SIDE", "CycleMachine", "run_section_cycle_true"]
