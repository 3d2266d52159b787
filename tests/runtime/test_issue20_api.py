"""Issue 20, the Python API: errors that say what to do, kernels that describe themselves."""

import inspect

import numpy as np
import pytest

import wiadsl
from wiadsl import WiaCallError, WiaError, WiaNameError, WiaUsageError

MATMUL = """
kernel matmul(input A: f32[M, K], input B: f32[K, N], output C: f32[M, N]) {
    C = A @ B;
}
kernel scale(input X: tensor, input s: f32, output Y: tensor, output Z: f32[2]) {
    Y = X * s;
    Z = [s, s];
}
"""


@pytest.fixture(scope="module")
def mod():
    return wiadsl.jit(MATMUL)


def test_misspelled_kernel_names_the_kernels_and_the_closest(mod):
    with pytest.raises(WiaNameError) as info:
        mod.matmull  # noqa: B018
    message = str(info.value)
    assert "did you mean 'matmul'?" in message
    assert "matmul, scale" in message
    assert isinstance(info.value, AttributeError)  # hasattr/getattr(default) still work
    assert not hasattr(mod, "nothing_like_it")
    assert getattr(mod, "matmull", None) is None


def test_misspelled_kernel_argument_of_jit():
    with pytest.raises(WiaUsageError, match="did you mean 'matmul'"):
        wiadsl.jit(MATMUL, kernel="matmu")


def test_bytes_source_is_a_usage_error_that_says_decode():
    with pytest.raises(WiaUsageError, match=r"got bytes; decode it"):
        wiadsl.jit(MATMUL.encode())


def test_a_path_given_to_jit_points_at_jit_file(tmp_path):
    path = tmp_path / "k.wia"
    path.write_text(MATMUL)
    for given in (str(path), "k.wia", path):
        with pytest.raises(WiaUsageError, match=r"wiadsl\.jit_file"):
            wiadsl.jit(given)
    mod = wiadsl.jit_file(path)
    a = np.ones((2, 3), np.float32)
    np.testing.assert_allclose(mod.matmul(a, a.T), a @ a.T)
    assert wiadsl.jit_file(str(path), kernel="scale").name == "scale"


def test_jit_file_errors_name_the_path(tmp_path):
    missing = tmp_path / "missing.wia"
    with pytest.raises(WiaUsageError, match="cannot read '.*missing.wia'"):
        wiadsl.jit_file(missing)
    binary = tmp_path / "b.wia"
    binary.write_bytes(b"\xff\xfe\x00kernel")
    with pytest.raises(WiaUsageError, match="not UTF-8"):
        wiadsl.jit_file(binary)


def test_kernels_have_a_real_signature(mod):
    sig = inspect.signature(mod.matmul)
    assert str(sig) == ("(A: 'f32[M, K]', B: 'f32[K, N]', *, C: 'f32[M, N]' = None)"
                        " -> 'f32[M, N]'")
    sig = inspect.signature(mod.scale)
    assert list(sig.parameters) == ["X", "s", "Y", "Z"]
    assert sig.parameters["Y"].kind is inspect.Parameter.KEYWORD_ONLY
    assert sig.return_annotation == "tuple[tensor, f32[2]]"
    sig.bind(np.ones(3), 2.0)  # what the kernel takes, Python's binder takes


def test_kernel_repr_is_one_short_line(mod):
    text = repr(mod.matmul)
    assert text == ("<wiadsl kernel matmul(A: f32[M, K], B: f32[K, N]) -> (C: f32[M, N])"
                    " target=cpu>")
    mod.matmul(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32))
    assert repr(mod.matmul) == text  # a call's specializations do not show


def test_kernel_docstring_is_its_declaration(mod):
    doc = mod.matmul.__doc__
    assert doc.splitlines()[0] == ("kernel matmul(input A: f32[M, K], input B: f32[K, N], "
                                   "output C: f32[M, N])")
    assert "matmul(A, B) -> C" in doc and "C=buffer" in doc
    assert "'tensor' parameters" in mod.scale.__doc__
    assert "scale(X, s) -> (Y, Z)" in mod.scale.__doc__


def test_dtype_messages_use_the_right_article(mod):
    a = np.ones((2, 2), np.float32)
    with pytest.raises(WiaCallError, match="got an int32 array"):
        mod.matmul(a, a.astype(np.int32))
    with pytest.raises(WiaCallError, match="got an int64 array"):
        mod.matmul(a, a, C=np.ones((2, 2), np.int64))
    with pytest.raises(WiaCallError, match="got a float64 array"):
        mod.matmul(a, a.astype(np.float64))


def test_every_jit_error_is_a_wia_error():
    for bad in (b"x", 3, None):
        with pytest.raises(WiaError):
            wiadsl.jit(bad)


def test_quantized_kernel_repr_and_bad_method(mod):
    a = np.ones((2, 3), np.float32)
    b = np.ones((3, 2), np.float32)
    qk = wiadsl.quantize(mod.matmul, calibration=[(a, b)])
    assert repr(qk).startswith("<wiadsl kernel matmul(") and "\n" not in repr(qk)
    with pytest.raises(WiaUsageError, match="method must be 'minmax' or 'percentile'"):
        wiadsl.quantize(mod.matmul, calibration=[(a, b)], method="entropy")
