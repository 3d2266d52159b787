"""Parsing a kernel body: declarations, labels, guarded instructions, operands, scopes.

Invariant: after ``parse_body`` every register name used by an instruction has
been resolved through the scope stack to the unique name stored in
``Kernel.regs``; labels map to the index of the next instruction.
"""

from __future__ import annotations

from dataclasses import replace

from .ast import Addr, Instr, Kernel, Name, Pair, Paren, SymOff, TensorRef, Vec
from .errors import PtxSimError
from .parser import _SPACES, _Parser, _type_of, _var_decl, parse_number


def _reg_decl(p: _Parser, kern: Kernel, scope: dict[str, str]) -> None:
    """``.reg .type a, b<N>, ...;`` — ``b<N>`` declares b0..b(N-1)."""
    tok = p.next()
    if tok.text.startswith(".v") and tok.text[2:].isdigit():
        raise PtxSimError("vector registers (.reg .vN) are unsupported", line=tok.line)
    t = _type_of(tok)
    while True:
        name = p.next().text
        names = [name]
        if p.accept("<"):
            n = p.number()
            p.expect(">")
            names = [f"{name}{i}" for i in range(n)]
        for nm in names:
            unique = nm
            k = 1
            while unique in kern.regs:
                unique = f"{nm}#{k}"
                k += 1
            kern.regs[unique] = t
            scope[nm] = unique
        if not p.accept(","):
            break
    p.expect(";")


def _resolve(op, scopes: list[dict[str, str]]):
    """Rename register operands through the scope stack (innermost first)."""

    def name(n: str) -> str:
        for s in reversed(scopes):
            if n in s:
                return s[n]
        return n

    if isinstance(op, Name):
        return replace(op, name=name(op.name))
    if isinstance(op, Addr) and op.base is not None:
        return replace(op, base=name(op.base))
    if isinstance(op, Pair):
        return Pair(_resolve(op.first, scopes), _resolve(op.second, scopes))
    if isinstance(op, Vec):
        return Vec(tuple(None if i is None else _resolve(i, scopes) for i in op.items))
    if isinstance(op, TensorRef):
        return TensorRef(_resolve(op.addr, scopes), _resolve(op.coords, scopes))
    return op


def parse_body(p: _Parser, kern: Kernel) -> None:
    """Parse ``{ ... }`` into ``kern`` (instructions, registers, variables, labels)."""
    p.expect("{")
    scopes: list[dict[str, str]] = [{}]
    while True:
        tok = p.peek()
        if tok is None:
            raise PtxSimError(f"unterminated body of '{kern.name}'", line=p.line())
        t = tok.text
        if t == "}":
            p.next()
            scopes.pop()
            if not scopes:
                return
            continue
        if t == "{":
            p.next()
            scopes.append({})
            continue
        nxt = p.peek(1)
        if tok.kind == "ident" and nxt is not None and nxt.text == ":":
            p.next()
            p.next()
            if t in kern.labels:
                raise PtxSimError(f"duplicate label {t!r}", line=tok.line)
            kern.labels[t] = len(kern.instrs)
            continue
        if t == ".reg":
            p.next()
            _reg_decl(p, kern, scopes[-1])
            continue
        if t in _SPACES or t in (".extern", ".visible", ".weak"):
            p.next()
            extern = t == ".extern"
            space = t if t in _SPACES else p.next().text
            if space not in _SPACES:
                raise PtxSimError(f"unexpected {space!r} in kernel body", line=tok.line)
            kern.vars.append(_var_decl(p, space, extern))
            continue
        if t in (".pragma", ".param"):
            if t == ".param":
                raise PtxSimError("kernel-body .param declarations (calls) are unsupported",
                                  line=tok.line)
            p.skip_to(";")
            continue
        guard = None
        if t == "@":
            p.next()
            neg = p.accept("!")
            guard = Name(p.next().text, neg)
        ins = parse_instr(p, guard)
        ops = tuple(_resolve(o, scopes) for o in ins.operands)
        g = _resolve(guard, scopes) if guard else None
        kern.instrs.append(Instr(ins.line, ins.opcode, ops, g))


def parse_operand(p: _Parser):
    """One instruction operand (see the module docstring for the forms)."""
    tok = p.next()
    t = tok.text
    if t == "[":
        base, off = None, 0
        sign = 1
        while True:
            tok2 = p.next()
            if tok2.text == "]":
                break
            if tok2.text == "," and base is not None:  # [tmap, {c0, c1}] (TMA)
                coords = parse_operand(p)
                p.expect("]")
                if not isinstance(coords, Vec):
                    raise PtxSimError("expected {coordinates} after the tensor map", line=tok2.line)
                return TensorRef(Addr(base, off), coords)
            if tok2.text in "+-" and tok2.kind == "punct":
                sign = -sign if tok2.text == "-" else sign
                continue
            if tok2.kind == "num":
                off += sign * int(parse_number(tok2).value)
            elif tok2.kind == "ident" and base is None and sign == 1:
                base = tok2.text
            else:
                raise PtxSimError(f"unsupported address term {tok2.text!r}", line=tok2.line)
            sign = 1
        return Addr(base, off)
    if t == "{":
        items = []
        while not p.accept("}"):
            op = parse_operand(p)
            items.append(None if isinstance(op, Name) and op.name == "_" else op)
            p.accept(",")
        return Vec(tuple(items))
    if t == "(":
        items = []
        while not p.accept(")"):
            items.append(parse_operand(p))
            p.accept(",")
        return Paren(tuple(items))
    if t == "!":
        return Name(p.next().text, neg=True)
    if t == "-":
        nt = p.next()
        if nt.kind not in ("num", "float"):
            raise PtxSimError(f"expected a number after '-', found {nt.text!r}", line=nt.line)
        return parse_number(nt, negative=True)
    if tok.kind in ("num", "float"):
        return parse_number(tok)
    if tok.kind == "ident":
        if p.accept("|"):
            return Pair(Name(t), Name(p.next().text))
        if (ahead := p.peek()) is not None and ahead.text in "+-" and ahead.kind == "punct":
            neg = p.next().text == "-"
            return SymOff(t, -p.number() if neg else p.number())
        return Name(t)
    raise PtxSimError(f"unexpected {t!r} in operand list", line=tok.line)


def parse_instr(p: _Parser, guard: Name | None) -> Instr:
    """``opcode operand, ...;`` (the guard, if any, was already consumed)."""
    tok = p.next()
    if tok.kind != "ident" or tok.text.startswith("."):
        raise PtxSimError(f"expected an instruction, found {tok.text!r}", line=tok.line)
    ops = []
    while not p.accept(";"):
        ops.append(parse_operand(p))
        if not p.accept(","):
            p.expect(";")
            break
    return Instr(tok.line, tok.text, tuple(ops), guard)
