"""``wiadsl.quantize(kernel, calibration=[...])``: post-training int8 quantization.

    qk = wiadsl.quantize(mod.mlp, calibration=[(x0, w1, b1, w2, b2), ...])
    y = qk(x, w1, b1, w2, b2)          # same signature, same backend, int8 inside
    qk.report                          # QuantReport: max / mean error vs f32, per output

Steps: the kernel's f32 IR (specialized to the dtypes of the first sample) is
optimized up to fusion (``PREPARE``), calibrated in the reference interpreter
(``calibrate.py``: operand 0 of every matmul/conv2d, min-max or percentile),
annotated with ``quant_range`` and rewritten by the ``quantize-int8`` pass
(options from the arguments). The result is a ``QuantizedKernel``: a
``KernelFunction`` whose IR is the quantized module, so argument checking,
specialization caching and every backend work unchanged (the backend runs its
usual pipeline on it). Finally both kernels run on every calibration sample and
``report`` records the error of each output against the f32 kernel.

Invariant: the f32 kernel is not modified; ``QuantizedKernel`` serves only the
``tensor`` parameter dtypes it was calibrated for (others: ``WiaUsageError``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..diagnostics import WiaUsageError
from ..dtypes import DType, from_numpy
from ..ir.copying import copy_module
from ..ir.module import ModuleOp
from ..passes import PassManager, optimize
from ..passes.remarks import Remark
from ..records import record
from ..runtime.binding import bind_call
from ..runtime.jit import KernelFunction
from .calibrate import annotate, calibrate, observer_factory, product_ops
from .params import choose

PREPARE = "inline,canonicalize,sccp,simplify-cfg,cse,licm,canonicalize,dce,fuse,dce"


@dataclass(frozen=True)
class OutputError:
    """Error of one output of the quantized kernel against the f32 kernel."""

    name: str
    max_abs: float
    mean_abs: float
    max_rel: float  #: max_abs / max |f32 output| (0 when that is 0)


@dataclass(frozen=True)
class ActivationParams:
    """The static quantization of one product's activation operand."""

    lo: float
    hi: float
    scale: float
    zero_point: int


@dataclass
class QuantReport:
    """What ``quantize`` did and how far the result is from f32 on the calibration set."""

    products: int = 0
    requantized: int = 0
    #: per product op, in program order: calibrated activation range and the
    #: (scale, zero point) the pass derives from it (``params.choose``)
    activations: list[ActivationParams] = field(default_factory=list)
    outputs: list[OutputError] = field(default_factory=list)
    remarks: list[Remark] = field(default_factory=list)

    def render(self) -> str:
        lines = [f"{self.products} product(s) quantized to int8, {self.requantized} requantize epilogue(s)"]
        lines += [f"  {o.name}: max |err| {o.max_abs:.4g}, mean |err| {o.mean_abs:.4g}, "
                  f"max rel {o.max_rel:.3%}" for o in self.outputs]
        return "\n".join(lines)


@record
class QuantizedKernel(KernelFunction):
    """A kernel whose IR is the int8-quantized module made by ``quantize``."""

    quantized: ModuleOp | None = None
    generic: dict[str, tuple[DType, int]] = field(default_factory=dict)
    report: QuantReport = field(default_factory=QuantReport)

    def ir_for(self, generic: dict[str, tuple[DType, int]] | None = None) -> ModuleOp:
        if (generic or {}) != self.generic:
            raise WiaUsageError(f"quantized kernel '{self.name}' was calibrated for tensor "
                                f"parameters {self.generic}, called with {generic}")
        assert self.quantized is not None
        return copy_module(self.quantized)  # a fresh copy per specialization


def _inputs(kernel: KernelFunction, sample: Sequence[Any] | Mapping[str, Any]) -> list[np.ndarray]:
    bound = bind_call(kernel.signature, (), dict(sample)) if isinstance(sample, Mapping) \
        else bind_call(kernel.signature, tuple(sample), {})
    return list(bound.inputs.values())


def _generic_types(kernel: KernelFunction, inputs: list[np.ndarray]
                   ) -> dict[str, tuple[DType, int]]:
    """The dtype and rank of each ``tensor`` parameter (``KernelFunction.compiled_for``)."""
    params = kernel.signature.inputs
    generic: dict[str, tuple[DType, int]] = {}
    for i in kernel.signature.generic_inputs:
        dtype = from_numpy(inputs[i].dtype)
        assert dtype is not None, "bind_call admits only language dtypes"
        generic[params[i].name] = (dtype, inputs[i].ndim)
    return generic


def quantize(kernel: KernelFunction, calibration: Sequence[Sequence[Any] | Mapping[str, Any]],
             method: str = "minmax", percentile: float = 99.99, per_channel: bool = True,
             symmetric: bool = False, requantize: bool = True) -> QuantizedKernel:
    """The int8 version of ``kernel`` (from ``wiadsl.jit``), calibrated on ``calibration``
    (a non-empty list of argument tuples or name -> value mappings)."""
    if not isinstance(kernel, KernelFunction):
        raise WiaUsageError("quantize() takes a kernel from wiadsl.jit (e.g. mod.mlp)")
    if not calibration:
        raise WiaUsageError("quantize() needs at least one calibration sample")
    if method not in ("minmax", "percentile"):  # a WiaError, not calibrate's ValueError
        raise WiaUsageError(f"quantize(): method must be 'minmax' or 'percentile', got {method!r}")
    samples = [_inputs(kernel, s) for s in calibration]
    generic = _generic_types(kernel, samples[0])
    module = kernel.ir_for(generic)
    optimize(module, pipeline=PREPARE)
    observers = calibrate(module, kernel.name, samples, observer_factory(method, percentile))
    annotate(module, kernel.name, observers)
    acts = []
    for op in product_ops(module, kernel.name):
        lo, hi = op.attributes["quant_range"]
        conv = op.name.endswith("conv2d")
        sc, zp = choose(lo, hi, symmetric or conv)
        acts.append(ActivationParams(lo, hi, float(sc), int(zp)))
    remarks: list[Remark] = []
    spec = (f"quantize-int8{{per_channel={str(per_channel).lower()},symmetric={str(symmetric).lower()},"
            f"method={method},percentile={percentile},requantize={str(requantize).lower()}}},cse,dce")
    pm = PassManager(spec, remarks=remarks)
    pm.run(module)
    stats = pm.statistics().get("quantize-int8", {})
    report = QuantReport(stats.get("products quantized", 0), stats.get("requantize fused", 0),
                         activations=acts, remarks=remarks)
    qk = QuantizedKernel(kernel.source, kernel.signature, kernel.backend, dict(kernel.options),
                         quantized=module, generic=generic, report=report)
    report.outputs = measure(kernel, qk, samples)
    return qk


def measure(reference: KernelFunction, quantized: KernelFunction,
            samples: Sequence[Sequence[Any]]) -> list[OutputError]:
    """Max / mean absolute error of each output of ``quantized`` against ``reference``."""
    names = [p.name for p in reference.signature.outputs]
    worst = {n: [0.0, 0.0, 0.0, 0] for n in names}   # max_abs, sum_abs, max |ref|, count
    for s in samples:
        ref, got = reference(*s), quantized(*s)
        refs = ref if isinstance(ref, tuple) else (ref,)  # a tuple iff several outputs
        gots = got if isinstance(got, tuple) else (got,)
        for n, r, g in zip(names, refs, gots, strict=True):
            r64, g64 = np.asarray(r, np.float64), np.asarray(g, np.float64)
            err = np.abs(r64 - g64)
            w = worst[n]
            w[0] = max(w[0], float(err.max(initial=0.0)))
            w[1] += float(err.sum())
            w[2] = max(w[2], float(np.abs(r64).max(initial=0.0)))
            w[3] += err.size
    return [OutputError(n, w[0], w[1] / max(w[3], 1), w[0] / w[2] if w[2] else 0.0)
            for n, w in worst.items()]
