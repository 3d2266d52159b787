"""Batch separability (passes/batch_axis.py): which kernels compute each index of their
batch inputs' axis 0 on their own. Every kernel the analysis accepts is run by the
interpreter on a whole batch and on its slices, and the slices' results, joined along
axis 0, must equal the batch's (the analysis's invariant; but for the rounding of
NumPy's matmul, whose summation order depends on the rows it is given); every refusal
names the op that mixes the batch."""

from __future__ import annotations

import numpy as np
import pytest

from wiadsl.frontend.compile import compile_to_ir
from wiadsl.ir import run_func
from wiadsl.passes.batch_axis import NotSeparable, separable

SEPARABLE = {
    "conv_net": """
import nn;
kernel k(input x: f32[N, 3, 9, 9], input w: f32[4, 3, 3, 3], input fc: f32[4, 5],
         output y: f32[N, 5]) {
    p = full([N, 3, 11, 11], 0.0, f32);
    p[:, :, 1:10, 1:10] = x;
    c = relu(conv2d(p, w, stride=1, padding=0) * 0.5 + 1.0);
    m = max_pool(c, kernel=2, stride=2);
    g = reduce_mean(m, axis=[2, 3], keepdims=true);
    y = nn.softmax(flatten(g) @ fc);
}""",
    "attention": """
import nn;
kernel k(input x: f32[B, 6, 8], input wq: f32[8, 8], input wk: f32[8, 8], input g: f32[8],
         output y: f32[B, 6, 8]) {
    q = transpose(reshape(x @ wq, [B, 6, 2, 4]), [0, 2, 1, 3]);
    t = transpose(reshape(x @ wk, [B, 6, 2, 4]), [0, 2, 3, 1]);
    a = nn.softmax(q @ t);
    o = reshape(transpose(a @ q, [0, 2, 1, 3]), [B, 6, 8]);
    y = nn.layer_norm(o + x, g, g);
}""",
    "two_inputs_and_results": """
kernel k(input x: f32[N, 4], input s: f32[N, 3, 4], input bias: f32[1, 4], input t: f32,
         output y: f32[N, 4], output z: i64[N, 3]) {
    y = x * t + bias + reduce_sum(s, axis=[1]);
    z = argmax(s + broadcast_to(reshape(x[:, 0:1], [N, 1, 1]), [N, 3, 4]), axis=2);
}""",
    "concat_and_rows": """
kernel k(input x: f32[N, 3], input w: f32[3, 2], output y: f32[N, 5]) {
    y = concat([x, x @ w], axis=1);
}""",
}

REFUSED = {
    "reduces the batch axis": """
kernel k(input x: f32[N, 4], output y: f32[N, 4]) { y = x - reduce_mean(x, axis=[0], keepdims=true); }""",
    "moves the batch axis": """
kernel k(input x: f32[N, 4], output y: f32[4, N]) { y = transpose(x, [1, 0]); }""",
    "selects along the batch axis": """
kernel k(input x: f32[N, 4], output y: f32[N, 4]) { y = x; y[0:1, :] = x[1:2, :]; }""",
    "contracts or broadcasts the batch axis": """
kernel k(input x: f32[N, 4], output y: f32[4]) { y = x[:, 0] @ x; }""",
    "uses the batch size as a value": """
kernel k(input x: f32[N, 4], output y: f32[N, 4]) { y = x / cast(dim(x, 0), f32); }""",
    "joins along the batch axis": """
kernel k(input x: f32[N, 4], output y: f32[M, 4]) { y = concat([x, x], axis=0); }""",
    "other than as its first axis": """
kernel k(input x: f32[N, 4], input m: f32[4, N], output y: f32[N, N]) { y = x @ m; }""",
    "not computed per batch index": """
kernel k(input x: f32[N, 4], input w: f32[4], output y: f32[N, 4], output z: f32[4]) {
    y = x + w;
    z = w * 2.0;
}""",
    "reads a batched value": """
kernel k(input x: f32[N, 4], output y: f32[N, 4]) { y = x * x[0, 0]; }""",
    "control flow": """
kernel k(input x: f32[N, 4], output y: f32[N, 4]) {
    y = x;
    for i in range(3) { y = y * 2.0; }
}""",
    "no input has a named leading dim": """
kernel k(input x: f32[4, 4], output y: f32[4, 4]) { y = x * 2.0; }""",
}


def _inputs(func, batch: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    out = []
    for a in func.args:
        t = a.type
        if not hasattr(t, "shape"):
            out.append(np.float32(rng.standard_normal()))
            continue
        shape = tuple(batch if d is None else d for d in t.shape)
        out.append(rng.standard_normal(shape).astype(t.dtype.numpy))
    return out


def _weights(func) -> frozenset[int]:
    """The inputs of static shape, frozen as a model's weights are."""
    return frozenset(i for i, t in enumerate(func.arg_types) if None not in getattr(t, "shape", ()))


@pytest.mark.parametrize("name", sorted(SEPARABLE))
def test_slices_of_a_separable_kernel_give_the_batchs_results(name: str) -> None:
    module = compile_to_ir(SEPARABLE[name])
    func = module.get("k")
    found = separable(func, _weights(func))
    assert found.inputs and all(func.arg_types[i].shape[0] is None for i in found.inputs)
    args = _inputs(func, 6, seed=len(name))
    whole = run_func(module, "k", args)
    for cut in ([0, 3, 6], [0, 1, 2, 6]):  # even and uneven slices
        parts = [run_func(module, "k", [a[lo:hi] if i in found.inputs else a
                                        for i, a in enumerate(args)])
                 for lo, hi in zip(cut, cut[1:])]
        for j, result in enumerate(whole):
            joined = np.concatenate([p[j] for p in parts], axis=0)
            # equal but for rounding: NumPy's matmul sums in an order that depends on M
            np.testing.assert_allclose(joined, result, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("why", sorted(REFUSED))
def test_a_kernel_that_mixes_the_batch_is_refused_with_the_reason(why: str) -> None:
    func = compile_to_ir(REFUSED[why]).get("k")
    with pytest.raises(NotSeparable, match=why):
        separable(func, _weights(func))


@pytest.mark.parametrize("src", [
    "kernel k(input x: f32[N, 4], output y: f32[N, 4]) { y = x + full([N, 4], cast(dim(x, 0), f32), f32); }",
    "kernel k(input x: f32[N, 4], output y: f32[N, 4]) { y = x + broadcast_to(cast(dim(x, 0), f32), [N, 4]); }",
], ids=["fill value", "broadcast source"])
def test_the_batch_size_as_data_is_refused(src: str) -> None:
    # a slice would fill with its own rows' count, not the batch's
    with pytest.raises(NotSeparable, match="uses the batch size as a value"):
        separable(compile_to_ir(src).get("k"))


def test_frozen_inputs_are_never_split() -> None:
    src = "kernel k(input x: f32[N, 4], input w: f32[N, 4], output y: f32[N, 4]) { y = x * w; }"
    func = compile_to_ir(src).get("k")
    assert separable(func).inputs == (0, 1)
    with pytest.raises(NotSeparable, match="input 1 uses the batch dim N"):
        separable(func, frozen=frozenset({1}))


def test_a_product_with_a_weight_that_is_not_frozen_is_refused() -> None:
    # each slice would pack the weight again (a frozen one is packed once)
    src = "kernel k(input x: f32[N, 8], input w: f32[8, 4], output y: f32[N, 4]) { y = x @ w; }"
    func = compile_to_ir(src).get("k")
    with pytest.raises(NotSeparable, match="would pack its weight"):
        separable(func)
    assert separable(func, frozen=frozenset({1})).inputs == (0,)


def test_the_work_estimate_counts_results_and_products_at_the_given_shapes() -> None:
    src = """kernel k(input x: f32[N, 8], input w: f32[8, 16], output y: f32[N, 16]) {
        y = relu(x @ w);
    }"""
    func = compile_to_ir(src).get("k")
    found = separable(func, frozenset({1}), shapes=[(10, 8), (8, 16)])
    assert found.results == ((10, 16),)
    # the product: 10 x 16 results of 8 multiply-adds; relu: 10 x 16
    assert found.work == 10 * 16 * 8 + 10 * 16
    assert separable(func, frozenset({1})).work is None  # no batch size: unknown


def test_named_dims_and_called_functions_give_the_work_at_the_shapes() -> None:
    src = """import nn;
    kernel k(input x: f32[N, D], input g: f32[D], input w: f32[D, H], output y: f32[N, H]) {
        y = nn.softmax(nn.layer_norm(x, g, g) @ w);
    }"""
    func = compile_to_ir(src).get("k")
    found = separable(func, frozenset({1, 2}), shapes=[(6, 5), (5,), (5, 3)])
    assert found.results == ((6, 3),) and found.work is not None and found.work > 6 * 3 * 5


def test_each_call_of_a_function_has_its_own_shapes() -> None:
    src = """import nn;
    kernel k(input x: f32[N, D], input z: f32[N, E], output a: f32[N, D], output b: f32[N, E]) {
        a = nn.softmax(x);
        b = nn.softmax(z);
    }"""
    module = compile_to_ir(src)
    func = module.get("k")
    found = separable(func, shapes=[(4, 3), (4, 5)])
    assert found.results == ((4, 3), (4, 5))
