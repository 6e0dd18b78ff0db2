"""The NVML fake's event wait: with the real clock and no scenario board it sleeps until the spec's
next scheduled XID instead of ticking every 50 ms (it runs inside the daemon, standing in for a
driver wait that costs no CPU), and still returns scheduled and fired XIDs on time."""

from __future__ import annotations

import threading
import time

from infrapulse.simulate.nvml_fake import FakeNvml

H100 = {"name": "NVIDIA H100 80GB HBM3", "memory_total": 85520809984, "nvlinks": 4, "mig_slots": 0}


def _fake(**gpu) -> tuple[FakeNvml, object, list[int]]:
    fake = FakeNvml({"models": {"H100": H100}, "gpus": [{"model": "H100", **gpu}]})
    fake.init()
    event_set = fake.event_set_create()
    fake.register_xid_events(fake.handle_by_index(0), event_set)
    reads = [0]
    clock = fake.now

    def counting_now() -> float:  # how often the fake looks at its clock: one per wake-up
        reads[0] += 1
        return clock()

    fake.now = counting_now
    return fake, event_set, reads


def test_wait_without_scheduled_xids_does_not_tick():
    fake, event_set, reads = _fake()
    started = time.monotonic()
    assert fake.event_set_wait(event_set, 400) is None
    assert 0.35 <= time.monotonic() - started < 2.0
    assert reads[0] <= 4  # ticking every 50 ms would read the clock ~16 times


def test_a_scheduled_xid_arrives_at_its_time_without_ticking():
    fake, event_set, reads = _fake(xids=[{"at": 0.3, "xid": 13}])
    started = time.monotonic()
    event = fake.event_set_wait(event_set, 5000)
    assert event is not None and event.xid == 13
    assert 0.25 <= time.monotonic() - started < 2.0
    assert reads[0] <= 6


def test_a_fired_xid_wakes_the_wait_at_once():
    fake, event_set, _ = _fake()
    threading.Timer(0.1, fake.fire_xid, args=(0, 79)).start()
    started = time.monotonic()
    event = fake.event_set_wait(event_set, 5000)
    assert event is not None and event.xid == 79
    assert time.monotonic() - started < 2.0


def test_a_hand_driven_clock_still_ticks():
    t = [0.0]
    fake = FakeNvml({"models": {"H100": H100}, "gpus": [{"model": "H100", "xids": [{"at": 5, "xid": 31}]}]},
                    clock=lambda: t[0])
    fake.init()
    event_set = fake.event_set_create()
    fake.register_xid_events(fake.handle_by_index(0), event_set)
    threading.Timer(0.15, lambda: t.__setitem__(0, 6.0)).start()  # time jumps past the XID
    event = fake.event_set_wait(event_set, 3000)
    assert event is not None and event.xid == 31
