"""The interactive session: ``wiac --repl``, or ``python -m wiadsl`` with no argument.

Reads entries (an entry spans lines while a bracket or brace is open, after a
trailing ``\\``, and until a ``kernel`` / ``func`` header has its body), runs each (``evaluate.execute`` or a ``:command``)
and prints the result. On a terminal it has a prompt, line editing, tab
completion and history (``completion.py``); from a pipe it reads the same
language without prompts, so a session can be scripted.

Invariants:
- An error is printed (with the caret, naming the input ``<inN>``) and the
  session goes on; Ctrl-C cancels the entry being typed or the command running.
- The exit status is 0, or 1 when input came from a pipe and some entry failed
  (so scripted sessions fail loudly).
"""

from __future__ import annotations

import argparse
import re
import signal
import sys

from .. import __version__
from ..diagnostics import WiaError
from .commands import Quit, ReplState, run_command
from .errors import EXIT_OK, EXIT_USER, internal_error_banner, render_error, silence_stdout
from .evaluate import execute
from .session import Session, SessionError

PS1, PS2 = "wia> ", "...> "
BANNER = (f"wiadsl {__version__} interactive session: WIA DSL declarations, "
          "expressions and :commands\n"
          "Type :help for the commands, :quit (or Ctrl-D) to leave.")

_COMMENTS = re.compile(r"//[^\n]*|/\*[\s\S]*?(\*/|\Z)")
_HEADER = re.compile(r"\s*(kernel|func)\b")


def needs_more(text: str) -> bool:
    """Whether ``text`` is an unfinished entry (the REPL reads another line).

    An entry goes on only while a bracket, brace or block comment is open, after
    a line ending in ``\\`` (``read_entry`` drops it), or after a ``kernel`` /
    ``func`` header whose ``{`` is still to come. A line ending in an operator
    does not continue: ``y = x +`` is an error now, not a wait for more input
    that would glue on whatever comes next.
    """
    if text.lstrip().startswith(":"):
        return False
    if text.endswith("\\"):
        return True
    code = _COMMENTS.sub(" ", text)
    if re.search(r"/\*(?![\s\S]*\*/)", text):
        return True  # an unterminated block comment
    depth = 0
    for ch in code:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
    if depth > 0:
        return True
    # a header whose body is on the next lines; a blank line gives up on it
    return (depth == 0 and bool(_HEADER.match(code)) and "{" not in code
            and not text.endswith("\n"))


def read_entry(interactive: bool) -> str:
    """One entry, over as many lines as it needs. EOF on the first line ends the session."""
    lines = [input(PS1 if interactive else "")]
    while needs_more("\n".join(lines)):
        if lines[-1].endswith("\\"):  # an explicit continuation: the backslash goes
            lines[-1] = lines[-1][:-1]
        try:
            lines.append(input(PS2 if interactive else ""))
        except EOFError:
            break
    return "\n".join(lines)


def handle(state: ReplState, entry: str) -> str:
    if entry.strip().startswith(":"):
        return run_command(state, entry)
    return execute(state.session, entry, state.label)


def _options(args: object) -> tuple[str | None, int]:
    if isinstance(args, argparse.Namespace):
        target = args.target if args.target in ("interp", "cpu", "systolic", "cuda") else None
        # no -O given: the default level, as for wiac itself (None broke :passes)
        return target, 2 if args.level is None else args.level
    return None, 2


def main(args: object = None) -> int:
    """Run the session on stdin/stdout; returns the exit status."""
    try:
        return _session(args)
    except BrokenPipeError:
        # The reader went away (``python -m wiadsl | head``): not an error of ours.
        silence_stdout()
        return EXIT_OK


def _answer_ctrl_c() -> None:
    """Ctrl-C raises KeyboardInterrupt (and cancels the entry being typed) even when
    the session started with SIGINT ignored: a job started with ``&`` from a script
    inherits that, and Python then installs no handler of its own."""
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:  # not the main thread: leave the handler as it is
        pass


def _session(args: object) -> int:
    from .completion import save_history, setup_readline

    target, level = _options(args)
    session = Session(target, level)
    interactive = sys.stdin.isatty()
    readline = setup_readline(session) if interactive else None
    if interactive:
        _answer_ctrl_c()
        print(BANNER)
    state = ReplState(session)
    failed = False
    count = 1
    while True:
        state.label = f"<in{count}>"
        try:
            entry = read_entry(interactive)
        except EOFError:
            if interactive:
                print()
            break
        except KeyboardInterrupt:
            print("\n(cancelled)")
            continue
        if not entry.strip():
            continue
        try:
            out = handle(state, entry)
            if out:
                print(out)
        except Quit:
            break
        except WiaError as err:
            failed = True
            sys.stdout.flush()
            text = err.render() if isinstance(err, SessionError) else render_error(err, "wiadsl")
            print(text, file=sys.stderr)
        except KeyboardInterrupt:
            print("\n(interrupted)")
        except BrokenPipeError:
            raise  # stdout is gone: the session ends (main)
        except Exception as exc:  # noqa: BLE001 - a bug must not end the session
            failed = True
            sys.stdout.flush()
            print(internal_error_banner(exc, "wiadsl"), file=sys.stderr)
        sys.stderr.flush()
        sys.stdout.flush()
        count += 1
    save_history(readline)
    return EXIT_USER if failed and not interactive else EXIT_OK
