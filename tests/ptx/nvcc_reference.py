"""CUDA C references for the elementwise register comparison (``test_elementwise_registers``).

Each reference does the work of one WIA kernel per thread the way the emitter structures
it, as a CUDA programmer writes it for bandwidth: 16-byte loads and stores (8 halves or
4 floats a group; 16-bit math on ``__half2``/``__nv_bfloat162`` pairs), a grid-stride loop
over the groups with ``size_t`` indices (the WIA kernels are emitted with symbolic
shapes: 64-bit), then a scalar grid-stride tail. The math is the language's: every op
rounded (``__fmul_rn``, ``__hmul2_rn``...: nothing contracted into an fma), NaN-propagating
max, and exp/sigmoid by the emitter's own algorithm (``scalar_math.f_exp``), so that the
register counts compare code structure, not two different exp implementations.
"""

from __future__ import annotations

CTYPE = {"f32": "float", "f16": "__half", "bf16": "__nv_bfloat16"}
PAIR_TYPE = {"f16": "__half2", "bf16": "__nv_bfloat162"}
PACK2 = {"f16": "__floats2half2_rn", "bf16": "__floats2bfloat162_rn"}
TO_FLOAT = {"f16": "__half2float", "bf16": "__bfloat162float"}
FROM_FLOAT = {"f16": "__float2half_rn", "bf16": "__float2bfloat16_rn"}
OPS = ("add", "fma", "relu", "bcast", "cast", "exp", "sigmoid")
CASES = [(dt, op) for dt in ("f32", "f16", "bf16") for op in OPS]

PRELUDE = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

// exp as the emitter computes it (scalar_math.f_exp): clamp, Cody-Waite by ln2, a
// degree-7 polynomial in fma.rn, 2^j as two normal powers of two
__device__ __forceinline__ float wexp(float x) {
  float c = fminf(fmaxf(x, -104.f), 89.f);
  float j = rintf(__fmul_rn(c, 1.4426950408889634f));
  float r = __fmaf_rn(j, -0.693359375f, c);
  r = __fmaf_rn(j, 2.12194440e-4f, r);
  float z = __fmul_rn(r, r);
  float p = 1.9875691500e-4f;
  p = __fmaf_rn(p, r, 1.3981999507e-3f);
  p = __fmaf_rn(p, r, 8.3334519073e-3f);
  p = __fmaf_rn(p, r, 4.1665795894e-2f);
  p = __fmaf_rn(p, r, 1.6666665459e-1f);
  p = __fmaf_rn(p, r, 5.0000001201e-1f);
  p = __fmaf_rn(p, z, r);
  p = __fadd_rn(p, 1.f);
  int n = __float2int_rn(j), n1 = n >> 1, n2 = n - n1;
  return __fmul_rn(__fmul_rn(p, __int_as_float((n1 + 127) << 23)),
                   __int_as_float((n2 + 127) << 23));
}
__device__ __forceinline__ float wsigmoid(float x) {
  float e = wexp(-fabsf(x));
  return __fdiv_rn(x < 0.f ? e : 1.f, __fadd_rn(e, 1.f));
}
"""

#: one element of type T from elements {a} {b} {c} (f16/bf16: __half arithmetic)
SCALAR = {
    "f32": {"add": "__fadd_rn({a}, {b})", "fma": "__fadd_rn(__fmul_rn({a}, {b}), {a})",
            "relu": "fmaxf(__fadd_rn(__fmul_rn({a}, {b}), {c}), 0.f)",
            "exp": "wexp({a})", "sigmoid": "wsigmoid({a})"},
    **{dt: {"add": "__hadd_rn({a}, {b})", "fma": "__hadd_rn(__hmul_rn({a}, {b}), {a})",
            "relu": f"__hmax_nan(__hadd_rn(__hmul_rn({{a}}, {{b}}), {{c}}), {FROM_FLOAT[dt]}(0.f))",
            "exp": f"{FROM_FLOAT[dt]}(wexp({TO_FLOAT[dt]}({{a}})))",
            "sigmoid": f"{FROM_FLOAT[dt]}(wsigmoid({TO_FLOAT[dt]}({{a}})))"}
       for dt in ("f16", "bf16")},
}
#: two 16-bit lanes at once from pairs {a} {b} {c} (__half2 / __nv_bfloat162)
PAIR = {
    dt: {"add": "__hadd2_rn({a}, {b})", "fma": "__hadd2_rn(__hmul2_rn({a}, {b}), {a})",
         "relu": f"__hmax2_nan(__hadd2_rn(__hmul2_rn({{a}}, {{b}}), {{c}}), {PACK2[dt]}(0.f, 0.f))",
         "exp": f"{PACK2[dt]}(wexp(__low2float({{a}})), wexp(__high2float({{a}})))",
         "sigmoid": f"{PACK2[dt]}(wsigmoid(__low2float({{a}})), wsigmoid(__high2float({{a}})))"}
    for dt in ("f16", "bf16")
}
INPUTS = {"add": "ab", "fma": "ab", "relu": "abc", "exp": "a", "sigmoid": "a"}
WIA = {"add": "y = a + b;", "fma": "y = a * b + a;", "relu": "y = relu(a * b + c);",
       "exp": "y = exp(a);", "sigmoid": "y = sigmoid(a);"}


def wia_source(dt: str, op: str) -> str:
    """The WIA kernel ``k`` that reference ``ref_<dt>_<op>`` is compared with."""
    if op == "bcast":
        return f"kernel k(input a: {dt}[M, N], input b: {dt}[N], output y: {dt}[M, N]) {{ y = a + b; }}"
    if op == "cast":
        dst = cast_target(dt)
        return f"kernel k(input a: {dt}[N], output y: {dst}[N]) {{ y = cast(a, {dst}); }}"
    ins = ", ".join(f"input {x}: {dt}[N]" for x in INPUTS[op])
    return f"kernel k({ins}, output y: {dt}[N]) {{ {WIA[op]} }}"


def cast_target(dt: str) -> str:
    return "f16" if dt == "f32" else "f32"


def _entry(name: str, ins: str, t: str, out_t: str, extra: str = "") -> str:
    params = ", ".join(f"const {t}* __restrict__ {x}" for x in ins)
    return (f'extern "C" __global__ void {name}({params}, {out_t}* __restrict__ y, size_t n{extra}) {{\n'
            "  size_t gid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;\n"
            "  size_t stride = (size_t)gridDim.x * blockDim.x;\n")


def _math(dt: str, op: str) -> str:
    """y = op(a[, b, c]): 16-byte groups over a grid-stride loop, then a scalar tail."""
    t, ins = CTYPE[dt], INPUTS[op]
    lanes = 4 if dt == "f32" else 8
    src = _entry(f"ref_{dt}_{op}", ins, t, t) + f"  size_t groups = n / {lanes};\n"
    src += "  for (size_t g = gid; g < groups; g += stride) {\n    uint4 vy;\n"
    for x in ins:
        src += f"    uint4 v{x} = reinterpret_cast<const uint4*>({x})[g];\n"
    if dt == "f32":
        for x in ins + "y":
            src += f"    float* e{x} = reinterpret_cast<float*>(&v{x});\n"
        expr = SCALAR[dt][op].format(**{x: f"e{x}[k]" for x in "abc"})
        src += f"#pragma unroll\n    for (int k = 0; k < 4; k++) ey[k] = {expr};\n"
    else:
        for x in ins + "y":
            src += f"    {PAIR_TYPE[dt]}* e{x} = reinterpret_cast<{PAIR_TYPE[dt]}*>(&v{x});\n"
        expr = PAIR[dt][op].format(**{x: f"e{x}[k]" for x in "abc"})
        src += f"#pragma unroll\n    for (int k = 0; k < 4; k++) ey[k] = {expr};\n"
    src += "    reinterpret_cast<uint4*>(y)[g] = vy;\n  }\n"
    expr = SCALAR[dt][op].format(**{x: f"{x}[i]" for x in "abc"})
    src += f"  for (size_t i = groups * {lanes} + gid; i < n; i += stride) y[i] = {expr};\n}}\n"
    return src


def _broadcast(dt: str) -> str:
    """y[m, j] = a[m, j] + b[j] over a symbolic [M, N]: one element an iteration (the
    broadcast view is not dense, so neither side takes 16-byte accesses)."""
    add = SCALAR[dt]["add"].format(a="a[i]", b="b[i % cols]")
    return (_entry(f"ref_{dt}_bcast", "ab", CTYPE[dt], CTYPE[dt], ", size_t cols")
            + f"  for (size_t i = gid; i < n; i += stride) y[i] = {add};\n}}\n")


def _cast(src_t: str) -> str:
    """y = cast(a): 8 elements a group (16 bytes of the 16-bit side, 32 of the f32 side)."""
    dst_t = cast_target(src_t)
    body = _entry(f"ref_{src_t}_cast", "a", CTYPE[src_t], CTYPE[dst_t])
    body += "  size_t groups = n / 8;\n  for (size_t g = gid; g < groups; g += stride) {\n"
    if src_t == "f32":
        body += ("    float4 x0 = reinterpret_cast<const float4*>(a)[2 * g];\n"
                 "    float4 x1 = reinterpret_cast<const float4*>(a)[2 * g + 1];\n"
                 "    uint4 vy;\n    __half2* h = reinterpret_cast<__half2*>(&vy);\n"
                 "    h[0] = __floats2half2_rn(x0.x, x0.y); h[1] = __floats2half2_rn(x0.z, x0.w);\n"
                 "    h[2] = __floats2half2_rn(x1.x, x1.y); h[3] = __floats2half2_rn(x1.z, x1.w);\n"
                 "    reinterpret_cast<uint4*>(y)[g] = vy;\n  }\n")
        tail = "__float2half_rn(a[i])"
    else:
        p2 = PAIR_TYPE[src_t]
        conv = "__half22float2" if src_t == "f16" else "__bfloat1622float2"
        body += (f"    uint4 va = reinterpret_cast<const uint4*>(a)[g];\n"
                 f"    {p2}* h = reinterpret_cast<{p2}*>(&va);\n"
                 f"    float2 f0 = {conv}(h[0]), f1 = {conv}(h[1]);\n"
                 f"    float2 f2 = {conv}(h[2]), f3 = {conv}(h[3]);\n"
                 "    reinterpret_cast<float4*>(y)[2 * g] = make_float4(f0.x, f0.y, f1.x, f1.y);\n"
                 "    reinterpret_cast<float4*>(y)[2 * g + 1] = make_float4(f2.x, f2.y, f3.x, f3.y);\n"
                 "  }\n")
        tail = f"{TO_FLOAT[src_t]}(a[i])"
    return body + f"  for (size_t i = groups * 8 + gid; i < n; i += stride) y[i] = {tail};\n}}\n"


def cuda_source() -> str:
    """Every reference kernel (``ref_<dtype>_<op>`` for each of ``CASES``) as one file."""
    parts = [PRELUDE]
    for dt, op in CASES:
        parts.append(_broadcast(dt) if op == "bcast" else _cast(dt) if op == "cast"
                     else _math(dt, op))
    return "\n".join(parts)
