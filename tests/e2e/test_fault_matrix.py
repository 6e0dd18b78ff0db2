"""The fault matrix in one place: every source's faults injected at once, then cleared.

One daemon runs every source against the real simulators (sysfs tree, NIC stats files, two
gNMI switches, a serving engine plus a flaky endpoint, the NVML fake, a fake dcgm-exporter).
All faults start together; throughout, /metrics keeps answering within its timeout; every
faulty instance shows source_up 0 with a reason while the healthy ones stay up; after the
faults clear, every instance is up again.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp
from aiohttp import web

from conftest import ROOT, running_daemon
from infrapulse.simulate.dcgm_exporter import FakeDcgmExporter, GpuExposition
from infrapulse.simulate.gnmi_target import SimFabric
from infrapulse.simulate.nic_stats import write_stats
from infrapulse.simulate.nvml_fake import DEFAULT_DATA, FakeNvml
from infrapulse.simulate.serving_engines import EngineServer
from infrapulse.simulate.sysfs_tree import DeviceSpec, PortSpec, write_tree

SCRAPE_TIMEOUT = 2.0
VLLM_BODY = (ROOT / "tests/fixtures/serving/vllm-0.33.prom").read_text()


class FlakyEndpoint:
    """A /metrics endpoint whose behaviour the test switches: ok, http_500, garbage, hang."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def _metrics(self, request: web.Request) -> web.StreamResponse:
        if self.mode == "http_500":
            return web.Response(status=500, text="internal error")
        if self.mode == "garbage":
            return web.Response(text="<html><body>not metrics {{{</body></html>", content_type="text/html")
        if self.mode == "hang":
            await asyncio.sleep(3600)
        return web.Response(text=VLLM_BODY, content_type="text/plain")

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        self.runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/metrics"  # noqa: SLF001

    async def close(self) -> None:
        await self.runner.cleanup()


async def _status(session: aiohttp.ClientSession, base: str) -> dict[tuple[str, str], dict]:
    async with session.get(base + "/api/v1/sources") as resp:
        return {(s["source"], s["target"]): s for s in (await resp.json())["sources"]}


async def _until(session, base, predicate, timeout: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout
    status: dict = {}
    while time.monotonic() < deadline:
        status = await _status(session, base)
        if predicate(status):
            return status
        await asyncio.sleep(0.25)
    raise AssertionError(f"condition not met; last status: "
                         f"{ {k: (v['up'], v['reason']) for k, v in status.items()} }")


async def _scrape_continuously(base: str, stop: asyncio.Event, latencies: list[float], failures: list[str],
                               phase: list[str], phases: list[str]) -> None:
    """Scrape until stopped; `phases` gets the phase (phase[0]) each scrape ran in."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=SCRAPE_TIMEOUT)) as session:
        while not stop.is_set():
            phases.append(phase[0])
            started = time.monotonic()
            try:
                async with session.get(base + "/metrics") as resp:
                    await resp.read()
                    if resp.status != 200:
                        failures.append(f"status {resp.status}")
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                failures.append(repr(exc))
            latencies.append(time.monotonic() - started)
            await asyncio.sleep(0.2)


async def _scrapes_during(phases: list[str], name: str, count: int = 3) -> None:
    """Wait until `count` scrapes ran in phase `name`: the scraper kept going through it."""
    for _ in range(300):
        if phases.count(name) >= count:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"only {phases.count(name)} scrapes during {name}")


def _up(status, key) -> bool:
    return key in status and status[key]["up"]


async def test_every_fault_at_once_then_recovery(tmp_path):
    tree = write_tree(tmp_path / "sys", [DeviceSpec(f"mlx5_{i}", ports=[PortSpec(
        link_layer="Ethernet", netdev=f"ens{i + 1}f0np0")]) for i in range(2)])
    nics = write_stats(tmp_path / "stats", ["ens1f0np0", "ens2f0np0"])
    fabric = SimFabric.rails(["node-a"], ["openconfig", "sonic"], ports=2)
    await fabric.start()
    engine = EngineServer("vllm")
    await engine.start()
    flaky = FlakyEndpoint()
    await flaky.start()
    dcgm = FakeDcgmExporter(GpuExposition(FakeNvml.from_file()))
    await dcgm.start()
    good_switch, bad_switch = fabric.targets
    config = f"""
interval: 500ms
http: {{render_cache: 0s}}
sources:
  infiniband: {{sysfs_root: "{tmp_path / 'sys'}", rescan_interval: 1s}}
  ethtool: {{stats_dir: "{tmp_path / 'stats'}", sysfs_root: "{tmp_path / 'sys'}", rescan_interval: 1s}}
  gnmi:
    defaults: {{insecure: true, sample_interval: 1s, stall_timeout: 3s, connect_timeout: 1s}}
    retry_max: 1s
    targets:
      - {{name: leaf-a, address: "{good_switch.address}", profile: openconfig}}
      - {{name: leaf-b, address: "{bad_switch.address}", profile: sonic}}
  serving:
    endpoints:
      - {{name: steady, url: "{engine.url}"}}
      - {{name: flaky, url: "{flaky.url}", timeout: 400ms, retries: 0}}
  nvml: {{enabled: true, fake: "{DEFAULT_DATA}"}}
  dcgm: {{enabled: true, url: "{dcgm.url}", timeout: 400ms}}
"""
    stop = asyncio.Event()
    latencies: list[float] = []
    failures: list[str] = []
    phase, phases = ["starting"], []
    try:
        async with running_daemon(config, hostname="gpu-node-01") as daemon:
            base = f"http://127.0.0.1:{daemon.bound_port}"
            scraper = asyncio.create_task(
                _scrape_continuously(base, stop, latencies, failures, phase, phases))
            async with aiohttp.ClientSession() as session:
                healthy = [("infiniband", "mlx5_0"), ("infiniband", "mlx5_1"), ("ethtool", "ens1f0np0"),
                           ("ethtool", "ens2f0np0"), ("gnmi", "leaf-a"), ("gnmi", "leaf-b"),
                           ("serving", "steady"), ("serving", "flaky"), ("nvml", "nvml"), ("dcgm", "dcgm")]
                status = await _until(session, base, lambda s: all(_up(s, k) for k in healthy))
                assert status[("nvml", "nvml")]["reason"] == "ok"
                nvml = daemon.sources["nvml"][0].api  # the NVML fake, created once the source started

                # Every fault at once.
                (tree.class_dir / "mlx5_1" / "ports").rename(tree.class_dir / "mlx5_1" / "ports.off")
                (tmp_path / "stats" / "ens2f0np0.json").write_text("{not json")
                bad_switch.set_fault("stall")
                good_switch.set_fault("refuse")
                await good_switch.restart()  # drop the live stream so the refusal is seen
                flaky.mode = "hang"
                dcgm.body = "<html>maintenance</html>"
                nvml.set_lost(1, True)

                def all_faulted(s):
                    return (not _up(s, ("infiniband", "mlx5_1")) and not _up(s, ("ethtool", "ens2f0np0"))
                            and not _up(s, ("gnmi", "leaf-a")) and not _up(s, ("gnmi", "leaf-b"))
                            and not _up(s, ("serving", "flaky")) and not _up(s, ("dcgm", "dcgm"))
                            and s[("nvml", "nvml")]["reason"] == "partial")

                status = await _until(session, base, all_faulted, timeout=40)
                phase[0] = "faulted"
                await _scrapes_during(phases, "faulted")
                # The healthy instances stayed up through it all.
                for key in (("infiniband", "mlx5_0"), ("ethtool", "ens1f0np0"), ("serving", "steady")):
                    assert status[key]["up"], (key, status[key])
                assert status[("serving", "flaky")]["reason"] == "timeout"
                assert status[("gnmi", "leaf-a")]["reason"] in ("unavailable", "refused")
                assert status[("gnmi", "leaf-b")]["reason"] == "stalled"
                assert status[("dcgm", "dcgm")]["reason"] == "not_prometheus"
                async with session.get(base + "/metrics") as resp:
                    text = await resp.text()
                assert 'infrapulse_gpu_healthy{gpu="1"' in text
                assert 'infrapulse_switch_up{switch="leaf-b"} 0.0' in text

                # Faults clear: every instance recovers.
                (tree.class_dir / "mlx5_1" / "ports.off").rename(tree.class_dir / "mlx5_1" / "ports")
                nics["ens2f0np0"].write(tmp_path / "stats")
                bad_switch.set_fault(None)
                good_switch.set_fault(None)
                flaky.mode = "ok"
                dcgm.body = None
                nvml.set_lost(1, False)
                status = await _until(session, base, lambda s: all(_up(s, k) for k in healthy)
                                      and s[("nvml", "nvml")]["reason"] == "ok", timeout=40)
                assert all(status[k]["reason"] == "ok" for k in healthy if k[0] != "infiniband")
                phase[0] = "recovered"
                await _scrapes_during(phases, "recovered")
            stop.set()
            await scraper
    finally:
        stop.set()
        for closer in (fabric.close, engine.stop, flaky.close, dcgm.close):
            await closer()
    assert failures == []
    assert phases.count("faulted") >= 3 and phases.count("recovered") >= 3
    assert max(latencies) < SCRAPE_TIMEOUT
