"""``wiac``: compile a WIA DSL file and print or write one stage of the pipeline.

Exit status: 0 on success, 1 on a user error (the diagnostic on stderr, never a
traceback), 2 on bad command-line usage (argparse's convention).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from .. import __version__
from ..diagnostics import WiaError, WiaUsageError

EMIT_STAGES = ("tokens", "ast", "ir")


def build_arg_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="wiac",
        description="Compile WIA DSL kernels. Reads FILE ('-' for stdin) and prints the "
        "stage chosen with --emit, or writes it to -o OUT ('-' for stdout).",
    )
    parser.add_argument("file", help="a .wia source file, or '-' for standard input")
    parser.add_argument("-o", "--output", metavar="OUT", help="write the result here")
    parser.add_argument("--emit", choices=EMIT_STAGES, default="ir",
                        help="the stage to print (default: ir)")
    parser.add_argument("--kernel", metavar="NAME", help="only this kernel")
    parser.add_argument("--version", action="version", version=f"wiac {__version__}")
    return parser


def _read_source(path: str) -> tuple[str, str]:
    if path == "-":
        return sys.stdin.read(), "<stdin>"
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise WiaUsageError(f"cannot read '{path}': {exc.strerror}") from None
    from ..frontend.parser import decode_source

    return decode_source(data, path), path


def _emit_tokens(text: str, filename: str, _args: argparse.Namespace) -> str:
    from ..frontend.parser import tokenize

    return "".join(f"{line}:{col}\t{kind}\t{tok!r}\n" for kind, tok, line, col in
                   tokenize(text, filename))


def _emit_ast(text: str, filename: str, _args: argparse.Namespace) -> str:
    from ..frontend.astdump import dump_program
    from ..frontend.loader import load_program
    from ..frontend.typecheck import check

    loaded = load_program(text, filename)
    check(loaded)
    return dump_program(loaded.main)


def _emit_ir(text: str, filename: str, args: argparse.Namespace) -> str:
    from ..ir.printer import print_module
    from ..frontend.compile import compile_to_ir

    return print_module(compile_to_ir(text, filename, kernel=args.kernel))


EMITTERS: dict[str, Callable[[str, str, argparse.Namespace], str]] = {
    "tokens": _emit_tokens,
    "ast": _emit_ast,
    "ir": _emit_ir,
}


def _write(result: str, output: str | None) -> None:
    if output is None or output == "-":
        sys.stdout.write(result)
        return
    try:
        Path(output).write_text(result)
    except OSError as exc:
        raise WiaUsageError(f"cannot write '{output}': {exc.strerror}") from None


def main(argv: list[str] | None = None) -> int:
    args = build_arg_parser().parse_args(argv)
    try:
        text, filename = _read_source(args.file)
        _write(EMITTERS[args.emit](text, filename, args), args.output)
    except WiaError as err:
        print(err.render(), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
