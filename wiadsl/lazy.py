"""Lazy re-exports for package ``__init__`` files (PEP 562).

A package that re-exports its submodules' names eagerly makes ``import
wiadsl.pkg.small_module`` import the whole package first; a warm-cache process
(issue 21) must not pay for the optimizer, the parser generator or the LLVM code
generator it never uses. ``lazy_exports`` gives a package ``__getattr__`` and
``__dir__`` that import a submodule only when one of its names is first asked
for (``from wiadsl.ir import Builder`` works unchanged).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, exports: dict[str, str]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: ``exports`` maps each public
    name to the submodule (relative, like ``.builder``) that defines it."""
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        where = exports.get(name)
        if where is None:
            raise AttributeError(f"module '{package}' has no attribute '{name}'")
        value = getattr(importlib.import_module(where, package), name)
        namespace[name] = value  # later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
