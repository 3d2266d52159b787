"""Malformed input: broken sources and bad calls must raise only ``WiaError``.

Sources (``bad_sources``): token soup from the language's own tokens, truncations
and single-character edits of valid generated programs, deep nesting (beyond the
parser's limit), huge integer and float literals and huge dims, non-UTF-8 bytes.
Each is compiled (``compile_source``, or ``parse_bytes`` for bytes) and, when it
compiles, lowered; anything but success or a ``WiaError`` is a finding.

Calls (``bad_calls``): a valid kernel called with wrong dtypes, ranks and extents,
non-contiguous and strided arrays, NaN/inf, empty arrays and zero-sized dims,
Python objects that are not arrays, missing and extra arguments. Every target
given must return or raise a ``WiaError``; calls run in a forked child so a
crash of native code is recorded, not suffered.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from ..diagnostics import WiaError

TOKENS = ("kernel", "func", "const", "import", "input", "output", "if", "else", "for", "in",
          "while", "return", "true", "false", "(", ")", "{", "}", "[", "]", ",", ";", ":",
          "=", "+=", "+", "-", "*", "/", "%", "@", "**", "==", "<", "&&", "||", "!", ".",
          "x", "A", "f32", "i8", "bool", "tensor", "M", "range", "reduce_sum", "cast", "0",
          "1.5", "1e999", "//", "/*", "*/", "\"", "\\", "\t", "\n")


@dataclass
class MalformedReport:
    sources: int = 0
    calls: int = 0
    findings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings

    def summary(self) -> str:
        head = (f"malformed: {self.sources} sources, {self.calls} calls, "
                f"{len(self.findings)} findings")
        return "\n".join([head] + [f"  {f[:300]}" for f in self.findings])


def bad_sources(rng: random.Random, count: int) -> Iterator[str | bytes]:
    """``count`` malformed sources, every kind in turn."""
    from .genprog import generate

    for i in range(count):
        kind = i % 7
        if kind == 0:
            yield " ".join(rng.choice(TOKENS) for _ in range(rng.randint(1, 40)))
        elif kind in (1, 2):
            text = generate(rng.randrange(1 << 30)).source
            if kind == 1:
                yield text[:rng.randrange(len(text) + 1)]
            else:
                k = rng.randrange(len(text))
                yield text[:k] + rng.choice(TOKENS + ("", "\x00", "\u00e9")) + text[k + 1:]
        elif kind == 3:
            depth = rng.choice((150, 250, 1000, 5000))
            opener, closer = rng.choice((("(", ")"), ("[", "]"), ("-", ""), ("{", "}")))
            body = opener * depth + "x" + closer * depth
            yield f"kernel k(input x: f32, output y: f32) {{ y = {body}; }}"
        elif kind == 4:
            big = rng.choice(("9" * 400, "1e999", "9223372036854775808", "1e-999",
                              "18446744073709551616", "0." + "0" * 500 + "1"))
            yield f"kernel k(input x: f32[4], output y: f32[4]) {{ y = x * {big}; }}"
        elif kind == 5:
            dims = rng.choice(("9223372036854775807", "4611686018427387904, 4",
                               "99999999999, 99999999999", "0", "1" + "0" * 30))
            yield (f"kernel k(input x: f32[{dims}], output y: f32[{dims}]) "
                   f"{{ y = zeros([{dims}], f32) + x; }}")
        else:
            raw = generate(rng.randrange(1 << 30)).source.encode()
            k = rng.randrange(len(raw) + 1)
            yield raw[:k] + bytes(rng.choice((b"\xff", b"\xc3\x28", b"\x80\x80", b"\xed\xa0\x80")))


def check_source(src: str | bytes) -> str | None:
    """None when ``src`` compiles (and lowers) or raises a WiaError, else the finding."""
    from ..frontend.compile import compile_source
    from ..frontend.parser import parse_bytes

    try:
        if isinstance(src, bytes):
            parse_bytes(src, "<bad>")
            return None
        compiled = compile_source(src, "<bad>")
        for k in compiled.kernels:
            compiled.lower_kernel(k.name, {})
    except WiaError:
        return None
    except RecursionError:
        return f"RecursionError on {src[:80]!r}"
    except Exception as exc:  # noqa: BLE001 - the finding
        return f"{type(exc).__name__}: {exc} on {src[:120]!r}"
    return None


#: Kernels the call fuzzer calls (each a different calling convention).
CALL_KERNELS = (
    "kernel k(input A: f32[M, K], input B: f32[K, N], output C: f32[M, N]) { C = A @ B; }",
    "kernel k(input x: f64[N], input s: f64, output y: f64[N]) { y = x * s + reduce_max(x); }",
    "kernel k(input x: i32[M, 3], output y: i64) { y = reduce_sum(x) + argmax(x); }",
    "kernel k(input x: tensor, output y: tensor) { y = x + x; }",
    "kernel k(input x: f32[N], input i: i64, output y: f32) { y = x[0] + cast(i, f32); }",
)


def bad_args(rng: random.Random) -> tuple[tuple, dict]:
    """Positional and keyword arguments that are wrong in some way (or edge cases)."""
    shapes = [(), (0,), (3,), (2, 3), (3, 0), (0, 0), (2, 3, 4), (1, 1), (3, 2)]
    dtypes = [np.float32, np.float64, np.float16, np.int32, np.int64, np.int8, np.bool_,
              np.uint8, np.complex64, object]

    def arg() -> object:
        r = rng.random()
        if r < 0.1:
            return rng.choice([None, "x", 3, 2.5, float("nan"), [1, 2], 10**30, True])
        shape = rng.choice(shapes)
        a: np.ndarray = np.zeros(shape, dtype=rng.choice(dtypes))
        if a.dtype.kind == "f" and a.size:
            with np.errstate(over="ignore"):  # 1e38 in a float16 is inf, as intended
                a.flat[0] = rng.choice([np.nan, np.inf, -np.inf, 1e38])
        if r < 0.25 and a.ndim == 2 and a.size:
            a = a.T
        elif r < 0.35 and a.ndim >= 1 and a.shape[0] > 1:
            a = a[::2]
        elif r < 0.4:
            a.setflags(write=False)
        return a

    args = tuple(arg() for _ in range(rng.choice((0, 1, 2, 2, 3))))
    kwargs = {rng.choice(("A", "y", "C", "zz")): arg()} if rng.random() < 0.3 else {}
    return args, kwargs


def check_call(target: str, src: str, args: tuple, kwargs: dict) -> str | None:
    from ..runtime.jit import jit

    try:
        jit(src, kernel="k", target=target)(*args, **kwargs)
    except WiaError:
        return None
    except Exception as exc:  # noqa: BLE001 - the finding
        shapes = [getattr(a, "shape", a) for a in args]
        return f"{target}: {type(exc).__name__}: {exc} calling {src[:50]!r} with {shapes}"
    return None


def run_malformed(seed: int, count: int, targets: tuple[str, ...] = ("interp", "cpu"),
                  ) -> MalformedReport:
    """``count`` malformed sources and ``count`` bad calls per target."""
    from .worker import run_forked

    rng = random.Random(seed)
    report = MalformedReport()
    for src in bad_sources(rng, count):
        report.sources += 1
        finding = check_source(src)
        if finding:
            report.findings.append(finding)
    for _ in range(count):
        src = rng.choice(CALL_KERNELS)
        args, kwargs = bad_args(rng)
        for target in targets:
            report.calls += 1
            if target == "interp":
                finding = check_call(target, src, args, kwargs)
            else:  # native code: in a child, so a crash is a finding, not our death
                died, value = run_forked(partial(check_call, target, src, args, kwargs))
                finding = value if isinstance(value, str) else None
                if died:
                    finding = f"{target}: the process died calling {src[:50]!r}"
            if finding:
                report.findings.append(str(finding))
    return report
