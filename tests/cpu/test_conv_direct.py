"""The direct stride-1 convolution (backends/llvm/conv.py's ``direct_tiles``): micro-kernels
that read each tile's patch rows from the padded input instead of packing them. It is
taken where output rows are whole tiles of NR pixels (16 on AVX2, 32 on AVX-512 for
f32; half that for f64), so the widths below are multiples of 32 (every host takes it)
besides widths that are not (the packed path), and where each output row is one vector
of W pixels (8 or 16 for f32, 4 or 8 for f64) and the rows pair up into whole tiles:
widths 4, 8 and 16 at even and odd heights. Against NumPy: every row count of
output channels (the micro-kernels of 1 to MR rows and the borrowed halves), kernels
wider than 3x3, one input channel, the K and weight-size limits on either side, f64,
a batch split over the pool and the fused epilogue. The IR tests check the kernel's
structure: no packing buffer is read, and only the stride-1 helper has it."""

from __future__ import annotations

import numpy as np
import pytest

import wiadsl
from wiadsl.backends.llvm.conv import DIRECT_WEIGHTS, ConvBuilder
from wiadsl.backends.llvm.gemm_config import default_config, ukernel_rows
from wiadsl.backends.llvm.library import dependencies
from wiadsl.backends.llvm.library_ir import library_ir
from wiadsl.dtypes import DType
from wiadsl.testing.filecheck import filecheck

from .test_conv_padding import FUSED, check, ref, run

rng = np.random.default_rng(23)


def case(n: int, c: int, o: int, h: int, w: int, k: tuple[int, int] = (3, 3),
         dtype: type = np.float32) -> None:
    x = rng.standard_normal((n, c, h, w)).astype(dtype)
    weight = rng.standard_normal((o, c, *k)).astype(dtype)
    pad = (k[0] // 2, k[1] // 2)
    check(run(x, weight, (1, 1), pad), ref(x, weight, (1, 1), pad))


@pytest.mark.parametrize("o", [1, 2, 5, 6, 7, 8, 13, 16, 33])
@pytest.mark.parametrize("c", [1, 3, 8])
def test_output_channel_counts(c, o):
    case(1, c, o, 5, 32)


@pytest.mark.parametrize("w", [32, 64, 16, 48, 7, 33])
def test_row_widths_direct_and_packed(w):
    case(2, 4, 8, 3, w)


@pytest.mark.parametrize("w", [16, 8, 4])
@pytest.mark.parametrize("h", [2, 7, 16])
def test_rows_of_one_vector(h, w):
    """Each output row one vector of the tile (the other vectors the next rows): rows
    that pair up (even heights) and an odd last row (the packed path), wide windows and
    both element types."""
    case(2, 3, 9, h, w)
    case(1, 5, 8, h, w, (5, 3))
    case(1, 2, 3, h, w, (3, 3), np.float64)


@pytest.mark.parametrize("k", [(5, 5), (1, 3), (3, 1), (7, 7)])
def test_kernel_shapes(k):
    case(1, 3, 6, 9, 32, k)


@pytest.mark.parametrize("c,o", [(40, 8), (48, 8), (56, 8), (64, 8), (32, DIRECT_WEIGHTS // 288),
                                 (32, DIRECT_WEIGHTS // 288 + 1)])
def test_limits_on_either_side(c, o):
    """Patch rows and a weight row block that fill less or more than a 32 KiB L1 (48 or 56
    input channels at 3x3; a 48 KiB one takes 64), and O * K at the weight limit and one
    row of output channels above it."""
    case(1, c, o, 4, 32)


def test_f64():
    case(2, 5, 7, 6, 32, dtype=np.float64)
    case(1, 3, 9, 4, 16, dtype=np.float64)


def test_batch_over_threads_and_fused_epilogue():
    mod = wiadsl.jit(FUSED, target="cpu")
    x = rng.standard_normal((8, 3, 32, 32)).astype(np.float32)
    w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal((8, 1, 1)).astype(np.float32)
    check(mod.block(x, w, b), np.maximum(ref(x, w, (1, 1), (1, 1)) + b, 0))


def helper_ir(stride: tuple[int, int]) -> str:
    from llvmlite import ir
    module = ir.Module("conv")
    ConvBuilder(module, DType.F32, stride).pixels()
    return str(module)


def test_the_stride_one_drivers_call_the_shared_direct_kernels():
    """The drivers declare the direct micro-kernels (the "dukernels" helper defines them,
    once for both stride-1 drivers, which list it among their dependencies)."""
    assert 'declare void @"wia.lib.dukernel.f32.' in helper_ir((1, 1))
    assert "dukernel" not in helper_ir((2, 2))
    config = default_config().as_dict()
    for kind in ("conv", "conv_range"):
        deps = [d["kind"] for d in dependencies({"kind": kind, "dtype": "f32", "config": config,
                                                 "stride": [1, 1]})]
        assert "dukernels" in deps
        assert "dukernels" not in [d["kind"] for d in dependencies(
            {"kind": kind, "dtype": "f32", "config": config, "stride": [2, 2]})]
    text = library_ir({"kind": "dukernels", "dtype": "f32", "config": config})
    for rows in ukernel_rows(default_config().mr):
        assert f'define void @"wia.lib.dukernel.f32.{default_config().label()}.{rows}"' in text


def test_direct_kernel_reads_the_input_not_a_packed_panel():
    """The micro-kernel's B vectors are loaded from its ``x`` argument (the tile's window
    corner; the second ``vstep`` elements after the first: ``wp`` where each vector is
    an output row) and there is one loop per window axis and input channel; nothing is stored
    but the C tile (its epilogue's multiply-adds, on the ``epi.on`` path, come after
    the loops)."""
    from llvmlite import ir
    module = ir.Module("conv")
    builder = ConvBuilder(module, DType.F32, (1, 1), define_ukernels=True)
    fn = builder.direct_ukernel(builder.config.mr)
    text = str(fn)
    assert [line.split(":")[0] for line in text.splitlines() if line.endswith(".head:")] == \
        ["dc.head", "di.head", "dj.head"]
    lines = text[:text.index("epi.on:")].splitlines()
    stores = [line for line in text.splitlines() if line.strip().startswith("store")]
    fmas = [line for line in lines if "@\"llvm.fmuladd" in line]
    assert fmas and len(stores) == len(fmas)  # each accumulator stored once, nothing else
    assert "scratch" not in text
    vstep = fn.args[10].get_reference()
    assert f"mul i64 1, {vstep}" in text


def test_fewer_rows_apply_the_epilogue_out_of_line():
    """A direct micro-kernel of fewer than MR rows stores its tile, then, with an
    epilogue record, calls the module's one ``wia.tile_epilogue`` loop on it (the
    whole-height kernel applies it inline, ``epi.on``): CHECK lines on its IR."""
    from llvmlite import ir
    module = ir.Module("conv")
    builder = ConvBuilder(module, DType.F32, (1, 1), define_ukernels=True)
    rows = builder.config.mr - 1  # the host's MR: 8 with AVX-512, 6 with AVX2
    fn = builder.direct_ukernel(rows)
    filecheck(str(fn), f"""
CHECK-NOT: epi.on:
CHECK: store <
CHECK: icmp ne ptr %".12", null
CHECK: call void @"wia.tile_epilogue.f32"({{{{.*}}}}, ptr %".12", i64 %".13", i64 {rows})
CHECK: ret void
""")
    assert 'define internal void @"wia.tile_epilogue.f32"' in str(module)
