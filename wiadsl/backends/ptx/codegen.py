"""Expression DAGs to PTX: kernel parameters, index spaces, loads, stores, scalar ops.

Invariants:
- ``KernelParams`` gives every kernel parameter a matching launch-plan argument,
  in order: ``{"buffer": name}``, ``{"expr": sym, "type": "u32"|"s32"}``,
  ``{"scalar": name, "dtype": d}`` or ``{"tmap": buffer, ...}`` (a TMA tensor map).
  Compile-time ints are immediates, never params.
- Index arithmetic is 32-bit when every extent, the domain's element count and
  every view's offset range provably stay within ``index_width.INDEX32_LIMIT`` (static
  sizes), else 64-bit (``ExprCodegen.wide``: symbolic sizes, or > 2^31 elements):
  coordinates ``b64``, sizes ``u64`` and strides/offsets ``s64`` parameters.
  Offsets are signed element counts (views may have negative strides); byte
  addresses are ``base + offset * size`` (``mul.wide.s32`` or ``mul.lo.s64``).
- ``ExprCodegen.memo`` maps node ids to registers valid at the current point;
  callers give each loop body a fresh copy so no register defined inside one
  loop body is read after it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...diagnostics import WiaError, WiaUsageError
from ...dtypes import DType
from . import device_errors
from .builder import KernelBuilder
from .expr import Apply, Const, Iota, Load, Node, Scalar, Stage, TensorArg
from .index_width import IMMEDIATE_RANGE, byte_address, is_b32, needs_wide, scaled
from .isa import PARAM_TYPE, float_literal, info, int_literal, round16
from .scalar_ops import ScalarEmitter
from .symbolic import Sym, contiguous_strides, mul


@dataclass
class KernelParams:
    """Kernel parameters and the plan arguments that feed them."""

    kb: KernelBuilder
    args: list[dict[str, Any]] = field(default_factory=list)
    memo: dict[str, str] = field(default_factory=dict)

    def buffer(self, name: str) -> str:
        key = f"buf:{name}"
        if key not in self.memo:
            self.memo[key] = self.kb.pointer(f"p{len(self.args)}")
            self.args.append({"buffer": name})
        return self.memo[key]

    def sym(self, value: Sym, ptype: str = "u32") -> str:
        """An integer size: an immediate when known, else a parameter. A known value
        that ``ptype`` cannot hold is a usage error (PTX would wrap it silently)."""
        if isinstance(value, int):
            lo, hi = IMMEDIATE_RANGE[ptype]
            if not lo <= value <= hi:
                raise WiaUsageError(f"kernel {self.kb.name}: the size {value} does not fit the "
                                    f"{ptype} arithmetic of this kernel")
            return str(value)
        key = f"{ptype}:{value}"
        if key not in self.memo:
            self.memo[key] = self.kb.param(ptype, f"p{len(self.args)}")
            self.args.append({"expr": value, "type": ptype})
        return self.memo[key]

    def tensor_map(self, arg: dict[str, Any]) -> str:
        """A TMA tensor map built at launch from plan argument ``arg`` (``{"tmap": buffer,
        ...}``, docs/ptx.md); returns the register holding its generic address."""
        reg = self.kb.tensor_map(f"p{len(self.args)}")
        self.args.append(arg)
        return reg

    def scalar(self, name: str, dtype: DType) -> str:
        """A host scalar passed by value, as a compute register of ``dtype``."""
        key = f"scalar:{name}:{dtype}"
        if key not in self.memo:
            reg = self.kb.param(PARAM_TYPE[dtype], f"p{len(self.args)}")
            self.args.append({"scalar": name, "dtype": str(dtype)})
            if dtype is DType.BOOL:
                p = self.kb.reg("pred")
                self.kb.prologue.append(f"setp.ne.u32 {p}, {reg}, 0;")
                reg = p
            self.memo[key] = reg
        return self.memo[key]


@dataclass
class IndexGroup:
    """Domain axes ``axes`` (extents ``dims``) enumerated by the linear register ``lin``."""

    axes: tuple[int, ...]
    dims: tuple[Sym, ...]
    lin: str


class ExprCodegen:
    """Evaluates expression nodes at the current domain point of a loop kernel."""

    def __init__(self, kb: KernelBuilder, params: KernelParams, inputs: list[TensorArg],
                 scalars: list, domain: tuple[Sym, ...]):
        self.kb, self.params, self.inputs, self.scalars = kb, params, inputs, scalars
        self.domain = domain
        self.ops = ScalarEmitter(kb, lambda kind: params.buffer(device_errors.placeholder(kind)))
        self.memo: dict[int, str] = {}
        self.groups: list[IndexGroup] = []
        self.coords: dict[int, str] = {}
        self.partials: dict[tuple[int, int], str] = {}
        self.stage_regs: list[str] = []
        self.load_override: dict[int, str] | None = None
        self.outputs_args: list[TensorArg] = []
        self._wide: bool | None = None
        self._widened: dict[str, str] = {}

    @property
    def wide(self) -> bool:
        """64-bit index arithmetic (``needs_wide``); fixed at first use, so kernels set
        ``outputs_args`` before asking."""
        if self._wide is None:
            self._wide = needs_wide(self.domain, [*self.inputs, *self.outputs_args])
        return self._wide

    def index_type(self, signed: bool = False) -> str:
        """The PTX type of sizes (``u``) or strides/offsets (``s``) at this width."""
        return ("s" if signed else "u") + ("64" if self.wide else "32")

    def index_reg(self) -> str:
        return self.kb.reg("b64" if self.wide else "b32")

    def widen(self, reg: str) -> str:
        """``reg`` as an index of this kernel's width: a b32 index register is
        zero-extended once (indices are >= 0) when the kernel is wide."""
        if not self.wide or not is_b32(reg):
            return reg
        if reg not in self._widened:
            out = self.kb.reg("b64")
            self.kb.emit(f"cvt.u64.u32 {out}, {reg}")
            self._widened[reg] = out
        return self._widened[reg]

    # ------------------------------------------------------------ index space
    def set_group(self, index: int, group: IndexGroup) -> None:
        """(Re)bind index group ``index``; drops coordinates and partials derived from it."""
        while len(self.groups) <= index:
            self.groups.append(group)
        self.groups[index] = group
        self._widened.pop(group.lin, None)  # a loop register: widen it where it is used
        for a in group.axes:
            self.coords.pop(a, None)
        for key in [k for k in self.partials if k[1] == index]:
            del self.partials[key]

    def coord(self, axis: int) -> str:
        if axis not in self.coords:
            g = next(g for g in self.groups if axis in g.axes)
            self._decompose(g)
        return self.coords[axis]

    def _decompose(self, g: IndexGroup) -> None:
        kb, rest, t = self.kb, self.widen(g.lin), self.index_type()
        for pos in range(len(g.axes) - 1, 0, -1):
            d = self.params.sym(g.dims[pos], t)
            c, q = self.index_reg(), self.index_reg()
            kb.emit(f"rem.{t} {c}, {rest}, {d}")
            kb.emit(f"div.{t} {q}, {rest}, {d}")
            self.coords[g.axes[pos]] = c
            rest = q
        self.coords[g.axes[0]] = rest

    def partial(self, arg: int, gi: int) -> str | None:
        """Offset contribution of index group ``gi`` to input/output view ``arg``."""
        key = (arg, gi)
        if key in self.partials:
            return self.partials[key]
        t = self._arg(arg)
        g = self.groups[gi]
        strides = [t.strides[a] for a in g.axes]
        out: str | None
        if all(s == 0 for s in strides):
            out = None
        elif strides == [mul(strides[-1], c) for c in contiguous_strides(list(g.dims))]:
            out = self._scaled(self.widen(g.lin), strides[-1])
        else:
            out = None
            for a, s in zip(g.axes, strides, strict=True):
                if s != 0:
                    out = self._mad(self.coord(a), s, out)
        # widened here, where callers compute partials (before any branch), not at a use
        self.partials[key] = None if out is None else self.widen(out)  # type: ignore[assignment]
        return out

    def _arg(self, arg: int) -> TensorArg:
        return self.inputs[arg] if arg >= 0 else self.outputs_args[-arg - 1]

    def _scaled(self, reg: str, stride: Sym) -> str:
        if stride == 1:
            return reg
        return self._mad(reg, stride, None)

    def _mad(self, reg: str, stride: Sym, acc: str | None) -> str:
        t = self.index_type(signed=True)
        return scaled(self.kb, reg, self.params.sym(stride, t), t, acc)

    def address(self, arg: int) -> str:
        """Byte address of view ``arg`` (>= 0: input, < 0: output -1-k) at the current point."""
        t = self._arg(arg)
        base = self.params.buffer(t.buffer)
        off: str | None = None
        st = self.index_type(signed=True)
        for gi in range(len(self.groups)):
            p = self.partial(arg, gi)
            if p is not None:
                if off is None:
                    off = self.widen(p)
                else:
                    s = self.index_reg()
                    self.kb.emit(f"add.{st} {s}, {off}, {self.widen(p)}")
                    off = s
        if t.offset != 0:
            o = self.params.sym(t.offset, st)
            s = self.index_reg()
            self.kb.emit(f"add.{st} {s}, {off or 0}, {o}")
            off = s
        if off is None:
            return base
        return byte_address(self.kb, base, off, info(t.dtype).size)

    # ------------------------------------------------------------ memory
    def load(self, addr: str, dtype: DType) -> str:
        kb, i = self.kb, info(dtype)
        if dtype is DType.BOOL:
            r, p = kb.reg("b32"), kb.reg("pred")
            kb.emit(f"ld.global.u8 {r}, [{addr}]")
            kb.emit(f"setp.ne.u32 {p}, {r}, 0")
            return p
        if dtype in (DType.F16, DType.BF16):
            h = kb.reg("b16")
            kb.emit(f"ld.global.b16 {h}, [{addr}]")
            return self.widen16(h, dtype)
        r = kb.reg(i.reg)
        kb.emit(f"ld.global.{i.mem} {r}, [{addr}]")
        return r

    def guarded_load(self, arg: int) -> str:
        """A load that reads 0 outside the view's guards (zero padding)."""
        kb, t = self.kb, self.inputs[arg]
        ok, st = kb.reg("pred"), self.index_type(signed=True)
        kb.emit(f"setp.eq.u32 {ok}, 0, 0")
        for terms, bias, limit in t.guards:
            acc = self.index_reg()
            kb.emit(f"mov.{st} {acc}, {bias}")
            for axis, coef in terms:
                kb.emit(f"mad.lo.{st} {acc}, {self.widen(self.coord(axis))}, {coef}, {acc}")
            lo, hi = kb.reg("pred"), kb.reg("pred")
            kb.emit(f"setp.ge.{st} {lo}, {acc}, 0")
            kb.emit(f"setp.lt.{st} {hi}, {acc}, {self.params.sym(limit, st)}")
            kb.emit(f"and.pred {ok}, {ok}, {lo}")
            kb.emit(f"and.pred {ok}, {ok}, {hi}")
        addr = self.address(arg)  # outside the branch: coordinates it computes stay valid
        zero = self.constant(0, t.dtype)
        out = kb.reg(info(t.dtype).reg)
        kb.emit(f"mov.{info(t.dtype).itype} {out}, {zero}")
        skip = kb.new_label("pad")
        kb.bra(skip, ok, negate=True)
        v = self.load(addr, t.dtype)
        kb.emit(f"mov.{info(t.dtype).itype} {out}, {v}")
        kb.label(skip)
        return out

    def widen16(self, h: str, dtype: DType) -> str:
        if dtype is DType.BF16:
            return self.ops.widen_bf16(h)
        f = self.kb.reg("f32")
        self.kb.emit(f"cvt.f32.f16 {f}, {h}")
        return f

    def store(self, addr: str, reg: str, dtype: DType) -> None:
        kb, i = self.kb, info(dtype)
        if dtype is DType.BOOL:
            r = kb.reg("b32")
            kb.emit(f"selp.u32 {r}, 1, 0, {reg}")
            kb.emit(f"st.global.u8 [{addr}], {r}")
        elif dtype in (DType.F16, DType.BF16):
            h = self.narrow16(reg, dtype)
            kb.emit(f"st.global.b16 [{addr}], {h}")
        else:
            kb.emit(f"st.global.{i.mem} [{addr}], {reg}")

    def narrow16(self, reg: str, dtype: DType) -> str:
        h = self.kb.reg("b16")
        self.kb.emit(f"cvt.rn.{'bf16' if dtype is DType.BF16 else 'f16'}.f32 {h}, {reg}")
        return h

    # ------------------------------------------------------------ evaluation
    def value(self, node: Node) -> str:
        key = id(node)
        if key not in self.memo:
            self.memo[key] = self._compute(node)
        return self.memo[key]

    def _compute(self, node: Node) -> str:
        if isinstance(node, Load):
            if self.load_override is not None and node.arg in self.load_override:
                return self.load_override[node.arg]
            t = self.inputs[node.arg]
            if t.guards:
                return self.guarded_load(node.arg)
            return self.load(self.address(node.arg), t.dtype)
        if isinstance(node, Scalar):
            s = self.scalars[node.arg]
            return self.params.scalar(str(s.value), s.dtype)
        if isinstance(node, Const):
            return self.constant(node.value, node.dtype)
        if isinstance(node, Iota):
            c = self.coord(node.axis)
            r = c if not is_b32(c) and c.startswith("%") else self.kb.reg("b64")
            if r != c:
                self.kb.emit(f"cvt.u64.u32 {r}, {c}")
            return self.ops.cast(r, DType.I64, node.dtype)
        if isinstance(node, Stage):
            return self.stage_regs[node.index]
        if isinstance(node, Apply):
            return self.apply(node)
        raise WiaError(f"the PTX backend cannot compute node {type(node).__name__}")

    def apply(self, node: Apply, rounded: bool = True) -> str:
        """The op of ``node`` on its operands' registers (``ScalarEmitter.apply``)."""
        attrs = node.attrs
        exponent = node.args[1] if node.fn == "pow" else None
        if isinstance(exponent, Const) and node.dtype.is_float and exponent.value == 0.5:
            # as NumPy and the CPU backend (llvm/scalars.py's _fpow): -inf ** 0.5 is
            # NaN and -0.0 ** 0.5 is -0.0, where pow gives inf and 0.0 (fuzz seed
            # 11500000000111)
            return self.ops.apply("sqrt", node.dtype, [(self.value(node.args[0]), node.dtype)],
                                  None, rounded)
        args = [(self.value(a), a.dtype) for a in node.args]
        if isinstance(exponent, Const) and exponent.value >= 0:  # nothing to check
            attrs = {**(attrs or {}), "nonnegative_exponent": True}
        return self.ops.apply(node.fn, node.dtype, args, attrs, rounded)

    def constant(self, value: Any, dtype: DType) -> str:
        kb, i = self.kb, info(dtype)
        if dtype is DType.BOOL:
            p = kb.reg("pred")
            kb.emit(f"setp.ne.u32 {p}, {1 if value else 0}, 0")
            return p
        if dtype in (DType.F16, DType.BF16):
            value = round16(float(value), dtype)
        r = kb.reg(i.reg)
        lit = float_literal(value, dtype) if dtype.is_float else int_literal(int(value), dtype)
        kb.emit(f"mov.{i.itype} {r}, {lit}")
        return r


__all__ = ["ExprCodegen", "IndexGroup", "KernelParams", "byte_address", "is_b32"]
