"""The helpers' LLVM IR (library.py loads them): declarations for kernel modules,
each helper's own module, and linking them into ahead-of-time output."""

from __future__ import annotations

import llvmlite.binding as llvm
from llvmlite import ir

from ...dtypes import DType
from .depthwise import ARGS as DEPTHWISE_ARGS
from .depthwise import POOL_ARGS, DepthwiseBuilder, Geometry, plane_geometry
from .fastcall import ObjectLayout
from .fastcall_ir import call_ir
from .gemm_config import GemmConfig, current_config, ukernel_rows
from .library import (
    ARENA_PREFIX,
    ARENA_SPEC,
    PLANE_KINDS,
    POOL_SPEC,
    QGEMM_KINDS,
    SCRATCH_SPEC,
    SCRATCH_SYMBOL,
    Spec,
    dependencies,
    pipeline,
    symbol,
)
from .parallel import SLOT_SYMBOL, pool_glue, pool_module
from .qgemm import ARGS as QGEMM_ARGS
from .qgemm import qgemm_builder, qgemm_variant
from .runtime import arena_module
from .scratch import scratch_module
from .types import I1, I64, PREPACK_TYPE, PTR

GEMM_TYPE = ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR] + [I64] * 6 + [I1])
CONV_TYPE = ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR] + [I64] * 8)
CONV_RANGE_TYPE = ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR] + [I64] * 10 + [PTR])
_TYPES = {"gemm": GEMM_TYPE, "gemm_packed": GEMM_TYPE, "gemm_prepack": PREPACK_TYPE,
          "conv": CONV_TYPE, "conv_range": CONV_RANGE_TYPE, "conv_rows": CONV_TYPE,
          "conv_rows_prepack": PREPACK_TYPE,
          "depthwise": ir.FunctionType(ir.VoidType(), DEPTHWISE_ARGS),
          "maxpool": ir.FunctionType(ir.VoidType(), POOL_ARGS),
          "qgemm": ir.FunctionType(ir.VoidType(), QGEMM_ARGS),
          "qgemm_packed": ir.FunctionType(ir.VoidType(), QGEMM_ARGS), "qgemm_prepack": PREPACK_TYPE}
#: Winograd F(m x m, 3x3) helpers (conv_winograd.py), m = 2 and 4: the driver on a packed
#: transform, the packing, and the driver that transforms a weight per call
WINOGRAD_KINDS = {f"conv_wino{m}{role}": (m, role) for m in (2, 4)
                  for role in ("", "_prepack", "_raw")}
_TYPES.update({kind: PREPACK_TYPE if role == "_prepack" else CONV_TYPE
               for kind, (_, role) in WINOGRAD_KINDS.items()})


def declare(mod: ir.Module, specs: list[Spec], kind: str, dtype: DType,
            stride: tuple[int, int] | None = None, geometry: Geometry | None = None) -> ir.Function:
    """An external declaration of the helper in ``mod``; its spec is added to ``specs``."""
    spec: Spec = {"kind": kind, "dtype": dtype.value, "config": current_config().as_dict()}
    if stride is not None:
        spec["stride"] = [int(stride[0]), int(stride[1])]
    if geometry is not None:
        spec["geometry"] = geometry.as_spec()
    return _declare_spec(mod, specs, spec)


def declare_qgemm(mod: ir.Module, specs: list[Spec], kind: str) -> ir.Function:
    """``declare`` of an int8 GEMM helper (``QGEMM_KINDS``): this host's variant."""
    return _declare_spec(mod, specs, {"kind": kind, "variant": qgemm_variant()})


def _declare_spec(mod: ir.Module, specs: list[Spec], spec: Spec) -> ir.Function:
    name = symbol(spec)
    if spec not in specs:
        specs.append(spec)
    fn = mod.globals.get(name)
    if fn is None:
        fn = ir.Function(mod, _TYPES[spec["kind"]], name)
    return fn


def library_ir(spec: Spec) -> str:
    """LLVM IR text of one helper, exported under ``symbol(spec)``."""
    from .conv import ConvBuilder
    from .conv_rows import ConvRowsBuilder
    from .conv_winograd import ConvWinogradBuilder
    from .gemm import GemmBuilder, use_config
    from .host import host
    mod = ir.Module(name=symbol(spec))
    mod.triple = host().triple
    if spec["kind"] == "pool":
        pool_module(mod, symbol(spec))
        return str(mod)
    if spec["kind"] == "call":
        call_ir(mod, symbol(spec), ObjectLayout(**spec["layout"]))
        return str(mod)
    if spec["kind"] == "scratch":
        scratch_module(mod)
        return str(mod)
    if spec["kind"] == "arena":
        arena_module(mod)
        return str(mod)
    if spec["kind"] in QGEMM_KINDS:
        _qgemm_helper(mod, spec)
        return str(mod)
    dtype = DType(spec["dtype"])
    with use_config(GemmConfig(**spec["config"])):
        if spec["kind"] in PLANE_KINDS:
            combine = "max" if spec["kind"] == "maxpool" else "fma"
            DepthwiseBuilder(mod, dtype, plane_geometry(spec["geometry"]), combine).function(symbol(spec))
            return str(mod)
        if spec["kind"] == "ukernels":
            builder = GemmBuilder(mod, dtype, define_ukernels=True)
            for rows in ukernel_rows(builder.mr):
                builder.ukernel(rows)  # external: the drivers' objects link against them
            return str(mod)
        if spec["kind"] == "gemv":  # external: the gemm drivers' objects link against them
            builder = GemmBuilder(mod, dtype, define_gemv=True)
            builder.gemv()
            builder.gemv_split()
            return str(mod)
        if spec["kind"] == "dukernels":
            direct = ConvBuilder(mod, dtype, (1, 1), define_ukernels=True)
            for rows in ukernel_rows(direct.mr):
                direct.direct_ukernel(rows)
            return str(mod)
        if spec["kind"] == "gemm":
            fn = GemmBuilder(mod, dtype).driver(symbol(spec))
        elif spec["kind"] == "gemm_packed":
            fn = GemmBuilder(mod, dtype).driver(symbol(spec), prepacked=True)
        elif spec["kind"] == "gemm_prepack":
            fn = GemmBuilder(mod, dtype).prepack(symbol(spec))
        elif spec["kind"] == "conv_range":
            fn = ConvBuilder(mod, dtype, tuple(spec["stride"])).range_driver(symbol(spec))
        elif spec["kind"] == "conv_rows":
            fn = ConvRowsBuilder(mod, dtype, tuple(spec["stride"])).driver(symbol(spec))
        elif spec["kind"] == "conv_rows_prepack":
            fn = ConvRowsBuilder(mod, dtype, (1, 1)).prepack(symbol(spec))
        elif spec["kind"] in WINOGRAD_KINDS:
            tile, role = WINOGRAD_KINDS[spec["kind"]]
            builder = ConvWinogradBuilder(mod, dtype, tile)
            make = {"": builder.driver, "_prepack": builder.prepack, "_raw": builder.raw_driver}[role]
            fn = make(symbol(spec))
        else:
            fn = ConvBuilder(mod, dtype, tuple(spec["stride"])).driver(symbol(spec))
    fn.linkage = "external"
    return str(mod)


def _qgemm_helper(mod: ir.Module, spec: Spec) -> None:
    """The int8 GEMM's driver (or packing) under ``symbol(spec)``: a thunk that calls
    the builder's internal function (LLVM inlines it: its only caller)."""
    builder = qgemm_builder(mod, variant=spec["variant"])
    body = builder.prepack() if spec["kind"] == "qgemm_prepack" else builder.driver(spec["kind"] == "qgemm_packed")
    thunk = ir.Function(mod, _TYPES[spec["kind"]], symbol(spec))
    b = ir.IRBuilder(thunk.append_basic_block("entry"))
    b.call(body, list(thunk.args))
    b.ret_void()


def optimized(spec: Spec) -> llvm.ModuleRef:
    """The helper's module, optimized as the JIT's copy is (``library.pipeline``)."""
    from .target import optimize, parse_and_verify
    mod = parse_and_verify(library_ir(spec))
    optimize(mod, *pipeline(spec))
    return mod


def link_into(mod: llvm.ModuleRef, specs: list[Spec]) -> None:
    """Copy the helpers' definitions into ``mod`` (for self-contained AOT output) with
    the micro-kernels and one-row products they call, the scratch helper's once when
    anything in it calls that, and the pool's when anything in it runs a parallel region
    (with a slot that points at it from the start: no loader outside this process)."""
    called: list[Spec] = []
    for spec in specs:
        called += [d for d in dependencies(spec) if d["kind"] in ("ukernels", "dukernels", "gemv")
                   and d not in called]
    for spec in specs + called:
        if spec != SCRATCH_SPEC:
            mod.link_in(optimized(spec))
    if any(f.name == SCRATCH_SYMBOL and f.is_declaration for f in mod.functions):
        mod.link_in(optimized(SCRATCH_SPEC))
    if any(f.name.startswith(ARENA_PREFIX) and f.is_declaration for f in mod.functions):
        mod.link_in(optimized(ARENA_SPEC))
    if any(g.name == SLOT_SYMBOL and g.is_declaration for g in mod.global_variables):
        from .target import parse_and_verify
        mod.link_in(optimized(POOL_SPEC))
        glue = ir.Module(name="wia.lib.pool.glue")
        glue.triple = mod.triple
        pool_glue(glue)
        mod.link_in(parse_and_verify(str(glue)))


__all__ = ["CONV_RANGE_TYPE", "CONV_TYPE", "GEMM_TYPE", "declare", "declare_qgemm", "library_ir", "link_into",
           "optimized"]
