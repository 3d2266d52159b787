"""Winograd's F(2x2, 3x3) and F(4x4, 3x3) for 3x3 stride-1 convolutions (loops/conv.py's
``winograd_tile``, backends/llvm/conv_winograd.py) against NumPy, each form on planes of 1x1 to
29x29 (odd ones: the last tiles hang over and their outputs past the plane are
dropped), padding 0, 1 and 2, input channels in one and in several K blocks and not a
multiple of anything, output channels in one and several panels, two images, with and
without a fused epilogue, at one and two threads, with a frozen weight (packed on the
first call and read packed on the second) and with a weight that is an input
(transformed on every call); the rule; the lowering as IR text; and the hint on a
shape the kernel does not take (conv_rows.py computes it)."""

from __future__ import annotations

import numpy as np
import pytest

import wiadsl
from wiadsl.backends.llvm.compile import lower_kernel
from wiadsl.cache import entries as cache
from wiadsl.ir import parse_module, print_module
from wiadsl.loops import conv
from wiadsl.loops.conv import winograd_tile

BIASED = """
kernel c(input x: f32[N, C, H, W], input w: f32[O, C, 3, 3], input b: f32[O, 1, 1],
         output y: f32[N, O, P, Q]) {{
    y = relu(conv2d(x, w, stride=1, padding={p}) + b);
}}
"""
PLAIN = """
kernel c(input x: f32[N, C, H, W], input w: f32[O, C, 3, 3], output y: f32[N, O, P, Q]) {{
    y = conv2d(x, w, stride=1, padding={p});
}}
"""


@pytest.fixture(params=[2, 4], ids=["F2", "F4"])
def any_shape(request, monkeypatch):
    """The rule opened to every 3x3 stride-1 shape with whole panels of output channels
    (the kernel is right for any; the rule picks where it is fast), with one form,
    F(2x2, 3x3) or F(4x4, 3x3), and no cached kernel of the default rule (its
    constants are not the cache key's)."""
    monkeypatch.setattr(conv, "WINO_CHANNELS", 1)
    monkeypatch.setattr(conv, "WINO_TILES", 1)
    monkeypatch.setattr(conv, "WINO_TILES_PER_CALL", 1)
    monkeypatch.setattr(conv, "WINO4_TILES", 1 if request.param == 4 else 1 << 30)
    monkeypatch.setenv("WIADSL_CACHE", "0")
    cache.clear_memory()
    yield
    cache.clear_memory()


def reference(x: np.ndarray, w: np.ndarray, p: int) -> np.ndarray:
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p, p), (p, p)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))
    return np.einsum("nchwij,ocij->nohw", win, w.astype(np.float64))


def run(source: str, args: tuple[np.ndarray, ...], threads: int,
        frozen: tuple[int, ...] = (1,)) -> list[np.ndarray]:
    """Two calls (with a frozen weight, the first packs it and the second reads it
    packed)."""
    before = wiadsl.get_num_threads()
    wiadsl.set_num_threads(threads)
    try:
        f = wiadsl.jit(source, "c", frozen=frozen, shapes="static")
        return [f(*args) for _ in range(2)]
    finally:
        wiadsl.set_num_threads(before)


# (images, channels in, plane height, plane width, channels out, padding): ResNet-18's
# 7x7 stage; a 1x1 plane (one tile, three of its outputs dropped); odd planes; no
# padding and padding 2; 700 input channels (several K blocks) and 3 (one, part full);
# 128 output channels (two or more panels) on two images; a plane wider than high
CASES = [(1, 80, 7, 7, 512, 1), (1, 64, 1, 1, 64, 1), (1, 33, 13, 13, 64, 1),
         (2, 3, 9, 9, 64, 0), (1, 700, 5, 5, 128, 1), (2, 67, 29, 29, 128, 1),
         (1, 40, 6, 6, 64, 2), (1, 70, 4, 11, 192, 1)]


@pytest.mark.parametrize("frozen", [(1,), ()], ids=["frozen", "input"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("source", [BIASED, PLAIN], ids=["epilogue", "plain"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c)))
def test_winograd_matches_numpy(case, source: str, threads: int, frozen: tuple[int, ...],
                                any_shape) -> None:
    n, c, h, wd, o, p = case
    rng = np.random.default_rng(sum(case))
    x = rng.standard_normal((n, c, h, wd)).astype(np.float32)
    w = rng.standard_normal((o, c, 3, 3)).astype(np.float32)
    b = rng.standard_normal((o, 1, 1)).astype(np.float32)
    want = reference(x, w, p)
    if source is BIASED:
        want = np.maximum(want + b, 0)
    args = (x, w, b) if source is BIASED else (x, w)
    # the products are summed in another order than the direct sum's: a few ulps of
    # the largest terms (|y| up to ~4 sqrt(9 c))
    scale = 4 * np.sqrt(9 * c)
    for got in run(source.format(p=p), args, threads, frozen):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * scale)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", [(1, 9, 13, 13, 64, 1), (2, 16, 8, 8, 64, 1)],
                         ids=lambda c: "x".join(map(str, c)))
def test_f64_windows_wider_than_a_vector(case, threads: int, any_shape) -> None:
    """f64: a window row of F(4x4) (6 columns) is two vectors of 4 lanes on AVX2 (two
    loads and transposes per channel row), one of 8 on AVX-512; channels not a whole
    vector (9) and plane edges inside a tile (13) take the masked loads, whole ones (16,
    8) the plain."""
    n, c, h, wd, o, p = case
    rng = np.random.default_rng(sum(case))
    x = rng.standard_normal((n, c, h, wd))
    w = rng.standard_normal((o, c, 3, 3))
    source = PLAIN.format(p=p).replace("f32", "f64")
    scale = 4 * np.sqrt(9 * c)
    for got in run(source, (x, w), threads):
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, reference(x, w, p), rtol=1e-9, atol=1e-12 * scale)


@pytest.mark.parametrize(("extents", "frozen", "tile"), [
    ((64, 64, 3, 3, (1, 1), 56, 56), True, 4),        # ResNet-18's stages: F(4x4) from
    ((256, 256, 3, 3, (1, 1), 14, 14), True, 4),      # 16 tiles of 4x4,
    ((512, 512, 3, 3, (1, 1), 7, 7), True, 2),        # F(2x2) below
    ((64, 128, 3, 3, (2, 2), 28, 28), True, 0),       # stride 2
    ((64, 64, 1, 1, (1, 1), 56, 56), True, 0),        # 1x1
    ((32, 64, 3, 3, (1, 1), 32, 32), True, 0),        # few input channels (the small CNN)
    ((64, 96, 3, 3, (1, 1), 32, 32), True, 0),        # output channels not whole panels
    ((256, 256, 3, 3, (1, 1), 5, 5), True, 0),        # 9 tiles: too few rows for the GEMMs
    ((64, 64, 3, 3, (1, 1), 56, 56), False, 4),       # a weight transformed per call:
    ((256, 256, 3, 3, (1, 1), 10, 10), False, 2),     # 25 tiles pay for it,
    ((512, 512, 3, 3, (1, 1), 7, 7), False, 0)])      # 16 do not
def test_which_convolutions_take_winograd(extents, frozen: bool, tile: int) -> None:
    assert winograd_tile(*extents, frozen=frozen) == tile


TENSOR_CONV = """
func @c(%x: tensor<1x64x{h}x{h}xf32>, %w: tensor<128x64x3x3xf32>) -> tensor<1x128x{h}x{h}xf32> attributes {{kernel, outputs = ["y"]}} {{
^entry:
  %y = tensor.conv2d %x, %w {{stride = [1, 1], padding = [1, 1]}} : (tensor<1x64x{h}x{h}xf32>, tensor<128x64x3x3xf32>) -> tensor<1x128x{h}x{h}xf32>
  return %y : tensor<1x128x{h}x{h}xf32>
}}
"""


@pytest.mark.parametrize(("plane", "frozen", "hints", "helper"), [
    (7, frozenset({1}), "rows, winograd = 2", "conv_wino2"),   # 16 tiles, packed once
    (7, frozenset(), None, None),                              # 16 tiles, per call: direct
    (10, frozenset(), "winograd = 2", "conv_wino2_raw"),       # 25 tiles, per call
    (28, frozenset({1}), "rows, winograd = 4", "conv_wino4")])  # 49 tiles of 4x4
def test_the_lowering_hints_winograd(plane: int, frozen: frozenset[int], hints: str | None,
                                     helper: str | None) -> None:
    lowered = lower_kernel(parse_module(TENSOR_CONV.format(h=plane)), "c",
                           [[1, 64, plane, plane], [128, 64, 3, 3]], frozen=frozen)
    loops = print_module(lowered.loop_ir)
    # CHECK: loop.conv2d {{stride = [1, 1], <hints>}}, once per image, no pixel chunks
    assert (f"{{stride = [1, 1], {hints}}}" in loops) == (hints is not None)
    assert ("chunk = " in loops) == (hints is None)
    assert print_module(parse_module(loops)) == loops  # the hints parse back
    text = lowered.llvm_ir
    # CHECK (frozen w): the transform packed once behind a compare-and-swap, then the kernel
    # CHECK (w an input): the kernel that transforms it per call, no state
    # CHECK-NOT: conv_rows; conv_range only without the hint
    prepack = f"{helper}_prepack" if helper else "none"
    assert (f"@\"wia.lib.{prepack}.f32." in text and "cmpxchg" in text) == bool(frozen)
    for kind in ("conv_wino2", "conv_wino2_raw", "conv_wino4", "conv_wino4_raw"):
        assert (f"@\"wia.lib.{kind}.f32." in text) == (kind == helper)
    assert "@\"wia.lib.conv_rows.f32." not in text
    assert ("@\"wia.lib.conv_range.f32." in text) == (helper is None)


@pytest.mark.parametrize("threads", [1, 2])
def test_the_hint_on_channels_inside_a_panel_runs_conv_rows(monkeypatch, threads: int) -> None:
    """``winograd`` is a hint: with output channels that end inside a panel (the
    rule's step lowered to 1) the backend computes the convolution with conv_rows.py."""
    monkeypatch.setattr(conv, "WINO_CHANNEL_STEP", 1)
    monkeypatch.setenv("WIADSL_CACHE", "0")
    cache.clear_memory()
    shapes = [[1, 64, 14, 14], [130, 64, 3, 3]]
    lowered = lower_kernel(parse_module(TENSOR_CONV.replace("128x", "130x").format(h=14)), "c",
                           shapes, frozen=frozenset({1}))
    assert "rows, winograd = 4}" in print_module(lowered.loop_ir)
    assert "@\"wia.lib.conv_rows.f32." in lowered.llvm_ir
    assert "@\"wia.lib.conv_wino" not in lowered.llvm_ir
    rng = np.random.default_rng(130)
    x = rng.standard_normal((1, 64, 14, 14)).astype(np.float32)
    w = rng.standard_normal((130, 64, 3, 3)).astype(np.float32)
    try:
        for got in run(PLAIN.format(p=1), (x, w), threads):
            np.testing.assert_allclose(got, reference(x, w, 1), rtol=1e-4, atol=1e-3)
    finally:
        cache.clear_memory()
