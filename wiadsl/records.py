"""``record``: dataclass-like classes that cost nothing to define (issue 21's warm start).

Why: ``dataclasses.dataclass`` writes and compiles Python source for each class it
decorates (``__init__``, ``__repr__``, ``__eq__``, ``__hash__``, and for a frozen
class ``__setattr__``/``__delattr__``): ~0.5 ms per frozen class with CPython 3.11,
12 of the 27 ms that a warm-cache start (import + jit + first call) spent in
wiadsl's code, and 46 ms of a cold one (108 classes). The compiler's classes are
declared with ``record`` instead: the same declaration (annotated fields, defaults, ``field(default_factory=...)``,
``field(repr=False, compare=False)``), which type checkers read as a dataclass's
(``dataclass_transform``); at run time the methods are generic ones, so defining a
class compiles nothing. A class whose instances are made often gets an ``__init__``
compiled for its fields at its ``SPECIALIZE_AFTER``-th instance (one small compile
then, instead of six per class at import).

Semantics (``dataclass(frozen=..., eq=True)``'s, for what wiadsl uses):
- ``__init__`` takes the fields positionally or by name in declaration order (base
  records' fields first; ``kw_only`` ones by name only, after the others), with
  defaults and default factories, sets the ``init=False`` ones that have a default,
  then calls ``__post_init__`` if the class has one. Annotations that start with
  ``ClassVar`` are not fields.
- ``__eq__`` compares records of the same class field by field (``compare=False``
  fields left out); a frozen record hashes those fields, a mutable one is
  unhashable. ``__repr__`` shows the ``repr=True`` fields. A ``__repr__`` or
  ``__eq__`` the class or a base of it defines is kept.
- Frozen: setting or deleting an attribute raises ``dataclasses.FrozenInstanceError``
  (``functools.cached_property`` still works: it writes the instance dict).
- Fields take ``records.field`` or ``dataclasses.field`` alike. This module never
  imports ``dataclasses`` itself (~1.3 ms of a warm start, with ``copy`` that it
  imports): a ``dataclasses.Field`` can only exist once something else imported it,
  and the frozen error is imported when first raised.
- ``as_dict(r)``: the fields as a dict (shallow); ``replace(r, **changes)``: a copy
  with changes; ``fields(r)`` and ``is_record(r)``, as ``dataclasses``' functions.
  ``dataclasses.fields``, ``asdict`` and ``replace`` do not apply to records.
- ``eq=False``: no ``__eq__``/``__hash__`` (identity, as ``dataclass(eq=False)``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

if sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # Python 3.10: the decorator only informs type checkers
    def dataclass_transform(**_: Any) -> Callable[[Any], Any]:
        return lambda f: f

T = TypeVar("T")


class _MissingType:
    """No default (as ``dataclasses.MISSING``)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _MissingType()


class FieldSpec:
    """What ``field(...)`` gives: a field's options, read when its class is made."""

    __slots__ = ("default", "default_factory", "init", "repr", "compare", "kw_only")

    def __init__(self, default: Any, default_factory: Any, init: bool, repr: bool,
                 compare: bool, kw_only: bool) -> None:
        self.default, self.default_factory, self.init = default, default_factory, init
        self.repr, self.compare, self.kw_only = repr, compare, kw_only


def field(*, default: Any = MISSING, default_factory: Any = MISSING, init: bool = True,
          repr: bool = True, compare: bool = True, hash: bool | None = None,
          kw_only: bool = False) -> Any:
    """A field's default or default factory and options, as ``dataclasses.field``
    (a record hashes the fields it compares: ``hash``, if given, must be ``compare``)."""
    if hash is not None and hash != compare:
        raise TypeError("a record hashes exactly the fields it compares")
    return FieldSpec(default, default_factory, init, repr, compare, kw_only)


def _from_dataclasses(name: str) -> Any:
    """``dataclasses.<name>``, or None while nothing imported ``dataclasses``, or while
    another thread is still importing it: its partial module in ``sys.modules`` may not
    have the name yet (8 threads' first calls raised AttributeError here), and no object
    of it can be in anyone's hands before that import is done."""
    module = sys.modules.get("dataclasses")
    return getattr(module, name, None) if module is not None else None


def _is_field_spec(value: Any) -> bool:
    """Whether ``value`` is a field specification (ours or a ``dataclasses.Field``)."""
    field_class = _from_dataclasses("Field")
    return isinstance(value, FieldSpec) or (field_class is not None and isinstance(value, field_class))


class _Field:
    __slots__ = ("name", "default", "factory", "init", "repr", "compare", "kw_only")

    def __init__(self, name: str, spec: Any) -> None:
        self.name = name
        self.default, self.factory, self.init, self.repr, self.compare = MISSING, None, True, True, True
        self.kw_only = False
        if _is_field_spec(spec):
            self.default = _own_missing(spec.default)
            if _own_missing(spec.default_factory) is not MISSING:
                self.factory = spec.default_factory
            self.init, self.repr, self.compare = spec.init, spec.repr, spec.compare
            self.kw_only = spec.kw_only is True
        elif spec is not MISSING:
            self.default = spec

    @property
    def required(self) -> bool:
        return self.default is MISSING and self.factory is None


def _own_missing(value: Any) -> Any:
    """``MISSING`` for this module's or ``dataclasses``' marker, else ``value``."""
    marker = _from_dataclasses("MISSING")
    return MISSING if marker is not None and value is marker else value


def _fields_of(cls: type) -> tuple[_Field, ...]:
    inherited: dict[str, _Field] = {}
    for base in reversed(cls.__mro__[1:]):
        inherited.update((f.name, f) for f in getattr(base, "__record_fields__", ()))
    own = [name for name, kind in cls.__dict__.get("__annotations__", {}).items()
           if not str(kind).startswith(("ClassVar", "typing.ClassVar"))]
    for name in own:
        inherited[name] = _Field(name, cls.__dict__.get(name, MISSING))
        if _is_field_spec(cls.__dict__.get(name)):
            if inherited[name].default is MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, inherited[name].default)
    fields = tuple(inherited.values())
    seen_default = False
    for f in fields:
        if not f.init or f.kw_only:
            continue
        if f.required and seen_default:
            raise TypeError(f"{cls.__name__}: field '{f.name}' without a default follows one with a default")
        seen_default = seen_default or not f.required
    return fields


def _init(self: Any, *args: Any, **kwargs: Any) -> None:
    cls = type(self)
    fields = cls.__record_init__
    if len(args) > cls.__record_positional__:
        raise TypeError(f"{cls.__name__}() takes {cls.__record_positional__} positional fields, "
                        f"got {len(args)}")
    put = object.__setattr__
    for f, value in zip(fields, args):
        put(self, f.name, value)
    for f in fields[len(args):]:
        if f.name in kwargs:
            put(self, f.name, kwargs.pop(f.name))
        elif f.factory is not None:
            put(self, f.name, f.factory())
        elif f.default is not MISSING:
            put(self, f.name, f.default)
        else:
            raise TypeError(f"{cls.__name__}() is missing field '{f.name}'")
    for f in cls.__record_later__:  # init=False: the default, or left to __post_init__
        put(self, f.name, f.factory() if f.factory is not None else f.default)
    if kwargs:
        raise TypeError(f"{cls.__name__}() got unexpected fields {sorted(kwargs)}")
    post = getattr(self, "__post_init__", None)
    if post is not None:
        post()
    made = cls.__dict__.get("__record_made__", 0) + 1
    type.__setattr__(cls, "__record_made__", made)
    if made == SPECIALIZE_AFTER and cls.__dict__.get("__init__") is _init:
        type.__setattr__(cls, "__init__", _specialized_init(cls))


#: instances a class makes with the generic ``__init__`` before it gets one compiled
#: for its fields (as dataclass writes them): a class made a few times never pays the
#: compile, a hot one (spans: several per source line) stops paying the generic loop
SPECIALIZE_AFTER = 8


def _specialized_init(cls: type) -> Any:
    """``__init__`` for ``cls``'s fields as Python source, compiled once."""
    env: dict[str, Any] = {"_put": object.__setattr__, "MISSING": MISSING}
    params, body = ["self"], []
    for f in cls.__record_init__:  # type: ignore[attr-defined]
        env[f"_d_{f.name}"] = f.default
        env[f"_f_{f.name}"] = f.factory
        if f.kw_only and "*" not in params:
            params.append("*")
        if f.required:
            params.append(f.name)
        elif f.factory is not None:
            params.append(f"{f.name}=MISSING")
        else:
            params.append(f"{f.name}=_d_{f.name}")
        value = f"_f_{f.name}() if {f.name} is MISSING else {f.name}" if f.factory else f.name
        body.append(f"_put(self, {f.name!r}, {value})")
    for f in cls.__record_later__:  # type: ignore[attr-defined]
        env[f"_l_{f.name}"] = f.factory or f.default
        body.append(f"_put(self, {f.name!r}, _l_{f.name}{'()' if f.factory else ''})")
    if hasattr(cls, "__post_init__"):
        body.append("self.__post_init__()")
    source = f"def __init__({', '.join(params)}):\n    " + "\n    ".join(body or ["pass"])
    exec(source, env)  # noqa: S102 - text made above from the field names
    init = env["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


def _key(self: Any) -> tuple[Any, ...]:
    return tuple(getattr(self, f.name) for f in type(self).__record_fields__ if f.compare)


def _eq(self: Any, other: object) -> bool:
    if type(other) is not type(self):
        return NotImplemented
    return _key(self) == _key(other)


def _hash(self: Any) -> int:
    return hash(_key(self))


def _repr(self: Any) -> str:
    shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in type(self).__record_fields__ if f.repr)
    return f"{type(self).__qualname__}({shown})"


def _frozen_set(self: Any, name: str, value: Any) -> None:
    from dataclasses import FrozenInstanceError

    raise FrozenInstanceError(f"cannot assign to field '{name}'")


def _frozen_del(self: Any, name: str) -> None:
    from dataclasses import FrozenInstanceError

    raise FrozenInstanceError(f"cannot delete field '{name}'")


@dataclass_transform(field_specifiers=(field,))
def record(cls: type[T] | None = None, /, *, frozen: bool = False, eq: bool = True) -> Any:
    """Make ``cls`` a record (see the module docstring); ``@record`` or
    ``@record(frozen=True)``; ``eq=False``: compared and hashed by identity."""
    def make(c: type[T]) -> type[T]:
        fields = _fields_of(c)
        init = [f for f in fields if f.init and not f.kw_only]
        described = {"__record_fields__": fields, "__record_positional__": len(init),
                     "__record_init__": tuple(init + [f for f in fields if f.init and f.kw_only]),
                     "__record_later__": tuple(f for f in fields if not f.init and not f.required),
                     "__match_args__": tuple(f.name for f in fields)}
        for name, value in described.items():
            setattr(c, name, value)
        methods: dict[str, Any] = {"__init__": _init, "__repr__": _repr}
        if eq:
            methods.update(__eq__=_eq, __hash__=_hash if frozen else None)
        if frozen:
            methods.update(__setattr__=_frozen_set, __delattr__=_frozen_del)
        for name, fn in methods.items():
            if name in c.__dict__ and not (name == "__hash__" and c.__dict__[name] is None):
                continue  # the class's own
            inherited = getattr(c, name, None)
            if name in ("__repr__", "__eq__") and inherited not in (getattr(object, name), fn):
                continue  # a base's own (a subclass of a kernel keeps its repr)
            setattr(c, name, fn)
        return c
    return make if cls is None else make(cls)


def is_record(x: object) -> bool:
    """Whether ``x`` is a record class or an instance of one."""
    return hasattr(x if isinstance(x, type) else type(x), "__record_fields__")


def fields(x: object) -> tuple[Any, ...]:
    """The fields of a record class or instance, in order: each has ``name``,
    ``default`` (``records.MISSING`` if none), ``factory`` (or None), ``init``,
    ``repr`` and ``compare``."""
    cls = x if isinstance(x, type) else type(x)
    return cls.__record_fields__  # type: ignore[attr-defined,no-any-return]


def as_dict(r: Any) -> dict[str, Any]:
    """The fields of record ``r`` by name (shallow)."""
    return {f.name: getattr(r, f.name) for f in type(r).__record_fields__}


def replace(r: T, **changes: Any) -> T:
    """A new record like ``r`` with ``changes`` (``dataclasses.replace``)."""
    fields = {f.name: getattr(r, f.name) for f in type(r).__record_init__}  # type: ignore[attr-defined]
    unknown = set(changes) - set(fields)
    if unknown:
        raise TypeError(f"{type(r).__name__} has no init fields {sorted(unknown)}")
    return type(r)(**{**fields, **changes})


__all__ = ["MISSING", "as_dict", "field", "fields", "is_record", "record", "replace"]
