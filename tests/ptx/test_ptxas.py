"""Every example kernel and every op test, emitted for sm_80 and sm_90, assembles with ptxas;
elementwise and reduction kernels do not spill."""

from __future__ import annotations

import json

import pytest

from wiadsl.backends.ptx.emit import emit_ptx

from .corpus import OPS
from .helpers import assemble, corpus_module, emitted, example_kernels, spills

ARCHS = ("sm_80", "sm_90")
EXAMPLE_KERNELS = example_kernels()


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("path,kernel", EXAMPLE_KERNELS, ids=[k for _, k in EXAMPLE_KERNELS])
def test_example_assembles(ptxas: str, path: str, kernel: str, arch: str) -> None:
    text, plan_json = emitted(path, kernel, arch)
    rc, log = assemble(ptxas, text, arch)
    assert rc == 0, log
    plan = json.loads(plan_json)
    _no_spills(plan, log)


@pytest.mark.parametrize("path,kernel", EXAMPLE_KERNELS, ids=[k for _, k in EXAMPLE_KERNELS])
def test_example_dynamic_shapes_assemble(ptxas: str, path: str, kernel: str) -> None:
    text, _ = emitted(path, kernel, "sm_80", static=False)
    rc, log = assemble(ptxas, text, "sm_80")
    assert rc == 0, log


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", sorted(OPS))
def test_op_assembles(ptxas: str, name: str, arch: str) -> None:
    text, plan = emit_ptx(corpus_module(OPS[name][0]), "k", arch)
    rc, log = assemble(ptxas, text, arch)
    assert rc == 0, log
    _no_spills(plan, log)


def _no_spills(plan: dict, log: str) -> None:
    spilled = spills(log)
    for k in plan["kernels"]:
        if k["kind"].startswith(("elementwise", "row")):
            assert spilled.get(k["name"], 0) == 0, f"{k['name']} spills: {log}"
