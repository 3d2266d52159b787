"""PTX tokens to a ``Module`` (see ``ast.py``).

Accepts what nvcc emits and what a hand-written emitter writes: the header
directives, ``.visible``/``.weak``/``.extern`` linkage, ``.entry`` and ``.func``
with parameter lists and performance directives (``.maxntid`` ...), ``.reg``
declarations with ``%r<N>`` ranges, module- and kernel-scope variables with
initializers, labels, guards ``@%p``/``@!%p``, nested ``{ }`` scopes, vector,
pair and address operands.  Anything else is a ``PtxSimError`` naming the line.
"""

from __future__ import annotations

import struct

from .ast import Imm, Kernel, Module, Param, VarDecl
from .errors import PtxSimError
from .lexer import Token, tokenize
from .ptxtypes import PtxType, ptx_type

_SPACES = (".shared", ".local", ".global", ".const")
_LINKAGE = (".visible", ".extern", ".weak", ".common")
_PERF = (".maxntid", ".reqntid", ".minnctapersm", ".maxnctapersm", ".maxnreg", ".maxclusterrank",
         ".reqnctapercluster", ".explicitcluster", ".noreturn", ".pragma", ".blocksareclusters")


def parse_number(tok: Token, negative: bool = False) -> Imm:
    """An immediate from a num/float token (``0f3F800000``, ``0x1F``, ``017``, ``1.5``, ``7U``)."""
    t = tok.text
    sign = "-" if negative else ""
    if tok.kind == "float":
        kind = "f32bits" if t[1] in "fF" else "f64bits"
        bits = int(t[2:], 16)
        if negative:
            bits ^= 1 << (31 if kind == "f32bits" else 63)
        return Imm(kind, bits, sign + t)
    body = t.rstrip("U")
    if any(c in body for c in ".eE") and not body.lower().startswith("0x"):
        return Imm("float", float(sign + body), sign + t)
    if body.lower().startswith(("0x", "0b")):
        v = int(body, 0)
    elif len(body) > 1 and body.startswith("0"):
        v = int(body, 8)
    else:
        v = int(body)
    return Imm("int", -v if negative else v, sign + t)


class _Parser:
    """A cursor over tokens; the ``expect``/``accept`` helpers raise with the line on mismatch."""

    def __init__(self, tokens: list[Token]):
        self.toks = tokens
        self.i = 0

    def peek(self, k: int = 0) -> Token | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def line(self) -> int:
        t = self.peek() or (self.toks[-1] if self.toks else None)
        return t.line if t else 0

    def next(self) -> Token:
        t = self.peek()
        if t is None:
            raise PtxSimError("unexpected end of PTX text", line=self.line())
        self.i += 1
        return t

    def accept(self, text: str) -> bool:
        t = self.peek()
        if t is not None and t.text == text:
            self.i += 1
            return True
        return False

    def expect(self, text: str) -> Token:
        t = self.next()
        if t.text != text:
            raise PtxSimError(f"expected {text!r}, found {t.text!r}", line=t.line)
        return t

    def number(self) -> int:
        neg = self.accept("-")
        t = self.next()
        if t.kind != "num":
            raise PtxSimError(f"expected a number, found {t.text!r}", line=t.line)
        v = parse_number(t, neg).value
        if not isinstance(v, int):
            raise PtxSimError(f"expected an integer, found {t.text!r}", line=t.line)
        return v

    def skip_to(self, text: str) -> None:
        while self.next().text != text:
            pass


def _type_of(tok: Token) -> PtxType:
    t = ptx_type(tok.text)
    if t is None:
        raise PtxSimError(f"unknown PTX type {tok.text!r}", line=tok.line)
    return t


def _init_bytes(p: _Parser, t: PtxType) -> bytes:
    """The initializer after ``=``: a scalar or (nested) brace list of numbers."""
    vals: list[Imm] = []

    def item() -> None:
        if p.accept("{"):
            while not p.accept("}"):
                item()
                p.accept(",")
            return
        neg = p.accept("-")
        tok = p.next()
        if tok.kind not in ("num", "float"):
            raise PtxSimError(f"unsupported initializer {tok.text!r}", line=tok.line)
        vals.append(parse_number(tok, neg))

    item()
    out = bytearray()
    for v in vals:
        if t.kind == "f" and v.kind in ("int", "float"):
            out += struct.pack({16: "<e", 32: "<f", 64: "<d"}[t.bits], float(v.value))
        elif t.kind == "f" or v.kind.endswith("bits"):
            out += int(v.value).to_bytes(t.size, "little")
        else:
            out += (int(v.value) % (1 << t.bits)).to_bytes(t.size, "little")
    return bytes(out)


def _var_decl(p: _Parser, space: str, extern: bool) -> VarDecl:
    """``[.align N] .type name[dims]... [= init];`` after the state-space token."""
    align, t = 0, None
    while True:
        tok = p.next()
        if tok.text == ".align":
            align = p.number()
        elif tok.text.startswith(".v") and tok.text[2:].isdigit():
            raise PtxSimError("vector-typed variables are unsupported", line=tok.line)
        elif tok.text.startswith("."):
            if ptx_type(tok.text) is not None:
                t = _type_of(tok)
            # other attributes (.ptr, .attribute(...)) are ignored
        else:
            name = tok.text
            break
    if t is None:
        raise PtxSimError(f"variable {name!r} has no type", line=tok.line)
    count: int | None = 1
    while p.accept("["):
        if p.accept("]"):
            count = None
            continue
        n = p.number()
        p.expect("]")
        count = None if count is None else count * n
    init = None
    if p.accept("="):
        init = _init_bytes(p, t)
        if count is None:
            count = len(init) // t.size
    p.expect(";")
    size = None if count is None else count * t.size
    return VarDecl(space[1:], name, t, size, align or t.size, init, extern)


def _params(p: _Parser) -> list[Param]:
    params: list[Param] = []
    p.expect("(")
    while not p.accept(")"):
        p.expect(".param")
        align, t = 0, None
        while True:
            tok = p.next()
            if tok.text == ".align":
                align = p.number()
            elif tok.text.startswith("."):
                if ptx_type(tok.text) is not None:
                    t = _type_of(tok)
            else:
                name = tok.text
                break
        count = 1
        while p.accept("["):
            count *= p.number()
            p.expect("]")
        if t is None:
            raise PtxSimError(f"parameter {name!r} has no type", line=tok.line)
        params.append(Param(name, t, count * t.size, align or t.size))
        p.accept(",")
    return params


def parse_module(text: str) -> Module:
    """Parse PTX text into a ``Module``; raise ``PtxSimError`` naming the line on bad input."""
    from .body import parse_body

    p = _Parser(tokenize(text))
    mod = Module()
    while p.peek() is not None:
        tok = p.next()
        t = tok.text
        if t == ".version":
            mod.version = p.next().text
        elif t == ".target":
            targets = [p.next().text]
            while p.accept(","):
                targets.append(p.next().text)
            mod.target = tuple(targets)
        elif t == ".address_size":
            mod.address_size = p.number()
        elif t in _LINKAGE:
            nxt = p.peek()
            if t == ".extern" and nxt is not None and nxt.text in _SPACES:
                mod.vars.append(_var_decl(p, p.next().text, extern=True))
        elif t in _SPACES:
            mod.vars.append(_var_decl(p, t, extern=False))
        elif t in (".entry", ".func"):
            ret: list[Param] = []
            if t == ".func" and (ahead := p.peek()) is not None and ahead.text == "(":
                ret = _params(p)
            kern = Kernel(p.next().text, is_entry=t == ".entry")
            if (ahead := p.peek()) is not None and ahead.text == "(":
                kern.params = _params(p)
            kern.params = ret + kern.params if t == ".func" else kern.params
            while (ahead := p.peek()) is not None and ahead.text in _PERF:
                d = p.next().text
                if d == ".pragma":
                    p.skip_to(";")
                    continue
                while (ahead := p.peek()) is not None and (ahead.kind == "num" or ahead.text == ","):
                    p.next()
            if p.accept(";"):
                continue  # a declaration without body
            parse_body(p, kern)
            (mod.kernels if kern.is_entry else mod.funcs)[kern.name] = kern
        elif t == ".pragma":
            p.skip_to(";")
        else:
            raise PtxSimError(f"unexpected {t!r} at module scope", line=tok.line)
    return mod
