"""A NumPy PTX simulator: parse PTX text and run every thread of a small grid.

Public API: ``launch`` (run a kernel on NumPy arrays), ``parse_module`` (PTX text
to a ``Module``), ``LaunchStats``, ``PtxSimError``, and for shared-memory races
``SimRaceError`` / ``Race`` (``races.py``), the warp ``SCHEDULES``, and TMA tensor-map
arguments ``TensorMapArg`` / ``TensorMap`` (``tensormap.py``).  See
``launch.py`` for how arguments, pointers and scalars are passed, ``exec.py`` and
``schedule.py`` for the SIMT model, ``tracker.py`` for what counts as a race.
"""

from .errors import PtxSimError
from .launch import LaunchStats, launch
from .parser import parse_module
from .races import Race, SimRaceError
from .schedule import SCHEDULES
from .tensormap import TensorMap, TensorMapArg

__all__ = ["SCHEDULES", "LaunchStats", "PtxSimError", "Race", "SimRaceError", "TensorMap",
           "TensorMapArg", "launch",
           "parse_module"]
