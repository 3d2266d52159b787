"""GPU benchmark: our PTX against cuBLAS / CuPy, each row checked against NumPy first.

usage: PYTHONPATH=. python benchmarks/gpu_bench.py [--sim] [--rows SUBSTR,...] [--arch sm_XX]
                                                   [--seconds S] [--json PATH]

Rows (``gpu_rows.py``): f16 matmul 4096^3 and 8192^3, bf16 4096^3, f16 on the sm_80
kernel (on an sm_90 device), f32 4096^3 (FMA) and tf32 (allow_tf32), i8 -> i32 4096^3,
softmax and layer_norm 8192x8192 f32/f16, relu(a*b+c) over 2^28 f32, attention
4096x4096x64 f16 (plain, causal, 16 heads). Each row compiles its kernel as
``jit(..., target="cuda")`` does (``ptx_program``), runs the plan once through the
cuda target's executor, checks the output against NumPy (``gpu_rows``: relative error
on a subsample), then times repetitions of the same launches on the same device
buffers (``backends/ptx/timing.py``), and its CuPy reference (``gpu_refs.py``, checked
the same way) with the same timer. A device-to-device copy gives the bandwidth the
memory-bound rows are compared with.

``--sim`` runs the same code on the PTX simulator (target ptxsim, arch sm_90 unless
``--arch``) at twin sizes, without CuPy: a dry run of the plumbing; its times are the
simulator's and mean nothing. Needs cuda-python for the GPU; CuPy is optional (rows
then have no reference). Exit status 1 when a row's check fails or a row errs.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import shutil
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:  # run from a checkout: import its wiadsl
    sys.path.insert(0, str(HERE.parent))


def _sibling(name: str) -> Any:
    """Import benchmarks/<name>.py by path (this folder is never put on sys.path: its
    modules are named like packages, e.g. onnx.py)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules[name] = module
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    return sys.modules[name]


gpu_refs = _sibling("gpu_refs")
gpu_rows = _sibling("gpu_rows")

from wiadsl.backends.ptx.program import TargetOptions, ptx_program  # noqa: E402
from wiadsl.backends.ptx.timing import (  # noqa: E402
    TimedDevice,
    copy_bandwidth,
    record_plan,
    time_launches,
    time_steps,
)
from wiadsl.frontend.compile import compile_to_ir  # noqa: E402


@dataclass
class Target:
    """Where the rows run: the GPU (cuda-python) or the simulator."""

    sim: bool
    arch: str
    make_device: Callable[[str], TimedDevice]
    synchronize: Callable[[], None]
    description: str


def cuda_target(arch: str | None) -> Target:
    from wiadsl.backends.ptx import cuda

    info = cuda.device_info()
    chosen = arch or cuda.supported_arch(info["arch"])
    return Target(False, chosen, cuda.CudaDevice, cuda.synchronize,
                  f"{info['name']} ({info['arch']}, {info['sms']} SMs, "
                  f"{info['memory_bytes'] / 2**30:.0f} GiB), driver CUDA {info['driver_cuda']}")


def sim_target(arch: str | None) -> Target:
    from wiadsl.backends.ptx.simbackend import SimDevice

    return Target(True, arch or "sm_90", SimDevice, lambda: None,
                  "PTX simulator (ptxsim) -- SIMULATOR DRY RUN: twin sizes, times mean nothing")


@dataclass
class Result:
    name: str
    kernels: list[str] = field(default_factory=list)
    target: str = ""
    err: float | None = None
    tol: float = 0.0
    seconds: float | None = None
    launches: int = 0
    host_steps: int = 0
    work: float = 0.0
    unit: str = ""
    ref_label: str = ""
    ref_seconds: float | None = None
    ref_err: float | None = None
    note: str = ""
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error and self.err is not None and self.err <= self.tol

    def rate(self, seconds: float | None) -> str:
        if not seconds:
            return ""
        scale = 1e12 if self.unit in ("TFLOP/s", "TOP/s") else 1e9
        return f"{self.work / seconds / scale:.1f} {self.unit}"


def run_row(row: gpu_rows.Row, target: Target, cp: Any, rng: np.random.Generator,
            args: argparse.Namespace) -> Result:
    res = Result(row.name, tol=row.tol, work=row.work, unit=row.unit)
    xs = row.make(rng)
    options = TargetOptions(row.options.get("arch", target.arch), args.opt_level,
                            allow_tf32=bool(row.options.get("allow_tf32", False)))
    assert {n: x.shape for n, x in xs.items()} == row.shapes, row.name
    text, plan = compile_row(row, options)
    res.target = ptx_target(text)
    device = target.make_device(text)
    outputs, runner, calls = record_plan(plan, device, list(xs.values()))
    kinds = {k["name"]: k["kind"] for k in plan["kernels"]}
    res.kernels = [kinds[c.kernel] for c in calls]
    res.host_steps = runner.host_steps
    res.err = row.check(xs, np.asarray(outputs[0]))
    timing = time_launches(device, calls, seconds=args.seconds, batches=args.batches,
                           warmup=not target.sim)
    res.seconds, res.launches = timing.seconds, timing.launches
    del outputs, runner, calls, device
    if cp is not None and row.reference is not None:
        try:
            ref = gpu_refs.REFERENCES[row.reference](cp, xs)
            res.ref_label = ref.label
            ref.step()
            target.synchronize()
            res.ref_err = row.check(xs, np.asarray(ref.out.get()))
            res.ref_seconds = time_steps(ref.step, target.synchronize, seconds=args.seconds,
                                         batches=args.batches).seconds
        except Exception as exc:  # a reference that cannot run is reported, not fatal
            res.note = f"reference failed: {type(exc).__name__}: {exc}"[:200]
        finally:
            cp.get_default_memory_pool().free_all_blocks()
    elif row.reference is not None:
        res.ref_label = "none (simulator)" if target.sim else "none (no CuPy)"
    return res


def compile_row(row: gpu_rows.Row, options: TargetOptions) -> tuple[str, dict[str, Any]]:
    """The PTX and plan ``jit(row.source, target="cuda", **options)`` runs for the row's shapes."""
    return ptx_program(compile_to_ir(row.source, f"<{row.name}>"), {"k": row.shapes}, options)


def ptx_target(text: str) -> str:
    return re.search(r"^\.target (\S+)", text, re.M).group(1)  # type: ignore[union-attr]


def compile_only(rows: list[gpu_rows.Row], arch: str, args: argparse.Namespace) -> int:
    """Compile every row at its size for ``arch`` (no device): the kernels each plan holds
    and, with ptxas, each kernel's registers and spills. Status 1 if ptxas refuses one
    or a kernel spills."""
    ptxas = None if args.no_ptxas else (args.ptxas or shutil.which("ptxas"))
    print(f"compile only, {arch} at -O{args.opt_level}; ptxas: {ptxas or 'not found'}")
    bad = 0
    for row in rows:
        options = TargetOptions(row.options.get("arch", arch), args.opt_level,
                                allow_tf32=bool(row.options.get("allow_tf32", False)))
        text, plan = compile_row(row, options)
        kinds = [k["kind"] for k in plan["kernels"]]
        line = f"{row.name}: {', '.join(kinds)} ({ptx_target(text)})"
        if ptxas:
            ok, report = assemble(ptxas, text)
            bad += not ok
            line += f"; ptxas {report}"
        print(line, flush=True)
    print(f"compile only: {len(rows)} rows, {bad} failed in ptxas")
    return 1 if bad else 0


def assemble(ptxas: str, text: str) -> tuple[bool, str]:
    """ptxas -v for the module's own target: (ok and no spills, registers and spills)."""
    ptx_report = _sibling("ptx_report")
    rc, log = ptx_report.run_ptxas(ptxas, text, ptx_target(text))
    if rc != 0:
        return False, "FAILED: " + " ".join(log.split())[:300]
    stats = ptx_report.parse_log(log).values()
    regs, spilled = [k["regs"] for k in stats], sum(k["spill"] for k in stats)
    return spilled == 0, f"registers {regs}, {spilled} spill bytes"


def fmt_ms(seconds: float | None) -> str:
    return f"{seconds * 1e3:.3f} ms" if seconds else "-"


def table(results: list[Result], bandwidth: float | None) -> str:
    lines = ["| benchmark | kernels (ours) | target | check vs NumPy | ours | reference "
             "| reference time | ours vs reference | notes |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        if r.error:
            lines.append(f"| {r.name} | {', '.join(r.kernels)} | {r.target} | ERROR | | | | "
                         f"| {r.error} |")
            continue
        check = f"{'ok' if r.ok else 'WRONG'} {r.err:.1e} (tol {r.tol:.0e})"
        ours = f"{fmt_ms(r.seconds)}, {r.rate(r.seconds)}"
        ref = f"{fmt_ms(r.ref_seconds)}, {r.rate(r.ref_seconds)}" if r.ref_seconds else "-"
        ratio = f"{100 * r.ref_seconds / r.seconds:.0f}%" if r.ref_seconds and r.seconds else "-"
        notes = [r.note] if r.note else []
        if r.ref_err is not None and r.ref_err > r.tol:
            notes.append(f"reference off by {r.ref_err:.1e}: its ratio is not comparable")
        if bandwidth and r.unit == "GB/s" and r.seconds:
            notes.append(f"{100 * r.work / r.seconds / bandwidth:.0f}% of the copy bandwidth")
        if r.launches != 1:
            notes.append(f"{r.launches} launches")
        if r.host_steps:
            notes.append(f"{r.host_steps} host steps not repeated")
        lines.append(f"| {r.name} | {', '.join(r.kernels)} | {r.target} | {check} | {ours} "
                     f"| {r.ref_label or '-'} | {ref} | {ratio} | {'; '.join(notes)} |")
    return "\n".join(lines)


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim", action="store_true", help="dry run on the PTX simulator (twin sizes)")
    ap.add_argument("--rows", default="", help="comma-separated substrings of the rows to run")
    ap.add_argument("--arch", default=None, help="compile for this arch (default: the device's)")
    ap.add_argument("--opt-level", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=None,
                    help="time per measurement (default 0.3 on a GPU, 0 on the simulator)")
    ap.add_argument("--batches", type=int, default=None, help="batches per measurement (median)")
    ap.add_argument("--copy-bytes", type=int, default=None, help="bytes of the bandwidth copy")
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument("--compile-only", action="store_true",
                    help="compile every row at its GPU size (no device), ptxas when found")
    ap.add_argument("--ptxas", default=None, help="ptxas for --compile-only (default: on PATH)")
    ap.add_argument("--no-ptxas", action="store_true", help="--compile-only without ptxas")
    args = ap.parse_args(argv)
    args.seconds = args.seconds if args.seconds is not None else (0.0 if args.sim else 0.3)
    args.batches = args.batches or (1 if args.sim else 5)
    args.copy_bytes = args.copy_bytes or (1 << 20 if args.sim else 1 << 30)
    return args


def select(rows: list[gpu_rows.Row], wanted: str) -> list[gpu_rows.Row]:
    """The rows whose name contains one of the comma-separated ``wanted`` (all if empty)."""
    words = [w for w in wanted.split(",") if w]
    return [r for r in rows if not words or any(w in r.name for w in words)]


def import_cupy(sim: bool) -> tuple[Any, str]:
    if sim:
        return None, "CuPy not used on the simulator"
    try:
        import cupy
    except Exception as exc:  # ImportError, or a CuPy that finds no CUDA libraries
        return None, f"CuPy not available ({type(exc).__name__}): rows have no reference"
    return cupy, f"CuPy {cupy.__version__}"


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    start = time.perf_counter()
    if args.compile_only:
        arch = args.arch or "sm_90"
        return compile_only(select(gpu_rows.rows(args.sim, arch), args.rows), arch, args)
    try:
        target = sim_target(args.arch) if args.sim else cuda_target(args.arch)
    except Exception as exc:  # no cuda-python, no driver, no GPU
        print(f"gpu_bench: no GPU to run on ({type(exc).__name__}: {exc}); "
              f"--sim runs the dry run on the simulator")
        return 2
    cp, cupy_line = import_cupy(args.sim)
    rows = select(gpu_rows.rows(args.sim, target.arch), args.rows)
    print(f"device: {target.description}; compiled for {target.arch} at -O{args.opt_level}; "
          f"{cupy_line}", flush=True)
    mem = target.make_device("")
    bandwidth, bt = copy_bandwidth(mem, args.copy_bytes, seconds=args.seconds,
                                   batches=args.batches, warmup=not target.sim)
    del mem
    print(f"device-to-device copy of {args.copy_bytes / 2**20:.0f} MiB: {bandwidth / 1e9:.1f} GB/s "
          f"(bytes read + written, {fmt_ms(bt.seconds)})", flush=True)
    rng = np.random.default_rng(0)
    results = []
    for i, row in enumerate(rows, 1):
        t0 = time.perf_counter()
        try:
            res = run_row(row, target, cp, rng, args)
        except Exception as exc:  # reported in the table; the next row still runs
            res = Result(row.name, error=f"{type(exc).__name__}: {exc}"[:300])
            traceback.print_exc()
        results.append(res)
        state = "ERROR" if res.error else ("ok" if res.ok else "WRONG")
        print(f"[{i}/{len(rows)}] {row.name}: {state} {', '.join(res.kernels)} "
              f"ours {fmt_ms(res.seconds)} ref {fmt_ms(res.ref_seconds)} "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)
    print()
    print(f"device: {target.description}; compiled for {target.arch} at -O{args.opt_level}; "
          f"{cupy_line}")
    print(f"timing: median of {args.batches} batches of back-to-back repetitions (~{args.seconds:g} s "
          f"per measurement) between two synchronizations; inputs resident on the device")
    print(f"device-to-device copy: {bandwidth / 1e9:.1f} GB/s (bytes read + written)")
    print(table(results, bandwidth))
    failed = [r.name for r in results if not r.ok]
    print(f"gpu_bench: {len(results) - len(failed)} rows ok, {len(failed)} failed"
          f"{': ' + ', '.join(failed) if failed else ''} ({time.perf_counter() - start:.0f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"device": target.description, "arch": target.arch, "copy_bandwidth": bandwidth,
             "rows": [asdict(r) for r in results]}, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
