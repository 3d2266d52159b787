"""The micro-kernels are one helper object per dtype and config ("ukernels"): the gemm
and conv drivers declare them and call that object's, instead of each compiling its
own copies (library.py ``dependencies``, gemm.py ``GemmBuilder.ukernel``)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import wiadsl
from wiadsl.backends.llvm import library
from wiadsl.backends.llvm.gemm_config import (
    GemmConfig,
    current_config,
    gemv_symbol,
    ukernel_rows,
    ukernel_symbol,
)
from wiadsl.backends.llvm.library_ir import library_ir
from wiadsl.testing.filecheck import filecheck

DRIVERS = [("gemm", None), ("gemm_packed", None), ("conv_range", [2, 2]), ("conv_rows", [1, 1]),
           ("conv_wino2", None), ("conv_wino4_raw", None)]


def spec(kind: str, stride: list[int] | None = None, config: GemmConfig | None = None) -> library.Spec:
    out: library.Spec = {"kind": kind, "dtype": "f32", "config": (config or current_config()).as_dict()}
    if stride is not None:
        out["stride"] = stride
    return out


def functions(text: str, keyword: str) -> set[str]:
    """The names of the ``define``d or ``declare``d micro-kernels in LLVM IR text."""
    return set(re.findall(rf'^{keyword} [^@]*@"?(wia\.lib\.ukernel\.[^"(]+)"?\(', text, re.M))


@pytest.mark.parametrize("kind,stride", DRIVERS)
def test_a_driver_declares_the_micro_kernels_and_defines_none(kind: str, stride: list[int] | None) -> None:
    text = library_ir(spec(kind, stride))
    declared = functions(text, "declare")
    assert declared and not functions(text, "define")
    cfg = current_config()
    assert declared <= {ukernel_symbol("f32", cfg, rows) for rows in ukernel_rows(cfg.mr)}


@pytest.mark.parametrize("mr", [4, 6, 8, 10])
def test_the_ukernels_helper_defines_every_row_count_its_drivers_call(mr: int) -> None:
    cfg = GemmConfig(mr=mr, vector_bits=128)
    text = library_ir(spec("ukernels", config=cfg))
    assert functions(text, "define") == {ukernel_symbol("f32", cfg, rows) for rows in ukernel_rows(mr)}
    assert not re.search(r"^define internal [^@]*@\"?wia\.lib\.ukernel", text, re.M)  # all exported
    assert library.symbol(spec("ukernels", config=cfg)) == ukernel_symbol("f32", cfg, mr)


@pytest.mark.parametrize("mr", [6, 8])
def test_the_gemm_calls_a_kernel_of_every_tail_size(mr: int) -> None:
    # a tail of t < mr rows is one call of the t-row kernel, not 4 + 2 + 1 (gemm.py's row_tiles):
    # tiles below 4 rows are latency-bound, each call costs what 4 rows would
    cfg = GemmConfig(mr=mr, vector_bits=128)
    declared = functions(library_ir(spec("gemm", config=cfg)), "declare")
    assert declared == {ukernel_symbol("f32", cfg, rows) for rows in range(1, mr + 1)}


def test_a_tail_of_rows_is_one_call_site_whose_pointer_the_row_count_selects() -> None:
    # gemm.py's call_rows: the kernels of 3, 2 and 1 rows are chosen by value, then called
    # once (a call site per row count, each with its argument set-up, made the driver's
    # code generation ~25 ms slower)
    cfg = GemmConfig(mr=4, vector_bits=128)
    kernel = ukernel_symbol("f32", cfg, 1)[:-1]
    filecheck(library_ir(spec("gemm", config=cfg)), f"""
        CHECK: call void @"{kernel}4"(
        CHECK: = icmp eq i64 {{{{%\\S+}}}}, 3
        CHECK-NEXT: = select i1 {{{{.*}}}}@"{kernel}3", {{{{.*}}}}@"{kernel}1"
        CHECK-NEXT: = icmp eq i64 {{{{%\\S+}}}}, 2
        CHECK-NEXT: = select i1 {{{{.*}}}}@"{kernel}2", {{{{.*}}}}
        CHECK-NOT: call void @"{kernel}
        CHECK: call void %
    """)


def test_drivers_depend_on_the_micro_kernels_of_their_dtype_and_config() -> None:
    cfg = GemmConfig(mr=6, vector_bits=256)
    for kind, stride in DRIVERS:
        own = [spec("gemv", config=cfg)] if kind == "gemm" else []  # its one-row products
        assert library.dependencies(spec(kind, stride, cfg)) == [library.SCRATCH_SPEC, spec("ukernels", config=cfg),
                                                                 *own]
    for standalone in (library.SCRATCH_SPEC, library.POOL_SPEC, library.ARENA_SPEC, spec("ukernels")):
        assert library.dependencies(standalone) == []


def test_a_gemm_and_a_convolution_share_one_loaded_copy() -> None:
    mod = wiadsl.jit("kernel mm(input a: f32[M, K], input b: f32[K, N], output c: f32[M, N]) { c = a @ b; }\n"
                     "kernel cv(input x: f32[N, C, H, W], input w: f32[O, C, 3, 3], output y: f32[N, O, P, Q]) "
                     "{ y = conv2d(x, w, stride=2, padding=1); }", target="cpu")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((33, 17), np.float32), rng.standard_normal((17, 40), np.float32)
    np.testing.assert_allclose(mod.mm(a, b), a @ b, rtol=1e-5, atol=1e-5)
    x, w = rng.standard_normal((1, 4, 9, 9), np.float32), rng.standard_normal((5, 4, 3, 3), np.float32)
    y = mod.cv(x, w)
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.einsum("ocij,nchwij->nohw", w, np.lib.stride_tricks.sliding_window_view(
        padded, (3, 3), axis=(2, 3))[:, :, ::2, ::2])
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
    cfg = current_config()
    assert library.loaded_address(ukernel_symbol("f32", cfg, cfg.mr))


def test_the_one_row_products_are_a_helper_of_their_own() -> None:
    """The gemm driver declares ``gemv`` and ``gemv_split`` (gemm.py) and depends on the
    "gemv" helper, which defines both, exported: the two build at once on a process's
    first matmul, instead of one after the other in the driver."""
    cfg = current_config()
    names = {gemv_symbol("f32", cfg), gemv_symbol("f32", cfg, split=True)}
    driver = library_ir(spec("gemm"))
    assert set(re.findall(r'^declare [^@]*@"?(wia\.lib\.gemv\.[^"(]+)"?\(', driver, re.M)) == names
    assert not re.search(r"^define [^@]*@\"?wia\.(lib\.)?gemm\.gemv", driver, re.M)
    helper = library_ir(spec("gemv"))
    assert set(re.findall(r'^define void @"?(wia\.lib\.gemv\.[^"(]+)"?\(', helper, re.M)) == names
    assert library.symbol(spec("gemv")) == gemv_symbol("f32", cfg)
    assert library.dependencies(spec("gemv")) == [library.SCRATCH_SPEC]
