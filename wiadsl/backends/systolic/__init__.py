"""The systolic-array target: ISA (docs/systolic.md), emitter, assembler, simulator.

Pipeline: ``plan`` places IR ops (array / vector unit / host), ``lower`` + ``tiling``
(ws/is, with ``schedule``'s fold order) and ``os_tiling`` emit a section per group for
concrete shapes, ``isa`` prints it, ``asm`` parses it
back, ``simulator`` runs it on NumPy data and ``timing`` counts its cycles.
"""

from .api import emit_sasm, emit_sasm_program, format_stats, trace_kernel
from .asm import parse_listing, parse_program
from .config import ArrayConfig, config_from_options
from .isa import Listing, Program, SasmError, Section
from .simulator import SectionStats, run_section

__all__ = ["ArrayConfig", "Listing", "Program", "SasmError", "Section", "SectionStats",
           "config_from_options", "emit_sasm", "emit_sasm_program", "format_stats", "parse_listing",
           "parse_program", "run_section", "trace_kernel"]
