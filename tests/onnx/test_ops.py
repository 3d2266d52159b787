"""Each supported ONNX op, one small graph per case, on the interpreter against ONNX
Runtime (table-driven: the op, its attributes, its input shapes and constants)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from tests.onnx.helpers import assert_close, ort_run, require_onnx

require_onnx()

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from wiadsl.onnx.importer import load_onnx  # noqa: E402

F32 = np.float32
_ONNX_TYPES = {np.dtype(F32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64,
               np.dtype(np.int32): TensorProto.INT32, np.dtype(np.bool_): TensorProto.BOOL,
               np.dtype(np.int8): TensorProto.INT8, np.dtype(np.uint8): TensorProto.UINT8}


@dataclass
class OpCase:
    """``op(inputs..., **attrs)``: inputs are arrays (graph inputs) or ``Const``s."""

    id: str
    op: str
    inputs: list[Any]
    attrs: dict[str, Any] = field(default_factory=dict)
    opset: int = 17
    out_type: int = TensorProto.FLOAT
    n_out: int = 1
    #: per output, when they differ (Dropout's mask is bool)
    out_types: tuple[int, ...] = ()
    #: absolute tolerance (cubic interpolation cancels: its sums round apart in f32)
    atol: float = 1e-6


@dataclass
class Const:
    value: np.ndarray


def _r(*shape: int, seed: int = 0, lo: float = -2.0, hi: float = 2.0) -> np.ndarray:
    return np.random.default_rng(seed + sum(shape)).uniform(lo, hi, shape).astype(F32)


_U8 = np.random.default_rng(0).integers(0, 256, (1, 2, 5, 6)).astype(np.uint8)


def _i64(*v: int) -> Const:
    return Const(np.array(v, np.int64))


CASES = [
    *(OpCase(op.lower(), op, [_r(3, 4), _r(4, seed=1)]) for op in ("Add", "Sub", "Mul")),
    OpCase("div", "Div", [_r(3, 4), _r(3, 1, lo=0.5)]),
    OpCase("div_int_truncates", "Div", [np.array([-7, 7, -8, 9], np.int64), _i64(2, 2, 3, -4)],
           out_type=TensorProto.INT64),
    OpCase("pow", "Pow", [_r(3, 4, lo=0.5), Const(np.array(3.0, F32))]),
    OpCase("pow_int_exponents", "Pow", [_r(3, 4, lo=0.5), Const(np.array([1, 2, 3, 0], np.int64))]),
    OpCase("pow_tensor_exponent", "Pow", [_r(3, 4, lo=0.5), np.array([1, 2, 3, 0], np.int32)]),
    OpCase("max_variadic", "Max", [_r(2, 3), _r(3), _r(2, 1)]),
    OpCase("min", "Min", [_r(2, 3), _r(2, 3, seed=5)]),
    OpCase("sum", "Sum", [_r(2, 3), _r(3)]),
    OpCase("mean", "Mean", [_r(2, 3), _r(2, 3, seed=3)]),
    OpCase("greater_where", "Where", [Const(np.array([True, False, True])), _r(2, 3), _r(3)]),
    OpCase("equal", "Equal", [_i64(1, 2, 3), np.array([1, 0, 3], np.int64)],
           out_type=TensorProto.BOOL),
    *(OpCase(op.lower(), op, [_r(3, 5)]) for op in (
        "Relu", "Sigmoid", "Tanh", "Exp", "Abs", "Neg", "Erf", "Floor", "Ceil", "Sin", "Cos")),
    OpCase("log", "Log", [_r(3, 5, lo=0.1)]),
    OpCase("sqrt", "Sqrt", [_r(3, 5, lo=0.1)]),
    OpCase("reciprocal", "Reciprocal", [_r(3, 5, lo=0.5)]),
    OpCase("leaky_relu", "LeakyRelu", [_r(3, 5)], {"alpha": 0.2}),
    OpCase("clip", "Clip", [_r(3, 5), Const(np.array(-0.5, F32)), Const(np.array(0.7, F32))]),
    OpCase("hard_sigmoid", "HardSigmoid", [_r(3, 5)]),
    OpCase("gelu_tanh", "Gelu", [_r(3, 5)], {"approximate": "tanh"}, opset=20),
    OpCase("gelu", "Gelu", [_r(3, 5)], opset=20),
    OpCase("identity", "Identity", [_r(3)]),
    OpCase("matmul_batched", "MatMul", [_r(2, 3, 4), _r(4, 5)]),
    OpCase("matmul_vector", "MatMul", [_r(3, 4), _r(4)]),
    OpCase("gemm_trans_a", "Gemm", [_r(4, 3), _r(4, 5), _r(5)], {"transA": 1, "alpha": 2.0}),
    OpCase("gemm_input_b", "Gemm", [_r(3, 4), _r(5, 4), _r(1)], {"transB": 1, "beta": 0.5}),
    OpCase("softmax_axis1", "Softmax", [_r(2, 3, 4)], {"axis": 1}, opset=13),
    OpCase("softmax_opset11", "Softmax", [_r(2, 5)], opset=11),
    OpCase("log_softmax", "LogSoftmax", [_r(2, 5)]),
    OpCase("layer_norm_axis1", "LayerNormalization", [_r(2, 3, 4), _r(3, 4), _r(3, 4)],
           {"axis": 1, "epsilon": 1e-3}),
    OpCase("layer_norm_no_bias", "LayerNormalization", [_r(2, 6), Const(_r(6))]),
    OpCase("batch_norm_inputs", "BatchNormalization",
           [_r(2, 3, 4, 4), _r(3), _r(3), _r(3), _r(3, lo=0.5)]),
    OpCase("conv_same", "Conv", [_r(1, 2, 6, 6), Const(_r(3, 2, 3, 3))],
           {"auto_pad": "SAME_UPPER"}),
    OpCase("conv_stride_bias", "Conv", [_r(1, 2, 7, 7), _r(4, 2, 3, 3), _r(4)],
           {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    OpCase("conv_asymmetric_pads", "Conv", [_r(1, 2, 7, 6), Const(_r(3, 2, 3, 3))],
           {"pads": [0, 1, 2, 1]}),
    OpCase("conv_same_upper_stride2", "Conv", [_r(1, 2, 8, 7), Const(_r(3, 2, 3, 3))],
           {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    OpCase("conv_same_lower_even_kernel", "Conv", [_r(1, 2, 6, 6), Const(_r(2, 2, 2, 2))],
           {"auto_pad": "SAME_LOWER"}),
    OpCase("conv_strides_per_axis", "Conv", [_r(2, 2, 9, 8), Const(_r(3, 2, 3, 2)), _r(3)],
           {"strides": [2, 1], "pads": [1, 1, 1, 1]}),
    OpCase("conv_depthwise", "Conv", [_r(1, 5, 7, 7), Const(_r(5, 1, 3, 3)), Const(_r(5))],
           {"group": 5, "pads": [1, 1, 1, 1]}),
    OpCase("conv_depthwise_stride2", "Conv", [_r(2, 3, 9, 8), Const(_r(3, 1, 3, 3))],
           {"group": 3, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    OpCase("conv_depthwise_dilated", "Conv", [_r(1, 4, 9, 9), Const(_r(4, 1, 3, 3))],
           {"group": 4, "dilations": [2, 2], "pads": [2, 1, 2, 3]}),
    OpCase("conv_depthwise_5x5_asym", "Conv", [_r(1, 3, 8, 7), Const(_r(3, 1, 5, 5))],
           {"group": 3, "strides": [2, 1], "pads": [2, 1, 1, 2]}),
    OpCase("conv_grouped", "Conv", [_r(1, 4, 6, 6), Const(_r(6, 2, 3, 3)), Const(_r(6))],
           {"group": 2, "pads": [1, 1, 1, 1]}),
    OpCase("conv_channel_multiplier", "Conv", [_r(1, 2, 5, 5), Const(_r(6, 1, 3, 3))],
           {"group": 2, "strides": [2, 2]}),
    OpCase("max_pool_asymmetric_pads", "MaxPool", [_r(1, 2, 6, 7)],
           {"kernel_shape": [2, 2], "strides": [2, 2], "pads": [0, 0, 1, 1]}),
    OpCase("average_pool_same_upper", "AveragePool", [_r(1, 2, 7, 7)],
           {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    OpCase("gather_embedding", "Gather",
           [Const(_r(10, 4)), np.array([[3, -1, 0], [9, 2, -10]], np.int64)]),
    OpCase("gather_axis1_int32", "Gather",
           [_r(2, 5, 3), np.array([4, -2, 0, 4], np.int32)], {"axis": 1}),
    OpCase("gather_scalar_runtime", "Gather", [_r(3, 6), np.array(-3, np.int64)], {"axis": 1}),
    OpCase("gather_constant_matrix", "Gather", [_r(4, 3), Const(np.array([[1, 0], [3, -4]]))]),
    OpCase("gather_elements_axis0", "GatherElements",
           [_r(3, 4), np.array([[2, -1, 0, 1], [0, 0, -3, 2]], np.int64)]),
    OpCase("gather_elements_axis1", "GatherElements",
           [_r(2, 3, 4), np.array([[[3, -1], [0, 2], [1, 1]], [[-4, 0], [2, 3], [0, 0]]],
                                  np.int64)], {"axis": 2}),
    OpCase("constant_of_shape_default", "ConstantOfShape", [_i64(2, 3)]),
    OpCase("constant_of_shape_int64", "ConstantOfShape", [_i64(4, 5)],
           {"value": numpy_helper.from_array(np.array([7], np.int64))},
           out_type=TensorProto.INT64),
    OpCase("split_sizes_input", "Split", [_r(2, 7), _i64(3, 4)], {"axis": 1}, n_out=2),
    OpCase("split_equal_attr_free", "Split", [_r(6, 3)], n_out=3),
    OpCase("split_num_outputs_uneven", "Split", [_r(2, 7)], {"axis": -1, "num_outputs": 3},
           opset=18, n_out=3),
    OpCase("split_opset11_attr", "Split", [_r(5, 2)], {"split": [1, 4]}, opset=11, n_out=2),
    OpCase("pad_constant", "Pad", [_r(2, 3), _i64(1, 0, 2, 3), Const(np.array(1.5, F32))]),
    OpCase("pad_negative_crops", "Pad", [_r(4, 5), _i64(-1, 2, 1, -3)]),
    OpCase("pad_edge", "Pad", [_r(1, 3, 4), _i64(0, 2, 1, 0, 1, 3)], {"mode": "edge"}),
    OpCase("pad_reflect", "Pad", [_r(2, 4, 5), _i64(0, 3, 4, 0, 2, 4)], {"mode": "reflect"}),
    # wrap: periodic, pads longer than the axis (4 and 5 on an axis of 3) and a crop
    OpCase("pad_wrap", "Pad", [_r(2, 3, 4), _i64(0, 4, 1, 0, 5, 2)], {"mode": "wrap"}, opset=19),
    OpCase("pad_wrap_crop", "Pad", [_r(3, 5), _i64(-1, 6, 2, -2)], {"mode": "wrap"}, opset=19),
    OpCase("pad_axes_opset18", "Pad", [_r(2, 3, 4), _i64(1, 2), Const(np.array(0.0, F32)),
                                       _i64(-1)], {"mode": "constant"}, opset=18),
    OpCase("range_int64", "Range", [Const(np.array(2, np.int64)), Const(np.array(-7, np.int64)),
                                    Const(np.array(-3, np.int64))], out_type=TensorProto.INT64),
    OpCase("range_float", "Range", [Const(np.array(0.5, F32)), Const(np.array(3.0, F32)),
                                    Const(np.array(0.75, F32))]),
    OpCase("isnan", "IsNaN", [np.array([[np.nan, 1.0, -np.inf], [0.0, np.nan, np.inf]], F32)],
           out_type=TensorProto.BOOL),
    *(OpCase(f"isinf_{neg}{pos}", "IsInf",
             [np.array([[np.nan, 1.0, -np.inf], [0.0, np.inf, -3.0]], F32)],
             {"detect_negative": neg, "detect_positive": pos}, out_type=TensorProto.BOOL)
      for neg in (0, 1) for pos in (0, 1)),
    OpCase("gather_nd_consecutive", "GatherND",
           [_r(2, 5, 3), Const(np.array([[[0, 1], [0, 2], [0, 3]]], np.int64))]),
    OpCase("gather_nd_scattered", "GatherND",
           [_r(3, 4), Const(np.array([[2, 1], [0, -1], [1, 0]], np.int64))]),
    OpCase("gather_nd_rows", "GatherND", [_r(4, 3), Const(np.array([[3], [1]], np.int64))]),
    OpCase("gather_nd_runtime", "GatherND", [_r(3, 4, 2), np.array([[[2, 1], [0, -1]], [[1, 0], [-3, 3]]])]),
    OpCase("gather_nd_runtime_full", "GatherND", [_r(3, 4), np.array([[0, 3], [2, -2], [1, 1]])]),
    # batch_dims: the leading axes shared by data and indices, constant and run-time indices
    OpCase("gather_nd_batch_const", "GatherND",
           [_r(2, 3, 4), Const(np.array([[[1, 3], [0, -1]], [[2, 0], [1, 1]]], np.int64))],
           {"batch_dims": 1}),
    OpCase("gather_nd_batch_runtime", "GatherND",
           [_r(2, 3, 4, 5), np.array([[[1], [0], [-1]], [[2], [3], [0]]])], {"batch_dims": 2}),
    OpCase("gather_nd_batch_rows", "GatherND", [_r(3, 4, 2), np.array([[1], [3], [0]])],
           {"batch_dims": 1}),
    OpCase("gather_nd_bool", "GatherND",
           [np.array([[True, False, True]]), Const(np.array([[[0, 2], [0, 1]]], np.int64))],
           out_type=TensorProto.BOOL),
    OpCase("where_constant", "Where", [Const(np.array([True, False])), Const(np.array([1, 1], np.int64)),
                                        Const(np.array([5, -1], np.int64))],
           out_type=TensorProto.INT64),
    OpCase("trilu_upper", "Trilu", [_r(2, 4, 5)]),
    OpCase("trilu_lower_k", "Trilu", [_r(5, 3), Const(np.array(-1, np.int64))], {"upper": 0}),
    OpCase("cumsum_last", "CumSum", [_r(3, 7), Const(np.array(-1, np.int64))]),
    OpCase("cumsum_axis0_exclusive_reverse", "CumSum", [_r(5, 2, 3), Const(np.array(0, np.int32))],
           {"exclusive": 1, "reverse": 1}),
    OpCase("cumsum_int", "CumSum", [np.array([[1, -2, 3], [4, 5, -6]], np.int64),
                                    Const(np.array(1, np.int64))], out_type=TensorProto.INT64),
    OpCase("instance_norm", "InstanceNormalization", [_r(2, 3, 4, 5), Const(_r(3)), _r(3)],
           {"epsilon": 1e-3}),
    *(OpCase(f"einsum_{eq.replace(',', '_').replace('->', '_to_') or 'x'}", "Einsum",
             [_r(*shape, seed=k) for k, shape in enumerate(shapes)], {"equation": eq}, opset=12)
      for eq, shapes in (
          ("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
          ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
          ("bhqk,bhkd->bqhd", [(1, 2, 3, 4), (1, 2, 4, 5)]), ("i,i->", [(7,), (7,)]),
          ("ij->ji", [(3, 4)]), ("ij->j", [(3, 4)]), ("ij,j->i", [(3, 4), (4,)]),
          ("abc,cd->abd", [(2, 3, 4), (4, 5)]), ("ik,jk", [(3, 4), (5, 4)]),
          ("ijk,j->ik", [(2, 3, 4), (3,)]),
          # ellipses and diagonals
          ("...ij,...jk->...ik", [(2, 3, 4, 5), (2, 3, 5, 6)]), ("...ij->...j", [(4, 5)]), ("...ii->...i", [(2, 3, 4, 4)]),
          ("ii->", [(5, 5)]), ("bii,bi->b", [(3, 4, 4), (3, 4)]), ("i...,i...", [(3, 2, 5), (3, 2, 5)]),
          ("iji->j", [(4, 3, 4)]))),
    OpCase("max_pool_stride", "MaxPool", [_r(1, 2, 7, 7)], {"kernel_shape": [3, 3],
                                                             "strides": [2, 2]}),
    OpCase("max_pool_padded", "MaxPool", [_r(2, 2, 7, 7)], {"kernel_shape": [3, 3],
                                                             "strides": [2, 2], "pads": [1] * 4}),
    OpCase("average_pool_padded", "AveragePool", [_r(1, 2, 6, 6)],
           {"kernel_shape": [3, 3], "pads": [1] * 4}),
    OpCase("average_pool_padded_counted", "AveragePool", [_r(1, 2, 5, 5)],
           {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1] * 4, "count_include_pad": 1}),
    OpCase("average_pool", "AveragePool", [_r(1, 2, 6, 6)], {"kernel_shape": [2, 2],
                                                              "strides": [2, 2]}),
    OpCase("global_max_pool", "GlobalMaxPool", [_r(2, 3, 4, 5)]),
    # pools outside max_pool/avg_pool: 1-D, 3-D, rectangular, dilated, ceil_mode
    OpCase("max_pool_1d", "MaxPool", [_r(2, 3, 33)], {"kernel_shape": [3], "strides": [2],
                                                       "pads": [1, 0]}),
    OpCase("average_pool_1d_ceil", "AveragePool", [_r(1, 2, 7)],
           {"kernel_shape": [2], "strides": [2], "ceil_mode": 1}),
    OpCase("max_pool_3d", "MaxPool", [_r(1, 2, 5, 6, 7)], {"kernel_shape": [2, 3, 2],
                                                           "strides": [1, 2, 2]}),
    OpCase("average_pool_3d_padded", "AveragePool", [_r(1, 1, 5, 5, 5)],
           {"kernel_shape": [3, 3, 3], "pads": [1, 0, 1, 1, 1, 0], "strides": [2, 2, 2]}),
    OpCase("max_pool_dilated", "MaxPool", [_r(1, 2, 9, 8)],
           {"kernel_shape": [3, 2], "dilations": [2, 3], "pads": [1, 1, 2, 0]}),
    OpCase("max_pool_ceil_mode", "MaxPool", [_r(1, 2, 7, 7)],
           {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}),
    OpCase("average_pool_ceil_counted", "AveragePool", [_r(1, 2, 8, 7)],
           {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
            "ceil_mode": 1, "count_include_pad": 1}),
    OpCase("average_pool_ceil_real_only", "AveragePool", [_r(1, 2, 8, 7)],
           {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1}),
    OpCase("max_pool_int8_padded", "MaxPool", [np.arange(-60, 38, dtype=np.int8).reshape(1, 2, 7, 7)],
           {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]},
           out_type=TensorProto.INT8),
    *(OpCase(f"max_pool_indices_{name}", "MaxPool", [x], attrs, n_out=2,
             out_types=(TensorProto.FLOAT, TensorProto.INT64)) for name, x, attrs in (
        ("padded_batch", _r(2, 3, 7, 6), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1],
                                         "strides": [2, 2]}),
        ("ceil_column_major", _r(1, 2, 7, 5), {"kernel_shape": [2, 2], "strides": [2, 2],
                                               "ceil_mode": 1, "storage_order": 1}),
        ("ties_first", np.ones((1, 1, 4, 4), F32), {"kernel_shape": [2, 2]}),
        ("1d_dilated", _r(2, 2, 13), {"kernel_shape": [3], "dilations": [2], "pads": [1, 2]}))),
    # 3-D: a sum of 2-D convolutions per output depth
    OpCase("conv_3d_strided_padded_bias", "Conv",
           [_r(2, 3, 7, 6, 5), Const(_r(4, 3, 3, 2, 3)), Const(_r(4))],
           {"strides": [2, 1, 2], "pads": [1, 0, 1, 2, 1, 0]}),
    OpCase("conv_3d_dilated_grouped_weight_input", "Conv", [_r(1, 4, 8, 7, 7), _r(6, 2, 2, 3, 3)],
           {"group": 2, "dilations": [3, 1, 2], "pads": [0, 1, 2, 0, 1, 2]}),
    OpCase("conv_transpose_3d", "ConvTranspose",
           [_r(1, 2, 3, 4, 3), Const(_r(2, 3, 3, 2, 3)), Const(_r(3))],
           {"strides": [2, 1, 2], "pads": [1, 0, 0, 1, 1, 1], "output_padding": [1, 0, 0]}),
    OpCase("conv_1d", "Conv", [_r(2, 3, 33), Const(_r(4, 3, 5)), Const(_r(4))],
           {"pads": [2, 1], "strides": [2]}),
    OpCase("conv_1d_depthwise_dilated", "Conv", [_r(1, 4, 19), Const(_r(4, 1, 3))],
           {"group": 4, "dilations": [2], "pads": [2, 2]}),
    # Resize with constant scales or sizes: each pattern of take_constant, every family
    *(OpCase(f"resize_{mode}_{coords}", "Resize",
             [_r(2, 3, 5, 7), Const(np.zeros(0, F32)), Const(np.array([1, 1, 2, 2], F32))],
             {"mode": mode, "coordinate_transformation_mode": coords}, opset=13,
             atol=1e-5 if mode == "cubic" else 1e-6)
      for mode in ("nearest", "linear", "cubic")
      for coords in ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel")),
    OpCase("resize_downsample_linear", "Resize",
           [_r(1, 2, 8, 9), Const(np.zeros(0, F32)), Const(np.array([1, 1, 0.5, 0.34], F32))],
           {"mode": "linear"}, opset=13),
    OpCase("resize_odd_scale_nearest_ceil", "Resize",
           [_r(1, 2, 7, 5), Const(np.zeros(0, F32)), Const(np.array([1, 1, 1.7, 2.6], F32))],
           {"mode": "nearest", "nearest_mode": "ceil"}, opset=13),
    OpCase("resize_sizes_antialias_cubic", "Resize",
           [_r(1, 1, 16, 12), Const(np.zeros(0, F32)), Const(np.zeros(0, F32)),
            _i64(1, 1, 5, 7)], {"mode": "cubic", "antialias": 1, "exclude_outside": 1},
           opset=18),
    OpCase("resize_sizes_axes_not_larger", "Resize",
           [_r(1, 3, 6, 8), Const(np.zeros(0, F32)), Const(np.zeros(0, F32)), _i64(9, 10)],
           {"mode": "linear", "axes": [2, 3], "keep_aspect_ratio_policy": "not_larger"},
           opset=18),
    OpCase("resize_tf_crop_and_resize", "Resize",
           [_r(1, 1, 6, 6), Const(np.array([0, 0, 0.2, -0.3, 1, 1, 0.9, 1.2], F32)),
            Const(np.zeros(0, F32)), _i64(1, 1, 4, 5)],
           {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize",
            "extrapolation_value": 7.5}, opset=13),
    OpCase("resize_nearest_int32", "Resize",
           [np.arange(24, dtype=np.int32).reshape(1, 2, 3, 4), Const(np.zeros(0, F32)),
            Const(np.array([1, 1, 3, 0.5], F32))], {"mode": "nearest"}, opset=13,
           out_type=TensorProto.INT32),
    OpCase("resize_opset10_nearest", "Resize",
           [_r(1, 2, 4, 5), Const(np.array([1, 1, 2.5, 0.6], F32))], {"mode": "nearest"},
           opset=10),
    OpCase("upsample_opset9_linear", "Upsample",
           [_r(1, 2, 3, 4), Const(np.array([1, 1, 2, 3], F32))], {"mode": "linear"}, opset=9),
    # ConvTranspose: constant weights flipped at import, run-time ones in the kernel
    OpCase("conv_transpose_stride2_bias", "ConvTranspose",
           [_r(2, 3, 5, 4), Const(_r(3, 4, 3, 3)), Const(_r(4))], {"strides": [2, 2]}),
    OpCase("conv_transpose_pads_output_padding", "ConvTranspose",
           [_r(1, 2, 7, 6), Const(_r(2, 3, 4, 3))],
           {"strides": [3, 2], "pads": [1, 2, 2, 0], "output_padding": [2, 1]}),
    OpCase("conv_transpose_crop_dilated", "ConvTranspose", [_r(1, 2, 6, 6), _r(2, 2, 2, 3)],
           {"dilations": [2, 1], "pads": [3, 3, 2, 1], "strides": [2, 2]}),
    OpCase("conv_transpose_grouped", "ConvTranspose",
           [_r(1, 4, 5, 5), Const(_r(4, 3, 3, 3)), Const(_r(6))], {"group": 2, "strides": [2, 2]}),
    OpCase("conv_transpose_depthwise", "ConvTranspose", [_r(1, 3, 6, 5), Const(_r(3, 1, 4, 4))],
           {"group": 3, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    OpCase("conv_transpose_same_lower_output_shape", "ConvTranspose",
           [_r(1, 2, 5, 5), Const(_r(2, 2, 3, 3))],
           {"strides": [2, 2], "auto_pad": "SAME_LOWER", "output_shape": [10, 9]}),
    OpCase("conv_transpose_1d", "ConvTranspose", [_r(2, 3, 33), Const(_r(3, 2, 5)), Const(_r(2))],
           {"strides": [3], "pads": [1, 2], "output_padding": [1]}),
    # TopK: k rounds of selection; ties to the lower index; any integer width
    OpCase("top_k_last_axis", "TopK", [_r(3, 33), _i64(5)], n_out=2,
           out_types=(TensorProto.FLOAT, TensorProto.INT64)),
    OpCase("top_k_smallest_axis0", "TopK", [_r(7, 4, 3), _i64(7)], {"axis": 0, "largest": 0},
           n_out=2, out_types=(TensorProto.FLOAT, TensorProto.INT64)),
    OpCase("top_k_ties_int64", "TopK",
           [np.array([[3, 1, 3, -2**63, 7, 1], [-2**63] * 6], np.int64), _i64(4)], n_out=2,
           out_types=(TensorProto.INT64, TensorProto.INT64)),
    # uint8 images (held shifted or widened): the selecting ops keep their values exactly
    *(OpCase(f"{name}_uint8", op, [_U8, *extra], attrs, opset=18, n_out=len(types),
             out_types=types) for name, op, extra, attrs, types in (
        ("resize_nearest", "Resize", [Const(np.zeros(0, F32)), Const(np.array([1, 1, 2, 1.5], F32))],
         {"mode": "nearest"}, (TensorProto.UINT8,)),
        ("max_pool_ceil", "MaxPool", [], {"kernel_shape": [3, 2], "ceil_mode": 1, "strides": [2, 2]},
         (TensorProto.UINT8,)),
        ("top_k", "TopK", [_i64(3)], {"axis": 3}, (TensorProto.UINT8, TensorProto.INT64)))),
    OpCase("mod_fmod_floats_exact", "Mod",
           [np.array([-4, 4, -5.5, 5.5, 1e30, -7.25, 3, -3, np.inf, -0.0, 1e-40], F32),
            np.array([2, -2, np.inf, -np.inf, 3.3, 2, -0.7, 0.7, 2, 5, 3], F32)], {"fmod": 1},
           opset=13),
    OpCase("top_k_nan_first", "TopK", [np.array([[1, np.nan, 5, np.nan, 2]], F32), _i64(4)],
           n_out=2, out_types=(TensorProto.FLOAT, TensorProto.INT64)),
    OpCase("top_k_int32_smallest_limits", "TopK",
           [np.array([[2**31 - 1, 5, 2**31 - 1, -3]], np.int32), _i64(3)], {"largest": 0},
           n_out=2, out_types=(TensorProto.INT32, TensorProto.INT64)),
    OpCase("conv_dilated", "Conv", [_r(1, 3, 11, 10), Const(_r(4, 3, 3, 3)), Const(_r(4))],
           {"dilations": [2, 3], "pads": [2, 3, 2, 3]}),
    OpCase("conv_dilated_strided_weight_input", "Conv", [_r(2, 2, 12, 9), _r(3, 2, 2, 3)],
           {"dilations": [3, 2], "strides": [2, 1], "pads": [1, 0, 2, 1]}),
    OpCase("conv_grouped_dilated", "Conv", [_r(1, 4, 9, 9), Const(_r(6, 2, 3, 3))],
           {"group": 2, "dilations": [2, 2], "pads": [2, 2, 2, 2]}),
    OpCase("conv_1d_weight_input", "Conv", [_r(1, 2, 7), _r(3, 2, 1)]),
    OpCase("flatten_axis2", "Flatten", [_r(2, 3, 4, 2)], {"axis": 2}),
    OpCase("reshape_infer", "Reshape", [_r(2, 3, 4), _i64(0, -1)]),
    OpCase("transpose_default", "Transpose", [_r(2, 3, 4)]),
    OpCase("concat", "Concat", [_r(2, 3), Const(_r(1, 3))], {"axis": 0}),
    OpCase("squeeze", "Squeeze", [_r(2, 1, 3), _i64(1)], opset=13),
    OpCase("squeeze_attr", "Squeeze", [_r(2, 1, 3)], {"axes": [1]}, opset=11),
    OpCase("unsqueeze", "Unsqueeze", [_r(2, 3), _i64(0, 3)], opset=13),
    OpCase("expand", "Expand", [_r(3, 1), _i64(2, 3, 4)]),
    OpCase("slice", "Slice", [_r(4, 6), _i64(1, 0), _i64(3, 100), _i64(0, 1), _i64(1, 2)]),
    OpCase("slice_reverse", "Slice", [_r(5), _i64(-1), _i64(-100), _i64(0), _i64(-1)]),
    OpCase("gather_scalar", "Gather", [_r(3, 4), Const(np.array(2, np.int64))], {"axis": 1}),
    OpCase("reduce_sum_input_axes", "ReduceSum", [_r(2, 3, 4), _i64(1)], opset=13),
    OpCase("reduce_mean_attr", "ReduceMean", [_r(2, 3, 4)], {"axes": [0, 2], "keepdims": 0}),
    OpCase("reduce_max_all", "ReduceMax", [_r(2, 3, 4)], opset=18),
    OpCase("reduce_min", "ReduceMin", [_r(2, 3)], {"axes": [-1]}),
    OpCase("reduce_prod", "ReduceProd", [_r(2, 3, lo=0.5)], {"axes": [1]}),
    # issue 18: activations and elementwise ops of real exports
    *(OpCase(op.lower(), op, [_r(3, 4, lo=-4, hi=4)]) for op in
      ("Sign", "Elu", "Celu", "Selu", "Softplus", "Softsign", "HardSwish", "ThresholdedRelu",
       "Shrink")),
    OpCase("elu_alpha", "Elu", [_r(3, 4, lo=-4, hi=4)], {"alpha": 0.5}),
    OpCase("softplus_large", "Softplus", [np.array([-100.0, -20.0, 0.0, 20.0, 100.0], F32)]),
    OpCase("round_half_even", "Round", [np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.4, -2.6,
                                                  8388609.0, 1e30, 0.49999997], F32)]),
    OpCase("prelu_per_channel", "PRelu", [_r(2, 3, 4, 4), Const(np.array([0.1, 0.2, 0.3], F32)
                                                               .reshape(3, 1, 1))]),
    OpCase("mod_int", "Mod", [np.array([-7, 7, -8, 9, 0], np.int64), _i64(3, -3, 3, 4, 5)],
           out_type=TensorProto.INT64),
    OpCase("mod_int_fmod", "Mod", [np.array([-7, 7, -8, 9, 0], np.int64), _i64(3, -3, 3, 4, 5)],
           {"fmod": 1}, out_type=TensorProto.INT64),
    OpCase("dropout_inference_mask", "Dropout", [_r(3, 4), Const(np.array(0.5, F32)),
                                                 Const(np.array(False))],
           n_out=2, out_types=(TensorProto.FLOAT, TensorProto.BOOL)),
    OpCase("dropout_training_zero_ratio", "Dropout", [_r(3, 4), Const(np.array(0.0, F32)),
                                                      Const(np.array(True))],
           n_out=2, out_types=(TensorProto.FLOAT, TensorProto.BOOL)),
    *(OpCase(op.lower(), op, [_r(2, 3, 4, lo=0.1)], {"keepdims": k}, opset=13)
      for op in ("ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp")
      for k in (0, 1)),
    OpCase("reduce_log_sum_exp_big", "ReduceLogSumExp",
           [np.array([[1e30, 1e30, -3.0], [-np.inf, -np.inf, -np.inf]], F32)], {"axes": [1]},
           opset=13),
    OpCase("argmax_last_index", "ArgMax", [np.array([[1, 3, 3, 0], [5, 5, 5, 5]], F32)],
           {"axis": 1, "select_last_index": 1}, out_type=TensorProto.INT64),
    OpCase("argmin_last_index", "ArgMin", [np.array([[1, 0, 3, 0], [5, 5, 5, 5]], F32)],
           {"axis": 1, "keepdims": 0, "select_last_index": 1}, out_type=TensorProto.INT64),
    OpCase("argmax", "ArgMax", [_r(3, 5)], {"axis": 1, "keepdims": 0},
           out_type=TensorProto.INT64),
    OpCase("cast", "Cast", [_r(2, 3, lo=-5, hi=5)], {"to": TensorProto.INT32},
           out_type=TensorProto.INT32),
    OpCase("quantize_per_axis", "QuantizeLinear",
           [_r(2, 3, 4), Const(np.array([0.01, 0.02, 0.05], F32)),
            Const(np.array([0, 5, -3], np.int8))], {"axis": 1}, opset=13,
           out_type=TensorProto.INT8),
]


def _model(case: OpCase) -> tuple[Any, dict[str, np.ndarray]]:
    names, inputs, inits, feeds = [], [], [], {}
    for i, v in enumerate(case.inputs):
        name = f"in{i}"
        names.append(name)
        if isinstance(v, Const):
            inits.append(numpy_helper.from_array(v.value, name))
        else:
            inputs.append(helper.make_tensor_value_info(name, _ONNX_TYPES[v.dtype], list(v.shape)))
            feeds[name] = v
    outs = [f"out{i}" for i in range(case.n_out)]
    node = helper.make_node(case.op, names, outs, name=f"the_{case.id}", **case.attrs)
    graph = helper.make_graph([node], case.id, inputs,
                              [helper.make_tensor_value_info(o, t, None) for o, t in
                               zip(outs, case.out_types or [case.out_type] * case.n_out)],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", case.opset)])
    model.ir_version = 8
    return model, feeds


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_op_matches_onnxruntime(case: OpCase) -> None:
    model, feeds = _model(case)
    want = ort_run(model, feeds, optimize=False)
    got = load_onnx(model)(**feeds)
    got = got if isinstance(got, tuple) else (got,)
    for g, w in zip(got, want, strict=True):
        assert_close(g, w, rtol=1e-5, atol=case.atol)


def test_constant_nodes_and_shape_arithmetic_fold() -> None:
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape (as exporters write it) folds at
    import when the shape is static; Constant nodes become literals or weights."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "i0"], ["d0"], axis=0),
        helper.make_node("Unsqueeze", ["d0", "ax"], ["d0u"]),
        helper.make_node("Constant", [], ["minus1"], value_ints=[-1]),
        helper.make_node("Concat", ["d0u", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["flat"]),
        helper.make_node("Constant", [], ["c"], value_float=2.0),
        helper.make_node("Mul", ["flat", "c"], ["y"]),
    ]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "i0"),
             numpy_helper.from_array(np.array([0], np.int64), "ax")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, [2, 3, 4])],
                              [helper.make_tensor_value_info("y", 1, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    x = _r(2, 3, 4)
    mod = load_onnx(model)
    assert "reshape(x, [2, 12])" in mod.source and "Shape" not in mod.source.split("{")[1]
    assert_close(mod(x), ort_run(model, {"x": x})[0])


def test_symbolic_shape_arithmetic_folds() -> None:
    """With a dynamic batch and sequence, ``x.view(x.size(0) * x.size(1), -1)`` as an
    exporter writes it becomes ``reshape(x, [batch * seq, 8])``: one import, any batch."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "i0"], ["b"], axis=0),
        helper.make_node("Gather", ["s", "i1"], ["t"], axis=0),
        helper.make_node("Mul", ["b", "t"], ["bt"]),
        helper.make_node("Unsqueeze", ["bt", "ax"], ["btu"]),
        helper.make_node("Concat", ["btu", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
    ]
    inits = [numpy_helper.from_array(np.array(v, np.int64), n)
             for n, v in (("i0", 0), ("i1", 1), ("ax", [0]), ("minus1", [-1]))]
    x_info = helper.make_tensor_value_info("x", 1, ["batch", "seq", 8])
    graph = helper.make_graph(nodes, "g", [x_info], [helper.make_tensor_value_info("y", 1, None)],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    mod = load_onnx(model)
    assert "y = reshape(x, [batch * seq, 8]);" in mod.source
    assert "output y: tensor" in mod.source  # a product of dims is no declarable extent
    for shape in ((2, 3, 8), (1, 5, 8)):
        x = _r(*shape)
        assert_close(mod(x), ort_run(model, {"x": x})[0])


def _token_id_model(nodes: list, inits: list, opset: int = 13) -> Any:
    """A graph of ``nodes`` from int64 token ids ``[batch, seq]`` to one output ``y``."""
    ids_info = helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"])
    graph = helper.make_graph(nodes, "g", [ids_info], [helper.make_tensor_value_info("y", 1, None)],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def test_embedding_lookup_and_mask_from_the_shape() -> None:
    """BERT's first nodes as exporters write them: token ids (dynamic batch and
    sequence) look up a constant embedding table, and ``Shape -> ConstantOfShape``
    builds an all-ones attention mask: one import, any batch and sequence."""
    table = _r(11, 6)
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["emb"]),
        helper.make_node("Shape", ["ids"], ["s"]),
        helper.make_node("ConstantOfShape", ["s"], ["mask"],
                         value=numpy_helper.from_array(np.array([1.0], F32))),
        helper.make_node("Unsqueeze", ["mask", "ax"], ["mask3"]),
        helper.make_node("Mul", ["emb", "mask3"], ["y"]),
    ]
    inits = [numpy_helper.from_array(table, "table"),
             numpy_helper.from_array(np.array([2], np.int64), "ax")]
    model = _token_id_model(nodes, inits)
    mod = load_onnx(model)
    assert "full([batch, seq], 1.0, f32)" in mod.source
    for shape in ((1, 1), (2, 7), (3, 5)):
        ids = np.random.default_rng(sum(shape)).integers(-11, 11, shape)
        assert_close(mod(ids), ort_run(model, {"ids": ids})[0])


def test_position_ids_from_a_dynamic_sequence_length() -> None:
    """GPT-2's embeddings as exporters write them: ``Range(0, Shape(ids)[1], 1)`` gives
    the position ids of a dynamic sequence, which look up a position table; the sum
    with the token embeddings matches ORT for every batch and length."""
    wte, wpe = _r(13, 4), _r(9, 4, seed=1)
    nodes = [
        helper.make_node("Shape", ["ids"], ["s"]),
        helper.make_node("Gather", ["s", "one"], ["seq"], axis=0),
        helper.make_node("Range", ["zero", "seq", "step"], ["pos"]),
        helper.make_node("Gather", ["wte", "ids"], ["tok"]),
        helper.make_node("Gather", ["wpe", "pos"], ["where"]),
        helper.make_node("Add", ["tok", "where"], ["y"]),
    ]
    inits = [numpy_helper.from_array(v, name) for name, v in (
        ("wte", wte), ("wpe", wpe), ("one", np.array(1, np.int64)),
        ("zero", np.array(0, np.int64)), ("step", np.array(1, np.int64)))]
    model = _token_id_model(nodes, inits)
    mod = load_onnx(model)
    assert "arange(dim(ids, 1))" in mod.source
    for shape in ((1, 1), (2, 9), (3, 4)):
        ids = np.random.default_rng(sum(shape)).integers(0, 13, shape)
        assert_close(mod(ids), ort_run(model, {"ids": ids})[0])


def test_causal_mask_and_slices_of_a_dynamic_sequence() -> None:
    """What transformers' exports build from the sequence length (GPT-2, BERT): a causal
    ``Trilu`` of ``Expand(1, [seq, seq])``, a slice ``table[:, 0:seq]`` of a position
    buffer, and a mask scaled by the length (a shape value meeting run-time data)."""
    table = _r(1, 9)
    nodes = [
        helper.make_node("Shape", ["ids"], ["s"]),
        helper.make_node("Gather", ["s", "one"], ["seq"], axis=0),
        helper.make_node("Unsqueeze", ["seq", "ax"], ["seq1"]),
        helper.make_node("Concat", ["seq1", "seq1"], ["square"], axis=0),
        helper.make_node("Expand", ["onef", "square"], ["ones"]),
        helper.make_node("Trilu", ["ones"], ["causal"], upper=0),
        helper.make_node("Slice", ["table", "zero1", "seq1", "ax1"], ["pos"]),
        helper.make_node("Cast", ["ids"], ["idsf"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["seq"], ["seqf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["idsf", "seqf"], ["scaled"]),
        helper.make_node("Add", ["scaled", "pos"], ["rows"]),
        helper.make_node("MatMul", ["rows", "causal"], ["y"]),
    ]
    inits = [numpy_helper.from_array(v, name) for name, v in (
        ("table", table), ("one", np.array(1, np.int64)), ("ax", np.array([0], np.int64)),
        ("onef", np.array(1.0, F32)), ("zero1", np.array([0], np.int64)),
        ("ax1", np.array([1], np.int64)))]
    model = _token_id_model(nodes, inits, opset=17)
    mod = load_onnx(model)
    for shape in ((1, 1), (2, 9), (3, 4)):
        ids = np.random.default_rng(sum(shape)).integers(0, 13, shape)
        assert_close(mod(ids), ort_run(model, {"ids": ids})[0])


def test_expand_to_a_shape_with_minus_one_tests() -> None:
    """torch's ``expand(batch, seq)`` exports ``Where(Equal(shape, -1), 1, shape)`` before
    ``Expand``: with a dynamic batch that is symbolic shape arithmetic, folded at import."""
    nodes = [
        helper.make_node("Shape", ["ids"], ["s"]),
        helper.make_node("Shape", ["s"], ["slen"]),
        helper.make_node("ConstantOfShape", ["slen"], ["ones"],
                         value=numpy_helper.from_array(np.array([1], np.int64))),
        helper.make_node("Mul", ["ones", "minus1"], ["neg"]),
        helper.make_node("Equal", ["s", "neg"], ["is_neg"]),
        helper.make_node("Where", ["is_neg", "ones", "s"], ["target"]),
        helper.make_node("Expand", ["row", "target"], ["y"]),
    ]
    inits = [numpy_helper.from_array(np.array(-1, np.int64), "minus1"),
             numpy_helper.from_array(_r(1, 1), "row")]
    model = _token_id_model(nodes, inits)
    mod = load_onnx(model)
    assert "broadcast_to(" in mod.source and "where(" not in mod.source
    for shape in ((1, 1), (2, 5)):
        ids = np.zeros(shape, np.int64)
        assert_close(mod(ids), ort_run(model, {"ids": ids})[0])
