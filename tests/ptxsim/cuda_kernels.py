"""CUDA C kernels compiled with ``nvcc -arch=sm_80 -ptx -O3`` (once per test session).

Every kernel is ``extern "C"`` so its PTX entry name is the C name.
"""

CUDA_SOURCE = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <climits>

extern "C" __global__ void vadd(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

extern "C" __global__ void vadd4(const float* __restrict__ a, const float* __restrict__ b,
                                 float* __restrict__ c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (4 * i + 3 < n) {
    float4 x = reinterpret_cast<const float4*>(a)[i], y = reinterpret_cast<const float4*>(b)[i];
    reinterpret_cast<float4*>(c)[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  } else {
    for (int j = 4 * i; j < n; j++) c[j] = a[j] + b[j];
  }
}

extern "C" __global__ void relu_fma(const float* __restrict__ a, const float* __restrict__ b,
                                    const float* __restrict__ c, float* __restrict__ o, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    o[i] = fmaxf(a[i] * b[i] + c[i], 0.f);
}

extern "C" __global__ void softmax(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  __shared__ float red[32];
  int row = blockIdx.x;
  if (row >= rows) return;
  const float* xr = x + (size_t)row * cols;
  float* yr = y + (size_t)row * cols;
  int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
  float m = -INFINITY;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, xr[j]);
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, o));
  if (lane == 0) red[w] = m;
  __syncthreads();
  m = lane < nw ? red[lane] : -INFINITY;
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, o));
  __syncthreads();
  float s = 0.f;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) s += __expf(xr[j] - m);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
  if (lane == 0) red[w] = s;
  __syncthreads();
  s = lane < nw ? red[lane] : 0.f;
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
  float inv = 1.f / s;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = __expf(xr[j] - m) * inv;
}

extern "C" __global__ void rsum(const float* x, float* out, int n) {
  __shared__ float sm[256];
  float s = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) s += x[i];
  sm[threadIdx.x] = s;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) sm[threadIdx.x] += sm[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, sm[0]);
}

#define T 64
extern "C" __global__ void matmul(const float* __restrict__ A, const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[16][T];
  __shared__ float Bs[16][T];
  int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  int row0 = blockIdx.y * T, col0 = blockIdx.x * T;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < K; k0 += 16) {
    for (int i = threadIdx.x; i < 16 * T; i += 256) {
      int r = i / 16, c = i % 16, gr = row0 + r, gc = k0 + c;
      As[c][r] = (gr < M && gc < K) ? A[(size_t)gr * K + gc] : 0.f;
    }
    for (int i = threadIdx.x; i < 16 * T; i += 256) {
      int r = i / T, c = i % T, gr = k0 + r, gc = col0 + c;
      Bs[r][c] = (gr < K && gc < N) ? B[(size_t)gr * N + gc] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < 16; kk++) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; i++) { a[i] = As[kk][ty * 4 + i]; b[i] = Bs[kk][tx * 4 + i]; }
#pragma unroll
      for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) {
      int r = row0 + ty * 4 + i, c = col0 + tx * 4 + j;
      if (r < M && c < N) C[(size_t)r * N + c] = acc[i][j];
    }
}

extern "C" __global__ void f16conv(const float* x, __half* h, float* back, __nv_bfloat16* bf,
                                   float* bfback, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    __half v = __float2half(x[i]);
    h[i] = v;
    back[i] = __half2float(__hadd(v, v));
    __nv_bfloat16 b = __float2bfloat16(x[i]);
    bf[i] = b;
    bfback[i] = __bfloat162float(b) * 2.f;
  }
}

extern "C" __global__ void i8dot(const signed char* a, const signed char* b, int* out,
                                 const float* f, signed char* q, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const int* a4 = (const int*)a;
    const int* b4 = (const int*)b;
    out[i] = __dp4a(a4[i], b4[i], 0) + (int)a[i] * (int)b[i];
    q[i] = (signed char)max(-128, min(127, __float2int_rn(f[i] * 10.f)));
  }
}

extern "C" __global__ void diverge(const int* x, int* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int v = x[i];
  if (v % 3 == 0) {
    for (int k = 0; k < v % 7; k++) v = v * 3 + 1;
  } else if (v % 3 == 1) {
    v = -v;
  } else {
    v = __popc(v) + __clz(v) + __brev(v);
  }
  y[i] = v;
}

extern "C" __global__ void warp_ops(const int* x, int* up, int* down, int* idx, int* xr,
                                    unsigned* ballot, int* votes, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = i < n ? x[i] : 0;
  up[i] = __shfl_up_sync(0xffffffff, v, 3, 16);
  down[i] = __shfl_down_sync(0xffffffff, v, 5);
  idx[i] = __shfl_sync(0xffffffff, v, (threadIdx.x * 7) % 32, 8);
  xr[i] = __shfl_xor_sync(0xffffffff, v, 9, 16);
  ballot[i] = __ballot_sync(0xffffffff, v > 0);
  votes[i] = __any_sync(0xffffffff, v > 900) * 2 + __all_sync(0xffffffff, v > -900);
}

extern "C" __global__ void shared_atomics(const int* x, int* out, int n) {
  __shared__ int s[4];
  if (threadIdx.x == 0) { s[0] = INT_MIN; s[1] = INT_MAX; s[2] = 0; s[3] = 0; }
  __syncthreads();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    atomicMax(&s[0], x[i]);
    atomicMin(&s[1], x[i]);
    atomicAdd(&s[2], x[i]);
    atomicCAS(&s[3], 0, i + 1);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    atomicMax(&out[0], s[0]);
    atomicMin(&out[1], s[1]);
    atomicAdd(&out[2], s[2]);
    out[3 + blockIdx.x] = s[3];
  }
}

extern "C" __global__ void mma_f16(const __half* A, const __half* B, float* C, int trans_b) {
  __shared__ __align__(16) __half As[16 * 16];
  __shared__ __align__(16) __half Bs[16 * 8];
  __shared__ __align__(16) __half Bt[8 * 16];
  int l = threadIdx.x;
  unsigned sa = (unsigned)__cvta_generic_to_shared(As + l * 8);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" ::"r"(sa), "l"(A + l * 8));
  if (l < 16) {
    unsigned sb = (unsigned)__cvta_generic_to_shared(Bs + l * 8);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sb), "l"(B + l * 8));
  }
  asm volatile("cp.async.commit_group;");
  asm volatile("cp.async.wait_group 0;");
  __syncthreads();
  for (int i = l; i < 128; i += 32) Bt[(i % 8) * 16 + i / 8] = Bs[i];
  __syncthreads();
  unsigned a0, a1, a2, a3, b0, b1;
  unsigned pa = (unsigned)__cvta_generic_to_shared(As + (l % 16) * 16 + (l / 16) * 8);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(pa));
  if (trans_b) {
    unsigned pb = (unsigned)__cvta_generic_to_shared(Bs + (l % 16) * 8);
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                 : "=r"(b0), "=r"(b1) : "r"(pb));
  } else {
    unsigned pb = (unsigned)__cvta_generic_to_shared(Bt + (l % 8) * 16 + ((l / 8) % 2) * 8);
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];"
                 : "=r"(b0), "=r"(b1) : "r"(pb));
  }
  float d0, d1, d2, d3, z = 0.f;
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
               "{%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
               : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1),
                 "f"(z), "f"(z), "f"(z), "f"(z));
  int g = l >> 2, t = l & 3;
  C[g * 8 + 2 * t] = d0;
  C[g * 8 + 2 * t + 1] = d1;
  C[(g + 8) * 8 + 2 * t] = d2;
  C[(g + 8) * 8 + 2 * t + 1] = d3;
}

extern "C" __global__ void mma_bf16(const __nv_bfloat16* A, const __nv_bfloat16* Bt, const float* Cin,
                                    float* C) {
  __shared__ __align__(16) __nv_bfloat16 As[16 * 8];
  __shared__ __align__(16) __nv_bfloat16 Bs[8 * 8];
  int l = threadIdx.x;
  for (int i = l; i < 128; i += 32) As[i] = A[i];
  for (int i = l; i < 64; i += 32) Bs[i] = Bt[i];
  __syncthreads();
  unsigned a0, a1, b0;
  unsigned pa = (unsigned)__cvta_generic_to_shared(As + (l % 16) * 8);
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(a0), "=r"(a1) : "r"(pa));
  unsigned pb = (unsigned)__cvta_generic_to_shared(Bs + (l % 8) * 8);
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(b0) : "r"(pb));
  int g = l >> 2, t = l & 3;
  float c0 = Cin[g * 8 + 2 * t], c1 = Cin[g * 8 + 2 * t + 1];
  float c2 = Cin[(g + 8) * 8 + 2 * t], c3 = Cin[(g + 8) * 8 + 2 * t + 1];
  float d0, d1, d2, d3;
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
               "{%7,%8,%9,%10};"
               : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
               : "r"(a0), "r"(a1), "r"(b0), "f"(c0), "f"(c1), "f"(c2), "f"(c3));
  C[g * 8 + 2 * t] = d0;
  C[g * 8 + 2 * t + 1] = d1;
  C[(g + 8) * 8 + 2 * t] = d2;
  C[(g + 8) * 8 + 2 * t + 1] = d3;
}

// Integer and tf32 tensor-core shapes; fragments gathered straight from global memory with
// the ISA's formulas ("Matrix fragments for mma.m16n8k32" / "mma.m16n8k8"), g = lane/4,
// t = lane%4: s8 A a_i (row g + 8*((i>>2)&1), col 4t + (i&3) + 16*(i>>3)), B b_i (row
// 4t + (i&3) + 16*(i>>2), col g); tf32 A a_i (row g + 8*(i&1), col t + 4*(i>>1)), B b_i
// (row t + 4i, col g); C c_i (row g + 8*(i>>1), col 2t + (i&1)).
extern "C" __global__ void mma_s8(const signed char* A, const signed char* Bt, const int* Cin,
                                  int* C, int sat) {
  int l = threadIdx.x, g = l >> 2, t = l & 3;
  unsigned a[4], b[2];
  for (int r = 0; r < 4; ++r)  // register r holds a_{4r..4r+3}: one row, 4 consecutive k
    a[r] = *reinterpret_cast<const unsigned*>(A + (g + 8 * (r & 1)) * 32 + 4 * t + 16 * (r >> 1));
  for (int r = 0; r < 2; ++r)  // b_{4r..4r+3}: column g, k 4t+16r .. +3 (Bt is [n][k])
    b[r] = *reinterpret_cast<const unsigned*>(Bt + g * 32 + 4 * t + 16 * r);
  int c[4], d[4];
  for (int i = 0; i < 4; ++i) c[i] = Cin[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)];
  if (sat)
    asm volatile("mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                   "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
  else
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                   "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
  for (int i = 0; i < 4; ++i) C[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)] = d[i];
}

extern "C" __global__ void mma_tf32(const float* A, const float* B, const float* Cin, float* C) {
  int l = threadIdx.x, g = l >> 2, t = l & 3;
  unsigned a[4], b[2];
  for (int i = 0; i < 4; ++i)
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(a[i]) : "f"(A[(g + 8 * (i & 1)) * 8 + t + 4 * (i >> 1)]));
  for (int i = 0; i < 2; ++i)
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(b[i]) : "f"(B[(t + 4 * i) * 8 + g]));
  float c[4], d[4];
  for (int i = 0; i < 4; ++i) c[i] = Cin[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)];
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, "
               "{%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                 "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
  for (int i = 0; i < 4; ++i) C[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)] = d[i];
}

extern "C" __global__ void to_tf32(const float* x, unsigned* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(y[i]) : "f"(x[i]));
}

// ---- kernels that must fail in the simulator ----
extern "C" __global__ void oob_store(float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  y[i] = (float)n;
}

extern "C" __global__ void misaligned_v4(const float* x, float* y) {
  const float4* p = reinterpret_cast<const float4*>(x + 1);
  float4 v = p[threadIdx.x];
  y[threadIdx.x] = v.x + v.y + v.z + v.w;
}

extern "C" __global__ void divergent_bar(float* y) {
  __shared__ float s[64];
  s[threadIdx.x] = threadIdx.x;
  if (threadIdx.x < 16) __syncthreads();
  y[threadIdx.x] = s[63 - threadIdx.x];
}

extern "C" __global__ void uninit_shared(float* y) {
  __shared__ float s[64];
  if (threadIdx.x < 32) s[threadIdx.x] = 1.f;
  __syncthreads();
  y[threadIdx.x] = s[threadIdx.x];
}

extern "C" __global__ void shared_oob(float* y, int k) {
  __shared__ float s[32];
  s[threadIdx.x] = 1.f;
  __syncthreads();
  y[threadIdx.x] = s[threadIdx.x + k];
}

extern "C" __global__ void early_exit_bar(float* y, int n) {
  __shared__ float s[64];
  if (threadIdx.x >= n) return;
  s[threadIdx.x] = 1.f;
  __syncthreads();
  y[threadIdx.x] = s[threadIdx.x];
}
"""
