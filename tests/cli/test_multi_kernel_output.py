"""Issue 20: ``wiac file.wia -o out.EXT`` writes every kernel of the file into one
output (as nvcc puts every ``__global__`` of a file in one module); ``--kernel``
still picks one; ``-D`` that fixes only some dims keeps the rest symbolic on PTX
and the CPU.

Each output is checked by running it: the PTX module's plans in the simulator, the
LLVM IR and the object file in a fresh MCJIT engine through the entry ABI
(backends/llvm/runtime.py), the systolic program read back by the assembler.
"""

from __future__ import annotations

import ctypes
import json
import shutil

import numpy as np
import pytest

from wiadsl.backends.ptx.simbackend import PlannedKernel, SimDevice
from wiadsl.backends.systolic import parse_listing, parse_program

KERNELS = ["attn", "attn_explicit", "attn_batched"]
DIMS = {"T": 5, "D": 7, "S": 3, "E": 2, "B": 2}
DEFINES = [arg for d, n in DIMS.items() for arg in ("-D", f"{d}={n}")]


def attention_reference(q, k, v):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


def inputs(kernel: str, rng) -> list[np.ndarray]:
    T, D, S, E, B = (DIMS[d] for d in "TDSEB")
    lead = (B,) if kernel == "attn_batched" else ()
    return [rng.standard_normal(lead + shape).astype(np.float32)
            for shape in [(T, D), (S, D), (S, E)]]


def test_ptx_module_holds_every_kernel_and_each_plan_runs(wiac, example, tmp_path):
    out = tmp_path / "att.ptx"
    proc = wiac(example("attention.wia"), "-o", str(out))  # every dim symbolic
    assert proc.returncode == 0, proc.err
    text = out.read_text()
    plan = json.loads((tmp_path / "att.ptx.json").read_text())
    assert plan["format"] == "wiadsl-ptx-module/1" and plan["order"] == KERNELS
    assert text.count(".version ") == 1 and text.count(".target ") == 1
    for name in KERNELS:
        entries = plan["plans"][name]["kernels"]
        assert entries and all(e["name"].startswith(f"{name}_k") for e in entries)
        assert all(f".entry {e['name']}(" in text for e in entries)
    rng = np.random.default_rng(20)
    for name in KERNELS:
        args = inputs(name, rng)
        (got,) = PlannedKernel(text, plan["plans"][name], SimDevice).run(args)
        np.testing.assert_allclose(got, attention_reference(*args), rtol=2e-5, atol=1e-6)


def test_ptx_module_assembles(wiac, example, tmp_path):
    ptxas = shutil.which("ptxas") or shutil.which("/usr/local/cuda/bin/ptxas")
    if ptxas is None:
        pytest.skip("ptxas not found: PTX is emitted but not assembled here")
    import subprocess

    out = tmp_path / "att.ptx"
    assert wiac(example("attention.wia"), "-o", str(out), "--arch", "sm_90").returncode == 0
    done = subprocess.run([ptxas, "--gpu-name", "sm_90", str(out), "-o", str(tmp_path / "a.cubin")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def test_kernel_flag_still_picks_one(wiac, example, tmp_path):
    out = tmp_path / "one.ptx"
    proc = wiac(example("attention.wia"), "--kernel", "attn_explicit", "-o", str(out))
    assert proc.returncode == 0, proc.err
    plan = json.loads((tmp_path / "one.ptx.json").read_text())
    assert plan["format"] == "wiadsl-ptx-plan/1" and plan["kernel"] == "attn_explicit"
    assert ".entry attn_k" not in out.read_text()


def _entry(engine, symbol: str):
    address = engine.get_function_address(symbol)
    assert address, f"{symbol} is not exported"
    return ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)(address)


def _call(fn, args: list[np.ndarray], out: np.ndarray, extents: list[int] = ()) -> None:
    """The entry ABI: input pointers, the result's slots (pointer + one per extent),
    the copy-out pair (destination, bytes), then the extents read at run time."""
    slots = ([a.ctypes.data for a in args] + [0] * (1 + out.ndim) + [out.ctypes.data, out.nbytes]
             + list(extents))
    assert fn((ctypes.c_int64 * len(slots))(*slots)) == 0


def test_cpu_object_keeps_the_dims_no_define_fixes_symbolic(wiac, example, tmp_path):
    """``-D T=5`` only: the object's entries read the other extents from their argument
    slots, after the copy-out pair, input by input and axis by axis (runtime.py); an
    extent that disagrees with another of its dim name is an error code, not a read
    out of bounds."""
    llvm = pytest.importorskip("llvmlite.binding")
    out = tmp_path / "att.o"
    proc = wiac(example("attention.wia"), "-D", "T=5", "--kernel", "attn", "-o", str(out))
    assert proc.returncode == 0, proc.err
    engine = _engine(llvm)
    engine.add_object_file(llvm.ObjectFileRef.from_data(out.read_bytes()))
    engine.finalize_object()
    entry = _entry(engine, "wia_entry")
    rng = np.random.default_rng(23)
    for d, s, e in [(7, 3, 2), (1, 1, 1), (33, 9, 5)]:
        q, k, v = (rng.standard_normal(shape).astype(np.float32) for shape in [(5, d), (s, d), (s, e)])
        got = np.full((5, e), np.nan, np.float32)
        _call(entry, [q, k, v], got, extents=[d, s, d, s, e])  # Q: D; K: S, D; V: S, E
        np.testing.assert_allclose(got, attention_reference(q, k, v), rtol=2e-5, atol=1e-6)
    q, k, v = np.ones((5, 4), np.float32), np.ones((3, 4), np.float32), np.ones((3, 2), np.float32)
    slots = [a.ctypes.data for a in (q, k, v)] + [0] * 3 + [0, 0] + [4, 3, 6, 3, 2]  # K's D = 6
    assert entry((ctypes.c_int64 * len(slots))(*slots)) != 0


def _check_every_entry(engine) -> None:
    rng = np.random.default_rng(21)
    for name in KERNELS:
        args = inputs(name, rng)
        want = attention_reference(*args)
        out = np.full(want.shape, np.nan, np.float32)
        _call(_entry(engine, f"wia_entry_{name}"), args, out)
        np.testing.assert_allclose(out, want, rtol=2e-5, atol=1e-6)


def _engine(llvm, ir_text: str | None = None):
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_default_triple().create_target_machine()
    return llvm.create_mcjit_compiler(llvm.parse_assembly(ir_text or ""), target)


def test_llvm_module_exports_an_entry_per_kernel(wiac, example, tmp_path):
    llvm = pytest.importorskip("llvmlite.binding")
    out = tmp_path / "att.ll"
    proc = wiac(example("attention.wia"), *DEFINES, "-o", str(out))
    assert proc.returncode == 0, proc.err
    text = out.read_text()
    assert "@wia_entry(" not in text
    engine = _engine(llvm, text)
    engine.finalize_object()
    _check_every_entry(engine)


def test_object_file_exports_an_entry_per_kernel(wiac, example, tmp_path):
    llvm = pytest.importorskip("llvmlite.binding")
    out = tmp_path / "att.o"
    proc = wiac(example("attention.wia"), *DEFINES, "-o", str(out))
    assert proc.returncode == 0, proc.err
    engine = _engine(llvm)
    engine.add_object_file(llvm.ObjectFileRef.from_data(out.read_bytes()))
    engine.finalize_object()
    _check_every_entry(engine)


def test_assembly_declares_an_entry_per_kernel(wiac, example, tmp_path):
    out = tmp_path / "att.s"
    proc = wiac(example("attention.wia"), *DEFINES, "-o", str(out))
    assert proc.returncode == 0, proc.err
    text = out.read_text()
    assert all(f".globl\twia_entry_{name}\n" in text for name in KERNELS)


def test_systolic_program_holds_every_kernel(wiac, example, tmp_path):
    out = tmp_path / "att.sasm"
    proc = wiac(example("attention.wia"), *DEFINES, "-o", str(out))
    assert proc.returncode == 0, proc.err
    program = parse_program(out.read_text())
    assert list(program.kernels) == KERNELS
    assert parse_program(program.text()) == program
    with pytest.raises(Exception, match="parse_program"):
        parse_listing(out.read_text())
    one = tmp_path / "attn.sasm"
    proc = wiac(example("attention.wia"), *DEFINES[:-2], "--kernel", "attn", "-o", str(one))
    assert proc.returncode == 0, proc.err  # (B is no dim of attn: DEFINES ends with it)
    assert parse_listing(one.read_text()) == program.kernels["attn"]


def test_static_targets_name_the_kernel_missing_a_dim(wiac, example, tmp_path):
    defines = DEFINES[:-2]  # every dim but B
    proc = wiac(example("attention.wia"), *defines, "-o", str(tmp_path / "att.sasm"))
    assert proc.returncode == 1
    assert "kernel 'attn_batched' has symbolic dims without a value: B" in proc.err


def test_a_define_no_kernel_has_is_an_error(wiac, example, tmp_path):
    proc = wiac(example("attention.wia"), "-D", "Q=3", "-o", str(tmp_path / "att.ptx"))
    assert proc.returncode == 1
    assert "-D Q: no kernel of the file has such a dim" in proc.err


def test_run_on_a_file_of_several_kernels_asks_for_one(wiac, example):
    proc = wiac(example("attention.wia"), "--run")
    assert proc.returncode == 1
    assert "choose one with --kernel NAME" in proc.err


def test_partial_defines_keep_the_other_dims_symbolic_on_ptx(wiac, example, tmp_path):
    out = tmp_path / "mm.ptx"
    proc = wiac(example("matmul.wia"), "-D", "N=33", "-o", str(out))
    assert proc.returncode == 0, proc.err
    plan = json.loads((tmp_path / "mm.ptx.json").read_text())
    shapes = {i["name"]: i["shape"] for i in plan["inputs"]}
    assert shapes["B"][1] == 33 and isinstance(shapes["B"][0], str)
    assert all(isinstance(d, str) for d in shapes["A"])
    rng = np.random.default_rng(22)
    for m, k in [(1, 1), (7, 5)]:
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, 33)).astype(np.float32)
        (got,) = PlannedKernel(out.read_text(), plan, SimDevice).run([a, b])
        np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)
    wrong = [np.ones((2, 3), np.float32), np.ones((3, 34), np.float32)]
    with pytest.raises(Exception, match="34.*expected 33"):
        PlannedKernel(out.read_text(), plan, SimDevice).run(wrong)
