"""A NumPy PTX simulator: parse PTX text and run every thread of a small grid.

Public API: ``launch`` (run a kernel on NumPy arrays), ``parse_module`` (PTX text
to a ``Module``), ``LaunchStats``, ``PtxSimError``.  See ``launch.py`` for how
arguments, pointers and scalars are passed, and ``exec.py`` for the SIMT model.
"""

from .errors import PtxSimError
from .launch import LaunchStats, launch
from .parser import parse_module

__all__ = ["LaunchStats", "PtxSimError", "launch", "parse_module"]
