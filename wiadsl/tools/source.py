"""Command-line inputs: the source file, ``-D NAME=EXTENT`` and ``--input NAME=VALUE``.

Invariants:
- ``read_source`` returns text decoded the way the parser decodes files (UTF-8,
  a leading BOM dropped); a bad byte is a ``WiaSyntaxError`` with line and column.
- A malformed option value is a ``CommandLineError`` (exit status 2, like an
  argparse error); a well-formed one that names a missing file is a ``WiaUsageError``
  (exit status 1).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from ..diagnostics import WiaUsageError

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class CommandLineError(WiaUsageError):
    """A malformed command line (exit status 2)."""


def read_source(path: str) -> tuple[str, str]:
    """``(text, filename)`` of ``path``; ``-`` reads standard input as ``<stdin>``."""
    if path == "-":
        data = sys.stdin.buffer.read()
        filename = "<stdin>"
    else:
        try:
            data = Path(path).read_bytes()
        except IsADirectoryError:
            raise WiaUsageError(f"cannot read '{path}': it is a directory") from None
        except OSError as exc:
            raise WiaUsageError(f"cannot read '{path}': {exc.strerror}") from None
        filename = path
    return decode(data, filename), filename


def decode(data: bytes, filename: str) -> str:
    """UTF-8 text of ``data``; an invalid byte raises the parser's ``WiaSyntaxError``."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        from ..frontend.parser import parse_bytes

        parse_bytes(data, filename)  # raises the located error
        raise AssertionError("parse_bytes accepted bytes that UTF-8 rejects") from None


def parse_defines(items: Iterable[str]) -> dict[str, int]:
    """``-D M=128 -D N=64`` as ``{"M": 128, "N": 64}``."""
    dims: dict[str, int] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not _NAME.match(name):
            raise CommandLineError(f"-D expects NAME=EXTENT (like -D M=128), got '{item}'")
        try:
            extent = int(value.strip(), 10)
        except ValueError:
            raise CommandLineError(f"-D {name}: the extent must be an integer, "
                                   f"got '{value}'") from None
        if extent < 0:
            raise CommandLineError(f"-D {name}: the extent must be >= 0, got {extent}")
        if name in dims and dims[name] != extent:
            raise CommandLineError(f"-D {name} given twice ({dims[name]} and {extent})")
        dims[name] = extent
    return dims


def parse_inputs(items: Iterable[str]) -> dict[str, object]:
    """``--input A=a.npy --input alpha=0.5`` as arrays and Python scalars.

    A value that parses as a number (or ``true``/``false``) is a scalar; anything
    else is a path to a ``.npy`` file (or ``NAME=file.npz:key`` for one array of
    an ``.npz``).
    """
    values: dict[str, object] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not _NAME.match(name) or not value:
            raise CommandLineError(f"--input expects NAME=FILE.npy or NAME=NUMBER, got '{item}'")
        if name in values:
            raise CommandLineError(f"--input {name} given twice")
        values[name] = _scalar(value) if _is_scalar(value) else load_array(value)
    return values


def _is_scalar(text: str) -> bool:
    if text in ("true", "false"):
        return True
    try:
        float(text)
    except ValueError:
        return False
    return True


def _scalar(text: str) -> object:
    if text in ("true", "false"):
        return text == "true"
    try:
        return int(text, 10)
    except ValueError:
        return float(text)


def load_array(spec: str) -> np.ndarray:
    """The array in ``file.npy`` (or ``file.npz:key``); a WiaUsageError if unreadable."""
    path, _, key = spec.partition(".npz:")
    if key:
        path += ".npz"
    try:
        loaded = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise WiaUsageError(f"cannot read '{path}': no such file") from None
    except (OSError, ValueError) as exc:
        raise WiaUsageError(f"cannot read '{path}' as a NumPy file: {exc}") from None
    if isinstance(loaded, np.lib.npyio.NpzFile):
        with loaded:
            keys = list(loaded.keys())
            if not key and len(keys) == 1:
                key = keys[0]
            if key not in keys:
                raise WiaUsageError(f"'{path}' holds {', '.join(keys) or 'no arrays'}; "
                                    f"name one as {path}:KEY")
            return loaded[key]
    return loaded
