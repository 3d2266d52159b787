"""Instruction semantics on hand-written PTX: rounding, saturation, NaNs, bit ops, packing."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from wiadsl.backends.ptx.sim import launch

from .handwritten import ELEMENTWISE, FEATURES, HEADER

NAN = float("nan")
INT_MAX, INT_MIN = 2**31 - 1, -(2**31)
_REG = {"f32": "f32", "f64": "f64", "s32": "b32", "u32": "b32", "b32": "b32", "s64": "b64",
        "u64": "b64", "b64": "b64", "b16": "b16"}
_NP = {"f32": np.float32, "f64": np.float64, "s32": np.int32, "u32": np.uint32, "b32": np.uint32,
       "s64": np.int64, "u64": np.uint64, "b64": np.uint64, "b16": np.uint16}


def u32(x):
    return x & 0xFFFFFFFF


def _mulhi(a, b, bits, signed):
    return ((a * b) >> bits) & ((1 << bits) - 1) if not signed else (a * b) >> bits


def _prmt(a, b, s):
    v = a | b << 32
    out = 0
    for k in range(4):
        sel = s >> 4 * k & 0xF
        byte = v >> 8 * (sel & 7) & 0xFF
        if sel & 8:
            byte = 0xFF if byte & 0x80 else 0
        out |= byte << 8 * k
    return out


F16_ONE_PLUS = 1 + 2**-11 + 2**-20
# (body, a type, d type, a values, b values, expected d values)
CASES = {
    "cvt_rzi": ("cvt.rzi.s32.f32 %d, %a;", "f32", "s32",
                [1.5, -1.5, 2.5, -2.7, 3e9, -3e9, NAN, 0.49], None,
                [1, -1, 2, -2, INT_MAX, INT_MIN, 0, 0]),
    "cvt_rni": ("cvt.rni.s32.f32 %d, %a;", "f32", "s32",
                [1.5, -1.5, 2.5, -2.7, 3e9, -3e9, NAN, 0.49], None,
                [2, -2, 2, -3, INT_MAX, INT_MIN, 0, 0]),
    "cvt_rmi": ("cvt.rmi.s32.f32 %d, %a;", "f32", "s32", [1.5, -1.5, 2.5, -2.7], None,
                [1, -2, 2, -3]),
    "cvt_rpi": ("cvt.rpi.s32.f32 %d, %a;", "f32", "s32", [1.5, -1.5, 2.5, 0.49], None,
                [2, -1, 3, 1]),
    "cvt_u32_neg": ("cvt.rzi.u32.f32 %d, %a;", "f32", "u32", [-1.5, 1.5, 5e9], None,
                    [0, 1, 2**32 - 1]),
    "cvt_sat_f32": ("cvt.sat.f32.f32 %d, %a;", "f32", "f32", [-1.0, 0.5, 2.0, NAN], None,
                    [0.0, 0.5, 1.0, 0.0]),
    "cvt_rn_f16": ("cvt.rn.f16.f32 %d, %a;", "f32", "b16", [F16_ONE_PLUS, 70000.0, -0.0], None,
                   [0x3C01, 0x7C00, 0x8000]),
    "cvt_rz_f16": ("cvt.rz.f16.f32 %d, %a;", "f32", "b16", [F16_ONE_PLUS, 70000.0], None,
                   [0x3C00, 0x7BFF]),
    "cvt_sat_u8": ("cvt.sat.u8.s32 %d, %a;", "s32", "u32", [-5, 100, 300], None, [0, 100, 255]),
    "cvt_rn_bf16": ("cvt.rn.bf16.f32 %d, %a;", "f32", "b16", [1.0, 1 + 2**-8, 1 + 2**-8 + 2**-9],
                    None, [0x3F80, 0x3F80, 0x3F81]),
    "cvt_f16x2": ("cvt.rn.f16x2.f32 %d, %a, %b;", "f32", "b32", [1.0, -2.0], [0.5, 65504.0],
                  [0x3C003800, 0xC0007BFF]),
    # set: a mask per packed half (low half = first lane), all ones or 1.0 for a scalar
    "set_lt_f16x2": ("set.lt.u32.f16x2 %d, %a, %b;", "b32", "u32",
                     [0x7E003C00, 0xFC008000], [0x3C004000, 0x7BFF0000],
                     [0x0000FFFF, 0xFFFF0000]),
    "set_gt_f32": ("set.gt.u32.f32 %d, %a, %b;", "f32", "u32", [1.0, NAN, 2.0], [0.5, 1.0, 2.0],
                   [0xFFFFFFFF, 0, 0]),
    "set_equ_f32_to_f32": ("set.equ.f32.f32 %d, %a, %b;", "f32", "f32", [1.0, NAN, 2.0],
                           [1.0, 1.0, 3.0], [1.0, 1.0, 0.0]),
    "max_nan_f16x2": ("max.NaN.f16x2 %d, %a, %b;", "b32", "b32", [0xFC003C00], [0xC2004000],
                      [0xC2004000]),
    # a bf16 product by fma with -0.0 (bf16 mul below sm_90): rounded once, -0 kept
    "fma_bf16x2_times": ("mov.b32 %t1, 0x80008000; fma.rn.bf16x2 %d, %a, %b, %t1;", "b32", "b32",
                         [0x00003F81], [0xC0A03F81], [0x80003F82]),
    "add_rp": ("add.rp.f32 %d, %a, %b;", "f32", "f32", [1.0, -1.0], [2**-30, -(2**-30)],
               [float(np.nextafter(np.float32(1), np.float32(2))), -1.0]),
    "add_rm": ("add.rm.f32 %d, %a, %b;", "f32", "f32", [1.0, -1.0], [2**-30, -(2**-30)],
               [1.0, float(np.nextafter(np.float32(-1), np.float32(-2)))]),
    "add_rz": ("add.rz.f32 %d, %a, %b;", "f32", "f32", [1.0, -1.0], [2**-30, -(2**-30)], [1.0, -1.0]),
    "fma_exact": ("fma.rn.f32 %d, %a, %a, %b;", "f32", "f32", [1 + 2**-12], [-(1 + 2**-11)],
                  [2**-24]),
    "sat_add_s32": ("add.sat.s32 %d, %a, %b;", "s32", "s32", [INT_MAX, INT_MIN, 5], [1, -1, 6],
                    [INT_MAX, INT_MIN, 11]),
    "div_s32": ("div.s32 %d, %a, %b;", "s32", "s32", [7, -7, 7, -7], [2, 2, -2, -2], [3, -3, -3, 3]),
    "rem_s32": ("rem.s32 %d, %a, %b;", "s32", "s32", [7, -7, 7, -7], [2, 2, -2, -2], [1, -1, 1, -1]),
    "mulhi_s32": ("mul.hi.s32 %d, %a, %b;", "s32", "s32", [INT_MIN, -3, 123456789],
                  [INT_MIN, 5, -987654321],
                  [_mulhi(INT_MIN, INT_MIN, 32, True), -1, _mulhi(123456789, -987654321, 32, True)]),
    "mulhi_u64": ("mul.hi.u64 %d, %a, %b;", "u64", "u64", [2**64 - 1, 3 << 40], [2**64 - 1, 5 << 40],
                  [_mulhi(2**64 - 1, 2**64 - 1, 64, False), _mulhi(3 << 40, 5 << 40, 64, False)]),
    "mulhi_s64": ("mul.hi.s64 %d, %a, %b;", "s64", "s64", [-(2**62), -3], [2**62 + 7, 5],
                  [(-(2**62) * (2**62 + 7)) >> 64, -1]),
    "shr_s32_big": ("shr.s32 %d, %a, %b;", "s32", "s32", [-8, -8, 8], [40, 1, 40], [-1, -4, 0]),
    "shl_big": ("shl.b32 %d, %a, %b;", "b32", "b32", [1, 1], [33, 31], [0, 2**31]),
    "bfe_u32": ("bfe.u32 %d, %a, 4, 8;", "u32", "u32", [0xABCDEF12], None, [0xF1]),
    "bfe_s32": ("bfe.s32 %d, %a, 4, 8;", "s32", "s32", [0x00000F10, 0x00000710], None, [-15, 0x71]),
    "bfi": ("bfi.b32 %d, %a, %b, 8, 8;", "b32", "b32", [0xAB], [0x11223344], [0x1122AB44]),
    "prmt": ("prmt.b32 %d, %a, %b, 0x0123;", "b32", "b32", [0x11223344], [0], [0x44332211]),
    "prmt_sign": ("prmt.b32 %d, %a, %b, 0x8888;", "b32", "b32", [0x80, 0x7F], [0, 0],
                  [0xFFFFFFFF, 0]),
    "prmt_mix": ("prmt.b32 %d, %a, %b, 0x5140;", "b32", "b32", [0x11223344], [0xAABBCCDD],
                 [_prmt(0x11223344, 0xAABBCCDD, 0x5140)]),
    "lop3_xor3": ("lop3.b32 %d, %a, %b, 0x0F0F0F0F, 0x96;", "b32", "b32", [0x12345678], [0xFFFF0000],
                  [0x12345678 ^ 0xFFFF0000 ^ 0x0F0F0F0F]),
    "popc_b64": ("popc.b64 %t1, %a; cvt.u64.u32 %d, %t1;", "b64", "b64", [2**64 - 1, 5], None,
                 [64, 2]),
    "clz_b64": ("clz.b64 %t1, %a; cvt.u64.u32 %d, %t1;", "b64", "b64", [1, 0, 2**63], None,
                [63, 64, 0]),
    "brev_b32": ("brev.b32 %d, %a;", "b32", "b32", [1, 0x80000000, 0x12345678], None,
                 [0x80000000, 1, int(f"{0x12345678:032b}"[::-1], 2)]),
    "shf_l_wrap": ("shf.l.wrap.b32 %d, %a, %b, 36;", "b32", "b32", [0xF0000000], [0x1],
                   [u32((0x1 << 4) | (0xF0000000 >> 28))]),
    "shf_r_clamp": ("shf.r.clamp.b32 %d, %a, %b, 40;", "b32", "b32", [0x1234], [0xABCD], [0xABCD]),
    "setp_gtu_nan": ("setp.gtu.f32 %p, %a, %b; selp.u32 %d, 1, 0, %p;", "f32", "u32",
                     [NAN, 1.0, 1.0], [1.0, 2.0, 0.0], [1, 0, 1]),
    "setp_gt_nan": ("setp.gt.f32 %p, %a, %b; selp.u32 %d, 1, 0, %p;", "f32", "u32",
                    [NAN, 1.0, 1.0], [1.0, 2.0, 0.0], [0, 0, 1]),
    "setp_ne_nan": ("setp.ne.f32 %p, %a, %b; selp.u32 %d, 1, 0, %p;", "f32", "u32",
                    [NAN, 1.0], [1.0, 2.0], [0, 1]),
    "setp_neu_nan": ("setp.neu.f32 %p, %a, %b; selp.u32 %d, 1, 0, %p;", "f32", "u32",
                     [NAN, 1.0], [1.0, 1.0], [1, 0]),
    "setp_num_nan": ("setp.num.f32 %p, %a, %b; setp.nan.f32 %q, %a, %b; "
                     "selp.u32 %d, 1, 0, %p; selp.u32 %t1, 2, 0, %q; add.u32 %d, %d, %t1;",
                     "f32", "u32", [NAN, 1.0], [1.0, 1.0], [2, 1]),
    "setp_pair_and": ("setp.lt.and.s32 %p|%q, %a, %b, 1; selp.u32 %d, 1, 0, %p; "
                      "selp.u32 %t1, 2, 0, %q; add.u32 %d, %d, %t1;", "s32", "u32",
                      [1, 3], [2, 2], [1, 2]),
    "setp_lo_unsigned": ("setp.lo.u32 %p, %a, %b; selp.u32 %d, 1, 0, %p;", "u32", "u32",
                         [1, 2**32 - 1], [2**32 - 1, 1], [1, 0]),
    "min_nan": ("min.f32 %d, %a, %b;", "f32", "f32", [NAN, 1.0], [2.0, NAN], [2.0, 1.0]),
    "max_nan_prop": ("max.NaN.f32 %d, %a, %b;", "f32", "f32", [NAN, 1.0], [2.0, 3.0], [NAN, 3.0]),
    "abs_neg": ("abs.s32 %d, %a; neg.s32 %d, %d;", "s32", "s32", [INT_MIN, -5, 5],
                None, [INT_MIN, -5, -5]),
    "copysign": ("copysign.f32 %d, %a, %b;", "f32", "f32", [-1.0, 1.0], [2.0, -3.0], [-2.0, 3.0]),
    "div_rn": ("div.rn.f32 %d, %a, %b;", "f32", "f32", [1.0, 2.0], [3.0, 7.0],
               [float(np.float32(1) / np.float32(3)), float(np.float32(2) / np.float32(7))]),
    "sqrt_rcp": ("sqrt.rn.f32 %d, %a; rcp.rn.f32 %d, %d;", "f32", "f32", [4.0, 2.0], None,
                 [0.5, float(np.float32(1) / np.sqrt(np.float32(2)))]),
    "mul_wide_u32": ("mul.wide.u32 %d, %a, %b;", "u32", "u64", [2**32 - 1], [2**32 - 1],
                     [(2**32 - 1) ** 2]),
    "slct": ("slct.s32.s32 %d, %a, %b, %a;", "s32", "s32", [-1, 4], [9, 9], [9, 4]),
    "selp_f64": ("setp.lt.f64 %p, %a, %b; selp.f64 %d, %a, %b, %p;", "f64", "f64",
                 [1.0, 5.0], [2.0, 3.0], [1.0, 3.0]),
    "testp": ("testp.notanumber.f32 %p, %a; selp.u32 %d, 1, 0, %p;", "f32", "u32",
              [NAN, 1.0], None, [1, 0]),
}

APPROX = {
    "ex2": ("ex2.approx.f32 %d, %a;", np.exp2),
    "lg2": ("lg2.approx.f32 %d, %a;", np.log2),
    "sin": ("sin.approx.f32 %d, %a;", np.sin),
    "cos": ("cos.approx.f32 %d, %a;", np.cos),
    "tanh": ("tanh.approx.f32 %d, %a;", np.tanh),
    "rsqrt": ("rsqrt.approx.f32 %d, %a;", lambda x: 1 / np.sqrt(x)),
}


def kernel_ptx(name, body, at, dt):
    return ELEMENTWISE.format(name=name, areg=_REG[at], dreg=_REG[dt], asize=np.dtype(_NP[at]).itemsize,
                              dsize=np.dtype(_NP[dt]).itemsize, aty=at, dty=dt, body=body)


def _values(vals, t):
    """Python numbers as an array of PTX type ``t`` (integers wrap modulo 2^bits)."""
    if t.startswith("f"):
        return np.array(vals, _NP[t])
    bits = np.dtype(_NP[t]).itemsize * 8
    unsigned = np.array([v % (1 << bits) for v in vals], np.uint64)
    return unsigned.astype(f"u{bits // 8}").view(_NP[t])


def run_case(name, body, at, dt, a, b):
    ptx = HEADER + kernel_ptx(name, body, at, dt)
    av = _values(a, at)
    bv = _values(b if b is not None else [0] * len(a), at)
    d = np.zeros(len(a), _NP[dt])
    launch(ptx, name, 1, 32, [av, bv, d, len(a)])
    return d


@pytest.mark.parametrize("name", sorted(CASES))
def test_instruction(name):
    body, at, dt, a, b, expected = CASES[name]
    d = run_case(name, body, at, dt, a, b)
    np.testing.assert_array_equal(d, _values(expected, dt), err_msg=f"{name}: {body}")


@pytest.mark.parametrize("name", sorted(APPROX))
def test_approx_transcendentals(name):
    body, ref = APPROX[name]
    x = np.array([0.1, 0.5, 1.0, 2.5, 7.0], np.float32)
    d = run_case(name, body, "f32", "f32", list(x), None)
    np.testing.assert_allclose(d, ref(x).astype(np.float32), rtol=2e-6, atol=1e-6)


def test_features_module():
    """Module variables, dynamic shared, vectors, scopes, local memory, guards, comments."""
    n, nt = 45, 64
    x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    y = np.zeros(n, np.float32)
    launch(FEATURES, "feat", 1, nt, [x, y, n], shared_bytes=8 * nt)
    xs = np.zeros(nt, np.float32)
    xs[:n] = x
    t = np.arange(nt)
    nb = xs[(t + 1) % nt]
    ref = (nb + (nb + nb) * np.float32(2)) + np.array([1, 2, 3, 4], np.float32)[t % 4]
    ref = ref + (t * 0.5).astype(np.float32)
    np.testing.assert_array_equal(y, ref[:n])


def test_handwritten_ptx_assembles(ptxas, tmp_path):
    """Every hand-written module is real PTX: ptxas accepts it for sm_80."""
    kernels = [kernel_ptx(n, c[0], c[1], c[2]) for n, c in CASES.items()]
    kernels += [kernel_ptx(n, c[0], "f32", "f32") for n, c in APPROX.items()]
    for i, text in enumerate([FEATURES, HEADER + "\n".join(kernels)]):
        path = tmp_path / f"m{i}.ptx"
        path.write_text(text)
        r = subprocess.run([ptxas, "--gpu-name", "sm_80", str(path), "-o", str(tmp_path / "o.cubin")],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
