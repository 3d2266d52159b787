"""IR value types: scalars of a DType, ``index``, ranked tensors and SIMD vectors.

Invariants:
- Types are frozen, hashable dataclasses; equal spelling means equal type.
- A ``TensorType`` has rank >= 1; a rank-0 value is a ``ScalarType``.
- ``None`` in a tensor shape is a dynamic extent, printed ``?``.
- A ``VectorType`` (``vector<8xf32>``) is a register value of ``lanes >= 1``
  elements of one dtype (never ``index``); only loop-level IR uses it (the
  ``vectorize`` pass, ops_vector.py). It is not a tensor: it names no buffer.
"""

from __future__ import annotations

from ..dtypes import DType
from ..records import record


@record(frozen=True)
class ScalarType:
    """A rank-0 value of one element type, printed ``f32``, ``i1``, ``i64``..."""

    dtype: DType

    def __str__(self) -> str:
        return self.dtype.ir_name


@record(frozen=True)
class IndexType:
    """A machine-size integer for extents and loop counters, printed ``index``."""

    def __str__(self) -> str:
        return "index"


@record(frozen=True)
class TensorType:
    """A ranked tensor, printed ``tensor<4x?xf32>``; ``None`` extents are dynamic."""

    dtype: DType
    shape: tuple[int | None, ...]

    def __post_init__(self) -> None:
        if len(self.shape) == 0:
            raise ValueError("a TensorType has rank >= 1; use ScalarType for rank 0")
        for d in self.shape:
            if d is not None and (not isinstance(d, int) or isinstance(d, bool) or d < 0):
                raise ValueError(f"bad tensor extent {d!r}")
        object.__setattr__(self, "shape", tuple(self.shape))

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def num_dynamic(self) -> int:
        return sum(1 for d in self.shape if d is None)

    @property
    def is_static(self) -> bool:
        return self.num_dynamic == 0

    def __str__(self) -> str:
        dims = "".join("?x" if d is None else f"{d}x" for d in self.shape)
        return f"tensor<{dims}{self.dtype.ir_name}>"


@record(frozen=True)
class VectorType:
    """A SIMD register of ``lanes`` elements, printed ``vector<8xf32>``."""

    dtype: DType
    lanes: int

    def __post_init__(self) -> None:
        if not isinstance(self.lanes, int) or isinstance(self.lanes, bool) or self.lanes < 1:
            raise ValueError(f"bad vector lane count {self.lanes!r}")

    @property
    def element(self) -> ScalarType:
        """The scalar type of one lane."""
        return ScalarType(self.dtype)

    def __str__(self) -> str:
        return f"vector<{self.lanes}x{self.dtype.ir_name}>"


IRType = ScalarType | IndexType | TensorType | VectorType

INDEX = IndexType()
I1 = ScalarType(DType.BOOL)
I64 = ScalarType(DType.I64)
F32 = ScalarType(DType.F32)


def scalar(dtype: DType) -> ScalarType:
    return ScalarType(dtype)


def tensor(dtype: DType, shape: tuple[int | None, ...] | list[int | None]) -> IRType:
    """A tensor type, or the scalar type when ``shape`` is empty (rank 0)."""
    return TensorType(dtype, tuple(shape)) if len(shape) else ScalarType(dtype)


def dtype_of(t: IRType) -> DType | None:
    """The element dtype, or None for ``index``."""
    return None if isinstance(t, IndexType) else t.dtype


def shape_of(t: IRType) -> tuple[int | None, ...]:
    """The shape; ``()`` for scalars and ``index``."""
    return t.shape if isinstance(t, TensorType) else ()


def static_shape(t: IRType) -> tuple[int, ...] | None:
    """The shape (``()`` for scalars and ``index``), or None if an extent is dynamic."""
    shape = shape_of(t)
    static = tuple(d for d in shape if d is not None)
    return static if len(static) == len(shape) else None


def with_dtype(t: IRType, dtype: DType) -> IRType:
    """The same shape (or lane count) with another element type (``index`` becomes a scalar)."""
    if isinstance(t, VectorType):
        return VectorType(dtype, t.lanes)
    return TensorType(dtype, t.shape) if isinstance(t, TensorType) else ScalarType(dtype)


def lanes_of(t: IRType) -> int | None:
    """The lane count of a vector type, else None."""
    return t.lanes if isinstance(t, VectorType) else None


def is_integer_like(t: IRType) -> bool:
    """``index`` or a scalar/tensor of an integer dtype (not bool)."""
    return isinstance(t, IndexType) or t.dtype.is_int


def broadcast_shapes(*shapes: tuple[int | None, ...]) -> tuple[int | None, ...]:
    """The NumPy broadcast of static/dynamic shapes.

    Raises ValueError when two static extents other than 1 differ. A dynamic
    extent next to 1 stays dynamic; next to a static extent n > 1 it becomes n
    (at run time it must be n or 1).
    """
    rank = max((len(s) for s in shapes), default=0)
    out: list[int | None] = []
    for axis in range(rank):
        extents = [s[len(s) - rank + axis] for s in shapes if len(s) - rank + axis >= 0]
        static = {e for e in extents if e is not None and e != 1}
        if len(static) > 1:
            raise ValueError(f"extents {sorted(static)} do not broadcast")
        if static:
            out.append(static.pop())
        elif None in extents:
            out.append(None)
        else:
            out.append(1)
    return tuple(out)


def extents_compatible(a: int | None, b: int | None) -> bool:
    """Two extents may be equal at run time (either dynamic, or equal)."""
    return a is None or b is None or a == b


def shapes_compatible(a: tuple[int | None, ...], b: tuple[int | None, ...]) -> bool:
    return len(a) == len(b) and all(extents_compatible(x, y) for x, y in zip(a, b, strict=False))
