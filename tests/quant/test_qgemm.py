"""The CPU int8 GEMM (``loop.qgemm``): exact against NumPy, and really the host's
multiply-add (``vpdpbusd`` on a VNNI host, ``vpmaddwd`` elsewhere)."""

import numpy as np
import pytest

import wiadsl
from wiadsl.backends.llvm.qgemm_vnni import vnni_bits
from wiadsl.backends.llvm.target import host

SRC = "kernel mm(input a: i8[M, K], input b: i8[K, N], output c: i32[M, N]) { c = cast(a, i32) @ cast(b, i32); }"


@pytest.fixture(scope="module")
def mm():
    return wiadsl.jit(SRC, kernel="mm", target="cpu")


# odd k (pair / quad padding), column tails, 1-7-row tails, k blocks (> 512), threaded
# row splits (m = 97, 130), whole panels of 16 and 32 columns and their tails; one row
# (gemv: B in place, 4 rows of it per pass and the rest, columns in blocks of 2048)
@pytest.mark.parametrize("shape", [(1, 1, 1), (5, 7, 3), (33, 65, 17), (97, 512, 33), (40, 1025, 20), (16, 0, 5),
                                   (7, 515, 64), (130, 66, 129), (1, 768, 96), (1, 7, 2100), (1, 1027, 33),
                                   (1, 0, 9)])
def test_exact(shape):
    m, k, n = shape
    rng = np.random.default_rng(k)
    a = rng.integers(-128, 128, (m, k), dtype=np.int8)
    b = rng.integers(-128, 128, (k, n), dtype=np.int8)
    a[:, :1] = -128  # the extreme products
    b[:1, :] = -128
    c = wiadsl.jit(SRC, kernel="mm", target="cpu")(a, b)
    np.testing.assert_array_equal(c, a.astype(np.int32) @ b.astype(np.int32))


def test_loop_ir_uses_qgemm_and_no_widened_copy():
    from wiadsl.backends.llvm.compile import lower_kernel
    from wiadsl.passes import optimize
    module = optimize(wiadsl.jit(SRC, kernel="mm").ir_for(), 3)
    text = str(lower_kernel(module, "mm", [(8, 8), (8, 8)]).loop_ir)
    assert "loop.qgemm" in text and "xi32> -> " not in text.split("loop.qgemm")[0].split("loop.alloc")[-1]


def test_one_row_reads_b_in_place():
    """CHECK: the driver calls wia.qgemm.gemv when m == 1 (B not packed: it cost twice
    the product); its multiplies are i16 (exact for i8 x i8), its sums i32, eight or
    sixteen columns a step (written vectorized: the helper gets no IR passes), the
    last columns one by one."""
    from wiadsl.backends.llvm.library_ir import library_ir
    for variant, lanes in [("pmaddwd", 8), ("vnni512", 16)]:
        text = library_ir({"kind": "qgemm", "variant": variant})
        gemv = text.split('define internal void @"wia.qgemm.gemv"')[1].split("\n}")[0]
        assert f"mul <{lanes} x i16>" in gemv and f"add <{lanes} x i32>" in gemv, variant
        assert "mul i16" in gemv and "sext i16" in gemv and "add i32" in gemv, variant
    driver = text.split('define internal void @"wia.qgemm"(')[1].split("\n}")[0]
    assert 'call void @"wia.qgemm.gemv"' in driver


def test_a_kernel_calls_the_int8_gemm_helper_of_its_host():
    """CHECK: a kernel's int8 product is a call of the helper (compiled once per host,
    library.py), the variant its features choose; a frozen B is packed by the helper's
    prepack and read by its packed driver."""
    from wiadsl.backends.llvm.compile import lower_kernel
    from wiadsl.backends.llvm.qgemm import qgemm_variant
    from wiadsl.passes import optimize
    module = optimize(wiadsl.jit(SRC, kernel="mm").ir_for(), 3)
    lowered = lower_kernel(module, "mm", [(8, 64), (64, 40)])
    variant = qgemm_variant()
    assert f'declare void @"wia.lib.qgemm.{variant}"' in lowered.llvm_ir
    assert 'define internal void @"wia.qgemm' not in lowered.llvm_ir
    assert {"kind": "qgemm", "variant": variant} in lowered.libraries
    frozen = lower_kernel(module, "mm", [(8, 64), (64, 40)], frozen=frozenset({1}))
    assert f'call void @"wia.lib.qgemm_prepack.{variant}"' in frozen.llvm_ir
    assert f'call void @"wia.lib.qgemm_packed.{variant}"' in frozen.llvm_ir


def madd_instructions(features: set[str]) -> tuple[str, ...]:
    """The instructions the micro-kernel's multiply-adds may legitimately compile to on
    a host with ``features``: with VNNI the int8 GEMM is built on ``vpdpbusd`` (four
    u8 x s8 products per lane, qgemm_vnni.py); without, on i16 pairs, ``vpmaddwd``
    (then an add; issue 17: an LLVM may fuse those into ``vpdpwssd`` only with VNNI)."""
    if vnni_bits(",".join(sorted(features))):
        return ("vpdpbusd",)
    return ("vpmaddwd",)


def test_madd_instructions_follow_the_host_features():
    assert madd_instructions({"+avx2"}) == ("vpmaddwd",)
    assert madd_instructions({"+avx2", "+avxvnni"}) == ("vpdpbusd",)
    assert madd_instructions({"+avx512f", "+avx512bw", "+avx512vnni"}) == ("vpdpbusd",)
    assert vnni_bits("+avx2,+avxvnni") == 256 and vnni_bits("+avx512vnni,+avx512bw") == 512
    assert vnni_bits("+avx512f,+avx512bw,-avx512vnni,-avxvnni") == 0


@pytest.mark.skipif("+avx2" not in host().features.split(","), reason="needs AVX2")
def test_micro_kernel_is_the_hosts_multiply_add():
    """The micro-kernel is the host's multiply-add: ``vpdpbusd`` on a VNNI host,
    ``vpmaddwd`` elsewhere (whichever the host's features allow)."""
    from wiadsl.backends.llvm.library_ir import optimized
    from wiadsl.backends.llvm.qgemm import qgemm_variant
    from wiadsl.backends.llvm.target import jit_machine
    asm = jit_machine().emit_assembly(optimized({"kind": "qgemm", "variant": qgemm_variant()}))
    allowed = madd_instructions(set(host().features.split(",")))
    counts = {name: asm.count(name) for name in allowed}
    assert sum(counts.values()) >= 8, counts  # the 4 x 2 (or 8 x 2) register block, at least once


@pytest.mark.parametrize("variant, cpu", [("vnni512", "sapphirerapids"), ("vnni256", "alderlake"),
                                          ("narrowable", "haswell"), ("pmaddwd", "x86-64-v2")])
def test_every_variants_helpers_compile_for_a_cpu_that_has_its_features(variant, cpu):
    """CHECK: the int8 GEMM helpers of every host kind (built once per host, library.py)
    optimize and compile for a CPU of that kind, exporting their symbols, whatever this
    host is (emitted, not run); the VNNI drivers multiply with vpdpbusd on their width."""
    import llvmlite.binding as llvm

    from wiadsl.backends.llvm.library import QGEMM_KINDS, pipeline, symbol
    from wiadsl.backends.llvm.library_ir import library_ir
    from wiadsl.backends.llvm.target import _pass_builder, parse_and_verify
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    machine = llvm.Target.from_triple(host().triple).create_target_machine(cpu=cpu, opt=3)
    for kind in QGEMM_KINDS:
        spec = {"kind": kind, "variant": variant}
        mod = parse_and_verify(library_ir(spec))
        pb = _pass_builder(machine, *pipeline(spec))  # target.optimize's pipeline, on that CPU
        pb.getModulePassManager().run(mod, pb)
        asm = machine.emit_assembly(mod)
        assert f"\n{symbol(spec)}:" in asm and f".globl\t{symbol(spec)}" in asm, kind
        if variant.startswith("vnni") and kind != "qgemm_prepack":
            register = "zmm" if variant == "vnni512" else "ymm"
            assert any("vpdpbusd" in line and register in line for line in asm.splitlines()), kind
