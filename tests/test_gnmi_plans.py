"""The bulk-write plan on its own (sources/gnmi/plans.py, bindings.Prefix): how a plan's leaves
become slice assignments, and how many plans a prefix keeps. SwitchState's tests cover what the
plans write; these pin the run building itself, which they only see through its effects."""

from __future__ import annotations

from array import array

from infrapulse.columns import Slots
from infrapulse.sources.gnmi.bindings import Prefix
from infrapulse.sources.gnmi.plans import MAX_PLANS_PER_PREFIX, Plan, picker, runs_of


def _column_with(n: int):
    slots = Slots()
    column = slots.column()
    labels = [("sw", f"E{i}") for i in range(n)]
    for lv in labels:
        column.acquire(lv)
    return slots, column, labels


def _write(slots: Slots, runs, values_by_kind) -> None:
    """What BulkPath.apply does with a plan's runs."""
    for kind, pick, start, stop, scale in runs:
        picked = pick(values_by_kind[kind])
        slots.values[start:stop] = array("d", picked if scale is None else [v * scale for v in picked])


def test_neighbouring_slots_of_one_kind_and_scale_are_one_run():
    slots, column, labels = _column_with(4)
    runs = runs_of([(0, 1.0, i, column, lv) for i, lv in enumerate(labels)])
    assert [(kind, start, stop, scale) for kind, _, start, stop, scale in runs] == [(0, 0, 4, None)]
    _write(slots, runs, [[10, 11, 12, 13]])
    assert list(slots.values) == [10, 11, 12, 13]


def test_runs_split_at_a_gap_a_kind_or_a_scale():
    slots, column, labels = _column_with(5)
    writes = [(0, 1.0, 0, column, labels[0]), (0, 1.0, 1, column, labels[1]),  # slots 0-1
              (0, 1.0, 2, column, labels[3]),  # slot 3: after a gap
              (1, 1.0, 0, column, labels[2]),  # another value kind
              (0, 0.5, 3, column, labels[4])]  # another scale
    runs = runs_of(writes)
    assert sorted((kind, start, stop, scale) for kind, _, start, stop, scale in runs) == [
        (0, 0, 2, None), (0, 3, 4, None), (0, 4, 5, 0.5), (1, 2, 3, None)]
    _write(slots, runs, [[1, 2, 4, 10], [3.5]])
    assert list(slots.values) == [1, 2, 3.5, 4, 5.0]


def test_values_out_of_slot_order_are_picked_where_they_are():
    slots, column, labels = _column_with(3)
    # the notification sends E2, E0, E1: their values sit at 0, 1, 2 of the kind's list
    runs = runs_of([(0, 1.0, 0, column, labels[2]), (0, 1.0, 1, column, labels[0]),
                    (0, 1.0, 2, column, labels[1])])
    assert len(runs) == 1
    _write(slots, runs, [[22, 0, 11]])
    assert list(slots.values) == [0, 11, 22]


def test_pickers_are_shared_and_contiguous_positions_pick_a_slice():
    assert picker([2, 3, 4]) is picker([2, 3, 4])
    assert picker([2, 3, 4])([0, 1, 2, 3, 4, 5]) == [2, 3, 4]
    assert picker([0, 2])([7, 8, 9]) == (7, 9)


def test_a_prefix_keeps_a_few_plans_and_retires_the_hits_it_forgets():
    prefix = Prefix(())
    retired: list[Plan] = []
    plans = [Plan(bytes([i]), (), None, 1) for i in range(MAX_PLANS_PER_PREFIX + 1)]
    prefix.keep_plan(plans[0].shape, plans[0], retired)
    assert prefix.plans is None and prefix.last is plans[0]  # one shape: no dict
    plans[0].hits = 3
    for plan in plans[1:MAX_PLANS_PER_PREFIX]:
        prefix.keep_plan(plan.shape, plan, retired)
    assert prefix.plans is not None and len(prefix.plans) == MAX_PLANS_PER_PREFIX and retired == []
    last = plans[MAX_PLANS_PER_PREFIX]
    prefix.keep_plan(last.shape, last, retired)  # one shape too many: start over
    assert list(prefix.all_plans()) == [last] and retired == [plans[0]]
