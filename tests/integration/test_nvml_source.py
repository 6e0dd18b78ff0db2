"""The nvml source inside a running daemon: XID events counted exactly once, no NVML library,
and /metrics over real HTTP."""

from __future__ import annotations

import asyncio
import logging

import aiohttp
import pynvml
import yaml

from conftest import running_daemon
from helpers import parse_exposition, samples_of, value
from infrapulse.simulate import nvml_fake
from infrapulse.simulate.nvml_fake import FakeNvml
from infrapulse.simulate.scenarios import ScenarioBoard

SPEC = {
    "driver_version": "570.133.20", "cuda_driver_version": 12080,
    "models": {"H100": {"name": "NVIDIA H100 80GB HBM3", "memory_total": 85520809984, "nvlinks": 2}},
    "gpus": [
        {"model": "H100", "uuid": "GPU-aaaa", "utilization": 50, "power_w": 400},
        {"model": "H100", "uuid": "GPU-bbbb", "utilization": 60, "power_w": 450},
    ],
    "scenarios": {"xid": {"gpu": 1, "xid": 79, "lost": True}},
}


class Clock:
    def __init__(self, t: float = 1.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


async def until(predicate, timeout: float = 10.0, what: str = "condition"):
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def scrape(daemon) -> dict:
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{daemon.bound_port}/metrics") as resp:
            assert resp.status == 200
            return parse_exposition(await resp.text())


def write_spec(tmp_path, spec=SPEC):
    path = tmp_path / "gpus.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def live_fake(path, **kwargs) -> FakeNvml:
    fake = FakeNvml.from_file(path, **kwargs)
    nvml_fake.register_live(path, fake)
    return fake


def config(path, **nvml) -> str:
    section = {"enabled": True, "interval": "100ms", "fake": str(path), **nvml}
    return yaml.safe_dump({"interval": "1s", "sources": {"nvml": section}})


def xid_count(daemon, uuid: str, xid: int) -> float | None:
    for _src, _tgt, labels, v in daemon.store.iter_family("infrapulse_gpu_xid_errors_total"):
        if labels[1] == uuid and labels[2] == str(xid):
            return v
    return None


async def polls_pass(fake: FakeNvml, n: int) -> None:
    start = fake.calls["field_values"]
    await until(lambda: fake.calls["field_values"] >= start + 2 * n, what=f"{n} more polls")


async def test_gpu_families_are_served_over_http(tmp_path):
    path = write_spec(tmp_path)
    live_fake(path, clock=Clock())
    try:
        async with running_daemon(config(path)) as daemon:
            await until(lambda: daemon.store.snapshot("nvml", "nvml"), what="first poll")
            values = await scrape(daemon)
    finally:
        nvml_fake.unregister_live(path)
    assert value(values, "infrapulse_source_up", source="nvml", target="nvml") == 1
    assert value(values, "infrapulse_gpu_utilization_ratio", gpu="1", uuid="GPU-bbbb") == 0.6
    assert value(values, "infrapulse_gpu_power_watts", gpu="0", uuid="GPU-aaaa") == 400
    assert value(values, "infrapulse_gpu_xid_watch_up", gpu="0", uuid="GPU-aaaa") == 1
    assert value(values, "infrapulse_gpu_last_xid", gpu="0", uuid="GPU-aaaa") == 0
    assert samples_of(values, "infrapulse_gpu_xid_errors_total") == {}


async def test_an_xid_event_is_counted_exactly_once(tmp_path):
    path = write_spec(tmp_path)
    fake = live_fake(path, clock=Clock())
    try:
        # rescan_every 1: GPUs re-enumerated on every poll must not re-register or replay events
        async with running_daemon(config(path, rescan_every=1)) as daemon:
            await until(lambda: daemon.store.snapshot("nvml", "nvml"), what="first poll")
            fake.fire_xid(0, 48)
            await until(lambda: xid_count(daemon, "GPU-aaaa", 48), what="the XID")
            await polls_pass(fake, 5)
            assert xid_count(daemon, "GPU-aaaa", 48) == 1
            assert xid_count(daemon, "GPU-bbbb", 48) is None
            assert fake.calls["event_set_create"] == 1
            fake.fire_xid(0, 48)
            await until(lambda: xid_count(daemon, "GPU-aaaa", 48) == 2, what="the second XID")
            await polls_pass(fake, 3)
            values = await scrape(daemon)
    finally:
        nvml_fake.unregister_live(path)
    assert value(values, "infrapulse_gpu_xid_errors_total", gpu="0", uuid="GPU-aaaa", xid="48") == 2
    assert value(values, "infrapulse_gpu_last_xid", gpu="0", uuid="GPU-aaaa") == 48


async def test_xids_at_given_times_and_a_gpu_falling_off_the_bus(tmp_path):
    clock = Clock(1.0)
    spec = {**SPEC, "gpus": [{**SPEC["gpus"][0], "xids": [{"at": 5, "xid": 13}]},
                             {**SPEC["gpus"][1], "lost_at": 8}]}
    path = write_spec(tmp_path, spec)
    fake = live_fake(path, clock=clock)
    try:
        # rescan_every 1: the lost GPU is re-enumerated every poll and must keep its XID count
        async with running_daemon(config(path, rescan_every=1)) as daemon:
            await until(lambda: daemon.store.snapshot("nvml", "nvml"), what="first poll")
            clock.t = 6.0
            await until(lambda: xid_count(daemon, "GPU-aaaa", 13), what="XID 13 at t=5")
            clock.t = 9.0
            await until(lambda: xid_count(daemon, "GPU-bbbb", 79), what="XID 79 at t=8")
            await polls_pass(fake, 3)
            values = await scrape(daemon)
            status = daemon.store.status_of("nvml", "nvml")
    finally:
        nvml_fake.unregister_live(path)
    assert value(values, "infrapulse_gpu_xid_errors_total", gpu="0", uuid="GPU-aaaa", xid="13") == 1
    assert value(values, "infrapulse_gpu_xid_errors_total", gpu="1", uuid="GPU-bbbb", xid="79") == 1
    assert value(values, "infrapulse_gpu_last_xid", gpu="1", uuid="GPU-bbbb") == 79
    assert value(values, "infrapulse_gpu_healthy", gpu="1", uuid="GPU-bbbb") == 0
    assert value(values, "infrapulse_gpu_health_status_info", gpu="1", uuid="GPU-bbbb",
                 reason="gpu_is_lost") == 1
    assert fake.calls["event_set_create"] == 1  # the watcher was not restarted by the rescans
    assert value(values, "infrapulse_gpu_healthy", gpu="0", uuid="GPU-aaaa") == 1
    assert status.up and status.reason == "partial" and "gpu_is_lost" in status.message


async def test_xid_scenario_raises_79_once_per_activation(tmp_path):
    path = write_spec(tmp_path)
    board = ScenarioBoard()
    fake = live_fake(path, clock=Clock(), scenarios=board)
    try:
        async with running_daemon(config(path)) as daemon:
            await until(lambda: daemon.store.snapshot("nvml", "nvml"), what="first poll")
            board.activate("xid")
            await until(lambda: xid_count(daemon, "GPU-bbbb", 79), what="XID 79")
            await polls_pass(fake, 4)
            assert xid_count(daemon, "GPU-bbbb", 79) == 1
            values = await scrape(daemon)
            assert value(values, "infrapulse_gpu_healthy", gpu="1", uuid="GPU-bbbb") == 0
            board.deactivate("xid")
            await polls_pass(fake, 2)
            values = await scrape(daemon)
    finally:
        nvml_fake.unregister_live(path)
    assert value(values, "infrapulse_gpu_healthy", gpu="1", uuid="GPU-bbbb") == 1
    assert value(values, "infrapulse_gpu_xid_errors_total", gpu="1", uuid="GPU-bbbb", xid="79") == 1


async def test_no_library_with_enabled_auto_disables_the_source_and_the_daemon_runs_on(monkeypatch, caplog):
    # The real nvidia-ml-py path, made to miss libnvidia-ml.so.1 on any host.
    monkeypatch.setattr(pynvml, "nvmlLib", None)

    def no_library(*args, **kwargs):
        raise OSError("libnvidia-ml.so.1: cannot open shared object file")

    monkeypatch.setattr(pynvml, "CDLL", no_library)
    caplog.set_level(logging.INFO, logger="infrapulse.source.nvml")
    text = yaml.safe_dump({"interval": "1s", "sources": {"nvml": {"enabled": "auto"}}})
    async with running_daemon(text) as daemon:
        await until(lambda: any("nvml source off" in r.getMessage() for r in caplog.records),
                    what="the log line")
        values = await scrape(daemon)
        assert ("nvml", "nvml") not in daemon.store.status
    record = next(r for r in caplog.records if "nvml source off" in r.getMessage())
    assert record.reason == "no_nvml" and "NVML Shared Library Not Found" in record.detail
    assert samples_of(values, "infrapulse_gpu_healthy") == {}
    assert not any(dict(k).get("source") == "nvml" for k in samples_of(values, "infrapulse_source_up"))
    assert list(samples_of(values, "infrapulse_build_info").values()) == [1.0]  # the daemon serves on


async def test_no_library_with_enabled_true_is_source_down_with_reason(tmp_path):
    path = write_spec(tmp_path, {**SPEC, "library": "missing"})
    async with running_daemon(config(path)) as daemon:
        await until(lambda: ("nvml", "nvml") in daemon.store.status, what="the failure status")
        values = await scrape(daemon)
    assert value(values, "infrapulse_source_up", source="nvml", target="nvml") == 0
    assert value(values, "infrapulse_source_status_info", source="nvml", target="nvml", reason="no_nvml") == 1
    assert samples_of(values, "infrapulse_gpu_healthy") == {}


async def test_xid_events_off_exports_no_xid_families(tmp_path):
    path = write_spec(tmp_path)
    fake = live_fake(path, clock=Clock())
    try:
        async with running_daemon(config(path, xid_events=False)) as daemon:
            await until(lambda: daemon.store.snapshot("nvml", "nvml"), what="first poll")
            values = await scrape(daemon)
    finally:
        nvml_fake.unregister_live(path)
    assert fake.calls["event_set_create"] == 0
    assert samples_of(values, "infrapulse_gpu_xid_watch_up") == {}
    assert samples_of(values, "infrapulse_gpu_last_xid") == {}
    assert value(values, "infrapulse_gpu_healthy", gpu="0", uuid="GPU-aaaa") == 1
