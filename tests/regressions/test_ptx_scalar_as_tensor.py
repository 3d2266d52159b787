"""Fuzz findings (issue 17; seeds 5000026 and 6000011, ptxsim "unsupported"): a scalar
used where a tensor op needs a buffer stopped the PTX planner with "a scalar cannot be
materialized as a tensor".

The front end turns a scalar into a tensor with ``tensor.broadcast_to`` (``quantize`` of
a scalar, ``broadcast_to(reduce_min(x), ...)``, ``reshape`` or ``concat`` of a scalar, a
scalar row stored into a tensor), and the planner's views need a buffer. A host scalar
needed as a tensor is now a rank-0 device buffer of the IR value's dtype filled by a
host ``write`` step (``Planner.scalar_buffer``), seen through the usual views.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from tests.e2e.numerics import as_dtype, assert_same_bits, kernel
from tests.ptx.helpers import assemble
from wiadsl.backends.ptx.emit import emit_ptx
from wiadsl.frontend.compile import compile_to_ir

#: The same scalar broadcast in a branch and after the merge: the merge block does not
#: reuse the branch's buffer (on the else path that write never ran).
ACROSS_BLOCKS = ("kernel fz(input x: f32[3], input s: f32, output o: f32[3]) {"
                 " if s > 0 { t = broadcast_to(s, [3]); } else { t = x; }"
                 " o = t + broadcast_to(s, [3]); }")

#: name -> (source, inputs); each ran on the interpreter but not on ptxsim.
PROGRAMS: dict[str, tuple[str, tuple[object, ...]]] = {
    # seed 5000026, shrunk: quantize of a scalar broadcasts its operands to [1]
    "quantize_scalar": ("kernel fz(input s: f16, output o: i8) { o = quantize(s, cast(2.0, f16), 0); }",
                        (np.float16(3.0),)),
    # seed 6000011, shrunk: a reduced scalar (read back to the host) broadcast
    "broadcast_reduced": ("kernel fz(input x: i32[5, 1], output o: i32[2, 5, 3]) {"
                          " o = broadcast_to(reduce_min(x), [2, 5, 3]); }",
                          (np.arange(5, dtype=np.int32).reshape(5, 1) + 4,)),
    "broadcast_host_op": ("kernel fz(input x: f32[N], input s: f32, output o: f32[3, N]) {"
                          " o = broadcast_to(s * 2.0 + reduce_sum(x), [3, dim(x, 0)]); }",
                          (np.ones(4, np.float32), np.float32(1.5))),
    "broadcast_index": ("kernel fz(input x: f32[N], output o: i64[N]) {"
                        " o = broadcast_to(dim(x, 0), [dim(x, 0)]); }", (np.ones(4, np.float32),)),
    "reshape_cast": ("kernel fz(input s: i32, output o: f32[1]) { o = reshape(cast(s, f32), [1]); }",
                     (np.int32(7),)),
    "concat_reshaped": ("kernel fz(input x: f32[3], input s: f32, output o: f32[4]) {"
                        " o = concat([reshape(s, [1]), x], axis=0); }",
                        (np.arange(3, dtype=np.float32), np.float32(9.0))),
    "concat_two_scalars": ("kernel fz(input s: f16, output o: f16[2]) {"
                           " o = concat([reshape(s, [1]), reshape(-s, [1])], axis=0); }",
                           (np.float16(2.0),)),
    "matmul_operand": ("kernel fz(input x: f32[3], input s: f32, output o: f32) {"
                       " o = x @ broadcast_to(s, [3]); }", (np.arange(3, dtype=np.float32), np.float32(2.0))),
    "row_store": ("kernel fz(input a: f32[2, 3], input s: f32, output o: f32[2, 3]) {"
                  " a[1] = broadcast_to(s * 0.5, [3]); o = a; }",
                  (np.zeros((2, 3), np.float32), np.float32(4.0))),
    "across_blocks": (ACROSS_BLOCKS, (np.ones(3, np.float32), np.float32(2.0))),
    "across_blocks_else": (ACROSS_BLOCKS, (np.ones(3, np.float32), np.float32(-2.0))),
}

BROADCAST = "kernel fz(input s: {t}, output o: {t}[5]) {{ o = broadcast_to(s, [5]); }}"
#: values whose bits show a wrong device dtype (rounding, widening, truncation)
DTYPE_VALUES = {"f16": [65504.0, -6e-8, 0.1], "bf16": [3.0e38, -1.00390625, 0.1],
                "f32": [3.4e38, 1e-45, 0.1], "f64": [1e300, 5e-324, 0.1],
                "i8": [-128, 127, -7], "i32": [-(2**31), 2**31 - 1, 5],
                "i64": [-(2**63), 2**63 - 1, 2**40 + 3], "bool": [True, False]}


def host_value(dtype: str, v: object) -> object:
    if dtype == "bool":
        return np.bool_(v)
    if dtype.startswith("i"):
        return np.dtype(dtype.replace("i", "int")).type(v)
    return as_dtype([v], dtype)[0]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_scalar_as_tensor_matches_the_interpreter(name: str) -> None:
    src, args = PROGRAMS[name]
    want = np.asarray(kernel(src, "interp")(*args))
    assert_same_bits(np.asarray(kernel(src, "ptxsim")(*args)), want, name)


@pytest.mark.parametrize("dtype", sorted(DTYPE_VALUES))
def test_broadcast_scalar_input_keeps_its_dtype(dtype: str) -> None:
    src = BROADCAST.format(t=dtype)
    for v in DTYPE_VALUES[dtype]:
        s = host_value(dtype, v)
        want = np.asarray(kernel(src, "interp")(s))
        assert_same_bits(np.asarray(kernel(src, "ptxsim")(s)), want, f"{dtype} {v!r}")


@pytest.mark.parametrize("dtype", sorted(DTYPE_VALUES))
def test_scalar_buffer_is_written_in_its_own_dtype(dtype: str) -> None:
    """The plan allocates the scalar's buffer and writes it with one dtype, the IR's."""
    _, plan = emit_ptx(compile_to_ir(BROADCAST.format(t=dtype), "<test>"), "fz", "sm_80")
    steps = [s for b in plan["blocks"] for s in b["steps"]]
    allocs = {s["buffer"]: s["dtype"] for s in steps if s["op"] == "alloc"}
    writes = [s for s in steps if s["op"] == "write"]
    assert writes, "no host write fills the scalar's buffer"
    for w in writes:
        assert w["dtype"] == allocs[w["buffer"]] == dtype
        assert w["value"] == {"scalar": "s"}


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_plans_assemble(arch: str) -> None:
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        pytest.skip("ptxas not found: PTX is emitted but not assembled here")
    sources = sorted({src for src, _ in PROGRAMS.values()}) + [BROADCAST.format(t=t) for t in DTYPE_VALUES]
    for src in sources:
        text, _ = emit_ptx(compile_to_ir(src, "<test>"), "fz", arch)
        rc, log = assemble(ptxas, text, arch)
        assert rc == 0, f"{src}\n{log}"
