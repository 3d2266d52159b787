"""Pictures of a profile (matplotlib, an optional extra: ``pip install matplotlib``).

``roofline(profile, path)``: log-log FLOP/s against arithmetic intensity, the
two measured roofs (bandwidth slope, FMA ceiling) and one point per fused
kernel. ``latency(profile, path)``: eager and compiled latency histograms with
their p50 and p99 marked. Both write PNGs with the non-interactive Agg backend.

Invariant: without matplotlib these raise WiaUsageError saying how to install
it; nothing else in the profiler needs matplotlib.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..diagnostics import WiaUsageError
from .profiler import Profile


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise WiaUsageError("--plot needs matplotlib: pip install matplotlib") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def roofline(profile: Profile, path: str | Path) -> Path:
    plt = _pyplot()
    p = profile.peaks
    shown = [s for s in profile.stats if s.bytes and s.flops]
    ais = [s.intensity for s in shown] or [p.ridge]
    lo, hi = min(min(ais), p.ridge) / 4, max(max(ais), p.ridge) * 4
    x = np.geomspace(lo, hi, 200)
    fig, ax = plt.subplots(figsize=(8, 5.5))
    ax.loglog(x, np.minimum(p.gflops, p.gbs * x), "k-", lw=2,
              label=f"roof: {p.gbs:.1f} GB/s, {p.gflops:.1f} GFLOP/s")
    ax.axvline(p.ridge, color="0.7", ls=":", lw=1)
    for s in shown:
        color = "tab:red" if s.bound == "memory" else "tab:blue"
        ax.loglog([s.intensity], [max(s.gflops, 1e-6)], "o", color=color)
        ax.annotate(f"{s.label} ({s.utilization:.0f}%)", (s.intensity, max(s.gflops, 1e-6)),
                    fontsize=7, xytext=(4, 4), textcoords="offset points")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title(f"roofline of '{profile.kernel}' (red: memory-bound, blue: compute-bound)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    out = Path(path)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def latency(profile: Profile, path: str | Path) -> Path:
    plt = _pyplot()
    if not profile.latency:
        raise WiaUsageError("the profile has no latency samples (runs=0)")
    fig, axes = plt.subplots(1, len(profile.latency), figsize=(10, 4))
    for ax, lat in zip(np.atleast_1d(axes), profile.latency, strict=True):
        ax.hist(lat.ms, bins=40, color="tab:orange" if lat.name == "eager" else "tab:green")
        for q, style in ((lat.p50, "-"), (lat.p99, "--")):
            ax.axvline(q, color="k", ls=style, lw=1)
        ax.set_title(f"{lat.name}: p50 {lat.p50:.3f} ms, p99 {lat.p99:.3f} ms")
        ax.set_xlabel("latency (ms)")
        ax.set_ylabel("calls")
    fig.suptitle(f"'{profile.kernel}': {len(profile.latency[0].ms)} calls each")
    out = Path(path)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
