"""Lowering a float conv2d to ``loop.conv2d`` (ir/ops_loop.py): one image as an implicit GEMM.

    loop.conv2d %x, %w, %y, %xoff, %yoff, %c, %hp, %wp, %o, %kh, %kw, %ho, %wo {stride = [sh, sw]} : (...) -> ()

Semantics (cross-correlation, one group, no padding: the lowering passes an
input that is already zero-padded, ``hp x wp`` per channel):

    y[yoff + (oc * ho + oh) * wo + ow] =
        sum_{ci, i, j} w[((oc * c + ci) * kh + i) * kw + j]
                       * x[xoff + (ci * hp + oh * sh + i) * wp + ow * sw + j]

written (never accumulated) for every ``oc < o, oh < ho, ow < wo``.

Invariants:
- f32/f64 buffers of one dtype; ``w`` is the contiguous OIHW weight at offset 0.
- ``(ho - 1) * sh + kh <= hp`` and ``(wo - 1) * sw + kw <= wp`` (the lowering
  derives ho, wo from the padded extents, so every read is inside the image).
- The backend never materializes the im2col matrix: it packs K-panels of input
  patches straight from ``x`` into the micro-kernel's B layout (implicit GEMM).

A network's stride-2 stem instead runs at stride 1 on its input's phases
(``phase_split``), where the backend's direct kernels read the input in place.
"""

from __future__ import annotations

from ..ir.core import Value
from ..ir.ops_loop import Conv2dOp
from ..ir.types import ScalarType
from .builder import LoopBuilder, const_value
from .epilogue import Epilogue, channel_clamp
from .expr import Leaf, buffer_leaf

NAME = Conv2dOp.name


#: output pixels of a plane up to which a frozen weight's convolution is one ``rows``
#: call per image (ResNet-18's 14x14 and 7x7 stages; ``rows_pays``)
ROWS_PIXELS = 256
#: output channels a ``rows`` convolution has at least: panels for the threads to share
ROWS_CHANNELS = 128
#: multiply-adds per image a ``rows`` convolution has at least: its fixed costs (the
#: packing into rows, the tile's transposed copy, the epilogue as a pass of its own)
#: outweighed the lanes it saves below (against ONNX Runtime at one thread: 64 -> 64 channels 1x1 at 14x14,
#: 0.8 M, 20 -> 44 us; 32 -> 32 3x3 at 16x16, batch 4, 197 -> 308 us; ResNet-18's
#: 1x1 downsamples, 6.4 M, the same either way; its 3x3 layers, 58-116 M, 15-25 %
#: faster)
ROWS_MACS = 1 << 24


#: A kernel larger than 1x1 on a plane of at most half the direct kernel's pixel lanes
#: (``rows_pays``' ``lanes``) takes the ``rows`` layout whatever its channels: the direct
#: kernel would compute as many lanes again for nothing. Single layers with bias and
#: ReLU, one thread, per layer (four more in a chain), AMD Zen 5: with AVX-512 (32 lanes)
#: 32 -> 32 channels 3x3 at 4x4 4.05 -> 2.1 us, 64 -> 64 at 2x2 (imported as a gather
#: and a matmul before, onnx/ops/conv.py) 3.26 -> 2.2 us (ONNX Runtime 1.9); with AVX2
#: (16 lanes) the 4x4 plane fills the direct kernel's lanes (2.9-3.1 us against 3.2-3.4
#: as rows) and 2x2 3.97 -> 3.5-3.6.
#: A 1x1 kernel stays: its rows would be a transposed copy of the input for nothing.
SMALL_PLANE_SHARE = 2


def rows_pays(c: int, o: int, kh: int, kw: int, ho: int, wo: int, lanes: int = 0) -> bool:
    """Whether an image's convolution of a frozen weight takes the ``rows`` layout
    (``implicit_gemm``): a small plane, enough channels and multiply-adds; or a plane
    that fills at most half of the ``lanes`` (the direct kernel's pixels per row of its
    tile, for the convolution's dtype; 0: unknown) with a kernel larger than 1x1."""
    npix = ho * wo
    if kh * kw > 1 and npix * SMALL_PLANE_SHARE <= lanes:
        return True
    return npix <= ROWS_PIXELS and o >= ROWS_CHANNELS and npix * o * c * kh * kw >= ROWS_MACS


#: a 3x3, stride-1 convolution of a frozen weight runs as Winograd's F(2x2, 3x3) or
#: F(4x4, 3x3) in the rows layout (``winograd_tile``; backends/llvm/conv_winograd.py) with at least WINO_CHANNELS input
#: and output channels, output channels a multiple of WINO_CHANNEL_STEP (whole panels
#: of them at every vector width), and at least WINO_TILES output 2x2 tiles per image.
#: ResNet-18's four 3x3 stages, single layers with bias and ReLU, the direct convolution
#: against F(2x2, 3x3) at one thread (two threads in parentheses): 64 ch 56x56 2.28 ->
#: 1.49-1.54 ms (1.60 -> 1.15), 128 ch 28x28 2.23 -> 1.18-1.33 (-> 0.89), 256 ch 14x14
#: 2.68 -> 1.06-1.12 (-> 0.79), 512 ch 7x7 2.44 -> 1.39-1.44 (-> 0.95-0.99); ONNX
#: Runtime: 2.0-2.2 ms (1.0-1.1) each
WINO_CHANNELS = 64
WINO_CHANNEL_STEP = 64
WINO_TILES = 16
#: tiles an image has at least for F(2x2, 3x3) with a weight that is not frozen: the
#: call transforms the weight first (16 * O * C outputs), which the GEMMs' saving (20 *
#: O * C * tiles multiply-adds) must outweigh. With the weight an input, bias and ReLU,
#: one thread: 64 ch 56x56 2.3 -> 1.6 ms, 256 ch 14x14 2.56 -> 1.41, 256 ch 10x10 (25
#: tiles) 1.52 -> 0.97, 128 ch 10x10 0.385 -> 0.232; but 512 ch 7x7 (16) 3.0 -> 3.7
WINO_TILES_PER_CALL = 24


#: 4x4 output tiles an image has at least for F(4x4, 3x3) rather than F(2x2, 3x3): 36
#: products per 16 outputs instead of 16 per 4 (2.25x -> 4x fewer multiply-adds than
#: the direct sum), at about 15x its rounding error (still ~1e-5 of the outputs'
#: scale). ResNet-18's layers, one thread (two in parentheses), F(2x2) -> F(4x4): 64 ch
#: 56x56 1.46 -> 0.92 ms, 128 ch 28x28 1.17 -> 0.75, 256 ch 14x14 (16 tiles) 1.09 ->
#: 0.81 (0.78 -> 0.56); 512 ch 7x7 (4 tiles) 1.36 -> 1.11 but (0.91 -> 1.20): four
#: rows do not split over two threads
WINO4_TILES = 16


def winograd_tile(c: int, o: int, kh: int, kw: int, stride: tuple[int, int], ho: int,
                  wo: int, frozen: bool = True) -> int:
    """The output tile side ``m`` of the F(m x m, 3x3) an image's convolution runs as
    (2 or 4), else 0: its weight ``frozen`` (an imported model's: transformed once) or
    not (transformed on every call)."""
    tiles = -(-ho // 2) * -(-wo // 2)
    if not ((kh, kw) == (3, 3) and tuple(stride) == (1, 1) and min(c, o) >= WINO_CHANNELS
            and o % WINO_CHANNEL_STEP == 0
            and tiles >= (WINO_TILES if frozen else WINO_TILES_PER_CALL)):
        return 0
    return 4 if -(-ho // 4) * -(-wo // 4) >= WINO4_TILES else 2


#: output pixels per chunk when a fused epilogue follows the convolution: the chunk's
#: outputs (every channel) are still in L1/L2 when the epilogue reads them, and a
#: 32x32 image still splits four ways over the threads (MobileNetV2, batch 4, one
#: thread: 128 -> 256 pixels 606 -> 588 and 611 -> 595 us, two A/B runs)
CHUNK = 256


#: weight elements (O x K) up to which a stride-1 convolution may take the backend's
#: direct kernels (backends/llvm/conv.py ``direct_applies``; 64 KiB of f32: every tile
#: reads the whole weight, so it must stay in L2)
DIRECT_WEIGHTS = 16384
#: input channels and window side up to which a stride-2 convolution is split into
#: phases (``phase_split_pays``): an image's few channels, a stem's window of at most
#: 7x7 (the phase planes' patch rows and a row block of the weight then stay in a
#: 32 KiB L1, as ``direct_applies`` asks)
PHASE_CHANNELS = 4
PHASE_WINDOW = 7
#: multiply-adds the phases may add per output pixel and input channel, in units of
#: the window's taps, summed over the output channels (``phase_split_pays``)
PHASE_EXTRA = 8


def phase_split_pays(c: int, o: int, kh: int, kw: int, stride: tuple[int, int], ho: int, wo: int) -> bool:
    """Whether a stride-2 convolution runs as the stride-1 one of its input's four phases
    (``phase_split``): a network's stem (an image's channels, a window wider than 2x2),
    whose output rows the backend's direct stride-1 kernels cover on every host (rows of
    a multiple of 32 pixels, or 16-pixel rows in pairs) with a weight they keep in L2.
    The stride-2 packing of the patches (each patch element costs about as much as 13
    multiply-adds) gives way to one pass over the input and 4 ceil(KH/2) ceil(KW/2)
    taps a channel instead of KH KW (1.3x the multiply-adds at 7x7, 1.8x at 3x3), which
    every output channel pays: so only up to PHASE_EXTRA taps' worth of extra ones.
    Zen 5, one thread, packed -> phases: 3 -> 8 channels 7x7 at 64x64 25 -> 16.6 us,
    3 -> 16 34 -> 29, 1 -> 16 5x5 15.5 -> 13.3; but 3 -> 32 7x7 53 -> 55, 3 -> 64
    90 -> 105, 3 -> 32 3x3 13 -> 16.7, 3 -> 64 3x3 20 -> 30 (outside the rule)."""
    kh2, kw2 = -(-kh // 2), -(-kw // 2)
    rows = wo % 32 == 0 or (wo == 16 and ho % 2 == 0)
    extra = o * (4 * kh2 * kw2 - kh * kw)
    return (tuple(stride) == (2, 2) and c <= PHASE_CHANNELS and max(kh, kw) <= PHASE_WINDOW
            and kh2 * kw2 > 1 and rows and extra <= PHASE_EXTRA * kh * kw
            and o * 4 * c * kh2 * kw2 <= DIRECT_WEIGHTS)


def _fill(lb: LoopBuilder, dst: Value, start: Value, count: Value, value: Value | None = None,
          src: tuple[Value, Value, int] | None = None) -> None:
    """``dst[start + j]`` for ``j < count``: ``value``, or ``src = (buf, at, step)``'s
    ``buf[at + j * step]`` (element loops, which LLVM vectorizes: a memcpy call per row
    cost more than the row in the small planes of a network's later stages)."""
    def one(lb2: LoopBuilder, j: Value, _: list[Value]) -> list[Value]:
        if src is None:
            v = value
        else:
            buf, at, step = src
            v = lb2.load(buf, lb2.add(at, j if step == 1 else lb2.mul(j, lb2.idx(step))))
        lb2.store(v, dst, lb2.add(start, j))
        return []
    lb.loop(lb.idx(0), count, one)


def _phase(lb: LoopBuilder, p: Value) -> tuple[Value, Value, Value]:
    """Input channel ``p`` of ``phase_split``'s phases as (ci, a, b): ``p = 4 ci + 2 a + b``."""
    two = lb.idx(2)
    return lb.floordiv(p, lb.idx(4)), lb.mod(lb.floordiv(p, two), two), lb.mod(p, two)


def phase_split(lb: LoopBuilder, x: Leaf, w: Leaf, dims: tuple[Value, ...],
                pad: tuple[int, int]) -> tuple[Leaf, Leaf, tuple[Value, ...]]:
    """The stride-2 convolution of ``x`` (``dims`` as ``implicit_gemm``'s, zero padding
    ``pad``) as a stride-1 one without padding: input channel ``(ci, a, b)`` of the new
    input is phase ``(a, b)`` of the padded plane ``ci`` (its pixels ``[2r + a, 2s + b]``,
    zeros past the border) and the new weight's taps ``[i, j]`` of that channel are the
    old ones at ``[2i + a, 2j + b]`` (zeros past the window), since output ``(oh, ow)``
    reads padded pixel ``(2 oh + i, 2 ow + j)``. Both are written on every call (the
    weight has at most DIRECT_WEIGHTS elements), each element once. Returns the new
    input, weight and dims."""
    nb, c, h, wd, o, kh, kw, ho, wo = dims
    ph, pw = pad
    one, two = lb.idx(1), lb.idx(2)
    kh2, kw2 = (lb.floordiv(lb.add(k, one), two) for k in (kh, kw))
    hp2, wp2 = lb.add(lb.sub(ho, one), kh2), lb.add(lb.sub(wo, one), kw2)
    c4 = lb.mul(c, lb.idx(4))
    xs, ws = lb.alloc(x.dtype, [nb, c4, hp2, wp2]), lb.alloc(w.dtype, [o, c4, kh2, kw2])
    zero = lb.const(0.0, ScalarType(x.dtype))

    def span(lb2: LoopBuilder, phase: Value, padding: int, extent: Value, count: Value) -> tuple[Value, Value]:
        """[lo, hi): the r < count whose padded index 2r + phase is inside the input."""
        lo = lb2.floordiv(lb2.add(lb2.sub(lb2.idx(padding), phase), one), two)
        hi = lb2.floordiv(lb2.add(lb2.add(extent, lb2.idx(padding + 1)), lb2.sub(lb2.idx(0), phase)), two)
        lo = lb2.min(lo, count)
        return lo, lb2.max(lo, lb2.min(hi, count))

    def plane(lb2: LoopBuilder, ivs: list[Value]) -> None:
        (q,) = ivs  # (n, ci, a, b)
        n, p = lb2.floordiv(q, c4), lb2.mod(q, c4)
        ci, a, b = _phase(lb2, p)
        first = lb2.mul(q, lb2.mul(hp2, wp2))
        source = lb2.add(x.offset, lb2.mul(lb2.add(lb2.mul(n, c), ci), lb2.mul(h, wd)))
        r_lo, r_hi = span(lb2, a, ph, h, hp2)
        s_lo, s_hi = span(lb2, b, pw, wd, wp2)
        _fill(lb2, xs, first, lb2.mul(r_lo, wp2), zero)
        _fill(lb2, xs, lb2.add(first, lb2.mul(r_hi, wp2)), lb2.mul(lb2.sub(hp2, r_hi), wp2), zero)

        def row(lb3: LoopBuilder, r: Value, _: list[Value]) -> list[Value]:
            dst = lb3.add(first, lb3.mul(r, wp2))
            src = lb3.add(source, lb3.mul(lb3.sub(lb3.add(lb3.mul(r, two), a), lb3.idx(ph)), wd))
            _fill(lb3, xs, dst, s_lo, zero)
            # pixel s_lo + j of the phase row is input column 2 (s_lo + j) + b - pw
            at = lb3.add(src, lb3.sub(lb3.add(lb3.mul(s_lo, two), b), lb3.idx(pw)))
            _fill(lb3, xs, lb3.add(dst, s_lo), lb3.sub(s_hi, s_lo), src=(x.buf, at, 2))
            _fill(lb3, xs, lb3.add(dst, s_hi), lb3.sub(wp2, s_hi), zero)
            return []
        lb2.loop(r_lo, r_hi, row)
    lb.nest([lb.mul(nb, c4)], plane, parallel=True)

    def tap(lb2: LoopBuilder, ivs: list[Value]) -> None:
        oc, p, i, j = ivs
        ci, a, b = _phase(lb2, p)
        ii, jj = lb2.add(lb2.mul(i, two), a), lb2.add(lb2.mul(j, two), b)
        inside = lb2.and_(lb2.cmp("slt", ii, kh), lb2.cmp("slt", jj, kw))
        at = lb2.add(lb2.mul(lb2.add(lb2.mul(lb2.add(lb2.mul(oc, c), ci), kh), lb2.min(ii, lb2.sub(kh, one))), kw),
                     lb2.min(jj, lb2.sub(kw, one)))
        value = lb2.select(inside, lb2.load(w.buf, at), zero)
        lb2.store(value, ws, lb2.add(lb2.mul(lb2.add(lb2.mul(lb2.add(lb2.mul(oc, c4), p), kh2), i), kw2), j))
    lb.nest([o, c4, kh2, kw2], tap)
    return (buffer_leaf(lb, xs, owned=True), buffer_leaf(lb, ws, owned=True),
            (nb, c4, hp2, wp2, o, kh2, kw2, ho, wo))


def implicit_gemm(lb: LoopBuilder, x: Leaf, w: Leaf, out: Value, dims: tuple[Value, ...],
                  stride: tuple[int, int], pad: tuple[int, int],
                  epilogue: tuple[Epilogue, Value] | None = None, rows: bool = False,
                  winograd: int = 0) -> None:
    """Emit ``out = conv2d(x, w)`` for float ``x``: a zero-padded copy of the input
    (when padding) and one ``loop.conv2d`` per image; with ``epilogue`` (the fused
    body and the buffer it writes, ``out`` itself or one of the result's dtype), one
    ``loop.conv2d`` per chunk of CHUNK output pixels of an image instead, each
    followed by the epilogue on the pixels it wrote (loops/epilogue.py).

    ``rows`` (the weight is frozen and ``rows_pays``): one ``loop.conv2d {rows}`` per
    image, never chunks: the backend packs the weight once with the output channels
    as its vector lanes and splits the image's pixels over the threads itself
    (backends/llvm/conv_rows.py; pieces of channel blocks that each packed all the
    patches ran a 14x14 layer 2.36 -> 2.99 ms at one thread). ``winograd``
    (``winograd_tile``: 2 or 4): the hint ``winograd = m`` too (backends/llvm/conv_winograd.py),
    with or without ``rows``, and also one call per image with the epilogue after it.

    ``dims`` is (nb, c, h, wd, o, kh, kw, ho, wo). The padded copy writes each
    element once (a parallel loop over planes: zeros in the border, the input's rows
    copied inside, not a memset of the whole buffer first), so the micro-kernel's
    packing reads every patch without bounds checks (the "pre-padded copy" of
    border handling).
    """
    nb, c, h, wd, o, kh, kw, ho, wo = dims
    (sh, sw), (ph, pw) = stride, pad
    xbuf, hp, wp = x.buf, h, wd
    if ph or pw:
        hp, wp = lb.add(h, lb.idx(2 * ph)), lb.add(wd, lb.idx(2 * pw))
        xbuf = lb.alloc(x.dtype, [nb, c, hp, wp])
        st = ScalarType(x.dtype)

        def fill(lb2: LoopBuilder, start: Value, count: Value, src: Value | None = None) -> None:
            """``count`` elements from ``start``: zeros, or x's from ``src``."""
            if src is None:
                _fill(lb2, xbuf, start, count, lb2.const(0.0, st))
            else:
                _fill(lb2, xbuf, start, count, src=(x.buf, src, 1))

        def plane(lb2: LoopBuilder, ivs: list[Value]) -> None:
            (q,) = ivs
            first = lb2.mul(q, lb2.mul(hp, wp))
            if ph:  # the top and bottom padding rows
                fill(lb2, first, lb2.mul(lb2.idx(ph), wp))
                fill(lb2, lb2.add(first, lb2.mul(lb2.add(h, lb2.idx(ph)), wp)), lb2.mul(lb2.idx(ph), wp))

            def row(lb3: LoopBuilder, hh: Value, _: list[Value]) -> list[Value]:
                src = lb3.add(x.offset, lb3.mul(lb3.add(lb3.mul(q, h), hh), wd))
                dst = lb3.add(first, lb3.mul(lb3.add(hh, lb3.idx(ph)), wp))
                if pw:  # the left and right padding of this row
                    fill(lb3, dst, lb3.idx(pw))
                    fill(lb3, lb3.add(dst, lb3.add(wd, lb3.idx(pw))), lb3.idx(pw))
                fill(lb3, lb3.add(dst, lb3.idx(pw)), wd, src)
                return []
            lb2.loop(lb2.idx(0), h, row)
        # planes are disjoint: the copy splits over the threads like the convolution
        lb.nest([lb.mul(nb, c)], plane, parallel=True)
    base = lb.idx(0) if xbuf is not x.buf else x.offset
    pieces = _pieces(lb, dims)
    if not (rows or winograd) and (epilogue is not None or pieces[2] > 1):
        _chunks(lb, (xbuf, base, hp, wp), w, out, dims, pieces, (sh, sw), epilogue)
        return

    def image(lb2: LoopBuilder, ivs: list[Value]) -> None:
        (n,) = ivs
        xoff = lb2.add(base, lb2.mul(n, lb2.mul(c, lb2.mul(hp, wp))))
        yoff = lb2.mul(n, lb2.mul(o, lb2.mul(ho, wo)))
        attributes: dict[str, object] = {"stride": [sh, sw]}
        if rows:
            attributes["rows"] = True
        if winograd:
            attributes["winograd"] = winograd
        lb2.b.create(NAME, [xbuf, w.buf, out, xoff, yoff, c, hp, wp, o, kh, kw, ho, wo],
                     attributes=attributes)
    # images write disjoint outputs: a batch splits over the threads image by image
    # (each image's convolution then runs on its thread), one image over its pixels
    lb.nest([nb], image, parallel=True)



def _pieces(lb: LoopBuilder, dims: tuple[Value, ...]) -> tuple[Value, Value, int]:
    """The output pixels of an image, its chunks of at most CHUNK pixels, and the
    channel blocks per chunk (``channel_blocks``)."""
    nb, o, ho, wo = dims[0], dims[4], dims[7], dims[8]
    npix = lb.mul(ho, wo)
    count = lb.floordiv(lb.add(npix, lb.idx(CHUNK - 1)), lb.idx(CHUNK))
    return npix, count, channel_blocks(*(const_value(v) for v in (nb, count, o)))


#: pixel chunks start at multiples of this (a multiple of every micro-kernel panel
#: width, NR: at most 4 vectors of 16 lanes)
UNIT = 64


def _chunks(lb: LoopBuilder, src: tuple[Value, Value, Value, Value], w: Leaf, out: Value,
            dims: tuple[Value, ...], pieces: tuple[Value, Value, int], stride: tuple[int, int],
            epilogue: tuple[Epilogue, Value] | None) -> None:
    """One parallel loop over (image, chunk of CHUNK output pixels, block of output
    channels): the piece's ``loop.conv2d``, then the epilogue, if any, on those
    pixels of those channels. Pieces write disjoint outputs: the loop is parallel (a
    batch and one image alike split over the threads). The channels are one block
    unless the pixel chunks are too few to share (``channel_blocks``); ``pieces`` is
    ``_pieces``'s."""
    (xbuf, base, hp, wp), (nb, c, _, _, o, kh, kw, ho, wo) = src, dims
    npix, count, blocks = pieces
    per = lb.floordiv(lb.add(o, lb.idx(blocks - 1)), lb.idx(blocks))
    # chunk k: units [k * units / count, (k + 1) * units / count): sizes within one unit
    # of each other, so the threads' blocks of chunks are equal (28x28 as 256, 256,
    # 256 and 16 pixels gave one thread of two 512 and the other 272)
    units = lb.floordiv(lb.add(npix, lb.idx(UNIT - 1)), lb.idx(UNIT))
    # an epilogue that is a per-channel affine map, a residual add and bounds, written
    # in place, goes into the op (the micro-kernels apply it as they store each tile:
    # no second pass over the chunk)
    clamp = None
    if epilogue is not None and epilogue[1] is out:
        clamp = channel_clamp(lb, epilogue[0])
        if clamp is not None and clamp.residual is not None and clamp.residual[0] is out:
            clamp = None  # (the op writes partial sums there before its last K block)

    def piece(lb2: LoopBuilder, ivs: list[Value]) -> None:
        (t,) = ivs
        n, rest = lb2.floordiv(t, lb2.mul(count, lb2.idx(blocks))), lb2.mod(t, lb2.mul(count, lb2.idx(blocks)))
        k, j = lb2.floordiv(rest, lb2.idx(blocks)), lb2.mod(rest, lb2.idx(blocks))
        lo = lb2.mul(lb2.floordiv(lb2.mul(k, units), count), lb2.idx(UNIT))
        hi = lb2.min(lb2.mul(lb2.floordiv(lb2.mul(lb2.add(k, lb2.idx(1)), units), count),
                             lb2.idx(UNIT)), npix)
        o_lo = lb2.mul(j, per)
        o_hi = lb2.min(lb2.add(o_lo, per), o)
        xoff = lb2.add(base, lb2.mul(n, lb2.mul(c, lb2.mul(hp, wp))))
        yoff = lb2.mul(n, lb2.mul(o, npix))
        operands = [xbuf, w.buf, out, xoff, yoff, c, hp, wp, o, kh, kw, ho, wo, lo, hi]
        attributes: dict[str, object] = {"stride": list(stride), "chunk": CHUNK}
        if blocks > 1:
            operands += [o_lo, o_hi]
            attributes["channels"] = const_value(per)
        if clamp is not None:  # the micro-kernels apply it as they store them
            residual = None if clamp.residual is None else \
                (clamp.residual[0], lb2.add(clamp.residual[1], yoff))  # laid out as y
            present = [(name, part) for name, part in
                       (("scale", clamp.scale), ("shift", clamp.shift), ("residual", residual))
                       if part is not None]
            attributes["affine"] = [name for name, _ in present]
            attributes["clamp"] = [clamp.lo, clamp.hi]
            operands += [v for _, part in present for v in part]
        lb2.b.create(NAME, operands, attributes=attributes)
        if epilogue is None or clamp is not None:
            return
        epi, final = epilogue

        def channel(lb3: LoopBuilder, oc: Value, _: list[Value]) -> list[Value]:
            epi.apply(lb3, out, final, n, oc, lb3.add(yoff, lb3.mul(oc, npix)), lo, hi)
            return []
        lb2.loop(o_lo, o_hi, channel)
    lb.nest([lb.mul(nb, lb.mul(count, lb.idx(blocks)))], piece, parallel=True)


#: pieces (images x pixel chunks x channel blocks) a convolution's loop has at least
#: when its channels allow: enough for the threads of the machines we run on to share
#: (fixed, so the lowering does not depend on the host's CPUs)
MIN_PIECES = 4
#: output channels a block keeps at least when an image splits over its channels:
#: each block packs the pixels' patches again, which this many channels'
#: multiply-adds amortize
MIN_BLOCK_CHANNELS = 64


def channel_blocks(images: int | None, chunks: int | None, channels: int | None) -> int:
    """Output-channel blocks per pixel chunk: 1, unless the images x pixel chunks are
    fewer than MIN_PIECES, then enough blocks to reach it, each of at least
    MIN_BLOCK_CHANNELS channels. A dynamic batch counts as one image (a model's
    batch dimension is symbolic, and inference runs one image at a time).
    ResNet-18's last stages (14x14 and 7x7 pixels: one chunk, 256 and 512 channels)
    ran on one thread whatever the threads."""
    if chunks is None or channels is None:
        return 1
    pieces = (images or 1) * chunks
    if pieces >= MIN_PIECES:
        return 1
    return max(1, min(-(-MIN_PIECES // pieces), channels // MIN_BLOCK_CHANNELS))
