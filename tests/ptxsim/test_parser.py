"""Parsing PTX text, and the errors for what the simulator does not support."""

from __future__ import annotations

import numpy as np
import pytest

from wiadsl.backends.ptx.sim import PtxSimError, launch, parse_module
from wiadsl.backends.ptx.sim.ast import Addr, Imm, Pair, Vec

from .handwritten import FEATURES, HEADER


def test_parse_features_module():
    m = parse_module(FEATURES)
    assert m.version == "8.0" and m.target == ("sm_80",) and m.address_size == 64
    assert [v.name for v in m.vars] == ["gtable", "cscale", "dyn"]
    assert m.vars[0].init == b"".join(i.to_bytes(4, "little") for i in (1, 2, 3, 4))
    assert m.vars[2].extern and m.vars[2].size is None
    k = m.kernels["feat"]
    assert [p.name for p in k.params] == ["feat_x", "feat_y", "feat_n"]
    assert k.regs["%r11"].name == "b32" and "%r12" not in k.regs
    assert k.regs["%t"].name == "b32" and k.regs["%t#1"].name == "f32"  # scoped renaming
    assert "$L_done" in k.labels
    guarded = [i for i in k.instrs if i.guard is not None]
    assert guarded[0].guard.name == "%p1" and not guarded[0].guard.neg
    assert guarded[1].guard.neg
    st = next(i for i in k.instrs if i.opcode == "st.shared.v2.f32")
    assert isinstance(st.operands[0], Addr) and isinstance(st.operands[1], Vec)
    ld = next(i for i in k.instrs if i.opcode == "ld.shared.f32")
    assert ld.operands[1] == Addr("dyn", 4)
    mul = next(i for i in k.instrs if i.opcode == "mul.f64")
    assert mul.operands[2] == Imm("f64bits", 0x3FE0000000000000, "0d3FE0000000000000")


def test_parse_nvcc_output(cuda_ptx):
    m = parse_module(cuda_ptx)
    assert {"vadd", "softmax", "matmul", "mma_f16"} <= set(m.kernels)
    shfl = next(i for i in m.kernels["softmax"].instrs if i.op == "shfl")
    assert isinstance(shfl.operands[0], Pair)


BAD_OP = HEADER + """
.visible .entry k(.param .u64 p)
{
    .reg .b32 %r<3>;
    mov.u32 %r1, 1;
    frobnicate.b32 %r2, %r1;
    ret;
}
"""


def test_unsupported_instruction_is_an_error():
    with pytest.raises(PtxSimError, match=r"unsupported instruction 'frobnicate.b32' at line 9"):
        launch(BAD_OP, "k", 1, 1, [np.zeros(1, np.float32)])


def test_unsupported_modifier_is_an_error():
    text = BAD_OP.replace("frobnicate.b32 %r2, %r1;", "add.cc.u32 %r2, %r1, %r1;")
    with pytest.raises(PtxSimError, match=r"unsupported instruction 'add.cc.u32'.*modifier .cc"):
        launch(text, "k", 1, 1, [np.zeros(1, np.float32)])


def test_syntax_errors_name_the_line():
    with pytest.raises(PtxSimError, match="line 6"):
        parse_module(HEADER + ".visible .entry k()\n{\n  mov.u32 %r1 1 ;\n}\n")
    with pytest.raises(PtxSimError, match="unknown register or symbol '%r9'"):
        launch(BAD_OP.replace("frobnicate.b32 %r2, %r1;", "add.u32 %r2, %r9, 1;"), "k", 1, 1,
               [np.zeros(1, np.float32)])


DIVERGENT_SHFL = HEADER + """
.visible .entry k(.param .u64 p)
{
    .reg .pred %p;
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p];
    mov.u32 %r1, %laneid;
    setp.lt.u32 %p, %r1, 16;
    @%p bra $L_skip;
    shfl.sync.bfly.b32 %r2, %r1, 1, 31, -1;
$L_skip:
    ret;
}
"""

SPIN = HEADER + """
.visible .entry k()
{
$L_top:
    bra.uni $L_top;
}
"""


def test_shfl_with_inactive_member_lanes_is_an_error():
    with pytest.raises(PtxSimError, match="in membermask but is not executing"):
        launch(DIVERGENT_SHFL, "k", 1, 32, [np.zeros(1, np.float32)])


def test_infinite_loop_hits_the_step_limit():
    with pytest.raises(PtxSimError, match="step limit 1000 exceeded"):
        launch(SPIN, "k", 1, 32, [], max_steps=1000)
