"""NumPy reference implementations of the WIA DSL builtins and stdlib functions.

Every function here follows LANGUAGE.md (§7 builtins, stdlib/nn.wia and
stdlib/linalg.wia) exactly; where the page is silent it does what NumPy 2.x does.
Tests compare compiled kernels against these.

Conventions:
- Dtypes are given by their WIA spelling (``"f32"``, ``"i8"``, ...) or as NumPy dtypes.
- Scalar constants inside formulas are Python numbers, so they are *weak* (NEP 50)
  and keep the dtype of the tensor they meet, as WIA literals do (LANGUAGE.md §3).
- ``bf16`` values are stored as ``float32`` rounded to bfloat16 precision.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = [
    # elementwise unary
    "abs_",
    "neg",
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "tanh",
    "sigmoid",
    "relu",
    "sin",
    "cos",
    "floor",
    "ceil",
    "erf",
    # elementwise binary
    "add",
    "sub",
    "mul",
    "div",
    "mod",
    "pow_",
    "maximum",
    "minimum",
    "where",
    # reductions
    "reduce_sum",
    "reduce_mean",
    "reduce_max",
    "reduce_min",
    "reduce_prod",
    "argmax",
    "argmin",
    # linear algebra
    "matmul",
    "transpose",
    # neural
    "conv2d",
    "max_pool",
    "avg_pool",
    # shape
    "reshape",
    "flatten",
    "broadcast_to",
    "concat",
    "zeros",
    "ones",
    "full",
    "arange",
    # dtype
    "cast",
    "to_numpy_dtype",
    "round_to_bf16",
    "round_to_tf32",
    "truncate_to_tf32",
    # quantization
    "quantize",
    "dequantize",
    "fake_quant",
    # stdlib nn
    "softmax",
    "log_softmax",
    "gelu",
    "silu",
    "layer_norm",
    "batch_norm",
    "rms_norm",
    "attention",
    "attention_batched",
    "causal_attention",
    "causal_attention_batched",
    "mlp",
    "EPS",
    # stdlib linalg
    "norm",
    "gemm",
    # tables
    "UNARY",
    "BINARY",
    "REDUCTIONS",
]

# ------------------------------------------------------------------ dtypes

_WIA_TO_NUMPY = {
    "bool": np.dtype(np.bool_),
    "i8": np.dtype(np.int8),
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(np.float32),  # storage type; values rounded to bf16 by cast()
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
}


def to_numpy_dtype(dtype) -> np.dtype:
    """The NumPy storage dtype of a WIA dtype name (or a NumPy dtype, passed through)."""
    if isinstance(dtype, str) and dtype in _WIA_TO_NUMPY:
        return _WIA_TO_NUMPY[dtype]
    return np.dtype(dtype)


def round_to_bf16(x) -> np.ndarray:
    """Round float values to bfloat16 precision (round to nearest, ties to even),
    returned as float32. NaN stays NaN; values beyond the bf16 range become inf."""
    a = np.asarray(x, dtype=np.float32)
    bits = a.view(np.uint32).astype(np.uint64)
    lsb = (bits >> 16) & 1
    rounded = ((bits + 0x7FFF + lsb) >> 16) << 16
    out = rounded.astype(np.uint32).view(np.float32).reshape(a.shape)
    return np.where(np.isnan(a), a, out).astype(np.float32)


# tf32 is no dtype of the language: it is how the PTX backend's tensor cores read f32
# operands under the ``allow_tf32`` codegen option (docs/ptx.md).
def round_to_tf32(x) -> np.ndarray:
    """f32 values rounded to tf32 as ``cvt.rna.tf32.f32`` does (10 mantissa bits, ties
    away from zero), returned as float32."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    return ((bits + 0x1000) & 0xFFFFE000).view(np.float32)


def truncate_to_tf32(x) -> np.ndarray:
    """f32 values with their low 13 mantissa bits dropped (a tf32 operand read without a
    rounding ``cvt``: the simulator's wgmma reading f32 from shared memory), as float32."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    return (bits & np.uint32(0xFFFFE000)).view(np.float32)


# ------------------------------------------------------------------ elementwise unary


def _float_dtype(x) -> np.dtype:
    """The float dtype NumPy's transcendental ufuncs give for x (bool/i8 -> f16,
    i32/i64 -> f64, floats keep theirs)."""
    return np.sqrt(np.zeros(0, np.asarray(x).dtype)).dtype


def abs_(x):
    return np.abs(x)


def neg(x):
    return np.negative(x)


def exp(x):
    return np.exp(x)


def log(x):
    return np.log(x)


def sqrt(x):
    return np.sqrt(x)


def rsqrt(x):
    """1 / sqrt(x) in the float dtype of sqrt(x)."""
    s = np.sqrt(x)
    return np.asarray(np.divide(1, s), dtype=np.asarray(s).dtype)


def tanh(x):
    return np.tanh(x)


def sigmoid(x):
    """1 / (1 + exp(-x)), evaluated without overflow: exp(-|x|) is never > 1."""
    x = np.asarray(x)
    x = x.astype(_float_dtype(x))
    e = np.exp(-np.abs(x))  # in (0, 1]
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype)


def relu(x):
    """max(x, 0) with a weak 0 (keeps x's dtype); NaN propagates as np.maximum does."""
    return np.maximum(x, 0)


def sin(x):
    return np.sin(x)


def cos(x):
    return np.cos(x)


def floor(x):
    return np.floor(x)


def ceil(x):
    return np.ceil(x)


_vec_erf = np.vectorize(math.erf, otypes=[np.float64])


def erf(x):
    """The error function, computed in float64 and returned in the float dtype
    NumPy's ufuncs give for x (see _float_dtype)."""
    x = np.asarray(x)
    return _vec_erf(x.astype(np.float64)).astype(_float_dtype(x))


UNARY = {
    "abs": abs_,
    "neg": neg,
    "exp": exp,
    "log": log,
    "sqrt": sqrt,
    "rsqrt": rsqrt,
    "tanh": tanh,
    "sigmoid": sigmoid,
    "relu": relu,
    "sin": sin,
    "cos": cos,
    "floor": floor,
    "ceil": ceil,
    "erf": erf,
}

# ------------------------------------------------------------------ elementwise binary


def add(a, b):
    return np.add(a, b)


def sub(a, b):
    return np.subtract(a, b)


def mul(a, b):
    return np.multiply(a, b)


def div(a, b):
    """``/``: true division, as NumPy (integer operands give float64)."""
    return np.true_divide(a, b)


def mod(a, b):
    """``%``: NumPy's remainder (result has the sign of the divisor)."""
    return np.remainder(a, b)


def pow_(a, b):
    """``**``: NumPy's power."""
    return np.power(a, b)


def maximum(a, b):
    """``max(a, b)``: elementwise, NaN-propagating (np.maximum)."""
    return np.maximum(a, b)


def minimum(a, b):
    """``min(a, b)``: elementwise, NaN-propagating (np.minimum)."""
    return np.minimum(a, b)


def where(c, a, b):
    return np.where(c, a, b)


BINARY = {
    "+": add,
    "-": sub,
    "*": mul,
    "/": div,
    "%": mod,
    "**": pow_,
    "max": maximum,
    "min": minimum,
}

# ------------------------------------------------------------------ reductions


def _axis(axis):
    """WIA's ``axis=`` (int, list, or omitted for all axes) as a NumPy axis argument."""
    if axis is None:
        return None
    if isinstance(axis, (list, tuple)):
        return tuple(int(a) for a in axis)
    return int(axis)


def reduce_sum(x, axis=None, keepdims=False):
    """NumPy's sum: bool and small integers accumulate in int64 (np.sum's default)."""
    return np.sum(x, axis=_axis(axis), keepdims=keepdims)


def reduce_mean(x, axis=None, keepdims=False):
    """NumPy's mean: integer input gives float64; float input keeps its dtype."""
    return np.mean(x, axis=_axis(axis), keepdims=keepdims)


def reduce_max(x, axis=None, keepdims=False):
    return np.max(x, axis=_axis(axis), keepdims=keepdims)


def reduce_min(x, axis=None, keepdims=False):
    return np.min(x, axis=_axis(axis), keepdims=keepdims)


def reduce_prod(x, axis=None, keepdims=False):
    return np.prod(x, axis=_axis(axis), keepdims=keepdims)


def _arg(fn, x, axis, keepdims):
    ax = _axis(axis)
    if isinstance(ax, tuple):
        if len(ax) != 1:
            raise ValueError("argmax/argmin take one axis (or none for the flat index)")
        ax = ax[0]
    return np.asarray(fn(x, axis=ax, keepdims=keepdims), dtype=np.int64)


def argmax(x, axis=None, keepdims=False):
    """Index (i64) of the first maximum; with no axis, the index into the flattened
    array (NumPy). A NaN counts as the maximum (first NaN wins), as in NumPy."""
    return _arg(np.argmax, x, axis, keepdims)


def argmin(x, axis=None, keepdims=False):
    return _arg(np.argmin, x, axis, keepdims)


REDUCTIONS = {
    "reduce_sum": reduce_sum,
    "reduce_mean": reduce_mean,
    "reduce_max": reduce_max,
    "reduce_min": reduce_min,
    "reduce_prod": reduce_prod,
    "argmax": argmax,
    "argmin": argmin,
}

# ------------------------------------------------------------------ linear algebra


def matmul(a, b):
    """``@`` / ``matmul(a, b)``: NumPy's matmul (1-D, 2-D and batched)."""
    return np.matmul(a, b)


def transpose(x, perm: Sequence[int] | None = None):
    """``transpose(x)`` reverses all axes (NumPy's ``x.T``); ``transpose(x, perm)``
    permutes them."""
    return np.transpose(x, None if perm is None else tuple(perm))


# ------------------------------------------------------------------ neural


def _pair(v) -> tuple[int, int]:
    if isinstance(v, (list, tuple)):
        if len(v) != 2:
            raise ValueError(f"expected an int or a pair, got {v!r}")
        return int(v[0]), int(v[1])
    return int(v), int(v)


def conv2d(x, w, stride=1, padding=0):
    """2-D cross-correlation (no kernel flip), NCHW input and OIHW weight, no bias,
    no dilation, no groups. ``stride`` and ``padding`` are an int or an (h, w) pair;
    padding is zeros on both sides. Output [N, O, Ho, Wo] with
    Ho = (H + 2*ph - KH) // sh + 1 (likewise Wo). Dtype: NumPy promotion of x and w."""
    x = np.asarray(x)
    w = np.asarray(w)
    if x.ndim != 4 or w.ndim != 4:
        raise ValueError("conv2d takes x [N, C, H, W] and w [O, C, KH, KW]")
    if x.shape[1] != w.shape[1]:
        raise ValueError(f"conv2d: x has {x.shape[1]} channels, w expects {w.shape[1]}")
    sh, sw = _pair(stride)
    ph, pw = _pair(padding)
    out_dtype = np.result_type(x, w)
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw))).astype(out_dtype)
    kh, kw = w.shape[2], w.shape[3]
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))
    win = win[:, :, ::sh, ::sw]  # [N, C, Ho, Wo, KH, KW]
    return np.einsum("nchwij,ocij->nohw", win, w.astype(out_dtype)).astype(out_dtype)


def _pool(x, kernel, stride, reduce):
    x = np.asarray(x)
    if x.ndim != 4:
        raise ValueError("pooling takes x [N, C, H, W]")
    kh, kw = _pair(kernel)
    sh, sw = _pair(kernel if stride is None else stride)
    win = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(2, 3))
    win = win[:, :, ::sh, ::sw]  # [N, C, Ho, Wo, KH, KW]; no padding (floor mode)
    return reduce(win, axis=(4, 5))


def max_pool(x, kernel=2, stride=None):
    """Max over kernel windows of the last two axes of NCHW x; stride defaults to
    kernel; no padding; Ho = (H - kh) // sh + 1 (a partial window at the edge is
    dropped). Keeps x's dtype."""
    return _pool(x, kernel, stride, np.max)


def avg_pool(x, kernel=2, stride=None):
    """Mean over kernel windows, same geometry as max_pool. Float x keeps its dtype
    (integer x gives float64, as NumPy's mean)."""
    return _pool(x, kernel, stride, np.mean)


# ------------------------------------------------------------------ shape


def reshape(x, shape: Sequence[int]):
    """NumPy reshape (C order). A -1 entry is accepted here as NumPy does."""
    return np.reshape(x, tuple(int(d) for d in shape))


def flatten(x):
    """Keeps axis 0 and flattens the rest: [N, ...] -> [N, prod(...)]."""
    x = np.asarray(x)
    if x.ndim < 1:
        raise ValueError("flatten needs rank >= 1")
    return x.reshape(x.shape[0], -1)


def broadcast_to(x, shape: Sequence[int]):
    return np.broadcast_to(x, tuple(int(d) for d in shape)).copy()


def concat(xs: Sequence, axis=0):
    return np.concatenate(list(xs), axis=int(axis))


def zeros(shape: Sequence[int], dtype="f64"):
    """Default dtype f64, as NumPy (and wiadsl/frontend/builtins.py)."""
    return np.zeros(tuple(int(d) for d in shape), dtype=to_numpy_dtype(dtype))


def ones(shape: Sequence[int], dtype="f64"):
    return np.ones(tuple(int(d) for d in shape), dtype=to_numpy_dtype(dtype))


def full(shape: Sequence[int], v, dtype=None):
    """Without a dtype, the dtype of v (a Python int: i64, a Python float: f64)."""
    out = np.full(
        tuple(int(d) for d in shape), v, dtype=None if dtype is None else to_numpy_dtype(dtype)
    )
    return round_to_bf16(out) if dtype == "bf16" else out


def arange(*args):
    """``arange(n)`` = 0, 1, ..., n-1: i64 for an integer n, f64 for a float n (the
    language has only the one-argument form; ``arange(a, b[, step])`` is accepted
    here as NumPy's, for convenience)."""
    if any(isinstance(a, float) for a in args):
        return np.arange(*args, dtype=np.float64)
    return np.arange(*(int(a) for a in args), dtype=np.int64)


# ------------------------------------------------------------------ dtype


def cast(x, dtype):
    """Convert to ``dtype``: NumPy's astype (float -> int truncates toward zero; an
    out-of-range float -> int result is unspecified). ``bf16`` rounds to nearest even
    at bfloat16 precision and is stored as float32."""
    x = np.asarray(x)
    if dtype == "bf16":
        return round_to_bf16(x.astype(np.float32))
    return x.astype(to_numpy_dtype(dtype))


# ------------------------------------------------------------------ quantization


def quantize(x, scale, zero_point):
    """LANGUAGE.md §7: ``x / scale`` computed in the dtype of x, rounded half to even,
    plus zero_point, clamped to [-128, 127], as i8. scale and zero_point are scalars
    or broadcast against x."""
    x = np.asarray(x)
    if x.dtype.kind != "f":
        raise TypeError(f"quantize needs a float tensor, got {x.dtype}")
    q = np.rint(x / np.asarray(scale).astype(x.dtype))  # rint: round half to even
    q = q + np.asarray(zero_point).astype(np.float64)
    return np.clip(q, -128, 127).astype(np.int8)


def dequantize(q, scale, zero_point):
    """``(q - zero_point) * scale``, computed in f32 (each operand converted to f32
    first), result f32."""
    q32 = np.asarray(q).astype(np.float32)
    zp = np.asarray(zero_point).astype(np.float32)
    s = np.asarray(scale).astype(np.float32)
    return ((q32 - zp) * s).astype(np.float32)


def fake_quant(x, scale, zero_point):
    """dequantize(quantize(x, scale, zero_point), scale, zero_point), returned in x's
    (float) dtype, as wiadsl/frontend/shaperules.py types it (the f32 dequantized
    value converted to x's dtype)."""
    x = np.asarray(x)
    return dequantize(quantize(x, scale, zero_point), scale, zero_point).astype(x.dtype)


# ------------------------------------------------------------------ stdlib: nn

EPS = 1e-5
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_COEF = 0.044715


def softmax(x, axis=-1):
    """exp(x - max) / sum(exp(x - max)) over ``axis`` (stdlib nn.softmax: last axis)."""
    x = np.asarray(x)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def log_softmax(x, axis=-1):
    x = np.asarray(x)
    s = x - np.max(x, axis=axis, keepdims=True)
    return s - np.log(np.sum(np.exp(s), axis=axis, keepdims=True))


def gelu(x):
    """Tanh form: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))."""
    x = np.asarray(x)
    return 0.5 * x * (1.0 + np.tanh(_SQRT_2_OVER_PI * (x + _GELU_COEF * x**3)))


def silu(x):
    return np.asarray(x) * sigmoid(x)


def layer_norm(x, gamma, beta, eps=EPS):
    """Over the last axis, biased variance: (x - mu) / sqrt(var + eps) * gamma + beta."""
    x = np.asarray(x)
    mu = np.mean(x, axis=-1, keepdims=True)
    xc = x - mu
    var = np.mean(xc * xc, axis=-1, keepdims=True)
    return xc * rsqrt(var + eps) * gamma + beta


def rms_norm(x, gamma, eps=1e-6):
    """Over the last axis: x / sqrt(mean(x**2) + eps) * gamma."""
    x = np.asarray(x)
    return x * rsqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * gamma


def batch_norm(x, mean, var, gamma, beta, eps=EPS):
    """Inference batch norm of NCHW x with per-channel [C] statistics (channel axis 1)."""
    x = np.asarray(x)
    if x.ndim != 4:
        raise ValueError("batch_norm takes x [N, C, H, W]")

    def chan(v):
        return np.asarray(v).reshape(-1, 1, 1)

    return (x - chan(mean)) * rsqrt(chan(var) + eps) * chan(gamma) + chan(beta)


def attention(q, k, v):
    """softmax(q @ k^T / sqrt(d)) @ v, d = q.shape[-1]; k^T swaps the last two axes,
    so this also serves attention_batched."""
    q = np.asarray(q)
    d = q.shape[-1]
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) / math.sqrt(d)  # Python float: weak
    return np.matmul(softmax(scores, axis=-1), v)


def attention_batched(q, k, v):
    return attention(q, k, v)


def causal_attention(q, k, v):
    """attention where query i attends to keys j <= i (top-left aligned, as torch.tril):
    the other scores are -inf (a weak Python float: the scores keep their dtype)."""
    q = np.asarray(q)
    t, s = q.shape[-2], np.shape(k)[-2]
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) / math.sqrt(q.shape[-1])
    scores = np.where(np.arange(s) <= np.arange(t)[:, None], scores, -math.inf)
    return np.matmul(softmax(scores, axis=-1), v)


def causal_attention_batched(q, k, v):
    return causal_attention(q, k, v)


def mlp(x, w1, b1, w2, b2):
    """relu(x @ w1 + b1) @ w2 + b2."""
    return np.matmul(relu(np.matmul(x, w1) + b1), w2) + b2


# ------------------------------------------------------------------ stdlib: linalg


def norm(x, axis=None):
    """sqrt of the sum of squares over ``axis`` (all elements by default: the 2-norm
    / Frobenius norm)."""
    x = np.asarray(x)
    return np.sqrt(np.sum(x * x, axis=None if axis is None else _axes(axis)))


def _axes(axis):
    return tuple(axis) if isinstance(axis, (list, tuple)) else axis


def gemm(a, b, c, alpha, beta):
    """alpha * (a @ b) + beta * c."""
    return alpha * np.matmul(a, b) + beta * c
