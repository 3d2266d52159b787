"""The NumPy reference numerics (LANGUAGE.md §7) and the parameter choice."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import wiadsl
from wiadsl.quant import params as qp


def test_quantize_rounds_half_to_even_and_clamps():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 1000.0, -1000.0, 0.49], np.float32)
    assert qp.quantize(x, np.float32(1.0), 0).tolist() == [0, 2, 2, 0, -2, 127, -128, 0]
    assert qp.quantize(x, np.float32(1.0), 3).tolist() == [3, 5, 5, 3, 1, 127, -128, 3]


def test_reference_matches_the_interpreter_and_cpu():
    src = """kernel rt(input x: f32[N], input s: f32, input z: i32, output q: i8[N], output f: f32[N]) {
        q = quantize(x, s, z);
        f = fake_quant(x, s, z);
    }"""
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.standard_normal(200).astype(np.float32) * 3,
                        np.array([0.125, 0.375, -0.625, 50.0], np.float32)])
    s, z = np.float32(0.25), np.int32(-3)
    for target in ("interp", "cpu"):
        q, f = wiadsl.jit(src, kernel="rt", target=target)(x, s, z)
        np.testing.assert_array_equal(q, qp.quantize(x, s, z))
        np.testing.assert_array_equal(f, qp.fake_quant(x, s, z))


@settings(max_examples=60, deadline=None)
@given(st.floats(-1e3, 0.0, allow_subnormal=False), st.floats(0.0, 1e3, allow_subnormal=False),
       st.booleans())
def test_choose_invariants(lo, hi, symmetric):
    scale, zp = qp.choose(lo, hi, symmetric)
    assert scale.dtype == np.float32 and scale > 0 and np.isfinite(scale)
    assert -128 <= int(zp) <= 127
    assert qp.quantize(np.float32(0.0), scale, zp) == zp        # 0.0 is exact
    if symmetric:
        assert zp == 0
    # the range ends land inside the int8 grid (within one step)
    for v in (lo, hi):
        back = qp.fake_quant(np.float32(v), scale, zp)
        assert abs(float(back) - v) <= float(scale) * 1.01 + 1e-6


def test_weight_params_per_channel():
    w = np.array([[1.0, -4.0], [0.5, 2.0]], np.float32)
    p = qp.weight_params(w, axis=1)
    np.testing.assert_allclose(p.scale, [1.0 / 127, 4.0 / 127], rtol=1e-6)
    assert p.scale_for(2).shape == (2,)
    assert qp.quantize(w, p.scale_for(2), 0).tolist() == [[127, -127], [64, 64]]
    pc = qp.weight_params(np.ones((3, 2, 1, 1), np.float32), axis=0)
    assert pc.scale.shape == (3,) and pc.broadcast_shape(4) == (3, 1, 1, 1)
