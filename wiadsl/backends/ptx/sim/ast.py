"""The parsed form of a PTX module: kernels, declarations, instructions and operands.

Invariants: register names are unique per kernel (names declared in nested ``{ }``
scopes that collide are renamed ``name#k``); ``Kernel.labels`` maps a label to the
index of the instruction that follows it; an ``Instr`` keeps its source line and
opcode exactly as written (``ld.global.nc.v4.f32``) split into ``op`` and ``mods``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .ptxtypes import PtxType


@dataclass(frozen=True)
class Name:
    """A register, special register, variable, parameter or label (``!`` for predicates)."""

    name: str
    neg: bool = False

    def __str__(self) -> str:
        return ("!" if self.neg else "") + self.name


@dataclass(frozen=True)
class Imm:
    """An immediate: ``kind`` int, float (decimal), f32bits (``0f...``) or f64bits (``0d...``)."""

    kind: str
    value: int | float
    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Addr:
    """``[base+offset]``: base is a register or symbol name, or None for an absolute address."""

    base: str | None
    offset: int

    def __str__(self) -> str:
        if self.base is None:
            return f"[{self.offset}]"
        return f"[{self.base}{'+' + str(self.offset) if self.offset else ''}]"


@dataclass(frozen=True)
class SymOff:
    """A symbol plus a constant (``smem+8``) used as a value."""

    name: str
    offset: int

    def __str__(self) -> str:
        return f"{self.name}+{self.offset}"


@dataclass(frozen=True)
class Vec:
    """A brace list ``{%f1, %f2, _}``; a ``None`` item is the ``_`` sink."""

    items: tuple

    def __str__(self) -> str:
        return "{" + ", ".join("_" if i is None else str(i) for i in self.items) + "}"


@dataclass(frozen=True)
class TensorRef:
    """``[tmap, {c0, c1, ...}]``: a tensor map address and the tensor coordinates (TMA)."""

    addr: Addr
    coords: Vec

    def __str__(self) -> str:
        return f"[{str(self.addr)[1:-1]}, {self.coords}]"


@dataclass(frozen=True)
class Pair:
    """Two destinations ``d|p`` (``setp``, ``shfl.sync``)."""

    first: Name
    second: Name

    def __str__(self) -> str:
        return f"{self.first}|{self.second}"


@dataclass(frozen=True)
class Paren:
    """A parenthesised list (only ``call`` uses it)."""

    items: tuple

    def __str__(self) -> str:
        return "(" + ", ".join(map(str, self.items)) + ")"


Operand = Name | Imm | Addr | SymOff | Vec | Pair | Paren | TensorRef


@dataclass(frozen=True)
class Instr:
    """One instruction: ``@guard opcode operands;`` at source ``line``."""

    line: int
    opcode: str
    operands: tuple
    guard: Name | None = None

    @property
    def op(self) -> str:
        return self.opcode.split(".", 1)[0]

    @property
    def mods(self) -> tuple[str, ...]:
        return tuple(self.opcode.split(".")[1:])

    def __str__(self) -> str:
        g = f"@{self.guard} " if self.guard else ""
        return f"{g}{self.opcode} {', '.join(map(str, self.operands))}".strip()


@dataclass
class VarDecl:
    """A ``.shared``/``.local``/``.global``/``.const`` variable; ``size`` is None for ``extern`` unsized."""

    space: str
    name: str
    type: PtxType
    size: int | None
    align: int
    init: bytes | None = None
    extern: bool = False


@dataclass
class Param:
    """A kernel parameter: ``size`` bytes at natural ``align`` (arrays are ``.b8 name[N]``)."""

    name: str
    type: PtxType
    size: int
    align: int


@dataclass
class Kernel:
    """An ``.entry``: parameters, registers (name → type), variables, instructions, labels."""

    name: str
    params: list[Param] = field(default_factory=list)
    regs: dict[str, PtxType] = field(default_factory=dict)
    vars: list[VarDecl] = field(default_factory=list)
    instrs: list[Instr] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)
    is_entry: bool = True


@dataclass
class Module:
    """A PTX module: header directives, module-scope variables and kernels by name."""

    version: str | None = None
    target: tuple[str, ...] = ()
    address_size: int = 64
    vars: list[VarDecl] = field(default_factory=list)
    kernels: dict[str, Kernel] = field(default_factory=dict)
    funcs: dict[str, Kernel] = field(default_factory=dict)
