"""``wiadsl.records.record``: the dataclass semantics wiadsl relies on, without code
generation (defining a record compiles nothing), compared with ``dataclasses`` on the
same declarations."""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import dataclass, field
from functools import cached_property
from typing import ClassVar

import pytest

from wiadsl import records
from wiadsl.records import as_dict, record, replace


@record(frozen=True)
class Point:
    x: int
    y: int = 0
    tags: list[str] = field(default_factory=list)
    note: str = field(default="", repr=False, compare=False)
    SCALE: ClassVar[int] = 10

    @cached_property
    def norm(self) -> int:
        return abs(self.x) + abs(self.y)


@dataclass(frozen=True)
class DataPoint:
    x: int
    y: int = 0
    tags: list[str] = field(default_factory=list)
    note: str = field(default="", repr=False, compare=False)
    SCALE: ClassVar[int] = 10


@record
class Counter:
    name: str
    seen: int = 0
    _cache: dict[str, int] = field(default_factory=dict, init=False, repr=False)
    _later: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._later = len(self.name)


@record
class Named(Counter):
    label: str = "x"

    def __repr__(self) -> str:
        return f"<{self.name}>"


@record
class Child(Named):
    extra: int = 1


@pytest.mark.parametrize("args,kwargs", [((1,), {}), ((1, 2), {}), ((), {"x": 3, "y": 4}),
                                         ((1, 2, ["a"]), {"note": "n"})])
def test_construction_equality_hash_and_repr_match_dataclass(args, kwargs):
    ours, theirs = Point(*args, **kwargs), DataPoint(*args, **kwargs)
    assert as_dict(ours) == dataclasses.asdict(theirs)
    assert repr(ours).replace("Point", "DataPoint") == repr(theirs)
    assert ours == Point(*args, **kwargs) and ours != DataPoint(*args, **kwargs)
    assert Point(1, 2, note="a") == Point(1, 2, note="b") and Point(1) != Point(2)


@record(frozen=True)
class Pair:
    a: int
    b: str = field(default="", compare=False)


def test_frozen_records_hash_their_compared_fields():
    assert hash(Pair(1, "x")) == hash(Pair(1, "y")) == hash((1,))
    assert {Pair(1): 1}[Pair(1, "z")] == 1
    with pytest.raises(TypeError, match="unhashable"):
        hash(Point(1))  # a list field, as with dataclasses


def test_defaults_are_fresh_and_class_variables_are_not_fields():
    a, b = Point(1), Point(2)
    a.tags.append("t")
    assert b.tags == [] and Point.SCALE == 10 and "SCALE" not in as_dict(a)
    assert Point.__match_args__ == ("x", "y", "tags", "note")


def test_frozen_records_refuse_assignment_but_cache_properties():
    p = Point(3, -4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.x = 1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del p.y  # type: ignore[misc]
    assert p.norm == 7 and p.norm == 7


@pytest.mark.parametrize("args,kwargs,message", [
    ((), {}, "missing .*'x'"), ((1, 2, [], "", 5), {}, "takes"),
    ((1,), {"z": 1}, "unexpected.*'z'"), ((1,), {"_cache": {}}, "unexpected.*'_cache'")])
@pytest.mark.parametrize("made", [0, 20])
def test_bad_construction_names_the_field(args, kwargs, message, made):
    """With the generic ``__init__`` and with the one compiled after SPECIALIZE_AFTER
    instances (a fresh class each time: the count is per class)."""
    @record
    class Fresh:
        x: int
        y: int = 0
        tags: list[str] = field(default_factory=list)
        note: str = ""
        _cache: dict[str, int] = field(default_factory=dict, init=False)
    for _ in range(made):
        Fresh(1)
    assert (Fresh.__init__ is records._init) == (made < records.SPECIALIZE_AFTER)
    with pytest.raises(TypeError, match=message):
        Fresh(*args, **kwargs)


def test_the_compiled_init_makes_what_the_generic_one_makes():
    @record
    class Hot(Counter):
        extra: list[int] = field(default_factory=list)
    made = [Hot("a"), Hot("bc", 2), Hot(name="d", seen=3, extra=[1])]
    for _ in range(records.SPECIALIZE_AFTER):
        Hot("x")
    assert Hot.__init__ is not records._init
    again = [Hot("a"), Hot("bc", 2), Hot(name="d", seen=3, extra=[1])]
    assert [as_dict(h) for h in again] == [as_dict(h) for h in made]
    assert Hot("z").extra is not Hot("z").extra  # a fresh default per instance


def test_mutable_records_init_false_fields_and_post_init():
    c = Counter("abc")
    assert (c.seen, c._cache, c._later) == (0, {}, 3)
    c.seen += 1
    assert c == Counter("abc", 1) and c != Counter("abc")
    with pytest.raises(TypeError):
        hash(c)  # unhashable, as a mutable dataclass with eq


def test_subclasses_extend_the_fields_and_keep_a_base_repr():
    n = Child("ab", 2, "lbl", 5)
    assert as_dict(n) == {"name": "ab", "seen": 2, "_cache": {}, "_later": 2, "label": "lbl", "extra": 5}
    assert repr(n) == "<ab>" and repr(Counter("q")) == "Counter(name='q', seen=0)"


def test_replace_and_pickle():
    p = Point(1, 2, ["a"], "n")
    q = replace(p, y=5)
    assert (q.x, q.y, q.tags, q.note) == (1, 5, ["a"], "n") and p.y == 2
    with pytest.raises(TypeError, match="no init fields"):
        replace(Counter("a"), _cache={})
    assert pickle.loads(pickle.dumps(p)) == p


def test_a_required_field_after_a_default_is_refused():
    with pytest.raises(TypeError, match="'b' without a default follows one with a default"):
        @record
        class Bad:
            a: int = 0
            b: int


@record(frozen=True)
class Node:
    value: int
    span: str = field(compare=False, repr=False, kw_only=True)


@record(eq=False)
class Cell:
    x: int


def test_keyword_only_fields_identity_records_and_introspection():
    n = Node(3, span="here")
    assert n == Node(3, span="there") and repr(n) == "Node(value=3)"
    with pytest.raises(TypeError):
        Node(3, "here")  # span is keyword-only
    with pytest.raises(TypeError, match="'span'"):
        Node(3)
    a, b = Cell(1), Cell(1)
    assert a != b and a == a and len({a, b}) == 2  # compared and hashed by identity
    assert records.is_record(n) and records.is_record(Node) and not records.is_record(3)
    assert [f.name for f in records.fields(Node)] == ["value", "span"]
    assert [f.kw_only for f in records.fields(n)] == [False, True]
    for _ in range(records.SPECIALIZE_AFTER):
        Node(1, span="s")
    assert Node.__init__ is not records._init
    with pytest.raises(TypeError):
        Node(3, "here")
    assert Node(4, span="x").span == "x"


def test_the_records_own_field_declares_what_dataclasses_field_does():
    @record(frozen=True)
    class Own:
        x: int
        y: int = 0
        tags: list[str] = records.field(default_factory=list)
        note: str = records.field(default="", repr=False, compare=False, hash=False)

    for cls in (Own, Point):
        made = cls(1, 2, ["a"], "n")
        assert (made.tags, made.note) == (["a"], "n") and cls(1).tags == [] and cls(1).note == ""
        assert made == cls(1, 2, ["a"], "other") and "note" not in repr(made)
        assert [f.name for f in records.fields(made)] == ["x", "y", "tags", "note"]
    assert Own(1).tags is not Own(1).tags
    with pytest.raises(TypeError, match="hashes exactly the fields it compares"):
        records.field(default=0, compare=False, hash=True)


def test_a_record_is_made_while_another_thread_is_importing_dataclasses(monkeypatch):
    """A thread importing ``dataclasses`` leaves a partial module in ``sys.modules`` until
    it is done; another thread's first record classes saw it and raised AttributeError
    ('partially initialized module dataclasses has no attribute Field': 8 threads' first
    calls, tests/regressions/test_thread_first_calls.py, about one run in fifteen)."""
    import sys
    import types

    monkeypatch.setitem(sys.modules, "dataclasses", types.ModuleType("dataclasses"))  # nothing defined yet

    @record(frozen=True)
    class Mid:
        x: int
        y: int = 0
        tags: list[str] = records.field(default_factory=list)
        z: object = None

    made = Mid(1)
    assert (made.x, made.y, made.tags, made.z) == (1, 0, [], None) and Mid(1, 2) != made
