"""The columnar store behind streamed switch series (infrapulse.columns)."""

from __future__ import annotations

from infrapulse.columns import MIN_DEAD_TO_COMPACT, Slots


def test_a_held_series_shows_only_once_written():
    slots = Slots()
    column = slots.column()
    column.acquire(("sw", "E1"))
    column.acquire(("sw", "E2"))
    assert len(column) == 0 and ("sw", "E1") not in column and dict(column.items()) == {}
    column[("sw", "E2")] = 5.0
    column.reveal(("sw", "E1"))  # ahead of a bulk write into its slot
    slots.values[column.slot(("sw", "E1"))] = 3.0
    assert column == {("sw", "E2"): 5.0, ("sw", "E1"): 3.0}
    assert list(column) == [("sw", "E2"), ("sw", "E1")]  # the order they became visible
    assert list(column.values()) == [5.0, 3.0] and column.get(("sw", "E9")) is None
    assert slots.live == 2 and slots.dead == 0


def test_a_series_held_twice_goes_with_its_last_holder():
    slots = Slots()
    column = slots.column()
    labels = ("sw", "E1")
    column.acquire(labels)
    column.acquire(labels)  # a second leaf path mapping to the same labels
    column[labels] = 1.0
    assert slots.live == 1 and len(slots.values) == 1  # one slot for both
    column.release(labels)
    assert column == {labels: 1.0}
    column.release(labels)
    assert column == {} and slots.live == 0 and slots.dead == 1
    column.release(labels)  # releasing what is gone changes nothing
    assert slots.live == 0


def test_compaction_packs_live_slots_in_order_and_keeps_values():
    slots = Slots()
    a, b = slots.column(), slots.column()
    n = 2 * MIN_DEAD_TO_COMPACT + 10
    for i in range(n):
        (a if i % 2 else b).acquire(("sw", str(i)))
        (a if i % 2 else b)[("sw", str(i))] = float(i)
    b.acquire(("sw", "held"))  # held, never written: keeps its slot, stays hidden
    values = slots.values
    keep = {str(i) for i in range(0, n, 7)}
    for i in range(n):
        if str(i) not in keep:
            (a if i % 2 else b).release(("sw", str(i)))
    assert slots.dead > slots.live
    assert slots.compact_if_sparse([a, b]) is True
    assert len(slots.values) == slots.live == len(keep) + 1 and slots.dead == 0
    assert slots.values is values  # packed in place
    assert {**a, **b} == {("sw", k): float(k) for k in keep}
    # Slot order is kept: the survivors are numbered in the order they were allocated.
    survivors = sorted([*a.index.items(), *b.index.items(), *b.unset.items()], key=lambda kv: kv[1])
    assert [labels for labels, _ in survivors] == [("sw", str(i)) for i in sorted(map(int, keep))] \
        + [("sw", "held")]
    assert [slot for _, slot in survivors] == list(range(len(keep) + 1))
    assert ("sw", "held") not in b
    b[("sw", "held")] = 9.0
    assert b[("sw", "held")] == 9.0


def test_compaction_waits_until_dead_slots_outnumber_live_ones():
    slots = Slots()
    column = slots.column()
    for i in range(4 * MIN_DEAD_TO_COMPACT):
        column.acquire((str(i),))
    released = 0

    def release_up_to(count: int) -> None:
        nonlocal released
        for i in range(released, count):
            column.release((str(i),))
        released = count

    release_up_to(MIN_DEAD_TO_COMPACT - 1)
    assert not slots.compact_if_sparse([column])  # too few dead to be worth it
    release_up_to(2 * MIN_DEAD_TO_COMPACT)
    assert not slots.compact_if_sparse([column])  # dead == live
    release_up_to(2 * MIN_DEAD_TO_COMPACT + 1)
    assert slots.dead == 2 * MIN_DEAD_TO_COMPACT + 1 and slots.live == 2 * MIN_DEAD_TO_COMPACT - 1
    assert slots.compact_if_sparse([column])
    assert len(slots.values) == 2 * MIN_DEAD_TO_COMPACT - 1
    # With nothing live, any dead slot is freed.
    small = Slots()
    c = small.column()
    c.acquire(("x",))
    c.release(("x",))
    assert small.compact_if_sparse([c]) and len(small.values) == 0
