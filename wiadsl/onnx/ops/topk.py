"""ONNX TopK: the ``k`` largest (or smallest) elements along an axis and their indices.

WIA DSL has no sort; TopK is ``k`` rounds of selection in one counted loop, each a
pass over the row: the extreme of the elements not yet taken, the first position
holding it (``argmax`` of a bool mask: ties go to the lower index, as the spec asks),
then that position marked taken. Selection compares the values themselves, so
integers of any width are exact. NaNs come first, largest or smallest (the reductions
propagate them; NumPy's ``max`` and ``min`` do the same), each with its own index.
``k`` must be a constant (exporters write it as one); the results are always sorted
(``sorted=0`` allows any order).
"""

from __future__ import annotations

import numpy as np

from ...dtypes import DType
from ..graph import Node, Val
from ..shapes import Dim
from ..text import extreme_literal
from .registry import op


@op("TopK")
def _top_k(n: Node) -> list[Val]:
    x = n.x()
    axis = n.axis(int(n.attr("axis", -1)), x.rank)
    if n.opset < 10:
        k = int(n.attr("k"))
    else:
        value = n.const(1, "k")
        assert value is not None
        k = int(np.asarray(value).reshape(-1)[0])
    extent = x.shape[axis]
    if k < 1 or extent.is_static and k > extent.value:
        raise n.fail(f"k={k} must be between 1 and the axis extent {extent.text()}")
    largest = bool(int(n.attr("largest", 1)))
    em, names = n.em, n.em.names
    dims = [d.text() for d in x.shape]
    out_dims = [str(k) if a == axis else d for a, d in enumerate(dims)]
    keep = ", ".join(d if a == axis else "1" for a, d in enumerate(dims))
    at = lambda i: ", ".join(i if a == axis else ":" for a in range(x.rank))  # noqa: E731
    first = ", ".join("0" if a == axis else ":" for a in range(x.rank))
    vals, idxs, taken, pos = (names.fresh(h) for h in ("topk_values", "topk_indices",
                                                        "taken", "positions"))
    t, masked, best, hit, where_ = (names.fresh(h) for h in ("t", "masked", "best", "hit", "at"))
    if not (x.dtype.is_float or x.dtype.is_int):
        raise n.fail(f"TopK of {x.dtype} is not supported")
    # taken positions read a value no element loses to
    reduce, low = ("reduce_max" if largest else "reduce_min"), extreme_literal(x.dtype, largest)
    src = n.ref(x)
    em.body += [
        f"    {vals} = zeros([{', '.join(out_dims)}], {x.dtype});",
        f"    {idxs} = zeros([{', '.join(out_dims)}], i64);",
        f"    {taken} = zeros([{', '.join(dims)}], i32) > 0;",
        f"    {pos} = reshape(arange({extent.text()}), [{keep}]);",
        f"    for {t} in range({k}) {{",
        f"        {masked} = where({taken}, {low}, {src});",
        f"        {best} = {reduce}({masked}, axis={axis}, keepdims=true);",
        # a row's NaN is its extreme (the reductions propagate it): the first NaN not
        # taken is selected, value and index together
        f"        {hit} = !{taken} && ({masked} == {best} || {best} != {best} && "
        f"{masked} != {masked});",
        f"        {where_} = argmax(cast({hit}, i32), axis={axis}, keepdims=true);",
        f"        {taken} = {taken} || {pos} == {where_};",
        f"        {vals}[{at(t)}] = {best}[{first}];",
        f"        {idxs}[{at(t)}] = {where_}[{first}];",
        "    }",
    ]
    shape = tuple(Dim(k) if a == axis else d for a, d in enumerate(x.shape))
    return [n.out(vals, x.dtype, shape), n.out(idxs, DType.I64, shape, 1)]
