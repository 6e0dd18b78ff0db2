"""Inspections: ranking and verdicts from sequences of passes, the trigger's arming and rate
limits (409/429), and the bounded report store across restarts. The HTTP API, the switch side
from Prometheus and the CLI are in tests/integration/test_inspect_served.py."""

from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path

import pytest

from health_fixtures import Feed, service_for
from helpers import real
from infrapulse.inspect.compare import ARRIVALS_GREW, MOVED, counter_rate, windows
from infrapulse.inspect.config import InspectSettings
from infrapulse.inspect.inspection import findings
from infrapulse.inspect.recorder import Recorder
from infrapulse.inspect.reports import ReportStore
from infrapulse.inspect.sample import COUNTER, Meta, floor_of
from infrapulse.inspect.service import InspectionService
from infrapulse.inspect.trigger import Refused, Trigger
from infrapulse.inspect.verdict import decide
from infrapulse.store import Snapshot

T0 = 1_700_000_000.0
STEP = 1.0
BEFORE, SINCE = 20.0, 10.0


def waiting(ep: str) -> Meta:
    return Meta("queue", "waiting", f"endpoint {ep}", "count", 4.0)


def finished(ep: str) -> Meta:
    return Meta("queue", "finished", f"endpoint {ep}", "per_second", 0.2, kind=COUNTER)


def pause(port: str) -> Meta:
    return Meta("network", "pfc_pause_ratio", port, "ratio", floor_of(0.005, 0.2), good=0.005)


def xid(gpu: str) -> Meta:
    return Meta("compute", "xid_critical", f"GPU {gpu}", "count", floor_of(0.0, 1.0), good=0.0, evidence=True)


def itl(ep: str) -> Meta:
    return Meta("queue", "itl_p95", f"endpoint {ep}", "seconds", floor_of(0.05, 0.1), good=0.05)


class Passes:
    """A recorder fed one pass a second: a healthy stretch, then the fault from `fault_at`."""

    def __init__(self) -> None:
        self.recorder = Recorder(2 * BEFORE + 2 * SINCE, max_series=1000)

    def run(self, seconds: int, fault_at: int, healthy: dict[Meta, float], faulty: dict[Meta, float],
            counters: dict[Meta, tuple[float, float]] = {}) -> float:  # noqa: B006
        """Returns the crossing time (the first faulty pass); counters: per-second (healthy, faulty)."""
        totals = {m: 0.0 for m in counters}
        for i in range(seconds):
            ts = T0 + i * STEP
            bad = i >= fault_at
            values = dict(faulty if bad else healthy)
            for m, (ok, ko) in counters.items():
                totals[m] += ko if bad else ok
                values[m] = totals[m]
            self.recorder.observe(ts, list(values.items()), 40.0 if bad else 100.0, {})
        return T0 + fault_at * STEP

    def verdict(self, crossing: float):
        win = windows(self.recorder, crossing, BEFORE, SINCE)
        layers = findings(self.recorder, win)
        return decide(layers["queue"], layers["compute"], layers["network"]), layers


def test_queue_growing_with_arrivals_flat_and_the_fabric_pausing_is_the_network() -> None:
    p = Passes()
    healthy = {waiting("llama"): 1.0, itl("llama"): 0.03, pause("ens1f0np0 priority 3 rx"): 0.0001,
               pause("ens2f0np0 priority 3 rx"): 0.0001}
    faulty = {waiting("llama"): 12.0, itl("llama"): 0.2, pause("ens1f0np0 priority 3 rx"): 0.8,
              pause("ens2f0np0 priority 3 rx"): 0.0002}
    # Paused, the engine finishes 3 a second while 4 arrive: the queue's 11 more over the since
    # window's 11 s are the missing one a second, and arrivals stay at 4 (3 + 11/11).
    crossing = p.run(45, 25, healthy, faulty, {finished("llama"): (4.0, 3.0)})
    verdict, layers = p.verdict(crossing)
    assert (verdict.layer, verdict.cause, verdict.target) == ("network", "network", "ens1f0np0 priority 3 rx")
    top = layers["network"][0]
    assert top.before == pytest.approx(0.0001) and top.since == pytest.approx(0.8)
    assert "queue: endpoint llama itl_p95" in verdict.text or "queue: endpoint llama waiting" in verdict.text
    arrivals = next(f for f in layers["queue"] if f.meta.metric == "arrivals")
    assert arrivals.factor == pytest.approx(1.0, rel=0.05)


def test_queue_growing_with_arrivals_and_a_calm_fabric_is_a_saturated_engine() -> None:
    p = Passes()
    port = pause("ens1f0np0 priority 3 rx")
    healthy = {waiting("llama"): 1.0, waiting("qwen"): 1.0, port: 0.0001}
    faulty = {waiting("llama"): 30.0, waiting("qwen"): 6.0, port: 0.00012}
    # qwen's queue grows too, less: the verdict names llama, whose arrivals went x5.
    crossing = p.run(45, 25, healthy, faulty, {finished("llama"): (4.0, 20.0), finished("qwen"): (3.0, 3.0)})
    verdict, layers = p.verdict(crossing)
    assert (verdict.layer, verdict.cause, verdict.target) == ("queue", "engine_saturated", "endpoint llama")
    assert "waiting x30 with arrivals x5" in verdict.text
    assert "compute: normal" in verdict.text and "network: normal" in verdict.text


def test_a_load_that_grew_before_the_score_fell_is_still_a_saturated_engine() -> None:
    """The queue takes time to build: arrivals went x4 thirteen passes before the score fell, so
    most of the before window already holds the new load (its mean arrivals x2.8: x1.4 against
    the since window, not "grown"). The baseline is the lower of the window's and its first
    third's, and the queue's growth is measured over the same passes as the finished rate."""
    p = Passes()
    load_at, score_at = 19, 32
    done = queued = 0.0
    for i in range(50):
        loaded = i >= load_at
        done += 11.0 if loaded else 4.0  # saturated: 11 finish a second while 16 arrive
        queued += 5.0 if loaded else 0.0
        p.recorder.observe(T0 + i * STEP, [(finished("llama"), done), (waiting("llama"), 1.0 + queued)],
                           40.0 if i >= score_at else 100.0, {})
    crossing = T0 + score_at * STEP
    verdict, layers = p.verdict(crossing)
    arrivals = next(f for f in layers["queue"] if f.meta.metric == "arrivals")
    assert arrivals.before == pytest.approx(4.0) and arrivals.since == pytest.approx(16.0)
    assert (verdict.layer, verdict.cause, verdict.target) == ("queue", "engine_saturated", "endpoint llama")
    assert "with arrivals x4" in verdict.text


def test_queue_growing_with_arrivals_flat_and_a_calm_fabric_is_a_slow_engine() -> None:
    p = Passes()
    crossing = p.run(45, 25, {waiting("llama"): 1.0}, {waiting("llama"): 20.0},
                     {finished("llama"): (4.0, 4.0)})
    verdict, _ = p.verdict(crossing)
    assert (verdict.layer, verdict.cause, verdict.target) == ("queue", "engine_slow", "endpoint llama")



@pytest.mark.parametrize(("per_second", "cause"), [(1.0, "engine_slow"), (10.0, "engine_saturated")])
def test_arrivals_x1_6_are_a_grown_load_only_past_count_noise(per_second: float, cause: str) -> None:
    """Arrivals 2 -> 3.2 a second (x1.6) are 40 requests before and 32 since: two sigmas of
    Poisson noise, not a load that grew. The same x1.6 at ten times the rate is six sigmas."""
    p = Passes()
    crossing = p.run(45, 25, {itl("llama"): 0.03}, {itl("llama"): 0.2},
                     {finished("llama"): (2.0 * per_second, 3.2 * per_second)})
    verdict, layers = p.verdict(crossing)
    arrivals = next(f for f in layers["queue"] if f.meta.metric == "arrivals")
    assert arrivals.factor == pytest.approx(1.6, rel=0.02)
    expected_sigmas = 2.0 * per_second ** 0.5  # (3.2 - 2) r / sqrt(2.4 r (1/20 + 1/10)), r = per_second
    assert arrivals.sigmas == pytest.approx(expected_sigmas, rel=0.06)
    assert (verdict.layer, verdict.cause, verdict.target) == ("queue", cause, "endpoint llama")
    assert ("within count noise" in verdict.text) is (cause == "engine_slow")
    assert arrivals.as_json()["sigmas"] == round(arrivals.sigmas, 2)


def _poisson(rng: random.Random, mean: float) -> int:
    """Knuth's method: enough for the few requests a pass these runs count."""
    limit, k, product = math.exp(-mean), 0, rng.random()
    while product > limit:
        k += 1
        product *= rng.random()
    return k


def _seeded_runs(rng: random.Random, runs: int, rate: float, load: float) -> list[tuple[str, bool]]:
    """Each of `runs` inspections of an engine whose ITL jumps at pass 25 while requests arrive at
    random (Poisson, `rate` a second; `load` times that from pass 25): its cause, and whether its
    arrivals read x1.5 or more."""
    causes = []
    for _ in range(runs):
        p = Passes()
        done = 0.0
        for i in range(45):
            bad = i >= 25
            done += _poisson(rng, rate * (load if bad else 1.0))
            values = [(finished("llama"), done), (itl("llama"), 0.2 if bad else 0.03)]
            p.recorder.observe(T0 + i * STEP, values, 40.0 if bad else 100.0, {})
        verdict, layers = p.verdict(T0 + 25 * STEP)
        arrivals = next(f for f in layers["queue"] if f.meta.metric == "arrivals")
        causes.append((verdict.cause, arrivals.change >= ARRIVALS_GREW))
    return causes


def test_a_flat_random_load_is_a_slow_engine_and_a_quadrupled_one_saturated() -> None:
    """3 requests a second, as the demo's sglang-qwen: before the count-noise test, a flat load
    read x1.5 ("saturated") in about one inspection in ten."""
    rng = random.Random(7)
    flat = _seeded_runs(rng, 300, 3.0, 1.0)
    read_grown = sum(grown for _, grown in flat)
    saturated = sum(cause == "engine_saturated" for cause, _ in flat)
    assert read_grown >= 15 and saturated <= 3, (read_grown, saturated)
    quadrupled = _seeded_runs(rng, 100, 3.0, 4.0)
    assert sum(cause == "engine_saturated" for cause, _ in quadrupled) == 100

def test_a_gpu_event_is_compute_whatever_else_moved() -> None:
    p = Passes()
    healthy = {xid("3"): 0.0, xid("1"): 0.0, pause("ens1f0np0 priority 3 rx"): 0.0001, waiting("llama"): 1.0}
    faulty = {xid("3"): 1.0, xid("1"): 0.0, pause("ens1f0np0 priority 3 rx"): 0.5, waiting("llama"): 9.0}
    verdict, layers = p.verdict(p.run(45, 25, healthy, faulty))
    assert (verdict.layer, verdict.target) == ("compute", "GPU 3")
    assert [f.meta.target for f in layers["compute"] if f.moved] == ["GPU 3"]


def test_ties_rank_by_metric_then_target_and_the_first_is_named() -> None:
    p = Passes()
    a, b = pause("ens2f0np0 priority 3 rx"), pause("ens1f0np0 priority 3 rx")
    verdict, layers = p.verdict(p.run(45, 25, {a: 0.0, b: 0.0}, {a: 0.5, b: 0.5}))
    assert [f.meta.target for f in layers["network"]] == ["ens1f0np0 priority 3 rx",
                                                          "ens2f0np0 priority 3 rx"]
    assert layers["network"][0].change == layers["network"][1].change
    assert verdict.target == "ens1f0np0 priority 3 rx"


def test_nothing_past_the_noise_floor_is_no_verdict() -> None:
    p = Passes()
    port = pause("ens1f0np0 priority 3 rx")
    # Pausing 0.01% -> 0.03% (x3, but far under the floor) and a queue of 1 -> 3: noise.
    verdict, layers = p.verdict(p.run(45, 25, {port: 0.0001, waiting("llama"): 1.0},
                                      {port: 0.0003, waiting("llama"): 3.0}))
    assert verdict.layer == "none" and verdict.target == ""
    assert all(not f.moved for layer in layers.values() for f in layer)
    assert 0 < layers["network"][0].change < MOVED


def test_the_before_window_ends_where_the_score_started_to_fall() -> None:
    r = Recorder(100.0, 100)
    for i in range(40):  # 100 until i=20, then falling a point a pass, crossing 80 at i=39
        r.observe(T0 + i, [], 100.0 if i <= 20 else 100.0 - (i - 20) * 1.05, {})
    win = windows(r, T0 + 39, 30.0, 10.0)
    assert win.onset == T0 + 20
    assert win.before == (T0 - 10, T0 + 20) and win.since == (T0 + 39, T0 + 49)


def test_counter_rates_survive_a_reset() -> None:
    assert counter_rate([(0.0, 100.0), (1.0, 110.0), (2.0, 5.0), (3.0, 15.0)]) == pytest.approx(25 / 3)


def test_the_recorder_keeps_at_most_max_series() -> None:
    r = Recorder(60.0, max_series=3)
    dropped = r.observe(T0, [(pause(f"p{i}"), 0.0) for i in range(5)], 100.0, {})
    assert dropped == 2 and r.series_count() == 3


# -- the trigger ---------------------------------------------------------------------------------

def test_a_flapping_score_starts_one_inspection_per_min_interval() -> None:
    trig = Trigger(score_below=80, component_below={"network": 50}, rearm_margin=5, min_interval=600)
    assert trig.crossings(T0, 70.0, {}) == []  # first sight already low: a restart, not a drop
    started = []
    for i, score in enumerate([90, 70, 90, 70, 82, 70, 90, 70]):
        for c in trig.crossings(T0 + i, float(score), {}):
            started.append((i, c.value, trig.admit(T0 + i, busy=False)))
    # 82 is under threshold+margin: not re-armed, so the crossing at i=5 is not one.
    assert started == [(1, 70.0, ""), (3, 70.0, "rate_limited"), (7, 70.0, "rate_limited")]
    assert trig.suppressed == {"rate_limited": 2}


def test_component_crossings_and_busy() -> None:
    trig = Trigger(score_below=0, component_below={"network": 50}, rearm_margin=0, min_interval=0)
    trig.crossings(T0, 99.0, {"network": 100.0})
    (crossing,) = trig.crossings(T0 + 1, 99.0, {"network": 10.0})
    assert (crossing.watched, crossing.threshold, crossing.value) == ("network", 50.0, 10.0)
    assert trig.admit(T0 + 1, busy=True) == "busy"


# -- the report store ----------------------------------------------------------------------------

def _report(i: int, pad: int = 0) -> dict:
    return {"id": f"20261201T1700{i:02d}Z-{i:06x}", "timestamp": T0 + i, "pad": "x" * pad,
            "verdict": {"layer": "network", "cause": "network", "target": "p", "text": ""},
            "trigger": {"kind": "score", "crossings": []}}


def test_reports_are_bounded_by_count_and_bytes_and_survive_a_restart(tmp_path: Path) -> None:
    store = ReportStore(str(tmp_path), keep=3, max_bytes=64 * 1024)
    for i in range(5):
        store.save(_report(i))
    files = sorted(p.name for p in (tmp_path / "inspections").iterdir())
    assert files == [f"{_report(i)['id']}.json" for i in (2, 3, 4)]
    (tmp_path / "inspections" / "20261201T170099Z-zzzzzz.json").write_text("{")  # not an id: ignored
    (tmp_path / "inspections" / "20261201T170098Z-0000aa.json").write_text("{broken")
    again = ReportStore(str(tmp_path), keep=3, max_bytes=64 * 1024)
    again.load()
    assert [r["id"] for r in again.newest_first()] == [_report(i)["id"] for i in (4, 3, 2)]
    assert again.errors == 1  # the broken one, counted
    big = ReportStore(str(tmp_path), keep=10, max_bytes=64 * 1024)
    big.load()
    for i in range(5, 10):
        big.save(_report(i, pad=20_000))
    assert big.total_bytes() <= 64 * 1024 and len(big.reports) == 3
    on_disk = sum(p.stat().st_size for p in (tmp_path / "inspections").glob("2*Z-[0-9a-f]*.json")
                  if p.name[:-5] in big.reports)
    assert on_disk == big.total_bytes()


def test_an_unwritable_state_dir_keeps_reports_in_memory_and_counts(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    store = ReportStore(str(blocker), keep=3, max_bytes=64 * 1024)
    store.save(_report(1))
    assert store.errors == 1 and store.latest()["id"] == _report(1)["id"]


# -- through the health service ------------------------------------------------------------------

def _inspect_config(extra: str = "") -> InspectSettings:
    from infrapulse import config as config_mod

    return config_mod.load_text("inspect:\n  before: 20s\n  since: 5s\n" + extra).inspect


def _storming_feed(start: float) -> Feed:
    iface = ("ens1f0np0", "3", "rx")
    paused = [0.0]
    for _ in range(30):
        paused.append(paused[-1] + 0.0001)
    for _ in range(15):
        paused.append(paused[-1] + 0.9)
    feed = Feed(start=start)
    feed.series("ethtool", "infrapulse_nic_pfc_pause_duration_seconds_total", iface, paused, "ens1f0np0")
    return feed


async def _drive(feed: Feed, start: float, health, service: InspectionService) -> list[dict]:
    """One pass a second: publish the feed's step, score it, let the inspection service run."""
    made = []
    for i in range(max(len(s) for s in feed.readings.values())):
        ts = start + i
        for (source, target), per_step in feed.readings.items():
            snap = Snapshot(ts)
            for family, series in per_step[i].items():
                for labels, value in series.items():
                    snap.add(family, labels, value)
            feed.store.publish(source, target, snap, 10_000)
            feed.store.record_success(source, target, 0.001)
        health.tick(ts)
        report = await service.step(now=ts)
        if report is not None:
            made.append(report)
    return made


async def test_an_xid_fed_through_health_names_the_gpu_and_the_xid(tmp_path: Path) -> None:
    from infrapulse import config as config_mod
    from infrapulse.health.service import HealthService

    start = time.time() - 100
    feed = Feed(start=start)
    for gpu in ("1", "3"):
        feed.series("nvml", "infrapulse_gpu_healthy", (gpu, f"GPU-{gpu}"), [1.0] * 45, "nvml")
        feed.series("nvml", "infrapulse_gpu_utilization_ratio", (gpu, f"GPU-{gpu}"), [0.7] * 45, "nvml")
    # XID 79 on GPU 3 from pass 30: a sparse counter born mid-life counts from zero.
    feed.series("nvml", "infrapulse_gpu_xid_errors_total", ("3", "GPU-3", "79"), [None] * 30 + [1.0] * 15,
                "nvml")
    health = HealthService(feed.store, config_mod.load_text("health: {window: 5s}\n").health, "h", 1.0)
    service = InspectionService(feed.store, health.reports, _inspect_config(), str(tmp_path), "gpu-node-01",
                                health.interval)
    (report,) = await _drive(feed, start, health, service)
    assert (report["verdict"]["layer"], report["verdict"]["target"]) == ("compute", "GPU 3")
    compute = next(layer for layer in report["layers"] if layer["name"] == "compute")
    top = compute["findings"][0]
    assert (top["metric"], top["target"], top["before"], top["since"], top["note"]) == \
        ("xid_critical", "GPU 3", 0.0, 1.0, "XID 79")
    assert [f["target"] for f in compute["findings"] if f["moved"]] == ["GPU 3"]


async def test_the_verdict_gpu_carries_its_last_kernel_log_event_as_evidence(tmp_path: Path) -> None:
    from infrapulse import config as config_mod
    from infrapulse.health.service import HealthService
    from infrapulse.inspect.page import render
    from infrapulse.sources.kmsg.classify import classify

    start = time.time() - 100
    feed = Feed(start=start)
    for gpu, bus in (("1", "00000000:3B:00.0"), ("3", "00000000:B3:00.0")):
        feed.series("nvml", "infrapulse_gpu_healthy", (gpu, f"GPU-{gpu}"), [1.0] * 45, "nvml")
        feed.series("nvml", "infrapulse_gpu_utilization_ratio", (gpu, f"GPU-{gpu}"), [0.7] * 45, "nvml")
        feed.series("nvml", "infrapulse_gpu_info", (gpu, f"GPU-{gpu}", "H100", bus, "570.158.01", "12.8"),
                    [1.0] * 45, "nvml")
    feed.series("nvml", "infrapulse_gpu_xid_errors_total", ("3", "GPU-3", "79"), [None] * 30 + [1.0] * 15,
                "nvml")
    # The kmsg source's series for the same fault: the line shape of the real capture
    # nvrm-xid79-sxid20034-gpud-readme.txt, on this GPU's address.
    [event] = classify("NVRM: Xid (PCI:0000:b3:00): 79, pid='<unknown>', name=<unknown>, "
                       "GPU has fallen off the bus.")
    read_at = start + 30.5
    feed.series("kmsg", "infrapulse_kmsg_last_event_info",
                (event.pci_address, event.kind, event.code, event.summary()), [None] * 30 + [1.0] * 15)
    feed.series("kmsg", "infrapulse_kmsg_last_event_timestamp_seconds", (event.pci_address,),
                [None] * 30 + [read_at] * 15)
    # Another GPU's event is not this verdict's evidence.
    feed.series("kmsg", "infrapulse_kmsg_last_event_info", ("0000:3b:00.0", "pcie_aer", "physical_layer",
                "PCIe AER corrected physical_layer error"), [1.0] * 45)
    health = HealthService(feed.store, config_mod.load_text("health: {window: 5s}\n").health, "h", 1.0)
    service = InspectionService(feed.store, health.reports, _inspect_config(), str(tmp_path), "gpu-node-01",
                                health.interval)
    (report,) = await _drive(feed, start, health, service)
    assert (report["verdict"]["layer"], report["verdict"]["target"]) == ("compute", "GPU 3")
    assert report["verdict"]["kernel_log"] == {
        "pci_address": "0000:b3:00.0", "kind": "xid", "code": "79",
        "summary": "Xid 79: GPU has fallen off the bus", "timestamp": read_at}
    assert "kernel log, PCI 0000:b3:00.0: Xid 79: GPU has fallen off the bus (xid) at " in render(report)


async def test_a_netdev_verdict_carries_its_nics_last_kernel_log_event(tmp_path: Path) -> None:
    """ens1f0np0 -> mlx5_0 (infrapulse_rdma_port_info{netdev}) -> 0000:0d:00.0
    (infrapulse_rdma_device_info{pci_address}) -> that function's last kernel-log event."""
    from infrapulse import config as config_mod
    from infrapulse.health.service import HealthService
    from infrapulse.inspect.kernel_log import address_of
    from infrapulse.inspect.page import render
    from infrapulse.sources.kmsg.classify import classify

    start = time.time() - 100
    feed = _storming_feed(start)
    for device, address, netdev in (("mlx5_0", "0000:0d:00.0", "ens1f0np0"),
                                    ("mlx5_1", "0000:0d:00.1", "ens1f1np1")):
        feed.series("infiniband", "infrapulse_rdma_device_info",
                    (device, "MT4125", "MT_0000000359", "22.44.1036", "", address), [1.0] * 46, device)
        feed.series("infiniband", "infrapulse_rdma_port_info", (device, "1", "Ethernet", netdev), [1.0] * 46,
                    device)
    # The kmsg source's series for the first line of the real capture, on mlx5_0's function;
    # the other PF's event is not this verdict's evidence.
    line = real("kmsg", "mlx5-health-fw-assert-cx6dx-qemu-devel-2025.txt").read_text().splitlines()[0]
    [event] = classify(line.split("] ", 1)[1])
    assert (event.pci_address, event.kind) == ("0000:0d:00.0", "mlx5_health_compromised")
    read_at = start + 30.5
    feed.series("kmsg", "infrapulse_kmsg_last_event_info",
                (event.pci_address, event.kind, event.code, event.summary()), [None] * 30 + [1.0] * 16)
    feed.series("kmsg", "infrapulse_kmsg_last_event_timestamp_seconds", (event.pci_address,),
                [None] * 30 + [read_at] * 16)
    feed.series("kmsg", "infrapulse_kmsg_last_event_info", ("0000:0d:00.1", "mlx5_fw_error", "",
                "mlx5 firmware health issue"), [1.0] * 46)
    health = HealthService(feed.store, config_mod.load_text("health: {window: 5s}\n").health, "h", 1.0)
    service = InspectionService(feed.store, health.reports, _inspect_config(), str(tmp_path), "gpu-node-01",
                                health.interval)
    (report,) = await _drive(feed, start, health, service)
    assert (report["verdict"]["layer"], report["verdict"]["target"]) == ("network", "ens1f0np0 priority 3 rx")
    assert report["verdict"]["kernel_log"] == {
        "pci_address": "0000:0d:00.0", "kind": "mlx5_health_compromised", "code": event.code,
        "summary": event.summary(), "timestamp": read_at}
    assert f"kernel log, PCI 0000:0d:00.0: {event.summary()} (mlx5_health_compromised) at " in render(report)
    # The same mapping by RDMA device (an RDMA verdict); a switch's interface is not a netdev here.
    assert address_of(feed.store, {"device": "mlx5_1", "port": "1"}) == "0000:0d:00.1"
    assert address_of(feed.store, {"interface": "ens1f1np1"}) == "0000:0d:00.1"
    assert address_of(feed.store, {"switch": "leaf01", "interface": "ens1f0np0"}) == ""
    assert address_of(feed.store, {"interface": "eth9"}) == ""


async def test_a_pfc_storm_fed_through_health_gives_a_network_verdict(tmp_path: Path) -> None:
    start = time.time() - 100  # the store expires snapshots older than their staleness
    feed = _storming_feed(start)
    from infrapulse import config as config_mod
    from infrapulse.health.service import HealthService

    health = HealthService(feed.store, config_mod.load_text("health: {window: 5s}\n").health, "h", 1.0)
    service = InspectionService(feed.store, health.reports, _inspect_config(), str(tmp_path), "gpu-node-01",
                                health.interval)
    made = await _drive(feed, start, health, service)
    assert len(made) == 1
    report = made[0]
    assert report["verdict"]["layer"] == "network"
    assert report["verdict"]["target"] == "ens1f0np0 priority 3 rx"
    assert report["verdict"]["kernel_log"] is None  # no RDMA device maps this netdev to a PCI function
    assert report["trigger"]["kind"] == "score"
    network = next(layer for layer in report["layers"] if layer["name"] == "network")
    top = network["findings"][0]
    assert top["metric"] == "pfc_pause_ratio" and top["before"] < 0.001 and top["since"] > 0.5
    assert [layer["name"] for layer in report["layers"]] == ["queue", "compute", "network"]
    assert json.loads((tmp_path / "inspections" / f"{report['id']}.json").read_text()) == report
    # The service reloaded from the same state_dir still has it, as latest.
    again = InspectionService(feed.store, health.reports, _inspect_config(), str(tmp_path), "gpu-node-01",
                              health.interval)
    assert again.reports.latest() == report


async def test_on_demand_is_single_flight_and_rate_limited(tmp_path: Path) -> None:
    feed = _storming_feed(time.time() - 100)
    health = service_for(feed.store)
    config = _inspect_config("  on_demand_min_interval: 60s\n")
    service = InspectionService(feed.store, health.reports, config, str(tmp_path), "h", health.interval)
    feed.publish(health, step_seconds=1.0)
    await service.step(now=T0 + 50)
    first = await service.on_demand(now=T0 + 50)
    assert first["trigger"]["kind"] == "on_demand"
    with pytest.raises(Refused) as too_soon:
        await service.on_demand(now=T0 + 80)
    assert too_soon.value.status == 429 and too_soon.value.retry_after == pytest.approx(30)
    service.running = True
    with pytest.raises(Refused) as busy:
        await service.on_demand(now=T0 + 200)
    assert busy.value.status == 409


async def test_a_steady_score_starts_no_inspection(tmp_path: Path) -> None:
    from infrapulse import config as config_mod
    from infrapulse.health.service import HealthService

    start = time.time() - 100
    feed = Feed(start=start)
    feed.series("ethtool", "infrapulse_nic_pfc_pause_duration_seconds_total", ("ens1f0np0", "3", "rx"),
                [i * 0.0001 for i in range(45)], "ens1f0np0")
    health = HealthService(feed.store, config_mod.load_text("health: {window: 5s}\n").health, "h", 1.0)
    service = InspectionService(feed.store, health.reports, _inspect_config(), str(tmp_path), "gpu-node-01",
                                health.interval)
    assert await _drive(feed, start, health, service) == []
    assert health.report is not None and health.report.score == 100.0
    assert service.reports.latest() is None and not (tmp_path / "inspections").exists()
    assert service.recorder.series_count() == 1
