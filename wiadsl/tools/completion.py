"""Tab completion and persistent history for the REPL (GNU readline or libedit).

Completion offers, for the word under the cursor: ``:commands`` after a leading
``:``; ``module.name`` of the stdlib (and of imported modules) after a dot; else
builtins, keywords, dtypes, stdlib module names, the session's kernels, funcs,
consts and values, and the REPL's ``randn``/``rand``.

History lives in ``$WIADSL_HISTORY`` if set, else ``$XDG_STATE_HOME/wiadsl/history``
(``~/.local/state/wiadsl/history``). Invariant: a history file that cannot be read
or written never stops the REPL; it only loses history.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from ..dtypes import DTYPE_NAMES
from ..frontend.builtins import BUILTINS
from ..resources import stdlib_dir
from .commands import COMMANDS
from .session import Session

KEYWORDS = ("kernel", "func", "const", "import", "input", "output", "if", "else", "for",
            "in", "while", "return", "true", "false", "none", "range", "tensor")
REPL_HELPERS = ("randn", "rand")
HISTORY_LENGTH = 2000
#: Characters that end a word: ``:`` and ``.`` stay inside words so ``:ti`` and
#: ``nn.so`` complete as one word.
DELIMS = " \t\n()[]{},;=+-*/%@!<>&|"


@functools.cache
def stdlib_names() -> dict[str, tuple[str, ...]]:
    """``{"nn": ("softmax", "gelu", ...), "linalg": (...)}`` from the shipped stdlib."""
    from ..frontend import ast
    from ..frontend.parser import parse_source

    names: dict[str, tuple[str, ...]] = {}
    for path in sorted(stdlib_dir().glob("*.wia")):
        try:
            program = parse_source(path.read_text(encoding="utf-8"), str(path))
        except Exception:  # noqa: BLE001 - a broken stdlib file only loses completions
            continue
        names[path.stem] = tuple(d.name for d in program.decls
                                 if isinstance(d, (ast.Func, ast.Const)))
    return names


class Completer:
    """A readline completer over the session's current names."""

    def __init__(self, session: Session):
        self.session = session
        self._matches: list[str] = []

    def candidates(self, text: str, line_start: bool = True) -> list[str]:
        if text.startswith(":") and line_start:
            # Python's readline appends nothing after a unique match: add the space here.
            return sorted(f":{name} " for name in COMMANDS if f":{name}".startswith(text))
        if "." in text:
            module, _, prefix = text.partition(".")
            members = stdlib_names().get(module, ())
            return sorted(f"{module}.{m}" for m in members if m.startswith(prefix))
        pool = {*BUILTINS, *KEYWORDS, *DTYPE_NAMES, *REPL_HELPERS, *stdlib_names(),
                *self.session.values}
        pool |= {c.name for c in self.session.chunks.values() if c.kind != "import"}
        return sorted(n for n in pool if n.startswith(text))

    def complete(self, text: str, state: int) -> str | None:
        """The readline protocol: the ``state``-th completion of ``text``."""
        if state == 0:
            try:
                import readline

                begin = readline.get_begidx()
                line_start = not readline.get_line_buffer()[:begin].strip()
            except (ImportError, AttributeError):
                line_start = True
            self._matches = self.candidates(text, line_start)
        return self._matches[state] if state < len(self._matches) else None


def history_path() -> Path:
    override = os.environ.get("WIADSL_HISTORY")
    if override:
        return Path(override).expanduser()
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "wiadsl" / "history"


def setup_readline(session: Session) -> Any | None:
    """Install completion and load history; the readline module, or None without one."""
    try:
        import readline
    except ImportError:
        return None
    completer = Completer(session)
    readline.set_completer(completer.complete)
    readline.set_completer_delims(DELIMS)
    if "libedit" in (readline.__doc__ or ""):
        readline.parse_and_bind("bind ^I rl_complete")
    else:
        readline.parse_and_bind("tab: complete")
    readline.set_history_length(HISTORY_LENGTH)
    path = history_path()
    try:
        if path.exists():
            readline.read_history_file(str(path))
    except OSError:
        pass
    return readline


def save_history(readline: Any | None) -> None:
    """Write the history file (creating its folder); failures only lose history."""
    if readline is None:
        return
    path = history_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        readline.write_history_file(str(path))
    except OSError:
        pass
