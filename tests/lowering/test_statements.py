"""Lowering of statements (LANGUAGE.md §5) to SSA IR, checked as IR text: rebinding,
compound and slice assignment, if / else if / else with join block arguments, counted
and while loops with loop-carried header arguments."""

from __future__ import annotations

from tests.lowering.helpers import NUM, check


def test_rebinding_makes_new_ssa_values():
    check("""kernel k(input x: f32[N], output y: f32[N]) {
        h = x * x;
        h = h + x;
        y = h;
    }""", f"""
    CHECK:      %h = tensor.mul %x, %x : tensor<?xf32>
    CHECK-NEXT: {NUM} = tensor.add %h, %x : tensor<?xf32>
    CHECK-NEXT: return {NUM} : tensor<?xf32>
    """)


def test_compound_assignment_is_the_binary_operator():
    check("""kernel k(input x: i32[N], input s: i32, output y: i32[N]) {
        y = x; y += s; y -= 1; y *= x;
    }""", f"""
    CHECK:      %y = tensor.add %x, %s : (tensor<?xi32>, i32) -> tensor<?xi32>
    CHECK-NEXT: {NUM} = arith.constant 1 : i32
    CHECK-NEXT: {NUM} = tensor.sub %y, {NUM} : (tensor<?xi32>, i32) -> tensor<?xi32>
    CHECK-NEXT: {NUM} = tensor.mul {NUM}, %x : tensor<?xi32>
    CHECK-NOT:  tensor.cast
    """)


def test_scalar_element_update_is_tensor_insert_with_a_cast_value():
    check("""kernel k(input x: i8[N], input i: i64, input v: f32, output y: i8[N]) {
        y = x; y[i] = v;
    }""", f"""
    CHECK:      {NUM} = arith.cast %v : f32 -> i8
    CHECK-NEXT: %y = tensor.insert {NUM}, %x, %i : (i8, tensor<?xi8>, i64) -> tensor<?xi8>
    CHECK-NEXT: return %y : tensor<?xi8>
    """)


def test_slice_update_is_insert_slice_with_layout():
    check("""kernel k(input A: f32[M, N], input r: f16[N], output C: f32[M, N]) {
        C = A;
        C[1:, ::2] = 0.5;
        C[0, :] = r;
    }""", f"""
    CHECK:      {NUM} = arith.constant 1 : i64
    CHECK-NEXT: {NUM} = arith.constant 2 : i64
    CHECK:      %C = tensor.insert_slice {NUM}, %A, {NUM}, {NUM} {{layout = ["s:", "::t"]}} : (f32, tensor<?x?xf32>, i64, i64) -> tensor<?x?xf32>
    CHECK:      {NUM} = tensor.cast %r : tensor<?xf16> -> tensor<?xf32>
    CHECK-NEXT: {NUM} = tensor.insert_slice {NUM}, %C, {NUM} {{layout = ["i", ":"]}} : (tensor<?xf32>, tensor<?x?xf32>, i64) -> tensor<?x?xf32>
    """)


def test_slice_update_keeps_the_original_value_alive():
    check("""kernel k(input A: f32[4], output B: f32[4], output C: f32[4]) {
        B = A; B[0] = 1.0; C = A;
    }""", """
    CHECK: %B = tensor.insert {{%[0-9]+}}, %A, {{%[0-9]+}} : (f32, tensor<4xf32>, i64) -> tensor<4xf32>
    CHECK: return %B, %A : tensor<4xf32>, tensor<4xf32>
    """)


# ------------------------------------------------------------------ if


def test_if_else_joins_live_out_values_as_block_arguments():
    check("""kernel k(input x: f32[N], input c: bool, output y: f32[N], output n: i64) {
        n = 1;
        if c { y = x + 1.0; } else { y = x; n = 2; }
    }""", f"""
    CHECK:      cond_br %c, ^then, ^else
    CHECK-NEXT: ^then:
    CHECK:        {NUM} = tensor.add %x, {NUM}
    CHECK-NEXT:   br ^join({NUM}, {NUM} : i64, tensor<?xf32>)
    CHECK-NEXT: ^else:
    CHECK-NEXT:   {NUM} = arith.constant 2 : i64
    CHECK-NEXT:   br ^join({NUM}, %x : i64, tensor<?xf32>)
    CHECK-NEXT: ^join(%n: i64, %y: tensor<?xf32>):
    CHECK-NEXT:   return %y, %n : tensor<?xf32>, i64
    """)


def test_if_without_else_branches_straight_to_the_join():
    check("""kernel k(input x: f32[N], input c: bool, output y: f32[N]) {
        y = x;
        if (c) { y = y * y; }
    }""", f"""
    CHECK:      cond_br %c, ^then, ^join(%x : tensor<?xf32>)
    CHECK-NEXT: ^then:
    CHECK-NEXT:   {NUM} = tensor.mul %x, %x : tensor<?xf32>
    CHECK-NEXT:   br ^join({NUM} : tensor<?xf32>)
    CHECK-NEXT: ^join(%y: tensor<?xf32>):
    CHECK-NEXT:   return %y
    CHECK-NOT:  ^else
    """)


def test_values_unchanged_on_every_path_need_no_block_argument():
    check("""kernel k(input x: f32[N], input c: bool, output y: f32[N], output z: f32[N]) {
        z = x * 2.0;
        if c { y = z; } else { y = x; }
    }""", """
    CHECK:      ^join(%y: tensor<?xf32>):
    CHECK-NEXT:   return %y, %z
    """)


def test_else_if_chain_nests_conditional_branches():
    check("""kernel k(input t: f32, output code: i32) {
        if t > 1.0 { code = 2; } else if t > 0.0 { code = 1; } else { code = 0; }
    }""", f"""
    CHECK:      {NUM} = arith.cmpf ogt, %t, {NUM} : f32
    CHECK-NEXT: cond_br {NUM}, ^then, ^else
    CHECK-NEXT: ^then:
    CHECK-NEXT:   {NUM} = arith.constant 2 : i64
    CHECK-NEXT:   br ^join.1({NUM} : i64)
    CHECK-NEXT: ^else:
    CHECK:        {NUM} = arith.cmpf ogt, %t, {NUM} : f32
    CHECK-NEXT:   cond_br {NUM}, ^then.1, ^else.1
    CHECK-NEXT: ^then.1:
    CHECK:        br ^join({NUM} : i64)
    CHECK-NEXT: ^else.1:
    CHECK:        br ^join({NUM} : i64)
    CHECK-NEXT: ^join(%code: i64):
    CHECK-NEXT:   br ^join.1(%code : i64)
    CHECK-NEXT: ^join.1({NUM}: i64):
    CHECK-NEXT:   {NUM} = arith.cast {NUM} : i64 -> i32
    CHECK-NEXT:   return {NUM} : i32
    """)


def test_nested_if_inside_then_branch():
    check("""kernel k(input x: f32[N], input c: bool, input d: bool, output y: f32[N]) {
        y = x;
        if c {
            if d { y = y * 2.0; }
        }
    }""", f"""
    CHECK:      cond_br %c, ^then, ^join.1(%x : tensor<?xf32>)
    CHECK-NEXT: ^then:
    CHECK-NEXT:   cond_br %d, ^then.1, ^join(%x : tensor<?xf32>)
    CHECK-NEXT: ^then.1:
    CHECK:        br ^join({NUM} : tensor<?xf32>)
    CHECK-NEXT: ^join(%y: tensor<?xf32>):
    CHECK-NEXT:   br ^join.1(%y : tensor<?xf32>)
    CHECK-NEXT: ^join.1({NUM}: tensor<?xf32>):
    """)


def test_join_casts_a_weak_literal_on_its_edge():
    check("""kernel k(input x: f16, input c: bool, output y: f16) {
        if c { v = 0.5; } else { v = x; }
        y = v;
    }""", """
    CHECK:      ^then:
    CHECK:        {{%[0-9]+}} = arith.constant 0.5 : f16
    CHECK-NEXT:   br ^join({{%[0-9]+}} : f16)
    CHECK:      ^join(%v: f16):
    """)


def test_join_generalizes_static_extent_with_tensor_cast():
    check("""kernel k(input x: f32[N], input c: bool, output y: tensor) {
        if c { v = zeros([3], f32); } else { v = x; }
        y = v;
    }""", """
    CHECK:      ^then:
    CHECK:        {{%[0-9]+}} = tensor.cast {{%[0-9]+}} : tensor<3xf32> -> tensor<?xf32>
    CHECK-NEXT:   br ^join
    CHECK:      ^join(%v: tensor<?xf32>):
    """)


def test_condition_comes_from_a_reduction():
    check("""kernel k(input h: f32[T, D], output y: f32[T, D]) {
        y = h;
        if reduce_max(abs(h)) > 100.0 { y = h / reduce_max(abs(h)); }
    }""", """
    CHECK:      {{%[0-9]+}} = tensor.abs %h : tensor<?x?xf32>
    CHECK-NEXT: {{%[0-9]+}} = tensor.reduce_max {{%[0-9]+}} {axes = [0, 1]} : tensor<?x?xf32> -> f32
    CHECK:      {{%[0-9]+}} = arith.constant 100.0 : f32
    CHECK-NEXT: {{%[0-9]+}} = arith.cmpf ogt, {{%[0-9]+}}, {{%[0-9]+}} : f32
    CHECK-NEXT: cond_br {{%[0-9]+}}, ^then, ^join(%h : tensor<?x?xf32>)
    """)


# ------------------------------------------------------------------ loops


def test_for_loop_header_carries_induction_variable_and_rebound_names():
    check("""kernel k(input x: f32[N], input n: i64, output y: f32[N], output s: i64) {
        y = x; s = 0;
        for i in range(n) { y = y * 0.5; s += i; }
    }""", f"""
    CHECK:      {NUM} = arith.constant 0 : i64
    CHECK:      br ^loop({NUM}, %x, {NUM} : i64, tensor<?xf32>, i64)
    CHECK-NEXT: ^loop(%i: i64, %y: tensor<?xf32>, %s: i64):
    CHECK-NEXT:   {NUM} = arith.cmpi slt, %i, %n : i64
    CHECK-NEXT:   cond_br {NUM}, ^body, ^exit
    CHECK-NEXT: ^body:
    CHECK:        {NUM} = tensor.mul %y, {NUM} : (tensor<?xf32>, f32) -> tensor<?xf32>
    CHECK-NEXT:   {NUM} = arith.add %s, %i : i64
    CHECK-NEXT:   {NUM} = arith.add %i, {NUM} : i64
    CHECK-NEXT:   br ^loop({NUM}, {NUM}, {NUM} : i64, tensor<?xf32>, i64)
    CHECK-NEXT: ^exit:
    CHECK-NEXT:   return %y, %s : tensor<?xf32>, i64
    """)


def test_zero_trip_loop_still_has_header_and_exit():
    text = check("""kernel k(input x: f32[N], output y: f32[N]) {
        y = x;
        for i in range(5, 2) { y = y + 1.0; }
    }""", f"""
    CHECK:      {NUM} = arith.constant 5 : i64
    CHECK-NEXT: {NUM} = arith.constant 2 : i64
    CHECK:      br ^loop({NUM}, %x : i64, tensor<?xf32>)
    CHECK-NEXT: ^loop(%i: i64, %y: tensor<?xf32>):
    CHECK-NEXT:   {NUM} = arith.cmpi slt, %i, {NUM} : i64
    CHECK:      ^exit:
    CHECK-NEXT:   return %y
    """)
    assert text.count("\n^loop(") == 1  # one header block


def test_negative_constant_step_compares_with_greater_than():
    check("""kernel k(input n: i64, output s: i64) {
        s = 0;
        for i in range(n, 0, -2) { s += i; }
    }""", f"""
    CHECK:      {NUM} = arith.constant -2 : i64
    CHECK:      ^loop(%i: i64, %s: i64):
    CHECK-NEXT:   {NUM} = arith.cmpi sgt, %i, {NUM} : i64
    CHECK:        {NUM} = arith.add %i, {NUM} : i64
    """)


def test_dynamic_step_tests_both_directions():
    check("""kernel k(input a: i64, input st: i64, output s: i64) {
        s = 0;
        for i in range(0, a, st) { s += 1; }
    }""", f"""
    CHECK:      ^loop(%i: i64, %s: i64):
    CHECK-NEXT:   {NUM} = arith.constant 0 : i64
    CHECK-NEXT:   {NUM} = arith.cmpi sgt, %st, {NUM} : i64
    CHECK-NEXT:   {NUM} = arith.cmpi slt, %i, %a : i64
    CHECK-NEXT:   {NUM} = arith.and {NUM}, {NUM} : i1
    CHECK-NEXT:   {NUM} = arith.cmpi slt, %st, {NUM} : i64
    CHECK-NEXT:   {NUM} = arith.cmpi sgt, %i, %a : i64
    CHECK-NEXT:   {NUM} = arith.and {NUM}, {NUM} : i1
    CHECK-NEXT:   {NUM} = arith.or {NUM}, {NUM} : i1
    CHECK-NEXT:   cond_br {NUM}, ^body, ^exit
    CHECK:        {NUM} = arith.add %i, %st : i64
    """)


def test_loop_carried_weak_literal_widens_to_the_body_type():
    # acc = 0 is a weak i64; the body makes it f16: the header argument is f16
    check("""kernel k(input x: f16[N], output y: f16) {
        acc = 0;
        for i in range(N) { acc = acc + x[i]; }
        y = acc;
    }""", f"""
    CHECK:      %N = arith.cast {NUM} : index -> i64
    CHECK:      {NUM} = arith.constant 0.0 : f16
    CHECK:      br ^loop({NUM}, {NUM} : i64, f16)
    CHECK-NEXT: ^loop(%i: i64, %acc: f16):
    CHECK-NEXT:   {NUM} = arith.cmpi slt, %i, %N : i64
    CHECK:        {NUM} = tensor.extract %x, %i : (tensor<?xf16>, i64) -> f16
    CHECK-NEXT:   {NUM} = arith.add %acc, {NUM} : f16
    CHECK-NOT:  ^loop.1
    """)


def test_names_not_rebound_in_the_body_are_not_carried():
    check("""kernel k(input x: f32[N], input n: i64, output y: f32[N]) {
        y = x;
        w = x * 2.0;
        for i in range(n) { y = y + w; }
    }""", """
    CHECK: ^loop(%i: i64, %y: tensor<?xf32>):
    CHECK: tensor.add %y, %w
    """)


def test_nested_loops_have_their_own_headers():
    check("""kernel k(input m: i64, input n: i64, output s: i64) {
        s = 0;
        for i in range(m) { for j in range(n) { s += i * j; } }
    }""", f"""
    CHECK:      ^loop(%i: i64, %s: i64):
    CHECK-NEXT:   {NUM} = arith.cmpi slt, %i, %m : i64
    CHECK-NEXT:   cond_br {NUM}, ^body, ^exit
    CHECK-NEXT: ^body:
    CHECK:        br ^loop.1({NUM}, %s : i64, i64)
    CHECK-NEXT: ^loop.1(%j: i64, {NUM}: i64):
    CHECK-NEXT:   {NUM} = arith.cmpi slt, %j, %n : i64
    CHECK-NEXT:   cond_br {NUM}, ^body.1, ^exit.1
    CHECK-NEXT: ^body.1:
    CHECK-NEXT:   {NUM} = arith.mul %i, %j : i64
    CHECK:        br ^loop.1
    CHECK-NEXT: ^exit.1:
    CHECK:        br ^loop({NUM}, {NUM} : i64, i64)
    CHECK-NEXT: ^exit:
    CHECK-NEXT:   return %s : i64
    """)


def test_while_loop_header_evaluates_the_condition():
    check("""kernel k(input x: f32[N], output y: f32[N], output steps: i64) {
        h = x; n = 0;
        while reduce_max(abs(h)) >= 1.0 { h = h * 0.5; n += 1; }
        y = h; steps = n;
    }""", f"""
    CHECK:      br ^loop(%x, {NUM} : tensor<?xf32>, i64)
    CHECK-NEXT: ^loop(%h: tensor<?xf32>, %n: i64):
    CHECK-NEXT:   {NUM} = tensor.abs %h : tensor<?xf32>
    CHECK-NEXT:   {NUM} = tensor.reduce_max {NUM} {{axes = [0]}} : tensor<?xf32> -> f32
    CHECK:        {NUM} = arith.cmpf oge, {NUM}, {NUM} : f32
    CHECK-NEXT:   cond_br {NUM}, ^body, ^exit
    CHECK-NEXT: ^body:
    CHECK:        {NUM} = tensor.mul %h, {NUM} : (tensor<?xf32>, f32) -> tensor<?xf32>
    CHECK:        {NUM} = arith.add %n, {NUM} : i64
    CHECK-NEXT:   br ^loop({NUM}, {NUM} : tensor<?xf32>, i64)
    CHECK-NEXT: ^exit:
    CHECK-NEXT:   return %h, %n : tensor<?xf32>, i64
    """)


def test_if_inside_loop_joins_before_the_back_edge():
    check("""kernel k(input n: i64, output s: i64) {
        s = 0;
        for i in range(n) { if i % 2 == 0 { s += i; } }
    }""", f"""
    CHECK:      ^body:
    CHECK:        {NUM} = arith.rem %i, {NUM} : i64
    CHECK:        cond_br {NUM}, ^then, ^join(%s : i64)
    CHECK-NEXT: ^then:
    CHECK-NEXT:   {NUM} = arith.add %s, %i : i64
    CHECK-NEXT:   br ^join({NUM} : i64)
    CHECK-NEXT: ^join({NUM}: i64):
    CHECK:        br ^loop({NUM}, {NUM} : i64, i64)
    CHECK-NEXT: ^exit:
    """)
