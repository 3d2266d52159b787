"""``shape-specialize``: substitute call-time extents into a kernel, then fold.

``shape-specialize{kernel=mm,shapes=128x64,64x32}`` (or the Python API
``specialize_shapes(module, "mm", [(128, 64), (64, 32)])``) gives the kernel's
tensor parameters static shapes (one ``AxB`` entry per parameter in order; ``s``
for a scalar parameter, ``?`` keeps an extent dynamic), re-infers every result
type it can (``infer.refine``), refines block arguments whose incoming edges
agree, updates the signature, and folds ``tensor.dim`` and everything that
becomes constant.

``const_args=w,gamma`` (``specialize_shapes(..., const_args=[...])``) also
marks parameters whose values are the same on every call (the function
attribute ``const_args``, read by ``bn-fold``): a jit that is given
``constants={...}`` passes their names.

Invariants: a type only ever becomes more static (each new extent is compatible
with the old one); a shape that contradicts a static extent is a WiaUsageError.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..diagnostics import WiaUsageError
from ..ir.module import FuncOp, ModuleOp
from ..ir.types import TensorType, shapes_compatible
from ..records import record
from ..rewrite import canonical  # noqa: F401
from ..rewrite.pattern import apply_patterns_greedily
from .base import Pass, PassContext, register_pass
from .infer import refine_func

Shape = Sequence[int | None] | None


def specialize_shapes(module: ModuleOp, kernel: str, arg_shapes: Sequence[Shape],
                      const_args: Sequence[str] = ()) -> ModuleOp:
    """Specialize ``module[kernel]`` to ``arg_shapes`` (None entries: scalars/unchanged);
    ``const_args``: parameter names to mark constant (``bn_fold.mark_const_args``)."""
    func = module[kernel]
    if const_args:
        from .bn_fold import mark_const_args
        mark_const_args(func, const_args)
    if len(arg_shapes) != len(func.args):
        raise WiaUsageError(f"@{kernel} takes {len(func.args)} arguments, got {len(arg_shapes)} shapes")
    for i, (arg, shape) in enumerate(zip(func.args, arg_shapes, strict=True)):
        if shape is None:
            continue
        t = arg.type
        new = tuple(None if d is None else int(d) for d in shape)
        if not isinstance(t, TensorType) or not shapes_compatible(t.shape, new):
            raise WiaUsageError(f"shape {list(new)} does not fit argument {i} of @{kernel}: {t}")
        arg.type = TensorType(t.dtype, tuple(o if n is None else n for o, n in zip(t.shape, new, strict=True)))
    refine_func(func)
    apply_patterns_greedily(func, [], fold=True, use_owned=True)
    refine_func(func)
    return module


def parse_shapes(text: str) -> list[Shape]:
    out: list[Shape] = []
    for item in (s.strip() for s in text.split(",")):
        if item in ("s", "-", ""):
            out.append(None)
            continue
        try:
            out.append([None if d == "?" else int(d) for d in item.split("x")])
        except ValueError:
            raise WiaUsageError(f"bad shape {item!r} in shape-specialize (use 4x?x8 or s)") from None
    return out


@register_pass
@record(frozen=True)
class ShapeSpecialize(Pass):
    name = "shape-specialize"
    kernel: str = ""
    shapes: str = ""
    const_args: str = ""

    def run(self, module: ModuleOp, ctx: PassContext) -> None:
        if not self.shapes:
            raise WiaUsageError("shape-specialize needs shapes=AxB,... (one per parameter)")
        name = self.kernel or _only_kernel(module)
        names = [n.strip() for n in self.const_args.split(",") if n.strip()]
        specialize_shapes(module, name, parse_shapes(self.shapes), names)


def _only_kernel(module: ModuleOp) -> str:
    kernels = [f.name for f in module if f.is_kernel] or [f.name for f in module]
    if len(kernels) != 1:
        raise WiaUsageError(f"shape-specialize: name the kernel (kernel=...), found {kernels}")
    return kernels[0]


_ = FuncOp
