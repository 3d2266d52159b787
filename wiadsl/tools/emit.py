"""What ``wiac`` can print or write: one table of emitters, one function each.

An emitter takes a ``CompileJob`` (the source and the command line's choices) and
returns an ``Artifact``: the main text (or bytes, for objects) and any side files
(the PTX launch plan goes beside ``OUT.ptx`` as ``OUT.ptx.json``).

Invariants:
- ``EMITTERS`` is the whitelist: ``--emit`` choices, ``-o`` extensions and the
  ``--target`` defaults all resolve through it; an unknown name is an error.
- Backend emitters work on the selected kernels (``--kernel``'s, or every kernel
  of the file, in one output) after the optimization pipeline. ``-D`` fixes dims:
  PTX and the CPU keep the others symbolic; the systolic target needs every dim of
  every selected kernel and says which are missing.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..diagnostics import WiaUsageError
from ..dtypes import DType
from ..ir import ModuleOp, print_module
from ..signature import KernelSignature, signature_of
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
    #: PTX: raw ``.approx.ftz`` transcendentals (``wiac --fast-math``)
    fast_math: bool = False
    #: PTX: f32 matmuls on tensor cores in tf32 (``wiac --allow-tf32``)
    allow_tf32: bool = False


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

def _signatures(job: CompileJob) -> dict[str, KernelSignature]:
    from ..frontend.compile import compile_source

    kernels = {k.name: signature_of(k) for k in compile_source(job.text, job.filename).kernels}
    if not kernels:
        raise WiaUsageError(f"{job.filename} declares no kernel")
    if job.kernel is not None and job.kernel not in kernels:
        from ..runtime.jit import unknown_kernel_message

        raise WiaUsageError(unknown_kernel_message(job.kernel, list(kernels), job.filename))
    return kernels


def select_kernel(job: CompileJob) -> KernelSignature:
    """The signature of the one kernel this job runs (``--kernel`` or the only one)."""
    kernels = _signatures(job)
    if job.kernel is not None:
        return kernels[job.kernel]
    if len(kernels) > 1:
        raise WiaUsageError(f"{job.filename} declares {len(kernels)} kernels "
                            f"({', '.join(kernels)}); choose one with --kernel NAME")
    return next(iter(kernels.values()))


def selected_kernels(job: CompileJob) -> list[KernelSignature]:
    """The kernels a backend output holds: ``--kernel``'s, or every kernel of the file
    (in declaration order), as nvcc puts every ``__global__`` of a file in one module."""
    kernels = _signatures(job)
    return [kernels[job.kernel]] if job.kernel is not None else list(kernels.values())


def symbolic_dims(sig: KernelSignature) -> list[str]:
    """The kernel's dim names in order of first appearance."""
    names: list[str] = []
    for p in sig.params:
        for d in p.dims or ():
            if isinstance(d, str) and d not in names:
                names.append(d)
    return names


def check_defines(sigs: list[KernelSignature], dims: dict[str, int]) -> None:
    """A ``-D`` for a name that no selected kernel has as a dim is an error (a typo
    would otherwise be ignored)."""
    known = [d for sig in sigs for d in symbolic_dims(sig)]
    extra = [d for d in dims if d not in known]
    if not extra:
        return
    owner = f"kernel '{sigs[0].name}' has no such dim" if len(sigs) == 1 \
        else "no kernel of the file has such a dim"
    raise WiaUsageError(f"-D {', '.join(extra)}: {owner} "
                        f"(dims: {', '.join(dict.fromkeys(known)) or 'none'})")


def kernel_shapes(sig: KernelSignature, dims: dict[str, int], target: str, static: bool,
                  typed: bool | None = None) -> dict[str, tuple[int | None, ...]]:
    """The shape of every declared tensor or scalar parameter under ``dims``: a dim
    without a value stays None (symbolic). A ``static`` target needs every dim; a
    ``typed`` one (default: a static one) no ``tensor`` parameter: anything missing
    is an error that names it."""
    generic = [p.name for p in sig.params if p.dims is None]
    missing = [d for d in symbolic_dims(sig) if d not in dims]
    if (static if typed is None else typed) and generic:
        raise WiaUsageError(f"target '{target}' needs static shapes, but kernel '{sig.name}' "
                            f"takes 'tensor' parameter(s) {', '.join(generic)}")
    if static and missing:
        example = " ".join(f"-D {d}=128" for d in missing)
        raise WiaUsageError(f"target '{target}' needs static shapes: kernel '{sig.name}' "
                            f"has symbolic dims without a value: {', '.join(missing)} "
                            f"(give them like {example})")
    return {p.name: tuple(dims.get(d) if isinstance(d, str) else d for d in p.dims)
            for p in sig.params if p.dims is not None}


@dataclass
class BackendInput:
    """What a backend emitter compiles: the optimized IR holding the selected kernels,
    and each kernel's input shapes by parameter name (None: a symbolic extent)."""

    module: ModuleOp
    shapes: dict[str, dict[str, tuple[int | None, ...]]]

    @property
    def single(self) -> str | None:
        """The kernel's name when there is only one (the one-kernel output formats)."""
        return next(iter(self.shapes)) if len(self.shapes) == 1 else None

    def static(self) -> dict[str, dict[str, tuple[int, ...]]]:
        """The shapes of a static target (``kernel_shapes`` checked there is no None)."""
        return {k: {n: tuple(d for d in s if d is not None) for n, s in shapes.items()}
                for k, shapes in self.shapes.items()}


def _backend_input(job: CompileJob, target: str, static: bool, optimize: bool = True,
                   typed: bool | None = None) -> BackendInput:
    """The selected kernels' IR (after the pipeline unless ``optimize`` is False: the PTX
    program runs it itself) and shapes (``kernel_shapes``' ``static`` and ``typed``)."""
    sigs = selected_kernels(job)
    shapes: dict[str, dict[str, tuple[int | None, ...]]]
    if job.generic is not None and job.input_shapes is not None:
        # one call's shapes (the REPL's listing of a kernel it ran)
        call: dict[str, tuple[int | None, ...]] = {n: tuple(s) for n, s in job.input_shapes.items()}
        shapes = {sigs[0].name: call}
    else:
        check_defines(sigs, job.dims)
        shapes = {}
        for sig in sigs:
            own = kernel_shapes(sig, job.dims, target, static, typed)
            shapes[sig.name] = {p.name: own[p.name] for p in sig.inputs if p.name in own}
    narrowed = CompileJob(**{**job.__dict__, "kernel": sigs[0].name if len(sigs) == 1 else None})
    module = lowered_ir(narrowed)
    opt = job.opt
    if target == "cpu" and opt.pipeline is None and opt.level > 0:
        # the CPU's own pipeline (its depthwise pass), as the jit compiles it
        opt = dataclasses.replace(opt, pipeline=require("cpu_pipeline")(opt.level))
    return BackendInput(optimize_ir(module, opt, job.remarks) if optimize else module, shapes)


def _cpu(feature: str, job: CompileJob) -> str | bytes:
    """LLVM IR, assembly or an object: the extents ``-D`` fixes are compiled in, the
    others are read at run time from the entry's argument slots (the shape-generic
    entry ABI, backends/llvm/runtime.py)."""
    given = _backend_input(job, "cpu", False, typed=True)
    kernels = {k: list(shapes.values()) for k, shapes in given.shapes.items()}
    return require(feature)(given.module, kernels, level=job.opt.level)


def _llvm(job: CompileJob) -> Artifact:
    return Artifact(_cpu("llvm", job))


def _asm(job: CompileJob) -> Artifact:
    return Artifact(_cpu("asm", job))


def _obj(job: CompileJob) -> Artifact:
    obj = _cpu("obj", job)
    assert not isinstance(obj, str), "the object emitter returns bytes"
    return Artifact(bytes(obj))


def _ptx(job: CompileJob) -> Artifact:
    """PTX with symbolic extents where ``-D`` gave none: the launch plan reads them.
    Built by ``ptx_program``, as the ptxsim and cuda targets build what they run, so
    with every dim given this is the module ``jit(..., target="cuda")`` loads."""
    program = require("ptx_program")
    from ..backends.ptx.program import TargetOptions

    given = _backend_input(job, "ptx", False, optimize=False)
    opt = job.opt
    custom = opt.pipeline is not None or opt.patterns or opt.pm_options or job.remarks is not None
    target = TargetOptions(job.arch, opt.level, job.fast_math, job.allow_tf32)
    text, plan = program(given.module, given.shapes, target,
                         optimize=(lambda m: optimize_ir(m, opt, job.remarks)) if custom else None)
    return Artifact(text, {".json": json.dumps(plan, indent=2, sort_keys=True, default=str) + "\n"})


def _sasm(job: CompileJob) -> Artifact:
    given = _backend_input(job, "systolic", True)
    options = {"array": job.array, "dataflow": job.dataflow}
    if given.single is not None:
        return Artifact(require("sasm")(given.module, given.single,
                                        shapes=given.static()[given.single], **options))
    return Artifact(require("sasm_program")(given.module, given.static(), **options))


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
    Emitter("llvm", _llvm, "LLVM IR of the kernels (CPU backend)"),
    Emitter("asm", _asm, "host assembly of the kernels (CPU backend)"),
    Emitter("obj", _obj, "a host object file of the kernels (CPU backend)", binary=True),
    Emitter("ptx", _ptx, "PTX of the kernels, and the launch plan beside OUT as OUT.json"),
    Emitter("sasm", _sasm, "systolic-array assembly of the kernels (needs static dims)"),
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
