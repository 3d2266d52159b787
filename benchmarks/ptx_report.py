"""Regenerate benchmarks/ptx_report.md: our PTX beside nvcc -O3 PTX of equivalent CUDA C.

usage: PYTHONPATH=. python benchmarks/ptx_report.py [--arch sm_90]

Per kernel: registers, static shared memory, spills (ptxas -v) and static PTX
instruction counts, for our emitted kernel and for hand-written CUDA C compiled
with `nvcc -O3 -ptx`. Targets: within 1.5x of nvcc's registers, no spills for
elementwise, reduction and the 64x64-tile matmul.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from wiadsl.backends.ptx.emit import emit_ptx  # noqa: E402
from wiadsl.frontend.compile import compile_to_ir  # noqa: E402

CASES = [
    ("vector add", "kernel k(input a: f32[N], input b: f32[N], output y: f32[N]) { y = a + b; }",
     r"""extern "C" __global__ void k(const float* __restrict__ a, const float* __restrict__ b,
        float* __restrict__ y, unsigned n) {
      for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = a[i] + b[i]; }"""),
    ("relu(a*b+c)", "kernel k(input a: f32[N], input b: f32[N], input c: f32[N], output y: f32[N])"
     " { y = relu(a * b + c); }",
     r"""extern "C" __global__ void k(const float4* __restrict__ a, const float4* __restrict__ b,
        const float4* __restrict__ c, float4* __restrict__ y, unsigned n4) {
      for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
        float4 x = a[i], u = b[i], v = c[i], r;
        r.x = fmaxf(x.x * u.x + v.x, 0.f); r.y = fmaxf(x.y * u.y + v.y, 0.f);
        r.z = fmaxf(x.z * u.z + v.z, 0.f); r.w = fmaxf(x.w * u.w + v.w, 0.f); y[i] = r; } }"""),
    ("row sum", "kernel k(input a: f32[M, N], output y: f32[M]) { y = reduce_sum(a, axis=1); }",
     r"""extern "C" __global__ void k(const float* a, float* y, unsigned m, unsigned n) {
      __shared__ float red[32];
      for (unsigned r = blockIdx.x; r < m; r += gridDim.x) {
        float s = 0.f;
        for (unsigned c = threadIdx.x; c < n; c += blockDim.x) s += a[r * n + c];
        for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(~0u, s, o);
        if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = s;
        __syncthreads();
        if (threadIdx.x < 32) { s = threadIdx.x < blockDim.x / 32 ? red[threadIdx.x] : 0.f;
          for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(~0u, s, o);
          if (threadIdx.x == 0) y[r] = s; }
        __syncthreads(); } }"""),
    ("row softmax", "import nn;\nkernel k(input a: f32[M, N], output y: f32[M, N]) { y = nn.softmax(a); }",
     r"""__device__ float blockred(float v, bool mx, float* red) {
      for (int o = 16; o; o >>= 1) { float t = __shfl_xor_sync(~0u, v, o); v = mx ? fmaxf(v, t) : v + t; }
      if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
      __syncthreads();
      if (threadIdx.x < 32) { v = threadIdx.x < blockDim.x / 32 ? red[threadIdx.x] : (mx ? -INFINITY : 0.f);
        for (int o = 16; o; o >>= 1) { float t = __shfl_xor_sync(~0u, v, o); v = mx ? fmaxf(v, t) : v + t; }
        if (threadIdx.x == 0) red[0] = v; }
      __syncthreads(); v = red[0]; __syncthreads(); return v; }
    extern "C" __global__ void k(const float* a, float* y, unsigned m, unsigned n) {
      __shared__ float red[32];
      for (unsigned r = blockIdx.x; r < m; r += gridDim.x) {
        float mx = -INFINITY;
        for (unsigned c = threadIdx.x; c < n; c += blockDim.x) mx = fmaxf(mx, a[r * n + c]);
        mx = blockred(mx, true, red);
        float s = 0.f;
        for (unsigned c = threadIdx.x; c < n; c += blockDim.x) s += expf(a[r * n + c] - mx);
        s = blockred(s, false, red);
        for (unsigned c = threadIdx.x; c < n; c += blockDim.x) y[r * n + c] = expf(a[r * n + c] - mx) / s; } }"""),
    ("layer_norm", "import nn;\nkernel k(input a: f32[M, N], input g: f32[N], input b: f32[N],"
     " output y: f32[M, N]) { y = nn.layer_norm(a, g, b); }", None),
    ("matmul 64x64 tile", "kernel k(input a: f32[M, K], input b: f32[K, N], output y: f32[M, N]) { y = a @ b; }",
     r"""extern "C" __global__ void __launch_bounds__(256) k(const float* A, const float* B, float* C,
        int M, int N, int K) {
      __shared__ float As[16][64], Bs[16][64];
      int tx = threadIdx.x & 15, ty = threadIdx.x >> 4, m0 = blockIdx.y * 64, n0 = blockIdx.x * 64;
      float acc[4][4] = {};
      for (int k0 = 0; k0 < K; k0 += 16) {
        for (int j = 0; j < 4; ++j) { int e = threadIdx.x + j * 256;
          int r = e >> 4, kk = e & 15; As[kk][r] = (m0 + r < M && k0 + kk < K) ? A[(m0 + r) * K + k0 + kk] : 0.f;
          int kb = e >> 6, c = e & 63; Bs[kb][c] = (k0 + kb < K && n0 + c < N) ? B[(k0 + kb) * N + n0 + c] : 0.f; }
        __syncthreads();
        #pragma unroll
        for (int kk = 0; kk < 16; ++kk) {
          float4 a = *(float4*)&As[kk][ty * 4], b = *(float4*)&Bs[kk][tx * 4];
          float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
          #pragma unroll
          for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j) acc[i][j] += av[i] * bv[j]; }
        __syncthreads(); }
      for (int i = 0; i < 4; ++i) for (int j = 0; j < 4; ++j) {
        int r = m0 + ty * 4 + i, c = n0 + tx * 4 + j; if (r < M && c < N) C[r * N + c] = acc[i][j]; } }"""),
    ("matmul f16 (mma.sync)", "kernel k(input a: f16[M, K], input b: f16[K, N], output y: f16[M, N])"
     " { y = a @ b; }",
     r"""#include <mma.h>
    #include <cuda_fp16.h>
    using namespace nvcuda;
    extern "C" __global__ void __launch_bounds__(128) k(const half* A, const half* B, half* C,
        int M, int N, int K) {
      __shared__ __align__(32) half As[64][40], Bs[32][72];
      __shared__ __align__(32) float Cs[4][16][20];
      int w = threadIdx.x >> 5, wm = w >> 1, wn = w & 1, m0 = blockIdx.y * 64, n0 = blockIdx.x * 64;
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
      for (int i = 0; i < 2; ++i) for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.f);
      for (int k0 = 0; k0 < K; k0 += 32) {
        for (int e = threadIdx.x; e < 64 * 32; e += 128) { int r = e >> 5, c = e & 31;
          As[r][c] = (m0 + r < M && k0 + c < K) ? A[(m0 + r) * K + k0 + c] : __float2half(0.f);
          int kr = e >> 6, nc = e & 63;
          Bs[kr][nc] = (k0 + kr < K && n0 + nc < N) ? B[(k0 + kr) * N + n0 + nc] : __float2half(0.f); }
        __syncthreads();
        for (int ks = 0; ks < 32; ks += 16) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa[2];
          wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> fb[2];
          for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], &As[wm * 32 + i * 16][ks], 40);
          for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], &Bs[ks][wn * 32 + j * 16], 72);
          for (int i = 0; i < 2; ++i) for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]); }
        __syncthreads(); }
      for (int i = 0; i < 2; ++i) for (int j = 0; j < 2; ++j) {
        wmma::store_matrix_sync(&Cs[w][0][0], acc[i][j], 20, wmma::mem_row_major);
        __syncwarp();
        for (int e = threadIdx.x & 31; e < 256; e += 32) { int r = m0 + wm * 32 + i * 16 + (e >> 4),
          c = n0 + wn * 32 + j * 16 + (e & 15); if (r < M && c < N) C[r * N + c] = __float2half(Cs[w][e >> 4][e & 15]); }
        __syncwarp(); } }"""),
    ("matmul f16 4096^2 (static: cp.async)", "kernel k(input a: f16[M, K], input b: f16[K, N],"
     " output y: f16[M, N]) { y = a @ b; }", None, {"a": (4096, 4096), "b": (4096, 4096)}),
    ("conv2d 3x3 (implicit GEMM)", "kernel k(input x: f32[N, C, H, W], input w: f32[O, C, 3, 3],"
     " output y: f32[N, O, H, W]) { y = conv2d(x, w, padding=1); }", None),
    ("conv2d f16 (implicit GEMM, mma)", "kernel k(input x: f16[N, C, H, W], input w: f16[O, C, 3, 3],"
     " output y: f16[N, O, H, W]) { y = conv2d(x, w, padding=1); }", None),
    ("full sum (two-pass)", "kernel k(input a: f32[N], output y: f32) { y = reduce_sum(a); }", None),
    ("matmul+bias+relu", "kernel k(input a: f32[M, K], input b: f32[K, N], input c: f32[N],"
     " output y: f32[M, N]) { y = relu(a @ b + c); }", None),
    ("int8 matmul", "kernel k(input a: i8[M, K], input b: i8[K, N], output y: i32[M, N]) {"
     " y = cast(a, i32) @ cast(b, i32); }", None),
]

RE_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
RE_FRAME = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
RE_USED = re.compile(r"Used (\d+) registers")
RE_SMEM = re.compile(r"(\d+) bytes smem")


def run_ptxas(ptxas: str, text: str, arch: str) -> tuple[int, str]:
    """``ptxas -v`` on ``text`` for ``arch``: (exit status, its log)."""
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "k.ptx")
        Path(src).write_text(text)
        p = subprocess.run([ptxas, "-v", "--gpu-name", arch, src, "-o", os.path.join(d, "k.cubin")],
                           capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def ptxas_stats(ptxas: str, text: str, arch: str) -> dict[str, dict]:
    rc, log = run_ptxas(ptxas, text, arch)
    if rc != 0:
        raise RuntimeError(f"ptxas failed:\n{log}")
    out = parse_log(log)
    for name, body in entry_bodies(text):
        if name in out:
            out[name]["instr"] = sum(1 for s in body.split(";") if _is_instr(s))
    return out


def parse_log(log: str) -> dict[str, dict]:
    """kernel name -> {"regs", "smem", "spill"} (spill: store + load bytes) of a ptxas -v log."""
    out, cur = {}, None
    for line in log.splitlines():
        m = RE_ENTRY.search(line)
        if m:
            cur = out.setdefault(m.group(1), {"regs": 0, "smem": 0, "spill": 0})
        if cur is None:
            continue
        if (m := RE_FRAME.search(line)):
            cur["spill"] = int(m.group(1)) + int(m.group(2))
        if (m := RE_USED.search(line)):
            cur["regs"] = int(m.group(1))
            s = RE_SMEM.search(line)
            cur["smem"] = int(s.group(1)) if s else 0
    return out


def entry_bodies(text: str):
    for m in re.finditer(r"\.entry\s+(\w+)\s*\(", text):
        start = text.index("{", m.end())
        depth, j = 0, start
        while j < len(text):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            if depth == 0:
                break
            j += 1
        yield m.group(1), re.sub(r"//[^\n]*", "", text[start + 1:j])


def _is_instr(stmt: str) -> bool:
    s = re.sub(r"^\s*(\$?\w+:\s*)+", "", stmt.strip()).strip()
    s = re.sub(r"^@!?%?\w+\s+", "", s)
    return bool(s) and not s.startswith((".", "{", "}")) and re.match(r"[a-z]", s) is not None


def nvcc_ptx(nvcc: str, source: str, arch: str) -> str:
    with tempfile.TemporaryDirectory() as d:
        cu, out = os.path.join(d, "k.cu"), os.path.join(d, "k.ptx")
        Path(cu).write_text("#include <math_constants.h>\n#define INFINITY CUDART_INF_F\n" + source)
        subprocess.run([nvcc, f"-arch={arch}", "-O3", "-ptx", cu, "-o", out], check=True,
                       capture_output=True, text=True)
        return Path(out).read_text()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("-o", "--output", default=str(ROOT / "benchmarks" / "ptx_report.md"))
    args = ap.parse_args(argv)
    ptxas, nvcc = shutil.which("ptxas"), shutil.which("nvcc")
    if not ptxas:
        print("ptx_report: ptxas not found", file=sys.stderr)
        return 2
    rows = []
    for title, wia, cuda, *shapes in CASES:
        text, plan = emit_ptx(compile_to_ir(wia, "<report>"), "k", args.arch, *shapes)
        ours = ptxas_stats(ptxas, text, args.arch)
        kinds = {k["name"]: k["kind"] for k in plan["kernels"]}
        ref = {}
        if cuda and nvcc:
            ref = next(iter(ptxas_stats(ptxas, nvcc_ptx(nvcc, cuda, args.arch), args.arch).values()))
        for name, st in ours.items():
            ratio = f"{st['regs'] / ref['regs']:.2f}" if ref.get("regs") else "-"
            rows.append(f"| {title} | {kinds[name]} | {st['regs']} | {st['smem']} | {st['spill']} | "
                        f"{st.get('instr', '-')} | {ref.get('regs', '-')} | {ref.get('smem', '-')} | "
                        f"{ref.get('spill', '-')} | {ref.get('instr', '-')} | {ratio} |")
    lines = [
        "# PTX report: our kernels beside nvcc -O3",
        "",
        f"Regenerate: `PYTHONPATH=. python benchmarks/ptx_report.py --arch {args.arch}` "
        "(needs ptxas; the nvcc columns need nvcc). Shapes are symbolic (sizes are kernel "
        "parameters) unless the title says static; the CUDA C references are hand-written equivalents (same algorithm: "
        "grid-stride loops, float4 for the fused chain, shuffles + shared memory for rows, "
        "64x64 tiles with 4x4 per thread; for f16, WMMA 16x16x16 on 64x64 tiles with 4 warps, "
        "the same shape as our `mma.sync` m16n8k16 kernel). Our softmax/layer_norm rows are "
        "single-pass (`row(1-pass)`: the row is cached in shared memory, hence the larger smem; "
        "the nvcc softmax reference re-reads the row three times). instr = static PTX "
        "instructions.",
        "",
        "| kernel | kind | regs | smem B | spill B | instr | nvcc regs | nvcc smem | nvcc spill "
        "| nvcc instr | regs ratio |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *rows, "",
    ]
    Path(args.output).write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
