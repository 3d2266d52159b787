"""Planning products and windows: matmul (with epilogue and cast prologue), conv2d, pools.

Invariants:
- A matmul runs as one tiled kernel over the domain (batch..., M, N); 1-D operands
  are views with a stride-0 unit axis, and the result view drops that axis.
- An elementwise consumer of a single-use matmul becomes that kernel's epilogue;
  an operand produced by a single-use widening ``tensor.cast`` is read in its
  narrow dtype and widened while loading (the i8 path).
- A float conv2d / fused_conv2d is an implicit GEMM (``conv_gemm``): rows
  (n, oh, ow), columns o, depth (c, kh, kw), im2col indexing computed while the
  A tile is loaded and zero padding as guards on those loads; the fused body is
  the tile kernel's epilogue. Integer convs and pools are row kernels over
  windows whose input loads carry the same guards.
- f16/bf16 products with f32 accumulation, i8 x i8 products in i32 and (with
  ``allow_tf32``) f32 products run on tensor cores when the target is sm_80 or newer:
  on sm_90 the Hopper kernel (``wgmma`` + TMA) where TMA can load both operands, else
  ``mma.sync``; everything else on the FMA tiles (``kernels.gemm`` decides).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ....dtypes import DType
from ....ir.core import Operation, Value
from ....ir.types import TensorType
from ..expr import Acc, Apply, LoopSpec, Node, ReduceStage, Stage, TensorArg
from ..isa import sm_number
from ..kernels.elementwise import EmittedKernel
from ..kernels.gemm import product_kernels
from ..kernels.gemm_epilogue import EpilogueMap
from ..kernels.matmul import ProductSpec
from ..kernels.operands import GemmOperand, Guard, strided_operand
from ..kernels.row import row_kernel
from ..symbolic import Sym, _fold, mul, sub
from .fuse import SpecBuilder, expand_body, is_elementwise, product_dtype, value_dtype
from .values import HostScalar, Lazy, View, broadcast_shapes, broadcast_stride

ACC = {DType.F16: DType.F32, DType.BF16: DType.F32, DType.F32: DType.F32, DType.F64: DType.F64,
       DType.I8: DType.I32, DType.I32: DType.I32, DType.I64: DType.I64}


class PlannerBase:
    """What the planning mixins use of ``Planner``, declared for the type checker.

    ``ProductsMixin`` and ``OpsMixin`` are only ever mixed into ``Planner``, which
    defines all of this (and the checker holds its definitions to these signatures).
    """

    if TYPE_CHECKING:
        arch: str
        env: dict[int, Any]
        steps: list[dict[str, Any]]
        #: ids of the matmuls planned as one flash-attention kernel (``AttentionMixin``)
        flash_ready: dict[int, Any]

        def kernel_name(self, kind: str) -> str: ...
        def unify(self, a: str, b: str) -> bool: ...
        def alloc(self, dtype: DType, shape: tuple[Sym, ...]) -> View: ...
        def add_kernel(self, k: EmittedKernel, when: str | None = None) -> None: ...
        def shape(self, v: Value) -> tuple[Sym, ...]: ...
        def lookup(self, v: Value) -> Any: ...
        def host(self, v: Value) -> HostScalar: ...
        def materialize(self, v: Value) -> View: ...
        # defined by OpsMixin
        def result_shape(self, op: Operation) -> tuple[Sym, ...]: ...
        def check(self, cond: str, message: str) -> None: ...
        # defined by AttentionMixin
        def flash_attention(self, op: Operation, sink: Operation | None) -> View: ...


class ProductsMixin(PlannerBase):
    def matmul_shape(self, a: tuple[Sym, ...], b: tuple[Sym, ...]) -> tuple[Sym, ...]:
        batch = broadcast_shapes([a[:-2], b[:-2]], getattr(self, "unify", None))
        if len(a) > 1 and len(b) > 1 or True:
            k_a, k_b = a[-1], (b[-2] if len(b) > 1 else b[0])
            if isinstance(k_a, str) and isinstance(k_b, str) and k_a != k_b:
                self.unify(k_a, k_b)
        return (*batch, *a[-2:-1], *(b[-1:] if len(b) > 1 else ()))

    def epilogue_ok(self, op: Operation) -> bool:
        return product_dtype(op) in ACC

    def lazy_product(self, v: Value) -> Operation | None:
        """The Lazy matmul feeding ``v`` through Lazy elementwise ops, if any."""
        pv = self.env.get(id(v))
        if not isinstance(pv, Lazy):
            return None
        if pv.op.name in ("tensor.matmul", "tensor.fused_matmul"):
            return pv.op
        if is_elementwise(pv.op):
            for o in pv.op.operands:
                found = self.lazy_product(o)
                if found is not None:
                    return found
        return None

    # ------------------------------------------------------------ matmul
    def product_domain(self, op: Operation):
        a_v, b_v = op.operands[0], op.operands[1]
        a, b = self.operand_view(a_v), self.operand_view(b_v)
        ra, rb = len(a.shape), len(b.shape)
        if ra == 1:
            a = View(a.buffer, a.dtype, (1, a.shape[0]), (0, a.strides[0]), a.offset)
        if rb == 1:
            b = View(b.buffer, b.dtype, (b.shape[0], 1), (b.strides[0], 0), b.offset)
        batch = broadcast_shapes([a.shape[:-2], b.shape[:-2]], self.unify)
        m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
        self.check(f"{a.shape[-1]} == {b.shape[-2]}",
                   f"'tensor.matmul': inner extents {a.shape[-1]} and {b.shape[-2]} differ")
        nb = len(batch)

        def arg(v: View) -> TensorArg:
            lead = nb - (len(v.shape) - 2)
            strides = [0] * lead + [broadcast_stride(d, batch[lead + i], s)
                                    for i, (d, s) in enumerate(zip(v.shape[:-2], v.strides[:-2], strict=True))]
            return TensorArg(v.buffer, v.dtype, tuple(strides) + v.strides[-2:], v.offset)

        domain = (*batch, m, n)
        amap = tuple(range(nb)) + ((nb,) if ra > 1 else ()) + ((nb + 1,) if rb > 1 else ())
        return domain, amap, arg(a), arg(b), (batch, m, n, k)

    def operand_view(self, v: Value) -> View:
        pv = self.env.get(id(v))
        if isinstance(pv, Lazy) and pv.op.name == "tensor.cast":
            return self.materialize(pv.op.operands[0])  # widened while loading
        return self.materialize(v)

    def matmul(self, op: Operation, sink: Operation | None = None) -> View:
        if id(op) in self.flash_ready:
            return self.flash_attention(op, sink)
        domain, amap, a, b, (batch, m, n, k) = self.product_domain(op)
        dtype = product_dtype(op)  # the accumulator's; a fused body may cast the result
        spec, out = self.product_output(op, sink, self.kernel_name("matmul"), domain, amap)
        nb = len(batch)
        ga = strided_operand(a.buffer, a.dtype, a.offset, a.strides[:nb], m, a.strides[nb], k,
                             a.strides[nb + 1])
        gb = strided_operand(b.buffer, b.dtype, b.offset, b.strides[:nb], n, b.strides[nb + 1], k,
                             b.strides[nb])
        emap = EpilogueMap(tuple(range(nb)), batch, (nb,), (m,), (nb + 1,), (n,))
        self.add_product(ProductSpec(spec.name, batch, m, n, k, ga, gb, ACC[dtype], spec, emap))  # type: ignore[index]
        return out

    def product_output(self, op: Operation, sink: Operation | None, name: str,
                       domain: tuple[Sym, ...], amap: tuple[int, ...]) -> tuple[LoopSpec, View]:
        """The epilogue spec of product ``op`` over ``domain`` (its result's axes at
        ``amap``) and the fresh output it stores: the accumulator, ``op``'s fused body,
        or its elementwise consumer ``sink`` computed from it."""
        dtype = product_dtype(op)  # the accumulator's; a fused body may cast the result
        spec = LoopSpec(name, domain, len(domain))
        builder = SpecBuilder(self, spec, allow_acc=True)
        if sink is not None:
            node = builder.expand(sink, amap)
            out_dtype = value_dtype(sink.results[0])
        elif op.name == "tensor.fused_matmul":
            args = [builder.operand(op, i, amap) for i in range(2, len(op.operands))]
            node = expand_body(op.regions[0].blocks[0], [Acc(dtype), *args])[0]  # type: ignore[arg-type]
            out_dtype = value_dtype(op.results[0])
        else:
            node, out_dtype = Acc(dtype), dtype  # type: ignore[arg-type]
        shape = tuple(domain[i] for i in amap)
        out = self.alloc(out_dtype, shape)  # type: ignore[arg-type]
        strides: list[Sym] = [0] * len(domain)
        for i, ax in enumerate(amap):
            strides[ax] = out.strides[i]
        spec.outputs.append((node, TensorArg(out.buffer, out.dtype, tuple(strides))))
        return spec, out

    def add_product(self, ps: ProductSpec) -> None:
        """The GEMM kernels ``kernels.gemm.product_kernels`` picks for this arch, each
        launched where its condition holds (symbolic shapes on sm_90: Hopper or sm_80)."""
        for kernel, when in product_kernels(ps, sm_number(self.arch)):
            self.add_kernel(kernel, when)

    # ------------------------------------------------------------ windows
    def window_shape(self, op: Operation) -> tuple[Sym, ...]:
        x = self.shape(op.operands[0])
        lead: tuple[Sym, ...]
        if op.name in ("tensor.conv2d", "tensor.fused_conv2d"):
            w = self.shape(op.operands[1])
            kh, kw = w[2], w[3]
            pad = op.attributes.get("padding", [0, 0])
            lead = (x[0], w[0])
        else:
            kh, kw = op.attributes["kernel"]
            pad, lead = [0, 0], tuple(x[:-2])
        stride = op.attributes.get("stride", [1, 1])
        hw = [_fold(f"(({x[-2 + i]}) + {2 * pad[i]} - ({(kh, kw)[i]})) // {stride[i]} + 1")
              for i in (0, 1)]
        return (*lead, *hw)

    def window(self, op: Operation) -> View:
        out_shape = self.result_shape(op)
        x = self.materialize(op.operands[0])
        conv = op.name in ("tensor.conv2d", "tensor.fused_conv2d")
        if conv and x.dtype.is_float:
            return self.conv_gemm(op, x, self.materialize(op.operands[1]), out_shape)
        stride = op.attributes.get("stride", [1, 1])
        pad = op.attributes.get("padding", [0, 0]) if conv else [0, 0]
        sh, sw = x.strides[-2], x.strides[-1]
        domain: tuple[Sym, ...]
        xs: tuple[Sym, ...]
        if conv:
            w = self.materialize(op.operands[1])
            kh, kw = w.shape[2], w.shape[3]
            domain = (*out_shape, x.shape[1], kh, kw)
            xs = (x.strides[0], 0, mul(stride[0], sh), mul(stride[1], sw), x.strides[1], sh, sw)
        else:
            kh, kw = op.attributes["kernel"]
            domain = (*out_shape, kh, kw)
            xs = (*x.strides[:-2], mul(stride[0], sh), mul(stride[1], sw), sh, sw)
        n_out = len(out_shape)
        spec = LoopSpec(self.kernel_name("conv" if conv else "pool"), domain, n_out)
        builder = SpecBuilder(self, spec)
        offset = sub(sub(x.offset, mul(pad[0], sh)), mul(pad[1], sw))
        guards: tuple[tuple[tuple[tuple[int, int], ...], int, Sym], ...] = ()
        if conv and (pad[0] or pad[1]):
            guards = ((((2, stride[0]), (5, 1)), -pad[0], x.shape[2]),
                      (((3, stride[1]), (6, 1)), -pad[1], x.shape[3]))
        xarg = TensorArg(x.buffer, x.dtype, xs, offset, guards)
        from ..expr import Load
        xn = Load(x.dtype, spec.add_input(xarg))
        dtype = value_dtype(op.results[0])
        if conv:
            ws = (0, w.strides[0], 0, 0, w.strides[1], w.strides[2], w.strides[3])
            wn = Load(w.dtype, spec.add_input(TensorArg(w.buffer, w.dtype, ws, w.offset)))
            acc_t = x.dtype
            spec.stages.append(ReduceStage("sum", Apply(acc_t, "mul", [xn, wn]), acc_t))
        else:
            spec.stages.append(ReduceStage("max" if op.name == "tensor.max_pool" else "mean",
                                           xn, dtype))  # type: ignore[arg-type]
        node: Node = Stage(spec.stages[0].dtype, 0)
        if op.name == "tensor.fused_conv2d":
            amap = tuple(range(n_out))
            args = [builder.operand(op, i, amap) for i in range(2, len(op.operands))]
            node = expand_body(op.regions[0].blocks[0], [node, *args])[0]
        out = self.alloc(dtype, out_shape)  # type: ignore[arg-type]
        strides = tuple(out.strides) + (0,) * (len(domain) - n_out)
        spec.outputs.append((node, TensorArg(out.buffer, out.dtype, strides)))
        self.add_kernel(row_kernel(spec, thread_rows=True))
        return out


    def conv_gemm(self, op: Operation, x: View, w: View, out_shape: tuple[Sym, ...]) -> View:
        """conv2d as implicit GEMM: rows (n, oh, ow), columns o, depth (c, kh, kw)."""
        n, c, h, wd = x.shape
        o, kh, kw = w.shape[0], w.shape[2], w.shape[3]
        oh, ow = out_shape[2], out_shape[3]
        (sh, sw), (ph, pw) = op.attributes.get("stride", [1, 1]), op.attributes.get("padding", [0, 0])
        xs, ws = x.strides, w.strides
        guards = (Guard(1, sh, 1, 1, -ph, h), Guard(2, sw, 2, 1, -pw, wd)) if ph or pw else ()
        offset = sub(sub(x.offset, mul(ph, xs[2])), mul(pw, xs[3]))
        a = GemmOperand(x.buffer, x.dtype, offset, (),
                        ((n, xs[0]), (oh, mul(sh, xs[2])), (ow, mul(sw, xs[3]))),
                        ((c, xs[1]), (kh, xs[2]), (kw, xs[3])), guards)
        b = GemmOperand(w.buffer, w.dtype, w.offset, (), ((o, ws[0]),),
                        ((c, ws[1]), (kh, ws[2]), (kw, ws[3])))
        self.check(f"{c} == {w.shape[1]}",
                   f"'{op.name}': input has {c} channels, weight expects {w.shape[1]}")
        dtype = x.dtype  # the product's dtype; a fused epilogue may change the output's
        spec = LoopSpec(self.kernel_name("conv"), out_shape, len(out_shape))
        node: Node = Acc(dtype)
        if op.name == "tensor.fused_conv2d":
            builder = SpecBuilder(self, spec)
            amap = tuple(range(len(out_shape)))
            args = [builder.operand(op, i, amap) for i in range(2, len(op.operands))]
            node = expand_body(op.regions[0].blocks[0], [node, *args])[0]
        out = self.alloc(value_dtype(op.results[0]), out_shape)  # type: ignore[arg-type]
        spec.outputs.append((node, TensorArg(out.buffer, out.dtype, out.strides)))
        emap = EpilogueMap((), (), (0, 2, 3), (n, oh, ow), (1,), (o,))
        rows = mul(mul(n, oh), ow)
        self.add_product(ProductSpec(spec.name, (), rows, o, b.depth, a, b, ACC[dtype], spec,
                                     emap, "conv(igemm)"))
        return out


__all__ = ["ProductsMixin", "TensorType"]
