"""An indented, one-node-per-line dump of the AST (``wiac --emit ast``).

Each node prints as ``Kind field=value ... @line:col``; child nodes and tuples of
nodes are indented below their field name, so a reader sees the tree's shape.
"""

from __future__ import annotations

import dataclasses

from .ast import Program


def dump_program(program: Program) -> str:
    lines = [f"Program {program.filename}"]
    for decl in program.decls:
        _dump_node(decl, 1, lines)
    return "\n".join(lines) + "\n"


def _is_node(value: object) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def _dump_node(node: object, depth: int, lines: list[str]) -> None:
    pad = "  " * depth
    scalars: list[str] = []
    children: list[tuple[str, object]] = []
    for f in dataclasses.fields(node):  # type: ignore[arg-type]
        if f.name == "span":
            continue
        value = getattr(node, f.name)
        if _is_node(value) or (isinstance(value, tuple) and any(map(_is_node, value))):
            children.append((f.name, value))
        else:
            scalars.append(f"{f.name}={value!r}")
    span = getattr(node, "span", None)
    where = f" @{span.line}:{span.column}" if span is not None else ""
    lines.append(f"{pad}{type(node).__name__}{''.join(' ' + s for s in scalars)}{where}")
    for name, value in children:
        lines.append(f"{pad}  .{name}")
        for child in value if isinstance(value, tuple) else (value,):
            if _is_node(child):
                _dump_node(child, depth + 2, lines)
            else:
                lines.append(f"{pad}    {child!r}")
