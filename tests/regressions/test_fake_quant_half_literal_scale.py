"""fake_quant of an f16 (or bf16) tensor with a literal scale follows the contract,
``dequantize(quantize(x))``: the quantize half divides by the scale in x's dtype,
the dequantize half multiplies by it in f32 (LANGUAGE.md, quantization).

Found by the fuzzer (seed 4160000000400, NumPy evaluator against the interpreter):
``cast(1e38, f32) % fake_quant(x, 0.1, -128)`` differed, because the compiler used the
f16-rounded scale in both halves. At x = 1.25: 12 * f16(0.1) = 1.19970703 rounds (a
tie) to f16 1.1992188, where 12 * f32(0.1) = 1.2 gives f16 1.2001953; the remainder by
that divisor is hypersensitive to its last bit."""

from __future__ import annotations

import numpy as np
import pytest

import wiadsl

SRC = """
kernel fq(input x: f16[N], output y: f16[N]) { y = fake_quant(x, 0.1, -128); }
kernel fq_bf(input x: f32[N], output y: f32[N]) {
    y = cast(fake_quant(cast(x, bf16), 0.1, -128), f32);
}
kernel fq_s(input x: f16, output y: f16) { y = fake_quant(x, 0.1, -128); }
"""


def want(x: np.ndarray, dtype: object) -> np.ndarray:
    """The contract in NumPy: x / scale in x's dtype, rint, + zp, clamp; then
    (q - zp) * scale in f32, stored in x's dtype."""
    scale_x = np.asarray(0.1).astype(dtype)
    q = np.clip(np.rint((x / scale_x).astype(dtype)).astype(np.float32) - 128, -128, 127)
    return ((q + 128) * np.float32(0.1)).astype(dtype)


@pytest.mark.parametrize("target", ["interp", "cpu"])
def test_f16_fake_quant_uses_the_f32_scale_to_dequantize(target: str) -> None:
    mod = wiadsl.jit(SRC, target=target)
    x = (np.arange(-40, 40, dtype=np.float32) / 8).astype(np.float16)  # includes 1.25
    got = mod.fq(x)
    np.testing.assert_array_equal(got, want(x, np.float16))
    assert got[x == np.float16(1.25)][0] == np.float16(1.2)  # not f16(12 * f16(0.1))
    assert mod.fq_s(np.float16(1.25)) == np.float16(1.2)


@pytest.mark.parametrize("target", ["interp", "cpu"])
def test_bf16_fake_quant_matches_the_contract(target: str) -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    mod = wiadsl.jit(SRC, target=target)
    x = np.arange(-40, 40, dtype=np.float32) / 8  # exact in bf16
    got = mod.fq_bf(x)
    np.testing.assert_array_equal(got, want(x.astype(ml_dtypes.bfloat16), ml_dtypes.bfloat16)
                                  .astype(np.float32))
