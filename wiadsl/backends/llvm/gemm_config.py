"""The gemm's parameters (``GemmConfig``) and the config in effect; light, so a
cache key can name the config without importing the gemm's code generator."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

from ...records import as_dict, record
from .host import host

#: k block (K is cut into equal blocks of at most KC) and rows of A per cache block.
#: KC 512 rather than 256: C tiles are loaded and stored half as often, and the
#: KC x NR panel (64 KiB with 16-lane vectors), though larger than L1, streams from
#: L2 in order. Measured in one process against KC 256 (AMD Zen 4, 2 threads,
#: interleaved medians, several runs of benchmarks/gemm_blocking.py): f32 matmul 512^3
#: to 2048^3 +4..10 %; M = 16..256 inference shapes +1..12 %; K <= 256 the same code;
#: convolutions (K = 576 .. 2304) within +-1 %; AVX2 code on the same host 2048^3 +5 %.
KC, MC = 512, 96
#: rows of A per cache block of the AVX2 micro-kernel (``default_config``)
AVX2_MC = 48
#: columns of B per packed block (rounded down to a multiple of NR): KC x NC
#: floats = 512 KiB, so a packed block stays in L2 while every row block of A
#: streams past it (item "N blocking": at n = 2048 the whole packed K-slab was 2 MiB).
NC = 256
PARALLEL_FLOPS = 96 ** 3
#: chunks per thread of a parallel gemm (parallel.py hands them out dynamically)
CHUNKS = 2


@record(frozen=True)
class GemmConfig:
    """The register-blocking and cache-blocking parameters of ``loop.gemm``."""

    mr: int = 6            #: rows of the micro-kernel (broadcast A elements)
    nv: int = 2            #: vectors per micro-kernel row (NR = nv * lanes)
    vector_bits: int = 256  #: 128, 256 or 512 (at most what the host has)
    kc: int = KC           #: k block: the packed B panel is KC x NR
    mc: int = MC           #: rows of A per cache block
    unroll: int = 1        #: k-loop unroll of the micro-kernel (1, 2, 4, 8)

    def check(self, host_bits: int) -> None:
        """Raise ValueError when the config cannot be emitted on this host."""
        if self.vector_bits not in (128, 256, 512) or self.vector_bits > host_bits:
            raise ValueError(f"vector_bits {self.vector_bits} not in 128..{host_bits}")
        if not (1 <= self.mr <= 16 and 1 <= self.nv <= 4 and self.unroll in (1, 2, 4, 8)):
            raise ValueError(f"bad micro-kernel shape {self}")
        if self.kc < 8 or self.mc < self.mr:
            raise ValueError(f"bad cache blocks kc={self.kc} mc={self.mc}")

    def as_dict(self) -> dict[str, int]:
        return as_dict(self)

    def label(self) -> str:
        return (f"mr{self.mr}-nv{self.nv}-v{self.vector_bits}-kc{self.kc}-mc{self.mc}"
                f"-u{self.unroll}")


def ukernel_rows(mr: int) -> tuple[int, ...]:
    """The row counts of the micro-kernels a config with ``mr`` rows calls: ``mr``
    itself and every count below it, so a tail of rows is one call (gemm.py's
    ``GemmBuilder.row_tiles``; conv_rows.py's ``multiply_blocks`` also calls 7 beside 8)."""
    return tuple(range(mr, 0, -1))


def ukernel_symbol(dtype: str, config: GemmConfig, rows: int) -> str:
    """The symbol of the ``rows``-row micro-kernel of ``config`` on ``dtype``: one
    helper object defines them all (library.py's "ukernels"), and the gemm and conv
    helpers call them there rather than each compiling copies of its own."""
    return f"wia.lib.ukernel.{dtype}.{config.label()}.{rows}"


def gemv_symbol(dtype: str, config: GemmConfig, split: bool = False) -> str:
    """The symbol of the gemm driver's one-row product (gemm.py's ``gemv``, or with
    ``split`` its cut over the pool's threads, ``gemv_split``): the "gemv" helper object
    defines both, and the gemm driver calls them there."""
    return f"wia.lib.gemv.{dtype}.{config.label()}" + (".split" if split else "")


def direct_ukernel_symbol(dtype: str, config: GemmConfig, rows: int) -> str:
    """The symbol of conv.py's ``rows``-row direct micro-kernel (a stride-1 convolution's
    tile read from the padded input): one helper object defines them all ("dukernels"),
    which the two stride-1 convolution drivers call."""
    return f"wia.lib.dukernel.{dtype}.{config.label()}.{rows}"


def default_config() -> GemmConfig:
    """The hand-tuned defaults: 8 x 2 vectors with AVX-512; 6 x 2 with AVX2, its k loop
    unrolled four times.

    The AVX2 loop was not unrolled. On an AMD Zen 3 host (2 threads, interleaved
    rounds against OpenBLAS in one process, as benchmarks/gemm_blocking.py times
    them) unrolling took f32 matmul 256^3 .. 2048^3 from 0.76-0.90x to 0.86-1.23x,
    and the ONNX mlp and encoder from 0.85-0.95x ORT's speed to 1.04-1.19x: 6 rows x 2
    vectors issue 28 instructions per 12 FMAs a step, the unrolled loop its address
    and loop arithmetic once per four. (4 x 3 vectors measured the same within the
    host's noise, but its 24-column panels are no divisor of ResNet's channel counts,
    which conv_rows.py and Winograd's products need: loops/conv.py's WINO_CHANNEL_STEP.)

    AVX2 row blocks of ``AVX2_MC`` rows of A, not MC: on the same Zen 3 host (L2 512 KiB,
    8 ways; 2 threads; benchmarks/gemm_blocking.py ``--configs 6x2u4k512m96,6x2u4k512m48``,
    interleaved in one process) f32 matmul 1024^3 0.79-1.03x -> 0.91-1.09x of OpenBLAS (five
    runs), 2048^3 0.83-0.96x -> 0.84-1.00x (six), 512^3 0.96-1.17x -> 1.10-1.21x (two);
    64x512x1024 0.96 -> 1.12x, 256x768x768 0.97 -> 1.06x, 512x64x4096 1.10 -> 1.12x; ONNX
    models (both configs in one process, interleaved rounds) ResNet-18 at 224 31.4 -> 29.3 ms
    at one thread, 18.9 -> 18.2 at two, the encoder 2.90 -> 2.81 ms, MobileNetV2, the mlp and
    the exported ResNet-18 within 1.5 %. A block of A rows read in place (gemm.py reads
    A unpacked) whose rows are 4 or 8 KiB apart falls into few L2 sets: 48 rows stay there
    while the packed B panels stream past, 96 did not."""
    bits = host().vector_bits
    if bits >= 512:
        return GemmConfig(mr=8, nv=2, vector_bits=bits)
    return GemmConfig(mr=6, nv=2, vector_bits=bits, mc=AVX2_MC, unroll=4)


_CONFIG: contextvars.ContextVar[GemmConfig | None] = contextvars.ContextVar("gemm_config", default=None)


def current_config() -> GemmConfig:
    return _CONFIG.get() or default_config()


@contextlib.contextmanager
def use_config(config: GemmConfig | None) -> Iterator[None]:
    """Emit every gemm inside the block with ``config`` (None: the default)."""
    if config is not None:
        config.check(host().vector_bits)
    token = _CONFIG.set(config)
    try:
        yield
    finally:
        _CONFIG.reset(token)
