"""``loop.conv2d {winograd = m}`` (loops/conv.py): a 3x3, stride-1 convolution as
Winograd's F(m x m, 3x3), m = 2 or 4 (Lavin & Gray, "Fast Algorithms for Convolutional
Neural Networks", 2015), in conv_rows.py's layout.

Each m x m block of outputs (a "tile") needs an a x a window ``d`` of the padded input
(a = m + 2), and per pair of channels the algorithm computes it from a^2 products:
16 for 4 outputs (F(2x2)) or 36 for 16 (F(4x4)), not 9 per output:

    Y = A^T [ (G g G^T) (.) (B^T d B) ] A          (.) elementwise over the a x a

- ``U = G g G^T``: the weight's transform, once per model (``prepack``; per call in
  ``conv_wino{m}_raw`` below), stored as a^2 matrices ``U[e]^T`` (C x O) in the gemm's
  panel layout, one after the other;
- ``V = B^T d B``: every tile's transform, per input channel;
- the products summed over the input channels are a^2 GEMMs with the tiles as rows and
  the output channels as the vector lanes: ``M[e] (tiles x O) = V[e] (tiles x C) @
  U[e]^T``: a^2 * C * O multiply-adds per tile against 9 m^2 * C * O directly (2.25x
  fewer for F(2x2), 4x for F(4x4));
- ``Y = A^T M A`` turns each tile's a^2 sums into its m x m outputs.

    conv_wino{m}(x, up, y, c, hp, wp, o, kh, kw, ho, wo)      ; one image (kh = kw = 3)
    conv_wino{m}_raw(x, w, y, c, hp, wp, o, kh, kw, ho, wo)   ; w not frozen: U per call

splits the image's tiles over the pool as conv_rows does its pixels (a few tiles: its
output channels). A chunk (``tiles_part``) goes through its tiles in blocks of at most
``BLOCK_TILES``, and per block:
1. transforms the tiles' windows into a^2 row-major A matrices (K-block-major as
   conv_rows' patches), in its thread's scratch memory;
2. multiplies each by its ``U[e]^T`` panels (of its output channels) into its own C
   tile (scratch memory too);
3. transforms each tile's a^2 sums into outputs, a vector of output channels at a
   time, and stores those that fall inside the plane.

``conv_wino{m}_raw`` (a weight that is a kernel's input, not frozen) transforms the
weight into its thread's scratch memory first, on every call: a^2 * O * C outputs,
against the GEMMs' a^2 * O * C * tiles multiply-adds (the lowering takes it from 24
tiles of 2x2 up).

Numerics: F(2x2)'s transforms add and subtract (U scales by 1/2, exactly); F(4x4)'s
multiply by 2, 4, 5, 8 and 1/4, 1/6, 1/12, 1/24, so its outputs carry ~15x F(2x2)'s
rounding error: against a float64 reference, ~4e-7 (F(2x2)) and ~5e-6 (F(4x4)) of the
largest output, with 256 channels (the tests bound both at 1e-5 of the outputs' scale;
ResNet-18 differs from ONNX Runtime by 8e-6 on logits up to 5.5).

Invariants: the padded input holds ``hp = ho + 2`` rows of ``wp = wo + 2`` (stride 1,
3x3); a tile reaching past it (``ho`` or ``wo`` not a multiple of m) reads zeros there,
and its outputs past the plane are not stored. ``o`` is a multiple of NR (the codegen
falls back to conv_rows.py otherwise): ``U[e]^T``'s panels then start at ``e * o * c``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from llvmlite import ir

from ...dtypes import DType
from .conv_rows import ConvRowsBuilder
from .gemm import _i, imin
from .runtime import for_range
from .scratch import SLOT_CONV_PACK, SLOT_CONV_TILE, SLOT_CONV_WEIGHT, scratch, scratch_done
from .types import I1, I32, I64, PTR, splat, undef, zeros


@dataclass(frozen=True)
class Form:
    """F(m x m, 3x3): ``m`` outputs per tile side from an ``m + 2`` window; the weight's
    G ((m+2) x 3), the input's B^T and the output's A^T (m x (m+2))."""

    m: int
    g: tuple[tuple[float, ...], ...]
    bt: tuple[tuple[float, ...], ...]
    at: tuple[tuple[float, ...], ...]

    @property
    def alpha(self) -> int:
        """The window's side, and the products per tile are its square."""
        return self.m + 2


#: Lavin & Gray's F(2x2, 3x3) (interpolation points 0, 1, -1) and F(4x4, 3x3) (0, 1, -1,
#: 2, -2): 16 products for 4 outputs, 36 for 16
FORMS = {
    2: Form(2, g=((1, 0, 0), (0.5, 0.5, 0.5), (0.5, -0.5, 0.5), (0, 0, 1)),
            bt=((1, 0, -1, 0), (0, 1, 1, 0), (0, -1, 1, 0), (0, 1, 0, -1)),
            at=((1, 1, 1, 0), (0, 1, -1, -1))),
    4: Form(4, g=((1 / 4, 0, 0), (-1 / 6, -1 / 6, -1 / 6), (-1 / 6, 1 / 6, -1 / 6),
                  (1 / 24, 1 / 12, 1 / 6), (1 / 24, -1 / 12, 1 / 6), (0, 0, 1)),
            bt=((4, 0, -5, 0, 1, 0), (0, -4, -4, 1, 1, 0), (0, 4, -4, -1, 1, 0),
                (0, -2, -1, 2, 1, 0), (0, 2, -1, -2, 1, 0), (0, 4, 0, -5, 0, 1)),
            at=((1, 1, 1, 1, 1, 0), (0, 1, -1, 2, -2, 0), (0, 1, 1, 4, 4, 0),
                (0, 1, -1, 8, -8, 1))),
}

#: tiles a chunk transforms and multiplies at a time (bounds its scratch memory: a^2 A
#: and a^2 C rows per tile, 768 KiB at 128 channels and F(2x2)). 24, 48 and 96 ran ResNet-18's
#: 56x56 and 28x28 layers the same within this host's noise, at one and two threads.
BLOCK_TILES = 48
#: elements between the ends and starts of the A (and C) matrices: a cache line
SKEW = 16


def _combine(b: ir.IRBuilder, coefficients: tuple[float, ...], terms: list[ir.Value]) -> ir.Value:
    """``sum_i coefficients[i] * terms[i]`` (scalars or vectors), skipping the zeros and
    adding or subtracting where a coefficient is 1 or -1."""
    total: ir.Value | None = None
    for coefficient, term in zip(coefficients, terms, strict=True):
        if coefficient == 0:
            continue
        sign = 1 if coefficient > 0 else -1
        if abs(coefficient) != 1:
            scale = abs(float(coefficient))
            constant = ir.Constant(term.type, [scale] * term.type.count
                                   if isinstance(term.type, ir.VectorType) else scale)
            term = b.fmul(constant, term)
        if total is None:
            total = term if sign > 0 else b.fneg(term)
        else:
            total = b.fadd(total, term) if sign > 0 else b.fsub(total, term)
    assert total is not None
    return total


class ConvWinogradBuilder(ConvRowsBuilder):
    def __init__(self, mod: ir.Module, dtype: DType, tile: int):
        super().__init__(mod, dtype, (1, 1))
        self.form = FORMS[tile]
        self.tag = f"{self.tag}.m{tile}"

    def prepack(self, name: str) -> ir.Function:
        """``conv_wino{m}_prepack(w, P, o, c, ldw)``: ``U[e]^T`` for e < a^2 as the a^2
        blocks of O columns of one C x a^2*O matrix in panels: ``P[j*NR*c + q*NR + jj]``
        holds column ``j*NR + jj`` = ``e*o + oc``'s row ``q`` (input channel),
        ``U[e][oc, q] = (G w[oc, q] G^T)[e // a, e % a]``; ``ldw`` is unused (the weight
        is contiguous, 9 taps per channel pair); ``o`` a multiple of NR. Once per model
        (per call in ``raw_driver``), on the pool's threads (``parallel_prepack``), W
        output channels at a time: a tap of W channels is one gather, and each of the
        a^2 panels is written row after row, a vector at a time (one channel at a time,
        scalar, took ~60 ms over ResNet-18's weights)."""
        def panels(b: ir.IRBuilder, args: list[ir.Value], lo: ir.Value, hi: ir.Value) -> None:
            w, pk, o, c, _ = args
            every = ir.Constant(ir.VectorType(I1, self.w), [1] * self.w)
            blank = undef(self.vt)
            load = self.strided_gather(b, b.mul(c, _i(9)))  # lane l: channel oc + l's weights

            def pair(ob: ir.Value, q: ir.Value, jj: ir.Value) -> None:
                oc = b.add(ob, jj)
                taps = b.gep(w, [b.mul(b.add(b.mul(oc, c), q), _i(9))], source_etype=self.et)
                g = [[load(taps, _i(3 * i + j), every, blank) for j in range(3)] for i in range(3)]
                # G g (a x 3), then (G g) G^T (a x a)
                f, n = self.form, self.form.alpha
                gg = [[_combine(b, f.g[k], [g[i][j] for i in range(3)]) for j in range(3)]
                      for k in range(n)]
                row = b.add(b.mul(q, _i(self.nr)), jj)  # in the panel of columns e*o + ob..
                for k in range(n):
                    for l_ in range(n):
                        panel = b.mul(b.add(b.mul(_i(n * k + l_), o), ob), c)
                        b.store(_combine(b, f.g[l_], gg[k]),
                                b.gep(pk, [b.add(panel, row)], source_etype=self.et), align=self.size)

            def panel(ob: ir.Value) -> None:
                for_range(b, _i(0), c, 1, lambda q: for_range(
                    b, _i(0), _i(self.nr), self.w, lambda jj: pair(ob, q, jj), "jj"), "q")
            for_range(b, lo, hi, self.nr, panel, "ob")
        return self.parallel_prepack(name, panels)

    def strided_gather(self, b: ir.IRBuilder, stride: ir.Value
                       ) -> Callable[[ir.Value, ir.Value, ir.Value, ir.Value], ir.Value]:
        """``load(base, offset, mask, passthru)``: W elements, lane l's at ``base[offset +
        l * stride]`` (one masked gather; masked-off lanes read nothing)."""
        vi, ptrs_t = ir.VectorType(I64, self.w), ir.VectorType(PTR, self.w)
        mask_t = ir.VectorType(I1, self.w)
        gather = self.intrinsic(f"llvm.masked.gather.v{self.w}{self.suffix}.v{self.w}p0", self.vt,
                                [ptrs_t, I32, mask_t, self.vt])
        lane_bytes = b.mul(ir.Constant(vi, list(range(self.w))),
                           splat(b, b.mul(stride, _i(self.size)), vi))

        def load(base: ir.Value, offset: ir.Value, mask: ir.Value, passthru: ir.Value) -> ir.Value:
            first = b.ptrtoint(b.gep(base, [offset], source_etype=self.et), I64)
            ptrs = b.inttoptr(b.add(splat(b, first, vi), lane_bytes), ptrs_t)
            return b.call(gather, [ptrs, ir.Constant(I32, self.size), mask, passthru])
        return load

    def raw_driver(self, name: str) -> ir.Function:
        """``conv_wino{m}_raw`` (module docstring): ``prepack`` into scratch memory, then
        ``driver``; the buffer stays this thread's until the workers are done."""
        fn = ir.Function(self.mod, ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR] + [I64] * 8), name)
        fn.linkage = "internal"
        x, w, y, c, *rest = fn.args
        o = rest[2]
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        u_bytes = b.mul(b.mul(self.round_up(b, b.mul(o, _i(self.products))), c), _i(self.size))
        u = scratch(self.mod, b, None, SLOT_CONV_WEIGHT, b.add(u_bytes, _i(64)))
        b.call(self.prepack(f"wia.conv.wino.prepack.{self.tag}"), [w, u, o, c, c])
        b.call(self.driver(), [x, u, y, c, *rest])
        scratch_done(self.mod, b, SLOT_CONV_WEIGHT, u)
        b.ret_void()
        return fn

    def driver(self, name: str | None = None) -> ir.Function:
        """``conv_wino`` (module docstring): the tiles over the pool in chunks of whole
        micro-kernel rows."""
        def tiles(b: ir.IRBuilder, c: ir.Value, o: ir.Value, *sizes: ir.Value) -> tuple[ir.Value, ir.Value]:
            m = b.mul(self.tiles(b, sizes[2]), self.tiles(b, sizes[3]))
            return m, b.mul(b.mul(m, b.mul(c, _i(self.products))), o)
        return self.split_driver(name or f"wia.conv.wino.{self.tag}", self.tiles_part(), tiles)

    @property
    def products(self) -> int:
        """Products per tile and channel pair: the GEMMs, the matrices U, A and C."""
        return self.form.alpha ** 2

    def tiles(self, b: ir.IRBuilder, n: ir.Value) -> ir.Value:
        """Tiles along an axis of ``n`` outputs: ``ceil(n / m)``."""
        return b.sdiv(b.add(n, _i(self.form.m - 1)), _i(self.form.m))

    def tiles_part(self) -> ir.Function:
        """``part(ctx, lo, hi, col_lo, col_hi)`` (``new_part``): the tiles ``[lo, hi)``
        of the output channels ``[col_lo, col_hi)``, in blocks of at most BLOCK_TILES
        (``block``)."""
        name = f"wia.conv.wino.tiles.{self.tag}"
        if name in self.mod.globals:
            return self.mod.globals[name]
        fn, b, words, (lo, hi), span = self.new_part(name)
        x, up, y = (b.inttoptr(v, PTR) for v in words[:3])
        c, hp, wp, o, _, _, ho, wo = words[3:11]
        n = b.sub(hi, lo)
        blocks = b.sdiv(b.add(n, _i(BLOCK_TILES - 1)), _i(BLOCK_TILES))
        size = b.sdiv(b.add(n, b.sub(blocks, _i(1))), blocks)  # even blocks: no short tail
        kcb = self.k_block(b, c)
        lda = kcb
        kblocks = b.sdiv(b.add(c, b.sub(kcb, _i(1))), kcb)
        # one of the A matrices, and one C, each a cache line longer: 16 streams a
        # multiple of 4 KiB apart fell into one L1 set (the input transform ran 3x slower)
        a_elems = b.add(b.mul(b.mul(kblocks, size), lda), _i(SKEW))
        a_all = scratch(self.mod, b, None, SLOT_CONV_PACK,
                        b.add(b.mul(b.mul(a_elems, _i(self.products)), _i(self.size)), _i(64)))
        cols = self.round_up(b, o)
        c_elems = b.add(b.mul(size, cols), _i(SKEW))
        c_all = scratch(self.mod, b, None, SLOT_CONV_TILE,
                        b.add(b.mul(b.mul(c_elems, _i(self.products)), _i(self.size)), _i(64)))
        shape = (c, hp, wp, o, ho, wo, cols)

        # a window (or a tile's sums) transformed along one axis: a^2 vectors; then a
        # tile's m^2 outputs (``transform_output``)
        half = b.alloca(self.vt, self.products + self.form.m ** 2)

        def block(first: ir.Value) -> None:
            m = imin(b, size, b.sub(hi, first))
            self.transform_input(b, x, a_all, (a_elems, kcb, lda), shape, first, m, half)
            self.multiply(b, (a_all, a_elems, lda, kcb), (up, c_all, c_elems), (c, o, cols), m, span)
            self.transform_output(b, y, c_all, c_elems, shape, first, m, half, span)
        for_range(b, lo, hi, size, block, "blk")
        scratch_done(self.mod, b, SLOT_CONV_TILE, c_all)
        scratch_done(self.mod, b, SLOT_CONV_PACK, a_all)
        b.ret(ir.Constant(I32, 0))
        return fn

    def transform_input(self, b: ir.IRBuilder, x: ir.Value, a_all: ir.Value,
                        layout: tuple[ir.Value, ir.Value, ir.Value], shape: tuple[ir.Value, ...],
                        first: ir.Value, m: ir.Value, half: ir.Value) -> None:
        """``A[e][r, ci] = (B^T d B)[e // a, e % a]`` for the ``m`` tiles from ``first``
        (``d`` = tile ``first + r``'s a x a window of channel ``ci``; zeros past the
        padded image), K-block-major: block ``ci // kcb`` of A[e] is ``m`` rows ``lda``
        apart. W channels at a time: each channel's window row is one vector load, and
        W of them transposed give the row's columns with the channels as lanes (a
        gather per window position, which LLVM turned into W scalar loads, ran ResNet-18's
        64-channel 56x56 layer 1.34 -> 1.25 ms at one thread, and 1.03 with the masked
        loads and stores, microcoded on AMD, only where the window, the plane or the
        channels end); the sums are vector adds, and each A[e] row gets one store. In
        two passes over the window, each a loop of ``a`` steps with
        the half-transformed window in ``half`` (a^2 vectors on the stack): ``d B``
        row by row, then ``B^T (d B)`` column by column (``transform_output`` alike).
        Written out whole, the a^2 positions made the F(4x4) helper's worker ~2,400
        instructions in one block: its LLVM work took 140 ms, now 88 (F(2x2): 68 ->
        64), for the same run time (ResNet-18's layers, alternating processes)."""
        a_elems, kcb, lda = layout
        c, hp, wp, _, _, wo, _ = shape
        tw = self.tiles(b, wo)
        f, n = self.form, self.form.alpha
        mask_t = ir.VectorType(I1, self.w)
        mstore = self.intrinsic(f"llvm.masked.store.v{self.w}{self.suffix}.p0", ir.VoidType(),
                                [self.vt, PTR, I32, mask_t])
        mload = self.intrinsic(f"llvm.masked.load.v{self.w}{self.suffix}.p0", self.vt,
                               [PTR, I32, mask_t, self.vt])
        align = ir.Constant(I32, self.size)
        zero = zeros(self.vt)
        none = zeros(mask_t)
        plane_elems = b.mul(hp, wp)
        spans = range(0, n, self.w)  # the window's columns as vectors of W (one for n <= W)

        def tile(pc: ir.Value, r: ir.Value) -> None:
            t = b.add(first, r)
            top, left = b.mul(b.sdiv(t, tw), _i(f.m)), b.mul(b.srem(t, tw), _i(f.m))
            # per vector of the window's columns: its lanes inside the window and the image
            in_cols = [self.lane_masks(b, _i(0), imin(b, _i(n - s), b.sub(wp, b.add(left, _i(s)))))
                       for s in spans]
            row0 = b.add(b.mul(b.sdiv(pc, kcb), b.mul(m, lda)), b.mul(r, lda))
            kc = imin(b, b.sub(c, pc), kcb)

            # the window inside the padded image: every row's loads are plain (below)
            inside = b.and_(b.icmp_signed("<=", b.add(left, _i(n)), wp),
                            b.icmp_signed("<=", b.add(top, _i(n)), hp))

            def channels(q: ir.Value) -> None:
                lanes = self.lane_masks(b, _i(0), b.sub(kc, q))
                valid = [b.icmp_signed("<", _i(k), b.sub(kc, q)) for k in range(self.w)]
                corner = b.add(b.mul(b.add(pc, q), plane_elems), left)
                # the last element a plain load of the window's last row would read (the
                # lanes past the window are dropped) is inside x
                last = b.add(b.add(corner, b.mul(_i(self.w - 1), plane_elems)),
                             b.add(b.mul(b.add(top, _i(n - 1)), wp), _i(spans[-1] + self.w - 1)))
                plain = b.and_(b.and_(inside, b.icmp_signed(">=", b.sub(kc, q), _i(self.w))),
                               b.icmp_signed("<", last, b.mul(c, plane_elems)))

                def window_row(i: ir.Value, masked: bool) -> None:  # (d B)[i, :]
                    y = b.add(top, i)
                    at = b.add(corner, b.mul(imin(b, y, b.sub(hp, _i(1))), wp))
                    in_row = b.icmp_signed("<", y, hp)

                    def load(k: int, s: int, cols: ir.Value) -> ir.Value:
                        ptr = b.gep(x, [b.add(b.add(at, b.mul(_i(k), plane_elems)), _i(s))],
                                    source_etype=self.et)
                        if not masked:
                            return b.load(ptr, typ=self.vt, align=self.size)
                        return b.call(mload, [ptr, align, b.select(b.and_(in_row, valid[k]), cols, none),
                                              zero])
                    # each channel's row of the window (contiguous), then transposed: d[j]
                    # holds column j of every channel; masked loads only where the window
                    # or the channels end
                    d: list[ir.Value] = []
                    for s, cols in zip(spans, in_cols):
                        d += self.transpose(b, [load(k, s, cols) for k in range(self.w)])[:n - s]
                    for l_ in range(n):
                        self.half_store(b, _combine(b, f.bt[l_], d), half, b.add(b.mul(i, _i(n)), _i(l_)))

                def window_column(l_: ir.Value) -> None:  # (B^T (d B))[:, l]
                    column = [self.half_load(b, half, b.add(_i(n * i), l_)) for i in range(n)]
                    at = b.add(b.add(b.mul(l_, a_elems), row0), q)
                    sums = [(_combine(b, f.bt[k], column),
                             b.gep(a_all, [b.add(b.mul(_i(n * k), a_elems), at)], source_etype=self.et))
                            for k in range(n)]
                    # a masked store is microcoded on AMD (on Zen 3, ~30 % of this function's
                    # samples in perf): plain stores for a whole vector of channels
                    with b.if_else(b.icmp_signed(">=", b.sub(kc, q), _i(self.w))) as (whole, part):
                        with whole:
                            for value, dst in sums:
                                b.store(value, dst, align=self.size)
                        with part:
                            for value, dst in sums:
                                b.call(mstore, [value, dst, align, lanes])
                with b.if_else(plain) as (whole, part):
                    for block, masked in ((whole, False), (part, True)):
                        with block:
                            for_range(b, _i(0), _i(n), 1, lambda i, m_=masked: window_row(i, m_), "wrow")
                for_range(b, _i(0), _i(n), 1, window_column, "wcol")
            for_range(b, _i(0), kc, self.w, channels, "q")

        def k_block(pc: ir.Value) -> None:  # no division per channel: ~20 % of the call
            for_range(b, _i(0), m, 1, lambda r: tile(pc, r), "tile")
        for_range(b, _i(0), c, kcb, k_block, "pc")

    def multiply(self, b: ir.IRBuilder, a: tuple[ir.Value, ...], u: tuple[ir.Value, ...],
                 extents: tuple[ir.Value, ...], m: ir.Value, span: tuple[ir.Value, ir.Value]) -> None:
        """``C[e][:, span] = A[e] @ U[e]^T[:, span]`` for e < a^2: the ``m`` rows by the K
        blocks (conv_rows.py's ``multiply_blocks``)."""
        a_all, a_elems, lda, kcb = a
        up, c_all, c_elems = u
        c, o, cols = extents

        def one(e: ir.Value) -> None:
            self.multiply_blocks(b, (b.gep(a_all, [b.mul(e, a_elems)], source_etype=self.et), lda, kcb),
                                 (b.gep(up, [b.mul(e, b.mul(o, c))], source_etype=self.et), c),
                                 (b.gep(c_all, [b.mul(e, c_elems)], source_etype=self.et), cols), m, span)
        for_range(b, _i(0), _i(self.products), 1, one, "e")

    def transform_output(self, b: ir.IRBuilder, y: ir.Value, c_all: ir.Value, c_elems: ir.Value,
                         shape: tuple[ir.Value, ...], first: ir.Value, m: ir.Value,
                         half: ir.Value, span: tuple[ir.Value, ir.Value]) -> None:
        """``y``'s m x m outputs of the ``m`` tiles from ``first``, of the output channels
        ``span`` (whole vectors of them): ``A^T M A`` of each
        tile's a^2 sums (``C[e][r, oc]``), W output channels at a time (a row of C is
        contiguous), in two loops as ``transform_input``: ``M A`` row by row into
        ``half``, then ``A^T (M A)`` column by column into ``half`` after it (the
        tile's m^2 outputs, a vector of W channels each), then stored to the channels'
        planes (``store_outputs``)."""
        _, _, _, o, ho, wo, cols = shape
        tw = self.tiles(b, wo)
        f, n = self.form, self.form.alpha
        plane = b.mul(ho, wo)

        def tile(r: ir.Value) -> None:
            t = b.add(first, r)
            top, left = b.mul(b.sdiv(t, tw), _i(f.m)), b.mul(b.srem(t, tw), _i(f.m))
            row = b.mul(r, cols)

            def channels(oc: ir.Value) -> None:
                def sums_row(k: ir.Value) -> None:  # (M A)[k, :]
                    at = b.add(b.add(b.mul(b.mul(k, _i(n)), c_elems), row), oc)
                    sums = [self.load_vector(b, c_all, b.add(b.mul(_i(j), c_elems), at))
                            for j in range(n)]
                    for b_ in range(f.m):
                        self.half_store(b, _combine(b, f.at[b_], sums), half, b.add(b.mul(k, _i(f.m)), _i(b_)))

                def output_column(b_: ir.Value) -> None:  # (A^T (M A))[:, b]
                    column = [self.half_load(b, half, b.add(_i(f.m * k), b_)) for k in range(n)]
                    for a in range(f.m):
                        self.half_store(b, _combine(b, f.at[a], column), half,
                                        b.add(_i(self.products + f.m * a), b_))
                for_range(b, _i(0), _i(n), 1, sums_row, "srow")
                for_range(b, _i(0), _i(f.m), 1, output_column, "ocol")
                self.store_outputs(b, b.gep(y, [b.mul(oc, plane)], source_etype=self.et), half,
                                   (top, left), (ho, wo), plane)
            for_range(b, span[0], span[1], self.w, channels, "oc")
        for_range(b, _i(0), m, 1, tile, "tile")

    def store_outputs(self, b: ir.IRBuilder, channel: ir.Value, half: ir.Value,
                      corner: tuple[ir.Value, ir.Value], extent: tuple[ir.Value, ir.Value],
                      plane: ir.Value) -> None:
        """Store a tile's m^2 outputs (``half`` from ``products`` on, row-major, W
        channels each, the first at ``channel``) in the channels' planes, the outputs
        past the plane dropped. A tile inside the plane, when W divides m^2 and m
        divides W (F(4x4)): per group of W outputs, the W x W block transposed
        (``transpose``), so that each channel's outputs are W / m runs of m, each one
        vector store (at F(4x4) on AVX-512: 64 stores and 64 shuffles a tile and 16
        channels, where each output's lanes stored one by one took 256 lane extracts and
        stores, about a third of the F(4x4) helper's samples in ResNet-18; its 64-channel
        56x56 layer 417-445 -> 380-391 us at one thread). Else (F(2x2), the tiles at the plane's
        edges) each output's lanes one by one (one masked scatter each ran the
        64-channel 56x56 layer 4 % slower on Zen 4)."""
        (top, left), (ho, wo) = corner, extent
        m = self.form.m

        def lanes_one_by_one(p: ir.Value) -> None:
            oh, ow = b.add(top, b.sdiv(p, _i(m))), b.add(left, b.srem(p, _i(m)))
            out = self.half_load(b, half, b.add(_i(self.products), p))
            with b.if_then(b.and_(b.icmp_signed("<", oh, ho), b.icmp_signed("<", ow, wo))):
                at = b.add(b.mul(oh, wo), ow)
                for lane in range(self.w):
                    b.store(b.extract_element(out, ir.Constant(I32, lane)),
                            b.gep(channel, [b.add(at, b.mul(_i(lane), plane))], source_etype=self.et))
        if (m * m) % self.w or self.w % m:
            for_range(b, _i(0), _i(m * m), 1, lanes_one_by_one, "out")
            return
        inside = b.and_(b.icmp_signed("<=", b.add(top, _i(m)), ho), b.icmp_signed("<=", b.add(left, _i(m)), wo))
        with b.if_else(inside) as (whole, edge):
            with whole:
                for group in range(m * m // self.w):
                    outputs = [self.half_load(b, half, _i(self.products + group * self.w + p))
                               for p in range(self.w)]
                    for lane, mine in enumerate(self.transpose(b, outputs)):
                        for run in range(self.w // m):
                            oh = b.add(top, _i(group * (self.w // m) + run))
                            at = b.add(b.add(b.mul(oh, wo), left), b.mul(_i(lane), plane))
                            values = b.shuffle_vector(mine, undef(self.vt),
                                                      ir.Constant(ir.VectorType(I32, m),
                                                                  list(range(run * m, run * m + m))))
                            b.store(values, b.gep(channel, [at], source_etype=self.et), align=self.size)
            with edge:
                for_range(b, _i(0), _i(m * m), 1, lanes_one_by_one, "out")

    def transpose(self, b: ir.IRBuilder, rows: list[ir.Value]) -> list[ir.Value]:
        """The W x W matrix of ``rows`` (W vectors) transposed: vector j holds lane j of
        every row. log2(W) rounds of a perfect shuffle: row pairs (i, i + W/2)
        interleaved lane by lane, the low half of each pair's result to row 2i and the
        high half to 2i + 1."""
        w = self.w
        order = [k // 2 + (w if k % 2 else 0) for k in range(2 * w)]
        low, high = (ir.Constant(ir.VectorType(I32, w), order[h * w:(h + 1) * w]) for h in (0, 1))
        for _ in range(w.bit_length() - 1):
            rows = [b.shuffle_vector(rows[i], rows[i + w // 2], mask)
                    for i in range(w // 2) for mask in (low, high)]
        return rows

    def load_vector(self, b: ir.IRBuilder, base: ir.Value, at: ir.Value) -> ir.Value:
        """W consecutive elements from ``base[at]`` (aligned to an element)."""
        ptr = b.gep(base, [at], source_etype=self.et)
        return b.load(ptr, typ=self.vt, align=self.size)

    def half_load(self, b: ir.IRBuilder, half: ir.Value, at: ir.Value) -> ir.Value:
        """Vector ``at`` of ``half`` (the stack buffer of a half-done transform)."""
        return b.load(b.gep(half, [at], source_etype=self.vt), typ=self.vt, align=self.size)

    def half_store(self, b: ir.IRBuilder, value: ir.Value, half: ir.Value, at: ir.Value) -> None:
        b.store(value, b.gep(half, [at], source_etype=self.vt), align=self.size)
