"""Locate the data that ships with the package: the Lark grammar and the stdlib.

In a wheel they live in ``wiadsl/_data/`` (hatchling force-include); in a source
checkout they are the top-level ``grammar/`` and ``stdlib/`` folders.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def _data_dir(name: str) -> Path:
    installed = _PACKAGE_DIR / "_data" / name
    if installed.is_dir():
        return installed
    return _PACKAGE_DIR.parent / name


def grammar_path() -> Path:
    """The path of ``wia.lark``."""
    return _data_dir("grammar") / "wia.lark"


def stdlib_dir() -> Path:
    """The folder that holds ``nn.wia``, ``linalg.wia``, ..."""
    return _data_dir("stdlib")
