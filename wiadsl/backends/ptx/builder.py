"""Building one ``.entry`` as PTX text: parameters, virtual registers, labels, shared memory.

Invariants:
- Registers are virtual and typed by class (``%p`` pred, ``%h`` b16, ``%r`` b32,
  ``%rd`` b64, ``%f`` f32, ``%fd`` f64); each class is declared once as
  ``.reg .<class> %x<N>`` with N one past the highest number used, so any register
  handed out is declared.
- Parameters are loaded exactly once, at the top of the kernel (``ld.param``), and
  pointer parameters are converted with ``cvta.to.global`` before use; a tensor map
  parameter (ptype ``tmap``) is a 128-byte, 64-aligned ``.b8`` array whose generic
  address (``cvta.param``) the kernel uses.
- A module's ``.target`` is the arch, or the arch-specific target (``sm_90a``) a kernel
  of it needs.
- Instructions are emitted as complete statements (the builder adds ``;``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .isa import isa_version
from .options import CodegenOptions, current

REG_PREFIX = {"pred": "%p", "b16": "%h", "b32": "%r", "b64": "%rd", "f32": "%f", "f64": "%fd"}


@dataclass
class Param:
    """One ``.param``: its PTX type and name (also how the launch plan refers to it)."""

    name: str
    ptype: str


@dataclass
class KernelBuilder:
    """Accumulates the body of one kernel; ``text()`` renders the ``.entry``."""

    name: str
    params: list[Param] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    prologue: list[str] = field(default_factory=list)
    shared: list[str] = field(default_factory=list)
    shared_bytes: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    labels: int = 0
    max_threads: int | None = None
    #: ``.maxnreg``: a register budget for ptxas (None: its own heuristic, which under
    #: ``.maxntid`` may pick fewer registers than a kernel needs and spill)
    max_regs: int | None = None
    #: module-scope declarations this kernel uses (a ``.const`` table), by name
    module_decls: dict[str, str] = field(default_factory=dict)
    #: the options of the plan this kernel belongs to (``options.using``)
    options: CodegenOptions = field(default_factory=current)
    #: bytes of ``.extern .shared`` memory the launch must provide
    dynamic_shared: int = 0
    #: the arch-specific target this kernel needs (``sm_90a`` for wgmma), else None
    target: str | None = None

    # ------------------------------------------------------------------ registers
    def reg(self, cls: str) -> str:
        """A fresh register of class ``cls`` (``pred b16 b32 b64 f32 f64``)."""
        n = self.counts.get(cls, 0) + 1
        self.counts[cls] = n
        return f"{REG_PREFIX[cls]}{n}"

    def regs(self, cls: str, n: int) -> list[str]:
        return [self.reg(cls) for _ in range(n)]

    # ------------------------------------------------------------------ params
    def param(self, ptype: str, name: str) -> str:
        """Declare ``.param .<ptype> name`` and load it into a register (top of kernel)."""
        self.params.append(Param(name, ptype))
        cls = {"u64": "b64", "s64": "b64", "u32": "b32", "s32": "b32",
               "f32": "f32", "f64": "f64"}[ptype]
        r = self.reg(cls)
        self.prologue.append(f"ld.param.{ptype} {r}, [{name}];")
        return r

    def tensor_map(self, name: str) -> str:
        """A TMA tensor map parameter (``.param .align 64 .b8 name[128]``); returns a register
        with its generic address (``cvta.param``), as ``cp.async.bulk.tensor`` takes it."""
        self.params.append(Param(name, "tmap"))
        r = self.reg("b64")
        self.prologue += [f"mov.b64 {r}, {name};", f"cvta.param.u64 {r}, {r};"]
        return r

    def pointer(self, name: str) -> str:
        """A global-memory pointer parameter, converted to a global address."""
        generic = self.param("u64", name)
        g = self.reg("b64")
        self.prologue.append(f"cvta.to.global.u64 {g}, {generic};")
        return g

    def special(self, sreg: str) -> str:
        """Read a special register (``%tid.x``, ``%ctaid.y``...) into a b32 register."""
        r = self.reg("b32")
        self.prologue.append(f"mov.u32 {r}, {sreg};")
        return r

    def shared_array(self, name: str, elem: str, count: int, align: int = 16) -> str:
        """A static ``.shared`` array; returns its name (usable as an address)."""
        size = {"b8": 1, "b16": 2, "b32": 4, "f32": 4, "b64": 8, "f64": 8}[elem]
        self.shared.append(f".shared .align {align} .{elem} {name}[{count}];")
        self.shared_bytes += size * count
        return name

    # ------------------------------------------------------------------ code
    def emit(self, stmt: str) -> None:
        self.lines.append(stmt if stmt.endswith(":") else stmt + ";")

    def new_label(self, stem: str) -> str:
        self.labels += 1
        return f"$L_{stem}_{self.labels}"

    def label(self, name: str) -> None:
        self.lines.append(f"{name}:")

    def bra(self, target: str, pred: str | None = None, negate: bool = False) -> None:
        guard = "" if pred is None else f"@{'!' if negate else ''}{pred} "
        self.emit(f"{guard}bra.uni {target}" if pred is None else f"{guard}bra {target}")

    # ------------------------------------------------------------------ render
    def text(self) -> str:
        params = ",\n".join(f"    .param .align 64 .b8 {p.name}[128]" if p.ptype == "tmap"
                             else f"    .param .{p.ptype} {p.name}" for p in self.params)
        decls = [f"    .reg .{cls} {REG_PREFIX[cls]}<{n + 1}>;"
                 for cls, n in sorted(self.counts.items())]
        body = [f"    {s}" for s in self.shared]
        body += [f"    {s}" for s in self.prologue]
        body += [(s if s.endswith(":") else f"    {s}") for s in self.lines]
        head = f".visible .entry {self.name}(\n{params}\n)"
        if self.max_threads:
            head += f"\n.maxntid {self.max_threads}, 1, 1"
        if self.max_regs:
            head += f"\n.maxnreg {self.max_regs}"
        return head + "\n{\n" + "\n".join(decls + body + ["    ret;"]) + "\n}\n"


def module_text(kernels: list[KernelBuilder], arch: str, comment: str = "") -> str:
    """The whole PTX module: header then every kernel."""
    header = [f"// {line}" for line in comment.splitlines()] if comment else []
    arch = next((k.target for k in kernels if k.target), arch)  # sm_90 -> sm_90a for wgmma
    header += [f".version {isa_version(arch)}", f".target {arch}", ".address_size 64", ""]
    decls: dict[str, str] = {}
    for k in kernels:  # shared by name: two kernels using one table declare it once
        decls.update(k.module_decls)
    header += list(decls.values()) + ([""] if decls else [])
    return "\n".join(header) + "\n".join(k.text() for k in kernels)
