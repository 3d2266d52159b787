"""The CPU int8 GEMM (``loop.qgemm``): exact against NumPy, and really ``vpmaddwd``
(or, on a VNNI host, ``vpdpwssd``)."""

import numpy as np
import pytest

import wiadsl
from wiadsl.backends.llvm.target import host

SRC = "kernel mm(input a: i8[M, K], input b: i8[K, N], output c: i32[M, N]) { c = cast(a, i32) @ cast(b, i32); }"


@pytest.fixture(scope="module")
def mm():
    return wiadsl.jit(SRC, kernel="mm", target="cpu")


# odd k (pair padding), column tails, 1-row tails, k blocks (> 512), threaded row splits (m = 97)
@pytest.mark.parametrize("shape", [(1, 1, 1), (5, 7, 3), (33, 65, 17), (97, 512, 33), (40, 1025, 20), (16, 0, 5)])
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


def madd_instructions(features: set[str]) -> tuple[str, ...]:
    """The instructions LLVM may legitimately pick for the micro-kernel's multiply-add
    of i16 pairs on a host with ``features``: ``vpmaddwd`` (then an add), or with VNNI
    the fused ``vpdpwssd`` (issue 17: a VNNI host got only that)."""
    if {"+avxvnni", "+avx512vnni"} & features:
        return ("vpmaddwd", "vpdpwssd")
    return ("vpmaddwd",)


def test_madd_instructions_follow_the_host_features():
    assert madd_instructions({"+avx2"}) == ("vpmaddwd",)
    assert "vpdpwssd" in madd_instructions({"+avx2", "+avxvnni"})
    assert "vpdpwssd" in madd_instructions({"+avx512f", "+avx512vnni"})


@pytest.mark.skipif("+avx2" not in host().features.split(","), reason="needs AVX2")
def test_micro_kernel_is_vpmaddwd():
    """The micro-kernel is pair multiply-adds: ``vpmaddwd``, or on a VNNI host the
    fused ``vpdpwssd`` LLVM may pick instead (whichever the host's features allow)."""
    from wiadsl.backends.llvm.compile import build, lower_kernel
    from wiadsl.backends.llvm.target import engine
    from wiadsl.passes import optimize
    module = optimize(wiadsl.jit(SRC, kernel="mm").ir_for(), 3)
    asm = engine().tm.emit_assembly(build(lower_kernel(module, "mm", [(64, 64), (64, 64)])))
    allowed = madd_instructions(set(host().features.split(",")))
    counts = {name: asm.count(name) for name in allowed}
    assert sum(counts.values()) >= 8, counts  # the 4 x 2 register block, at least once
