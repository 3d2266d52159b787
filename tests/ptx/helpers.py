"""Shared helpers: compile corpus/example kernels, emit PTX, run ptxas (cached)."""

from __future__ import annotations

import functools
import glob
import json
import os
import re
import subprocess
import tempfile
from pathlib import Path

from wiadsl.backends.ptx.emit import emit_ptx
from wiadsl.frontend.compile import compile_to_ir
from wiadsl.runtime.jit import jit

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(glob.glob(str(ROOT / "examples" / "*.wia")))

#: Concrete input shapes for every example kernel (name -> {input: shape}).
EXAMPLE_SHAPES: dict[str, dict[str, tuple[int, ...]]] = {
    "attn": {"Q": (6, 16), "K": (9, 16), "V": (9, 8)},
    "attn_explicit": {"Q": (6, 16), "K": (9, 16), "V": (9, 8)},
    "attn_batched": {"Q": (3, 6, 16), "K": (3, 9, 16), "V": (3, 9, 8)},
    "attn_causal": {"Q": (9, 16), "K": (6, 16), "V": (6, 8)},
    "attn_causal_explicit": {"Q": (6, 16), "K": (9, 16), "V": (9, 8)},
    "attn_causal_batched": {"Q": (3, 6, 16), "K": (3, 9, 16), "V": (3, 9, 8)},
    "block": {"X": (5, 8), "W": (8, 8), "g": (8,), "b": (8,)},
    "forward_pass": {},
    "conditional_compute": {"x": (7, 33)},
    "ln_softmax": {"X": (7, 33), "g": (33,), "b": (33,)},
    "ln_log_softmax": {"X": (7, 33), "g": (33,), "b": (33,)},
    "matmul": {"A": (7, 33), "B": (33, 5)},
    "mlp_relu": {"x": (4, 7), "w1": (7, 9), "b1": (9,), "w2": (9, 3), "b2": (3,)},
    "mlp_gelu": {"x": (4, 7), "w1": (7, 9), "b1": (9,), "w2": (9, 3), "b2": (3,)},
    "mlp": {"x": (4, 7), "w1": (7, 9), "b1": (9,), "w2": (9, 3), "b2": (3,)},
    "power_iteration": {"A": (5, 5), "v0": (5,)},
    "roundtrip": {"x": (33,)},
    "int8_matmul": {"qa": (7, 9), "qb": (9, 5)},
    "qlinear": {"x": (7, 9), "w": (9, 5)},
    "row_scale": {"A": (7, 5), "s": (7,)},
    "cumsum_rows": {"A": (7, 5)},
    "every_other": {"A": (7, 5)},
    "views": {},
    "halve_until_small": {"x": (33,)},
}


def example_kernels() -> list[tuple[str, str]]:
    out = []
    for path in EXAMPLES:
        module = compile_to_ir(Path(path).read_text(), path)
        out += [(path, f.name) for f in module.funcs if f.is_kernel]
    return out


@functools.cache
def module_of(path: str):
    return compile_to_ir(Path(path).read_text(), path)


@functools.cache
def emitted(path: str, kernel: str, arch: str, static: bool = True) -> tuple[str, str]:
    """(PTX text, plan JSON) for an example kernel (concrete shapes when ``static``)."""
    shapes = EXAMPLE_SHAPES.get(kernel) if static else None
    text, plan = emit_ptx(module_of(path), kernel, arch, shapes)
    return text, json.dumps(plan)


def corpus_module(source: str):
    return compile_to_ir(source, "<ptx-corpus>")


@functools.cache
def assemble(ptxas: str, text: str, arch: str) -> tuple[int, str]:
    """ptxas -v on ``text``: (exit status, log); cached per text and arch. A module whose
    ``.target`` is the arch-specific ``sm_90a`` (wgmma) is assembled for that target."""
    if arch == "sm_90" and re.search(r"^\.target sm_90a$", text, re.M):
        arch = "sm_90a"
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "k.ptx")
        Path(src).write_text(text)
        p = subprocess.run([ptxas, "-v", "--gpu-name", arch, src, "-o", os.path.join(d, "k.cubin")],
                           capture_output=True, text=True)
        return p.returncode, p.stdout + p.stderr


def per_kernel(log: str, pattern: str) -> dict[str, int]:
    """kernel name -> the sum of ``pattern``'s groups on its line of a ptxas -v log."""
    out, current = {}, None
    for line in log.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            current = m.group(1)
        m = re.search(pattern, line)
        if m and current:
            out[current] = sum(int(g) for g in m.groups())
    return out


def spills(log: str) -> dict[str, int]:
    """kernel name -> spill bytes (stores + loads) from a ptxas -v log."""
    return per_kernel(log, r"(\d+) bytes spill stores, (\d+) bytes spill loads")


def registers(log: str) -> dict[str, int]:
    """kernel name -> registers, from a ptxas -v log."""
    return per_kernel(log, r"Used (\d+) registers")


def jit_kernel(source: str, name: str, target: str, filename: str = "<ptx-corpus>"):
    return jit(source, kernel=name, target=target, filename=filename)


#: where the ``gpu``-marked tests run: the GPU ("cuda"), or the simulator ("ptxsim"), a dry
#: run of those tests where there is no GPU (``WIADSL_GPU_TARGET=ptxsim``)
GPU_TARGET = os.environ.get("WIADSL_GPU_TARGET", "cuda")
#: the arch a dry run on the simulator compiles for (on a GPU: the device's)
GPU_SIM_ARCH = os.environ.get("WIADSL_GPU_SIM_ARCH", "sm_90")


def gpu_arch() -> str:
    """The arch the ``gpu``-marked tests compile for (what the cuda target picks)."""
    if GPU_TARGET == "ptxsim":
        return GPU_SIM_ARCH
    from wiadsl.backends.ptx.cuda import device_arch, supported_arch
    return supported_arch(device_arch())


def gpu_jit(source: str, name: str = "k", filename: str = "<gpu-test>", **options):
    """``jit`` on the GPU target (on the simulator at ``GPU_SIM_ARCH`` for a dry run)."""
    if GPU_TARGET == "ptxsim":
        options.setdefault("arch", GPU_SIM_ARCH)
    return jit(source, kernel=name, target=GPU_TARGET, filename=filename, **options)


def gpu_kinds(source: str, shapes: dict[str, tuple[int, ...]], **options) -> list[str]:
    """The kernel kinds of the plan ``gpu_jit`` runs for these input shapes."""
    from wiadsl.backends.ptx.program import TargetOptions, ptx_program

    opts = TargetOptions(options.get("arch", gpu_arch()), options.get("opt_level", 2),
                         allow_tf32=options.get("allow_tf32", False))
    _, plan = ptx_program(corpus_module(source), {"k": shapes}, opts)
    return [k["kind"] for k in plan["kernels"]]
