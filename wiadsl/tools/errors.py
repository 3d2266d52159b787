"""Exit statuses and the one place the tools turn exceptions into them.

| status | meaning |
| --- | --- |
| 0 | success |
| 1 | a user error: bad source, a bad call, a missing file or feature, a file-system error on a path (the diagnostic on stderr, with the path) |
| 2 | a malformed command line (argparse's convention) |
| 3 | an internal compiler error: a bug in wiadsl (a short banner; the traceback with WIADSL_DEBUG=1) |
| 130 | interrupted (Ctrl-C) |

Invariant: no traceback reaches the user unless ``WIADSL_DEBUG=1`` is set.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable

from ..diagnostics import WiaError
from .source import CommandLineError

EXIT_OK, EXIT_USER, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def debug_enabled() -> bool:
    return os.environ.get("WIADSL_DEBUG", "") not in ("", "0")


def internal_error_banner(exc: BaseException, prog: str = "wiac") -> str:
    """What the user sees for a bug in the compiler (the traceback only in debug mode)."""
    lines = [f"{prog}: internal compiler error: {type(exc).__name__}: {exc}",
             "note: this is a bug in wiadsl, not in your program; please report it "
             "with the input that caused it"]
    if debug_enabled():
        lines.append("".join(traceback.format_exception(exc)).rstrip())
    else:
        lines.append("note: set WIADSL_DEBUG=1 to see the traceback")
    return "\n".join(lines)


def render_error(err: WiaError, prog: str = "wiac") -> str:
    """A source error as ``file:line:col: error: ...``; any other as ``wiac: error: ...``."""
    text = err.render()
    return text if err.span is not None else f"{prog}: {text}"


def guarded(action: Callable[[], int], prog: str = "wiac") -> int:
    """Run ``action`` and map what escapes it to an exit status (see the table above)."""
    try:
        return action()
    except CommandLineError as err:
        print(f"{prog}: {err.render()}", file=sys.stderr)
        return EXIT_USAGE
    except WiaError as err:
        print(render_error(err, prog), file=sys.stderr)
        return EXIT_USER
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (``wiac ... | head``): not an error of ours.
        silence_stdout()
        return EXIT_OK
    except OSError as exc:
        if exc.filename is None:  # not about a path the user named: ours
            print(internal_error_banner(exc, prog), file=sys.stderr)
            return EXIT_INTERNAL
        # A file-system error on a path (a missing directory, no permission) that
        # a tool did not turn into a WiaUsageError itself: still the user's to fix.
        print(f"{prog}: error: cannot access '{exc.filename}': {exc.strerror or exc}",
              file=sys.stderr)
        return EXIT_USER
    except Exception as exc:  # noqa: BLE001 - the last line of defence
        print(internal_error_banner(exc, prog), file=sys.stderr)
        return EXIT_INTERNAL


def silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
