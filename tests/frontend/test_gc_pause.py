"""``gcpause.no_cyclic_gc``: the cycle collector is off inside, restored after,
and what the phase allocated leaves it in the oldest generation (so the first
collection after a large parse does not rescan the whole tree), without undoing a
process's own ``gc.freeze``."""

from __future__ import annotations

import gc

from wiadsl.gcpause import no_cyclic_gc


class Node:
    def __init__(self, child: object = None):
        self.child = child


def test_the_collector_is_off_inside_and_on_after() -> None:
    assert gc.isenabled()
    with no_cyclic_gc():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_disabled_collector_stays_disabled() -> None:
    gc.disable()
    try:
        with no_cyclic_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_no_collection_rescans_the_phase_objects_on_the_way_out() -> None:
    gc.collect()
    events: list[int] = []

    def seen(phase: str, info: dict) -> None:
        if phase == "start":
            events.append(info["generation"])
    gc.callbacks.append(seen)
    try:
        with no_cyclic_gc():
            tree = [Node(Node()) for _ in range(20_000)]
        after = [[] for _ in range(10)]  # tracked allocations: a collection would start here
    finally:
        gc.callbacks.remove(seen)
    assert events == [], events  # the ~40k new nodes did not trigger a scan
    assert gc.is_tracked(tree[0]) and len(after) == 10 and gc.get_freeze_count() == 0


def test_cycles_made_inside_are_still_collected() -> None:
    with no_cyclic_gc():
        a = Node()
        a.child = Node(a)
    del a
    assert gc.collect() >= 2


def test_objects_the_process_froze_stay_frozen() -> None:
    gc.collect()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with no_cyclic_gc():
            [Node() for _ in range(1_000)]
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
