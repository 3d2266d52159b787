"""A kernel's LLVM module cut into parts that optimize and compile on separate threads.

Why: LLVM works on one module on one thread, and a model's kernel is one module
(ResNet-18: ~530 ms of -O2 and code generation, most of its cold first call, issue
21). Its outlined parallel loops are independent functions: the kernel calls them
(directly and through their pool workers), they never call it back.

How (``partition``): the entry and the kernel function are the *root* (part 0). The
other defined functions are grouped into *clusters*, the connected groups of the
references between them (a loop body, its worker, what they call), and the clusters
are packed into parts, costliest first, each into the part with the least cost so far
(part 0 counts the root's): a function's characters, a third of them for one left
unoptimized (codegen.py's straight-line glue). Each part is the module's text with the
functions of the other parts as declarations. A function of a cluster outside part 0
is external in its part under ``<prefix>.<name>`` (a prefix unique to the kernel: the
loader's symbols are the process's), and part 0 declares it.

Invariants:
- Part 0 is the only one the entry is in, and it is loaded last: every other part
  only references helpers, the process and itself, so it links on its own first.
- A module is not cut (one part, the module's text) when it is small (the threads'
  and parts' overhead would cost more), when a cluster references the root, or when
  a cluster references a variable the module defines that is not constant (one
  copy of it per part would be two variables).
- Constant globals, declarations and metadata appear in every part; LLVM drops what
  a part does not use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from llvmlite import ir

#: text of the non-root functions below which a module stays whole. ResNet-18's
#: kernel, since its layers of one shape share code (merge_functions.py), has
#: ~104 KB of them beside a 96 KB root: cut in two, its LLVM work (~240 ms on one
#: thread) took 170 ms on two, and its first call on a cache holding the helpers
#: 512-557 -> 442-463 ms. The example kernels (at most ~6 KB of them) stay whole.
MIN_SPLIT_CHARS = 50_000

_REFERENCE = re.compile(r'@"((?:[^"\\]|\\.)*)"')


#: how many characters of an ``optnone`` function (codegen.py's straight-line glue)
#: cost LLVM what one of an optimized one does: ResNet-18's kernel function, 247 KB,
#: took 200 ms at -O2 and 67 ms unoptimized
UNOPTIMIZED_CHARS = 3


@dataclass
class _Function:
    name: str
    text: str
    refs: set[str]

    @property
    def cost(self) -> int:
        """The function's share of a part's LLVM time, in characters of optimized code."""
        optnone = "optnone" in self.text.split("\n", 1)[0]
        return len(self.text) // UNOPTIMIZED_CHARS if optnone else len(self.text)


def partition(mod: ir.Module, root: set[str], prefix: str, parts: int) -> list[str]:
    """The texts of ``mod`` cut into at most ``parts`` modules (module docstring); the
    first holds the functions named in ``root``."""
    defined = {f.name: _Function(f.name, str(f), set()) for f in mod.functions if f.blocks}
    for f in defined.values():
        f.refs = set(_REFERENCE.findall(f.text)) - {f.name}
    others = [f for name, f in defined.items() if name not in root]
    if parts < 2 or sum(len(f.text) for f in others) < MIN_SPLIT_CHARS or not _separable(mod, others, root):
        return [_part_text(mod, defined, 0, {}, {})]  # str(mod), its functions printed once
    bins = _pack(_clusters(others), sum(defined[n].cost for n in root if n in defined), parts)
    bins = [bins[0]] + [b for b in bins[1:] if b]
    owner = {f.name: k for k, cluster in enumerate(bins) for f in cluster}
    renamed = {name: f"{prefix}.{name}" for name, k in owner.items() if k > 0}
    return [_part_text(mod, defined, k, owner, renamed) for k in range(len(bins))]


def _separable(mod: ir.Module, others: list[_Function], root: set[str]) -> bool:
    """Whether no non-root function references the root or a mutable global defined
    here (an external one, as the pool's slot, is the same variable in every part)."""
    mutable = {g.name for g in mod.global_values if isinstance(g, ir.GlobalVariable)
               and g.initializer is not None and not g.global_constant}
    return not any(f.refs & (root | mutable) for f in others)


def _clusters(others: list[_Function]) -> list[list[_Function]]:
    """The connected groups of references among ``others`` (union-find)."""
    parent = {f.name: f.name for f in others}

    def find(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name
    for f in others:
        for ref in f.refs:
            if ref in parent:
                parent[find(ref)] = find(f.name)
    groups: dict[str, list[_Function]] = {}
    for f in others:
        groups.setdefault(find(f.name), []).append(f)
    return list(groups.values())


def _pack(clusters: list[list[_Function]], root_cost: int, parts: int) -> list[list[_Function]]:
    """Clusters into ``parts`` bins, costliest first into the lightest (bin 0 starts
    with the root's cost)."""
    bins: list[list[_Function]] = [[] for _ in range(parts)]
    load = [root_cost] + [0] * (parts - 1)
    for cluster in sorted(clusters, key=lambda c: -sum(f.cost for f in c)):
        k = load.index(min(load))
        bins[k].extend(cluster)
        load[k] += sum(f.cost for f in cluster)
    return bins


def _part_text(mod: ir.Module, defined: dict[str, _Function], k: int, owner: dict[str, int],
               renamed: dict[str, str]) -> str:
    """Part ``k``'s text: ``str(mod)``'s layout with the functions ``owner`` puts in
    another part declared, and the ``renamed`` ones (those outside part 0) external
    and referenced under their new names (a function missing from ``owner`` is part 0's)."""
    lines = [f'; ModuleID = "{mod.name}{f".part{k}" if k else ""}"', f'target triple = "{mod.triple}"',
             f'target datalayout = "{mod.data_layout}"', ""]
    lines += [t.get_declaration() for t in mod.get_identified_types().values()]
    for g in mod.global_values:
        f = defined.get(g.name)
        if f is None:
            lines.append(str(g))  # a declaration or a global variable
        elif owner.get(g.name, 0) == k:
            lines.append(f.text.replace("define internal ", "define ", 1) if g.name in renamed
                         else f.text)
        else:  # another part's: declared (with its prototype's argument types)
            head = f.text.split("\n", 1)[0]
            lines.append(head.replace("define internal ", "declare ", 1).replace("define ", "declare ", 1))
    lines += mod._get_metadata_lines()  # llvmlite's own lines for what str(mod) ends with
    text = "\n".join(lines)
    if not renamed:
        return text
    return _REFERENCE.sub(lambda m: f'@"{renamed.get(m.group(1), m.group(1))}"', text)


__all__ = ["MIN_SPLIT_CHARS", "partition"]
