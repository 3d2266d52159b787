"""An indented, one-node-per-line dump of the AST (``wiac --emit ast``).

Each node prints as ``Kind field=value ... @line:col``; child nodes and tuples of
nodes are indented below their field name, so a reader sees the tree's shape.
"""

from __future__ import annotations

from .. import records
from .ast import Program


def dump_program(program: Program) -> str:
    lines = [f"Program {program.filename}"]
    # An explicit stack of lines to print and nodes to expand, not recursion: a
    # chain ``a + b + ... + z`` is as deep as it is long.
    todo: list[str | tuple[object, int]] = [(d, 1) for d in reversed(program.decls)]
    while todo:
        item = todo.pop()
        if isinstance(item, str):
            lines.append(item)
        else:
            todo.extend(reversed(_expand(*item)))
    return "\n".join(lines) + "\n"


def _is_node(value: object) -> bool:
    return records.is_record(value) and not isinstance(value, type)


def _expand(node: object, depth: int) -> list[str | tuple[object, int]]:
    """The node's own line, then each child field's name and its nodes, in order."""
    pad = "  " * depth
    scalars: list[str] = []
    children: list[tuple[str, object]] = []
    for f in records.fields(node):
        if f.name == "span":
            continue
        value = getattr(node, f.name)
        if _is_node(value) or (isinstance(value, tuple) and any(map(_is_node, value))):
            children.append((f.name, value))
        else:
            scalars.append(f"{f.name}={value!r}")
    span = getattr(node, "span", None)
    where = f" @{span.line}:{span.column}" if span is not None else ""
    out: list[str | tuple[object, int]] = [
        f"{pad}{type(node).__name__}{''.join(' ' + s for s in scalars)}{where}"]
    for name, value in children:
        out.append(f"{pad}  .{name}")
        for child in value if isinstance(value, tuple) else (value,):
            out.append((child, depth + 2) if _is_node(child) else f"{pad}    {child!r}")
    return out
