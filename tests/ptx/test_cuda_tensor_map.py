"""The cuda target's tensor maps: ``cuTensorMapEncodeTiled`` is called with the arguments the
driver API documents (checked against a stand-in for libcuda; no GPU needed)."""

from __future__ import annotations

import ctypes

import pytest

from wiadsl.backends.ptx.cuda import encode_tensor_map
from wiadsl.backends.ptx.sim.tensormap import TensorMap
from wiadsl.diagnostics import WiaRuntimeError


class FakeEncode:
    """Records one call; writes a marker into the CUtensorMap it is given."""

    def __init__(self, result: int = 0):
        self.result = result
        self.calls: list[dict] = []

    def __call__(self, out, dtype, rank, addr, dims, strides, box, estrides, interleave, swizzle,
                 l2, oob):
        self.calls.append(dict(out=out, dtype=dtype, rank=rank, addr=addr, dims=list(dims[:rank]),
                               strides=list(strides[:rank - 1]), box=list(box[:rank]),
                               estrides=list(estrides[:rank]), interleave=interleave,
                               swizzle=swizzle, l2=l2, oob=oob))
        ctypes.memmove(out, b"\x5a" * 128, 128)
        return self.result


class FakeLib:
    def __init__(self, result: int = 0):
        self.cuTensorMapEncodeTiled = FakeEncode(result)

    def cuGetErrorName(self, err, name_ref) -> int:
        name_ref._obj.value = b"CUDA_ERROR_INVALID_VALUE"
        return 0


def test_encode_passes_the_documented_arguments() -> None:
    lib = FakeLib()
    tm = TensorMap(16, 2, (72, 33, 3), (144, 4752), (64, 128, 1), swizzle=3, data_type=6)
    got = encode_tensor_map(lib, 0x7F0000001000, tm)
    (call,) = lib.cuTensorMapEncodeTiled.calls
    assert call["out"] % 64 == 0 and call["out"] == got.raw.ctypes.data
    assert bytes(got.raw) == b"\x5a" * 128
    assert call == dict(out=call["out"], dtype=6, rank=3, addr=0x7F0000001010, dims=[72, 33, 3],
                        strides=[144, 4752], box=[64, 128, 1], estrides=[1, 1, 1],
                        interleave=0, swizzle=3, l2=2, oob=0)


def test_a_driver_error_names_itself() -> None:
    tm = TensorMap(0, 2, (64, 8), (128,), (64, 8), swizzle=3, data_type=6)
    with pytest.raises(WiaRuntimeError, match="cuTensorMapEncodeTiled failed: "
                                              "CUDA_ERROR_INVALID_VALUE"):
        encode_tensor_map(FakeLib(1), 0x1000, tm)
