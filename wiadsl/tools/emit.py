"""What ``wiac`` can print or write: one table of emitters, one function each.

An emitter takes a ``CompileJob`` (the source and the command line's choices) and
returns an ``Artifact``: the main text (or bytes, for objects) and any side files
(the PTX launch plan goes beside ``OUT.ptx`` as ``OUT.ptx.json``).

Invariants:
- ``EMITTERS`` is the whitelist: ``--emit`` choices, ``-o`` extensions and the
  ``--target`` defaults all resolve through it; an unknown name is an error.
- Backend emitters work on one kernel (``--kernel``, or the file's only kernel)
  after the optimization pipeline; an emitter marked ``static_shapes`` refuses to
  run until every symbolic dim of that kernel has a ``-D`` value, and says which
  are missing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..diagnostics import WiaUsageError
from ..dtypes import DType
from ..ir import ModuleOp, print_module
from ..runtime.signature import KernelSignature, signature_of
from .features import require
from .pipeline import OptOptions, optimize_ir


@dataclass
class CompileJob:
    """One ``wiac`` compilation: the source and every choice that shapes the output."""

    text: str
    filename: str
    kernel: str | None = None
    opt: OptOptions = field(default_factory=OptOptions)
    dims: dict[str, int] = field(default_factory=dict)
    arch: str = "sm_80"
    array: tuple[int, int] = (128, 128)
    dataflow: str = "ws"
    remarks: list[Any] | None = None
    #: inputs the source does not hold itself (an imported ONNX model's weights)
    weights: dict[str, Any] = field(default_factory=dict)
    #: for a kernel with ``tensor`` parameters (the REPL, after a call): the dtype and
    #: rank of each, and the shape of every input; backends then compile for these
    generic: dict[str, tuple[DType, int]] | None = None
    input_shapes: dict[str, tuple[int, ...]] | None = None


@dataclass
class Artifact:
    """An emitter's result: ``main`` goes to ``-o`` (or stdout); ``side`` files sit beside it."""

    main: str | bytes
    side: dict[str, str] = field(default_factory=dict)  # suffix appended to OUT -> text


# ------------------------------------------------------------------ frontend stages

def _tokens(job: CompileJob) -> Artifact:
    from ..frontend.parser import tokenize

    rows = tokenize(job.text, job.filename)
    return Artifact("".join(f"{line}:{col}\t{kind}\t{tok!r}\n" for kind, tok, line, col in rows))


def _ast(job: CompileJob) -> Artifact:
    from ..frontend.astdump import dump_program
    from ..frontend.compile import compile_source

    return Artifact(dump_program(compile_source(job.text, job.filename).checked.loaded.main))


def _wia(job: CompileJob) -> Artifact:
    """Canonical WIA DSL source (the unparser): a formatter for .wia files, and the
    readable, editable translation of an imported ONNX model."""
    from ..frontend.parser import parse_source
    from ..frontend.unparse import unparse

    return Artifact(unparse(parse_source(job.text, job.filename)))


def lowered_ir(job: CompileJob) -> ModuleOp:
    from ..frontend.compile import compile_source, compile_to_ir

    if job.generic is not None and job.kernel is not None:
        return compile_source(job.text, job.filename).lower_kernel(job.kernel, job.generic)
    return compile_to_ir(job.text, job.filename, kernel=job.kernel)


def _ir(job: CompileJob) -> Artifact:
    return Artifact(print_module(lowered_ir(job)))


def _opt_ir(job: CompileJob) -> Artifact:
    return Artifact(print_module(optimize_ir(lowered_ir(job), job.opt, job.remarks)))


# ------------------------------------------------------------------ backends

def select_kernel(job: CompileJob) -> KernelSignature:
    """The signature of the one kernel this job compiles (``--kernel`` or the only one)."""
    from ..frontend.compile import compile_source

    kernels = {k.name: k for k in compile_source(job.text, job.filename).kernels}
    if not kernels:
        raise WiaUsageError(f"{job.filename} declares no kernel")
    if job.kernel is not None:
        if job.kernel not in kernels:
            from ..runtime.jit import unknown_kernel_message

            raise WiaUsageError(unknown_kernel_message(job.kernel, list(kernels), job.filename))
        return signature_of(kernels[job.kernel])
    if len(kernels) > 1:
        raise WiaUsageError(f"{job.filename} declares {len(kernels)} kernels "
                            f"({', '.join(kernels)}); choose one with --kernel NAME")
    return signature_of(next(iter(kernels.values())))


def symbolic_dims(sig: KernelSignature) -> list[str]:
    """The kernel's dim names in order of first appearance."""
    names: list[str] = []
    for p in sig.params:
        for d in p.dims or ():
            if isinstance(d, str) and d not in names:
                names.append(d)
    return names


def kernel_shapes(sig: KernelSignature, dims: dict[str, int], target: str,
                  required: bool) -> dict[str, tuple[int, ...]] | None:
    """Every parameter's static shape under ``dims``; None when some dim is unknown.

    A ``-D`` for a name that is not a dim of the kernel is an error (a typo would
    otherwise be ignored). When ``required``, unknown dims are an error naming them.
    """
    known = symbolic_dims(sig)
    extra = [d for d in dims if d not in known]
    if extra:
        raise WiaUsageError(f"-D {', '.join(extra)}: kernel '{sig.name}' has no such dim "
                            f"(its dims: {', '.join(known) or 'none'})")
    generic = [p.name for p in sig.params if p.dims is None]
    missing = [d for d in known if d not in dims]
    if required and generic:
        raise WiaUsageError(f"target '{target}' needs static shapes, but kernel '{sig.name}' "
                            f"takes 'tensor' parameter(s) {', '.join(generic)}")
    if missing and len(missing) < len(known) and not required:
        # PTX takes symbolic dims or static shapes, not a mix: a partial -D would
        # otherwise be dropped without a word
        raise WiaUsageError(f"-D fixes {', '.join(d for d in known if d in dims)} but not "
                            f"{', '.join(missing)} of kernel '{sig.name}': target '{target}' "
                            "takes every dim fixed (static shapes) or none (symbolic)")
    if missing:
        if required:
            example = " ".join(f"-D {d}=128" for d in missing)
            raise WiaUsageError(f"target '{target}' needs static shapes: kernel '{sig.name}' "
                                f"has symbolic dims without a value: {', '.join(missing)} "
                                f"(give them like {example})")
        return None
    if generic:
        return None
    return {p.name: tuple(dims[d] if isinstance(d, str) else d for d in p.dims or ())
            for p in sig.params}


def _backend_input(job: CompileJob, target: str, static: bool
                   ) -> tuple[ModuleOp, str, dict[str, tuple[int, ...]] | None]:
    """The optimized IR of the job's kernel, its name, and its input shapes by name."""
    sig = select_kernel(job)
    narrowed = CompileJob(**{**job.__dict__, "kernel": sig.name})
    if job.generic is not None and job.input_shapes is not None:
        inputs: dict[str, tuple[int, ...]] | None = dict(job.input_shapes)  # one call's
    else:
        shapes = kernel_shapes(sig, job.dims, target, static)
        inputs = None if shapes is None else {p.name: shapes[p.name] for p in sig.inputs}
    module = optimize_ir(lowered_ir(narrowed), job.opt, job.remarks)
    return module, sig.name, inputs


def _cpu(feature: str, job: CompileJob) -> str | bytes:
    """LLVM IR, assembly or an object: the CPU backend specializes to every extent."""
    module, kernel, shapes = _backend_input(job, "cpu", True)
    emit = require(feature)
    assert shapes is not None
    return emit(module, kernel, list(shapes.values()), level=job.opt.level)


def _llvm(job: CompileJob) -> Artifact:
    return Artifact(_cpu("llvm", job))


def _asm(job: CompileJob) -> Artifact:
    return Artifact(_cpu("asm", job))


def _obj(job: CompileJob) -> Artifact:
    obj = _cpu("obj", job)
    assert not isinstance(obj, str), "the object emitter returns bytes"
    return Artifact(bytes(obj))


def _ptx(job: CompileJob) -> Artifact:
    module, kernel, shapes = _backend_input(job, "ptx", False)
    emit = require("ptx")
    text, plan = emit(module, kernel, arch=job.arch, shapes=shapes)
    return Artifact(text, {".json": json.dumps(plan, indent=2, sort_keys=True, default=str) + "\n"})


def _sasm(job: CompileJob) -> Artifact:
    module, kernel, shapes = _backend_input(job, "systolic", True)
    emit = require("sasm")
    result = emit(module, kernel, array=job.array, dataflow=job.dataflow, shapes=shapes)
    return Artifact(result if isinstance(result, str) else result[0])


@dataclass(frozen=True)
class Emitter:
    name: str
    run: Callable[[CompileJob], Artifact]
    help: str
    binary: bool = False


EMITTERS: dict[str, Emitter] = {e.name: e for e in [
    Emitter("tokens", _tokens, "the token stream (line:col, kind, text)"),
    Emitter("ast", _ast, "the checked AST, one node per line"),
    Emitter("wia", _wia, "canonical WIA DSL source (an imported .onnx model as DSL)"),
    Emitter("ir", _ir, "the SSA IR as lowered, before any pass (the default)"),
    Emitter("opt-ir", _opt_ir, "the IR after the -O / -p pipeline"),
    Emitter("llvm", _llvm, "LLVM IR of one kernel (CPU backend; needs static dims)"),
    Emitter("asm", _asm, "host assembly of one kernel (CPU backend; needs static dims)"),
    Emitter("obj", _obj, "a host object file of one kernel (CPU backend; needs static dims)", binary=True),
    Emitter("ptx", _ptx, "PTX of one kernel, and its launch plan beside OUT as OUT.json"),
    Emitter("sasm", _sasm, "systolic-array assembly of one kernel (needs static dims)"),
]}

#: ``-o`` extension -> emitter, when ``--emit`` is not given.
EXTENSIONS: dict[str, str] = {
    ".ir": "opt-ir", ".ll": "llvm", ".s": "asm", ".o": "obj", ".ptx": "ptx", ".sasm": "sasm",
    ".wia": "wia",
}

#: ``--target`` -> emitter, when neither ``--emit`` nor the extension decides.
TARGET_EMITS: dict[str, str] = {
    "interp": "opt-ir", "cpu": "asm", "ptx": "ptx", "cuda": "ptx", "systolic": "sasm",
}
