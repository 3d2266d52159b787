"""Lowering of expressions (LANGUAGE.md §3, §6, §7) to SSA IR, checked as IR text:
func calls as per-type instances, module funcs, dims, weak literal casts, builtins
with keyword arguments, array literals and consts."""

from __future__ import annotations

from tests.lowering.helpers import NUM, check


def test_func_call_is_one_instance_per_argument_type():
    check("""
    func twice(v) { return v + v; }
    kernel k(input x: f32[M, N], input h: f16[N], output a: f32[M, N], output b: f16[N],
             output c: f32[M, N]) {
        a = twice(x); b = twice(h); c = twice(a);
    }""", """
    CHECK-LABEL: func @k(
    CHECK:      %a = func.call @twice(%x) : (tensor<?x?xf32>) -> tensor<?x?xf32>
    CHECK-NEXT: %b = func.call @twice.1(%h) : (tensor<?xf16>) -> tensor<?xf16>
    CHECK-NEXT: %c = func.call @twice(%a) : (tensor<?x?xf32>) -> tensor<?x?xf32>
    CHECK-LABEL: func @twice(%v: tensor<?x?xf32>) -> tensor<?x?xf32> {
    CHECK-NEXT:  ^entry:
    CHECK-NEXT:    {{%[0-9]+}} = tensor.add %v, %v : tensor<?x?xf32>
    CHECK-NEXT:    return
    CHECK-LABEL: func @twice.1(%v: tensor<?xf16>) -> tensor<?xf16> {
    CHECK-NOT:   func @twice.2
    """)


def test_compile_time_func_arguments_are_folded_into_the_instance():
    check("""
    func total(x, ax) { return reduce_sum(x, axis=ax); }
    kernel k(input x: f32[M, N], output r: f32[M], output c: f32[N]) {
        r = total(x, 1); c = total(x, 0);
    }""", """
    CHECK:      %r = func.call @total(%x) : (tensor<?x?xf32>) -> tensor<?xf32>
    CHECK:      %c = func.call @total.1(%x) : (tensor<?x?xf32>) -> tensor<?xf32>
    CHECK-LABEL: func @total(%x: tensor<?x?xf32>)
    CHECK:       tensor.reduce_sum %x {axes = [1]}
    CHECK-LABEL: func @total.1(%x: tensor<?x?xf32>)
    CHECK:       tensor.reduce_sum %x {axes = [0]}
    """)


def test_func_with_returns_on_several_paths_joins_the_result_type():
    check("""
    func clamp0(v) { if v < 0.0 { return 0; } return v; }
    kernel k(input t: f16, output y: f16) { y = clamp0(t); }
    """, f"""
    CHECK-LABEL: func @clamp0(%v: f16) -> f16 {{
    CHECK:       cond_br {NUM}, ^then, ^join
    CHECK-NEXT:  ^then:
    CHECK:         {NUM} = arith.constant 0.0 : f16
    CHECK-NEXT:    return {NUM} : f16
    CHECK-NEXT:  ^join:
    CHECK-NEXT:    return %v : f16
    """)


def test_module_funcs_are_qualified_functions():
    check("""import nn; import linalg;
    kernel k(input x: f32[T, D], output y: f32[T, D], output n: f32) {
        y = nn.gelu(x); n = linalg.norm(y);
    }""", """
    CHECK:      %y = func.call @nn.gelu(%x) : (tensor<?x?xf32>) -> tensor<?x?xf32>
    CHECK-NEXT: %n = func.call @linalg.norm(%y) : (tensor<?x?xf32>) -> f32
    CHECK-LABEL: func @nn.gelu(%x: tensor<?x?xf32>) -> tensor<?x?xf32>
    CHECK:       tensor.pow %x, {{%[0-9]+}} : (tensor<?x?xf32>, f32) -> tensor<?x?xf32>
    CHECK:       tensor.tanh
    CHECK-LABEL: func @linalg.norm(%x: tensor<?x?xf32>) -> f32
    CHECK:       tensor.reduce_sum {{%[0-9]+}} {axes = [0, 1]} : tensor<?x?xf32> -> f32
    CHECK-NEXT:  arith.sqrt {{%[0-9]+}} : f32
    """)


def test_dims_are_read_once_as_index_and_cast_to_i64():
    text = check("""kernel k(input A: f32[M, K], input B: f32[K, N], output s: i64) {
        s = M * N + K + M;
    }""", f"""
    CHECK:      ^entry:
    CHECK-NEXT:   {NUM} = tensor.dim %A {{axis = 1}} : tensor<?x?xf32> -> index
    CHECK-NEXT:   %K = arith.cast {NUM} : index -> i64
    CHECK-NEXT:   {NUM} = tensor.dim %B {{axis = 1}} : tensor<?x?xf32> -> index
    CHECK-NEXT:   %N = arith.cast {NUM} : index -> i64
    CHECK-NEXT:   {NUM} = tensor.dim %A {{axis = 0}} : tensor<?x?xf32> -> index
    CHECK-NEXT:   %M = arith.cast {NUM} : index -> i64
    CHECK-NEXT:   {NUM} = arith.mul %M, %N : i64
    CHECK-NEXT:   {NUM} = arith.add {NUM}, %K : i64
    CHECK-NEXT:   %s = arith.add {NUM}, %M : i64
    """)
    assert text.count("tensor.dim") == 3


def test_dims_as_extents_of_created_tensors():
    check("""kernel k(input x: f32[M, N], output z: f32[N, M], output r: i64[N]) {
        z = zeros([N, M], f32); r = arange(N);
    }""", f"""
    CHECK:      {NUM} = arith.cast %N : i64 -> index
    CHECK-NEXT: {NUM} = arith.cast %M : i64 -> index
    CHECK-NEXT: {NUM} = arith.constant 0.0 : f32
    CHECK-NEXT: %z = tensor.full {NUM}, {NUM}, {NUM} : (f32, index, index) -> tensor<?x?xf32>
    CHECK:      %r = tensor.arange {NUM} {{start = 0, step = 1}} : index -> tensor<?xi64>
    """)


def test_weak_literals_are_made_in_the_tensor_dtype():
    check("""kernel k(input x: f16[N], input i: i8[N], output a: f16[N], output b: i8[N],
                      output c: f64[N]) {
        a = x * 2.0 + 1; b = i - 3; c = i / 2;
    }""", f"""
    CHECK:      {NUM} = arith.constant 2.0 : f16
    CHECK-NEXT: {NUM} = tensor.mul %x, {NUM} : (tensor<?xf16>, f16) -> tensor<?xf16>
    CHECK:      {NUM} = arith.constant 1.0 : f16
    CHECK-NEXT: %a = tensor.add {NUM}, {NUM} : (tensor<?xf16>, f16) -> tensor<?xf16>
    CHECK:      {NUM} = arith.constant 3 : i8
    CHECK-NEXT: %b = tensor.sub %i, {NUM} : (tensor<?xi8>, i8) -> tensor<?xi8>
    CHECK:      {NUM} = tensor.cast %i : tensor<?xi8> -> tensor<?xf64>
    CHECK:      {NUM} = arith.constant 2.0 : f64
    CHECK-NEXT: %c = tensor.div {NUM}, {NUM} : (tensor<?xf64>, f64) -> tensor<?xf64>
    CHECK-NOT:  tensor.cast %x
    """)


def test_strong_scalar_input_promotes_with_a_cast():
    check("""kernel k(input x: f16[N], input a: f32, output y: f32[N]) { y = x * a; }""", """
    CHECK:      {{%[0-9]+}} = tensor.cast %x : tensor<?xf16> -> tensor<?xf32>
    CHECK-NEXT: %y = tensor.mul {{%[0-9]+}}, %a : (tensor<?xf32>, f32) -> tensor<?xf32>
    """)


def test_comparisons_pick_cmpf_or_cmpi_and_logic_ops():
    check("""kernel k(input x: f32[N], input n: i32, output m: bool[N], output b: bool) {
        m = x != 0.5 && !(x < 0.0);
        b = n >= 3 || n == -1;
    }""", f"""
    CHECK:      {NUM} = tensor.cmpf une, %x, {NUM} : (tensor<?xf32>, f32) -> tensor<?xi1>
    CHECK:      {NUM} = tensor.cmpf olt, %x, {NUM} : (tensor<?xf32>, f32) -> tensor<?xi1>
    CHECK-NEXT: {NUM} = tensor.not {NUM} : tensor<?xi1>
    CHECK-NEXT: %m = tensor.and {NUM}, {NUM} : tensor<?xi1>
    CHECK:      {NUM} = arith.cmpi sge, %n, {NUM} : i32
    CHECK:      {NUM} = arith.constant -1 : i32
    CHECK-NEXT: {NUM} = arith.cmpi eq, %n, {NUM} : i32
    CHECK-NEXT: %b = arith.or {NUM}, {NUM} : i1
    """)


def test_builtins_with_keyword_arguments_become_attributes():
    check("""kernel k(input x: f32[B, C, H, W], input w: f32[O, C, 3, 3], output a: tensor,
                      output p: tensor, output s: tensor, output i: tensor) {
        a = conv2d(x, w, stride=2, padding=1);
        p = avg_pool(x, kernel=3, stride=1);
        s = reduce_mean(x, axis=[1, -1], keepdims=true);
        i = argmin(x, axis=-2);
    }""", """
    CHECK: %a = tensor.conv2d %x, %w {stride = [2, 2], padding = [1, 1]} : (tensor<?x?x?x?xf32>, tensor<?x?x3x3xf32>) -> tensor<?x?x?x?xf32>
    CHECK: %p = tensor.avg_pool %x {kernel = [3, 3], stride = [1, 1]} : tensor<?x?x?x?xf32>{{$}}
    CHECK: %s = tensor.reduce_mean %x {axes = [1, 3], keepdims} : tensor<?x?x?x?xf32> -> tensor<?x1x?x1xf32>
    CHECK: %i = tensor.argmin %x {axes = [2]} : tensor<?x?x?x?xf32> -> tensor<?x?x?xi64>
    """)


def test_default_keyword_values():
    check("""kernel k(input x: f32[1, 2, 8, 8], output p: tensor, output s: tensor) {
        p = max_pool(x); s = reduce_sum(x);
    }""", """
    CHECK: %p = tensor.max_pool %x {kernel = [2, 2], stride = [2, 2]} : tensor<1x2x8x8xf32> -> tensor<1x2x4x4xf32>
    CHECK: %s = tensor.reduce_sum %x {axes = [0, 1, 2, 3]} : tensor<1x2x8x8xf32> -> f32
    """)


def test_array_literals_and_consts_are_constants():
    check("""
    const SCALE = 2.5;
    const TABLE = [[1.0, 2.0], [3.0, 4.0]];
    kernel k(input x: f32[2, 2], output y: f32[2, 2], output z: f32[2, 2]) {
        y = x * SCALE + TABLE;
        z = x @ [[1, 0], [0, 1]];
    }""", f"""
    CHECK:      {NUM} = arith.constant 2.5 : f32
    CHECK-NEXT: {NUM} = tensor.mul %x, {NUM} : (tensor<2x2xf32>, f32) -> tensor<2x2xf32>
    CHECK:      {NUM} = tensor.constant {{value = dense<[[1.0, 2.0], [3.0, 4.0]] : tensor<2x2xf32>>}} : tensor<2x2xf32>
    CHECK-NEXT: %y = tensor.add {NUM}, {NUM} : tensor<2x2xf32>
    CHECK:      {NUM} = tensor.constant {{value = dense<[[1.0, 0.0], [0.0, 1.0]] : tensor<2x2xf32>>}} : tensor<2x2xf32>
    CHECK-NEXT: %z = tensor.matmul %x, {NUM} : tensor<2x2xf32>
    """)


def test_constant_arithmetic_is_folded():
    check("""const EPS = 1e-5;
    kernel k(input x: f32[N], output y: f32[N]) { y = x + (2 * EPS - -3); }""", f"""
    CHECK:      {NUM} = arith.constant 3.00002 : f32
    CHECK-NEXT: %y = tensor.add %x, {NUM} : (tensor<?xf32>, f32) -> tensor<?xf32>
    CHECK-NOT:  arith.mul
    """)


def test_indexing_is_extract_and_extract_slice():
    check("""kernel k(input x: f32[4, N], input i: i32, output a: f32, output b: tensor) {
        a = x[i, -1]; b = x[1:3, ::-1];
    }""", f"""
    CHECK:      {NUM} = arith.cast %i : i32 -> i64
    CHECK-NEXT: {NUM} = arith.constant -1 : i64
    CHECK-NEXT: %a = tensor.extract %x, {NUM}, {NUM} : (tensor<4x?xf32>, i64, i64) -> f32
    CHECK:      %b = tensor.extract_slice %x, {NUM}, {NUM}, {NUM} {{layout = ["s:e", "::t"]}} : (tensor<4x?xf32>, i64, i64, i64) -> tensor<2x?xf32>
    """)


def test_reshape_flatten_broadcast_concat_cast():
    check("""kernel k(input x: f32[M, 6], output r: tensor, output f: tensor, output b: tensor,
                      output c: tensor, output h: tensor) {
        r = reshape(x, [M, 2, 3]);
        f = flatten(r);
        b = broadcast_to(x[0, :], [2, 6]);
        c = concat([x, x], axis=0);
        h = cast(x, f16);
    }""", f"""
    CHECK:      {NUM} = arith.cast %M : i64 -> index
    CHECK:      %r = tensor.reshape %x, {NUM} : (tensor<?x6xf32>, index) -> tensor<?x2x3xf32>
    CHECK-NEXT: {NUM} = tensor.dim %r {{axis = 0}} : tensor<?x2x3xf32> -> index
    CHECK-NEXT: %f = tensor.reshape %r, {NUM} : (tensor<?x2x3xf32>, index) -> tensor<?x6xf32>
    CHECK:      %b = tensor.broadcast_to {NUM} : tensor<6xf32> -> tensor<2x6xf32>
    CHECK-NEXT: %c = tensor.concat %x, %x {{axis = 0}} : tensor<?x6xf32>
    CHECK-NEXT: %h = tensor.cast %x : tensor<?x6xf32> -> tensor<?x6xf16>
    """)


def test_quantization_ops():
    check("""kernel k(input x: f32[N], input s: f32, input zp: i32, output q: i8[N],
                      output d: f32[N], output f: f32[N]) {
        q = quantize(x, s, zp); d = dequantize(q, s, zp); f = fake_quant(x, 0.5, 2);
    }""", f"""
    CHECK:      %q = tensor.quantize %x, %s, %zp : (tensor<?xf32>, f32, i32) -> tensor<?xi8>
    CHECK-NEXT: %d = tensor.dequantize %q, %s, %zp : (tensor<?xi8>, f32, i32) -> tensor<?xf32>
    CHECK:      %f = tensor.fake_quant %x, {NUM}, {NUM} : (tensor<?xf32>, f32, i32) -> tensor<?xf32>
    """)


def test_fake_quant_of_f16_is_computed_in_f32_and_cast_back():
    # a typed scale is one value for both halves: the one op
    check("""kernel k(input x: f16[N], input s: f16, output f: f16[N]) {
        f = fake_quant(x, s, 0);
    }""", f"""
    CHECK:      {NUM} = tensor.fake_quant %x, %s, {NUM} : (tensor<?xf16>, f16, i32) -> tensor<?xf32>
    CHECK-NEXT: %f = tensor.cast {NUM} : tensor<?xf32> -> tensor<?xf16>
    """)


def test_fake_quant_of_f16_by_a_literal_takes_it_in_each_half_s_dtype():
    # dequantize(quantize(x)): 0.1 in f16 to quantize, 0.1 in f32 to dequantize
    check("""kernel k(input x: f16[N], output f: f16[N]) { f = fake_quant(x, 0.1, 0); }""", f"""
    CHECK:      {NUM} = arith.constant 0.1 : f16
    CHECK:      {NUM} = tensor.quantize %x, {NUM}, {NUM} : (tensor<?xf16>, f16, i32) -> tensor<?xi8>
    CHECK:      {NUM} = arith.constant 0.1 : f32
    CHECK:      {NUM} = tensor.dequantize {NUM}, {NUM}, {NUM} : (tensor<?xi8>, f32, i32) -> tensor<?xf32>
    CHECK-NEXT: %f = tensor.cast {NUM} : tensor<?xf32> -> tensor<?xf16>
    CHECK-NOT:  tensor.fake_quant
    """)
