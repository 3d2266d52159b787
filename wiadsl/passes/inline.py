"""``inline``: replace every ``func.call`` by a copy of the callee's body.

Invariants:
- A single-block callee is spliced before the call; its ``return`` values
  replace the call's results.
- A multi-block callee splits the caller's block at the call: the ops after the
  call move to a new continuation block whose arguments are the call's results;
  the callee's entry ops run in the caller's block (its parameters mapped to the
  call's operands), its other blocks are copied, and every ``return`` becomes
  ``br ^continuation(values)``.
- Callees are inlined bottom-up, so recursion (rejected by the frontend) would
  stop the pass with an error instead of looping. Functions that were called and
  no longer are, and are not kernels, are removed.
- Locations: a copied op keeps its own ``loc`` when it is in the caller's
  source file, else (a stdlib function, say) it takes the call's ``loc``, so
  remarks about inlined code point at the user's call (``site_loc``).
"""

from __future__ import annotations

from typing import Any

from ..diagnostics import WiaIRError
from ..ir.copying import clone_op
from ..ir.core import Block, Operation, Value
from ..ir.module import FuncOp, ModuleOp
from ..ir.ops import create_op
from ..records import record
from .base import Pass, PassContext, register_pass


def site_loc(own: Any, call: Any) -> Any:
    """The ``loc`` of an op inlined at a call located at ``call``."""
    if own is None or call is None:
        return own if call is None else call
    same = getattr(getattr(own, "source", None), "name", None) == \
        getattr(getattr(call, "source", None), "name", None)
    return own if same else call


def _clone_at(op: Operation, mapping: dict[int, Value], call: Operation,
              block_map: dict[int, Block] | None = None) -> Operation:
    new = clone_op(op, mapping, block_map)
    new.loc = site_loc(op.loc, call.loc)
    for region in new.regions:
        for b in region.blocks:
            for inner in b.ops:
                inner.loc = site_loc(inner.loc, call.loc)
    return new


def inline_call(call: Operation, callee: FuncOp) -> None:
    block = call.parent
    assert block is not None
    mapping: dict[int, Value] = {id(a): v for a, v in zip(callee.args, call.operands, strict=True)}
    if len(callee.blocks) == 1:
        for op in callee.entry.ops[:-1]:
            call.insert_before(_clone_at(op, mapping, call))
        ret = callee.entry.ops[-1]
        for r, v in zip(call.results, ret.operands, strict=True):
            new = mapping.get(id(v), v)
            if new.name_hint is None:
                new.name_hint = r.name_hint
            r.replace_all_uses_with(new)
        call.erase()
        return
    region = block.parent
    assert region is not None
    cont = Block(call.result_types, [r.name_hint for r in call.results])
    region.add_block(cont, region.blocks.index(block) + 1)
    index = block.ops.index(call)
    for op in block.ops[index + 1:]:
        op.detach()
        cont.append(op)
    for r, a in zip(call.results, cont.args, strict=True):
        r.replace_all_uses_with(a)
    call.erase()
    block_map: dict[int, Block] = {id(callee.entry): block}
    copies: list[Block] = []
    for b in callee.blocks[1:]:
        nb = Block(b.arg_types, [a.name_hint for a in b.args], b.name_hint)
        for a, na in zip(b.args, nb.args, strict=True):
            mapping[id(a)] = na
        block_map[id(b)] = nb
        copies.append(nb)
    at = region.blocks.index(cont)
    for i, nb in enumerate(copies):
        region.add_block(nb, at + i)
    for b in callee.blocks:
        target = block_map[id(b)]
        for op in b.ops:
            if op.name == "func.return":
                br = create_op("cf.br", successors=[
                    (cont, [mapping.get(id(v), v) for v in op.operands])])
                br.loc = site_loc(op.loc, call.loc)
                target.append(br)
            else:
                target.append(_clone_at(op, mapping, call, block_map))


def calls_in(func: FuncOp) -> list[Operation]:
    return [op for op in func.walk() if op.name == "func.call"]


@register_pass
@record(frozen=True)
class Inline(Pass):
    """Inline every call; ``keep_unused=true`` keeps callees that become unused."""

    name = "inline"
    keep_unused: bool = False

    def run(self, module: ModuleOp, ctx: PassContext) -> None:
        called = {op.attributes["callee"] for f in module for op in calls_in(f)}
        for func in module:
            self.inline_all(module, func, ctx, depth=0)
        if self.keep_unused:
            return
        still = {op.attributes["callee"] for f in module for op in calls_in(f)}
        for name in called - still:
            if name in module and not module[name].is_kernel:
                module.remove(name)
                ctx.count("functions removed")

    def inline_all(self, module: ModuleOp, func: FuncOp, ctx: PassContext, depth: int) -> None:
        if depth > 64:
            raise WiaIRError(f"inline: call depth over 64 in @{func.name} (recursion?)")
        for call in calls_in(func):
            callee = module.get(call.attributes["callee"])
            if callee is None:
                raise WiaIRError(f"inline: call of unknown function @{call.attributes['callee']}")
            if callee is func:
                raise WiaIRError(f"inline: @{func.name} calls itself")
            self.inline_all(module, callee, ctx, depth + 1)
            inline_call(call, callee)
            ctx.count("calls inlined")
