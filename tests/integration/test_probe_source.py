"""The probe source end to end with the fake nccl-tests and perftest executables
(infrapulse.simulate.probe_fake): scheduling, idleness, the lock, the hard timeout, lowered
priority, skip reasons, baselines across a daemon restart between two firmware versions,
before -> after records, floors, and result files dropped into the inbox."""

from __future__ import annotations

import asyncio
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import pytest

from helpers import real
from infrapulse.simulate.probe_fake import write_shims
from infrapulse.sources.base import SourceContext
from infrapulse.sources.probe import runner
from infrapulse.sources.probe.config import CONFIG, ProbeSettings
from infrapulse.sources.probe.idle import GPU_ACTIVITY_KEY
from infrapulse.sources.probe.source import ProbeSource
from infrapulse.store import Snapshot, Store

OLD_FW, NEW_FW = "28.39.1002", "28.41.1000"


class FakeGpu:
    def __init__(self, processes: int | None = 0) -> None:
        self.processes = processes

    def compute_processes(self) -> int | None:
        return self.processes


class Rig:
    """A state directory, a sysfs tree with two RDMA devices, fake tools and their state file."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.state_dir = tmp / "state"
        self.sysfs = tmp / "sys"
        for dev in ("mlx5_0", "mlx5_1"):
            d = self.sysfs / "class" / "infiniband" / dev
            d.mkdir(parents=True)
            (d / "fw_ver").write_text(OLD_FW + "\n")
            (d / "hca_type").write_text("MT4129\n")
        self.fake_state = tmp / "fake.json"
        self.fake({})
        self.bin = write_shims(tmp / "bin", self.fake_state)
        self.gpu = FakeGpu(0)
        self.store = Store()

    def fake(self, state: dict[str, Any]) -> None:
        self.fake_state.write_text(json.dumps({"gpus": 2, **state}))

    def firmware(self, version: str) -> None:
        for fw in (self.sysfs / "class" / "infiniband").glob("*/fw_ver"):
            fw.write_text(version + "\n")

    def config(self, **over: Any) -> ProbeSettings:
        cfg: dict[str, Any] = {
            "enabled": True, "interval": "1h", "jitter": "0s", "check_interval": "1s", "change_delay": "0s",
            "timeout": "30s", "nice": 5,
            "baseline": {"runs": 5, "min_runs": 2},
            "nccl": {"binary": str(self.bin["all_reduce_perf"]), "gpus": 2,
                     "runs": [{"name": "nccl_latency", "args": ["-b", "8", "-e", "64", "-f", "2", "-g",
                                                                "{gpus}"]}]},
            "perftest": {"enabled": False, "latency_binary": str(self.bin["ib_write_lat"]),
                         "bandwidth_binary": str(self.bin["ib_write_bw"]), "latency_sizes": [8],
                         "bandwidth_sizes": [65536], "base_port": _free_port()},
            "versions": {"sysfs_root": str(self.sysfs)},
        }
        for key, value in over.items():
            if isinstance(value, dict) and isinstance(cfg.get(key), dict):
                cfg[key] = {**cfg[key], **value}
            else:
                cfg[key] = value
        return CONFIG.validate(cfg, "sources.probe")

    def source(self, **over: Any) -> ProbeSource:
        ctx = SourceContext(store=self.store, interval=1.0, options={GPU_ACTIVITY_KEY: lambda: self.gpu},
                            state_dir=str(self.state_dir))
        src = ProbeSource(self.config(**over), ctx)
        src.start(time.time())
        return src

    def nccl_runs(self) -> int:
        path = Path(f"{self.fake_state}.runs")
        return len(path.read_text().splitlines()) if path.exists() else 0


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def round_(src: ProbeSource, now: float | None = None) -> float:
    """One check at `now` (default: past the next scheduled run), waiting for the run it starts."""
    now = max(time.time(), src.state["next_run"] + 1) if now is None else now
    await src.tick(now)
    if src.running is not None:
        await src.running
    return now


def metric(store: Store, family: str, **labels: str) -> dict[tuple[str, ...], float]:
    from infrapulse import catalog

    names = catalog.get(family).labels
    out = {}
    for _src, _tgt, values, value in store.iter_family(family, "probe"):
        named = dict(zip(names, values))
        if all(named.get(k) == v for k, v in labels.items()):
            out[values] = float(value)  # type: ignore[arg-type]
    return out


def one(store: Store, family: str, **labels: str) -> float:
    found = metric(store, family, **labels)
    assert len(found) == 1, f"{family} {labels}: {found}"
    return next(iter(found.values()))


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    return Rig(tmp_path)


async def test_a_run_publishes_the_table_and_judges_nothing_without_history(rig: Rig) -> None:
    src = rig.source()
    await round_(src)
    assert one(rig.store, "infrapulse_probe_last_result", probe="nccl_latency", result="ok") == 1.0
    t8 = one(rig.store, "infrapulse_probe_nccl_time_seconds", size="8", placement="out_of_place")
    assert 17.5e-6 < t8 < 18.5e-6  # the fake's 18 us NVLink latency, +-1 %
    assert one(rig.store, "infrapulse_probe_nccl_wrong_elements", size="64", placement="in_place") == 0.0
    labels = next(iter(metric(rig.store, "infrapulse_probe_nccl_time_seconds", size="8",
                              placement="out_of_place")))
    assert labels[:3] == ("local", "intra_node", "all_reduce")
    assert one(rig.store, "infrapulse_probe_verdict", metric="latency", size="8",
               verdict="no_baseline") == 1.0
    assert one(rig.store, "infrapulse_probe_versions_info", component="nic_firmware", version=OLD_FW) == 1.0
    assert one(rig.store, "infrapulse_probe_versions_info", component="nccl", version="2.29.7") == 1.0
    status = rig.store.status[("probe", "nccl_latency")]
    assert status.up and status.reason == "ok"
    assert not list((rig.state_dir / "probe").glob("nccl_latency.*/"))  # the run's work directory is gone


async def test_busy_gpus_skip_and_count_once_per_scheduled_run(rig: Rig) -> None:
    rig.gpu.processes = 2
    src = rig.source()
    now = await round_(src)
    await round_(src, now + 30)
    assert rig.nccl_runs() == 0
    assert one(rig.store, "infrapulse_probe_runs_total", probe="nccl_latency", result="busy") == 1.0
    status = rig.store.status[("probe", "nccl_latency")]
    assert status.up and status.reason == "busy" and status.message == "2 GPU compute process(es) running"
    rig.gpu.processes = 0
    await round_(src, now + 60)
    assert rig.nccl_runs() == 1 and rig.store.status[("probe", "nccl_latency")].reason == "ok"


async def test_nvml_that_cannot_tell_is_busy(rig: Rig) -> None:
    rig.gpu.processes = None
    src = rig.source()
    await round_(src)
    assert rig.nccl_runs() == 0
    assert rig.store.status[("probe",
                             "nccl_latency")].message == "NVML cannot tell whether the GPUs are in use"


async def test_serving_requests_make_the_node_busy_unless_the_maintenance_flag_is_set(rig: Rig) -> None:
    snap = Snapshot()
    snap.add("infrapulse_llm_requests_running", ("llama", "vllm", "llama-3-70b"), 3.0)
    rig.store.publish("serving", "llama", snap, 60)
    src = rig.source(idle={"maintenance_file": str(rig.tmp / "maintenance")})
    now = await round_(src)
    assert rig.nccl_runs() == 0
    assert rig.store.status[("probe", "nccl_latency")].message == "requests running or waiting on llama"
    (rig.tmp / "maintenance").write_text("window\n")
    await round_(src, now + 5)
    assert rig.nccl_runs() == 1


async def test_a_missing_binary_is_a_status_reason(rig: Rig) -> None:
    src = rig.source(nccl={"binary": str(rig.tmp / "nowhere" / "all_reduce_perf")})
    await round_(src)
    status = rig.store.status[("probe", "nccl_latency")]
    assert not status.up and status.reason == "no_binary" and "not found" in status.message
    assert one(rig.store, "infrapulse_probe_last_result", probe="nccl_latency", result="no_binary") == 1.0


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


async def test_a_hung_probe_and_its_children_are_killed_at_the_timeout(rig: Rig) -> None:
    marker = f"probe-hang-{os.getpid()}-{time.monotonic_ns()}"
    rig.fake({"hang": True, "hang_marker": marker})
    src = rig.source(timeout="2s")
    started = time.monotonic()
    await round_(src)
    assert time.monotonic() - started < 15
    status = rig.store.status[("probe", "nccl_latency")]
    assert status.reason == "timeout" and "did not finish within 2s" in status.message
    assert one(rig.store, "infrapulse_probe_runs_total", probe="nccl_latency", result="timeout") == 1.0
    await asyncio.sleep(0.3)
    assert _processes_with(marker) == []  # the child in its process group went too


async def test_a_held_lock_means_busy(rig: Rig) -> None:
    src = rig.source()
    with runner.probe_lock(rig.state_dir / "probe" / "run.lock"):
        await round_(src)
    assert rig.nccl_runs() == 0
    status = rig.store.status[("probe", "nccl_latency")]
    assert status.reason == "busy" and status.message.startswith("another probe holds")


async def test_wrong_results_and_failures(rig: Rig) -> None:
    rig.fake({"wrong": True})
    src = rig.source(nccl={"runs": [{"name": "nccl_latency", "args": ["-b", "1K", "-e", "2K", "-f", "2"]}]})
    now = await round_(src)
    status = rig.store.status[("probe", "nccl_latency")]
    assert status.reason == "wrong_results" and "wrong results at sizes 1024, 2048" in status.message
    assert one(rig.store, "infrapulse_probe_nccl_wrong_elements", size="1024",
               placement="out_of_place") == 256.0
    assert not metric(rig.store, "infrapulse_probe_verdict")  # wrong results are never judged
    rig.fake({"fail": True})
    src.state["next_run"] = now
    await round_(src, now + 1)
    status = rig.store.status[("probe", "nccl_latency")]
    assert status.reason == "failed" and "Test NCCL failure all_reduce.cu:44" in status.message


async def test_wrong_results_win_over_the_test_failure_lines_they_come_with(rig: Rig) -> None:
    """Issue 34: a run with wrong elements and `Test failure` lines was filed `failed`; data
    corruption is wrong_results, always."""
    rig.fake({"wrong": True, "fail": True})
    src = rig.source(nccl={"runs": [{"name": "nccl_latency", "args": ["-b", "1K", "-e", "2K", "-f", "2"]}]})
    await round_(src)
    status = rig.store.status[("probe", "nccl_latency")]
    assert status.reason == "wrong_results" and "wrong results at sizes 1024" in status.message
    assert one(rig.store, "infrapulse_probe_runs_total", probe="nccl_latency", result="wrong_results") == 1.0


async def test_an_inbox_file_with_wrong_results_and_failure_lines_is_wrong_results(rig: Rig) -> None:
    inbox = rig.tmp / "inbox"
    inbox.mkdir()
    text = real("probes", "nccl-tests-allreduce-2node16gpu-h100-ztan.txt").read_text()
    lines = text.splitlines()
    row = next(i for i, line in enumerate(lines) if line.strip().startswith("8589934592"))
    fields = lines[row].split()
    fields[8] = "12"  # the out-of-place #wrong of the largest size
    lines[row] = "  ".join(fields)
    lines.append(" .. node-a pid 4242: Test failure common.cu:1279")
    (inbox / "rack7-a-b__2026-01-02.txt").write_text("\n".join(lines) + "\n")
    old = time.time() - 60
    os.utime(inbox / "rack7-a-b__2026-01-02.txt", (old, old))
    src = rig.source(nccl={"enabled": False}, inbox={"dir": str(inbox), "settle": "10s"})
    await src.tick(time.time())
    assert metric(rig.store, "infrapulse_probe_ingested_files_total") == {("wrong_results",): 1.0}


async def test_probes_run_with_lowered_cpu_and_io_priority(rig: Rig) -> None:
    script = rig.tmp / "bin" / "prio_probe"
    script.write_text(f"""#!{os.sys.executable}
import ctypes, os, platform
io = {{"x86_64": 252, "aarch64": 31}}.get(platform.machine())
value = ctypes.CDLL(None).syscall(io, 1, 0) if io else -1
open({str(rig.tmp / 'prio.txt')!r}, "w").write(f"{{os.nice(0)}} {{value}}")
print("# Out of bounds values : 0 OK")
""")
    script.chmod(0o755)
    own = os.nice(0)
    src = rig.source(nccl={"binary": str(script)})
    await round_(src)
    nice, ioprio = (int(x) for x in (rig.tmp / "prio.txt").read_text().split())
    assert nice == min(own + 5, 19)
    if platform.machine() in ("x86_64", "aarch64"):
        assert ioprio >> 13 == 3  # IOPRIO_CLASS_IDLE
    assert os.nice(0) == own  # the daemon's own threads keep their priority


async def test_a_firmware_change_triggers_a_run_and_the_baseline_survives_a_restart(rig: Rig) -> None:
    src = rig.source()
    for _ in range(3):
        await round_(src)
    assert one(rig.store, "infrapulse_probe_verdict", metric="latency", size="8", verdict="ok") == 1.0
    base = one(rig.store, "infrapulse_probe_baseline_value", metric="latency", size="8")
    assert 17.5e-6 < base < 18.5e-6
    await src.close()

    # The upgrade reboots the node: a new daemon, a new store, the same state directory.
    rig.store = Store()
    rig.firmware(NEW_FW)
    rig.fake({"small_latency_factor": 1.4})
    restarted = rig.source()
    runs_before = rig.nccl_runs()
    await round_(restarted, time.time())  # long before the next scheduled run: only the change is due
    assert rig.nccl_runs() == runs_before + 1
    assert one(rig.store, "infrapulse_probe_verdict", metric="latency", size="8", verdict="regression") == 1.0
    ratio = one(rig.store, "infrapulse_probe_baseline_ratio", metric="latency", size="8")
    assert 1.36 < ratio < 1.44
    change = metric(rig.store, "infrapulse_probe_change_ratio", metric="latency", size="8")
    ((labels, value),) = change.items()
    assert labels[-3:] == ("nic_firmware", OLD_FW, NEW_FW) and value == pytest.approx(ratio)
    assert one(rig.store, "infrapulse_probe_version_change_timestamp_seconds", component="nic_firmware",
               before=OLD_FW, after=NEW_FW) > 0
    saved = json.loads((rig.state_dir / "probe" / "state.json").read_text())
    history = next(m for m in saved["metrics"].values() if m["labels"][3:] == ["latency", "8"])["history"]
    # judged against the median of the three runs under the old firmware, kept across the restart
    before = statistics.median(h["value"] for h in history[:3])
    assert one(rig.store, "infrapulse_probe_baseline_value", metric="latency", size="8") == before
    assert abs(before - base) < 0.5e-6
    assert [h["versions"]["nic_firmware"] for h in history] == [OLD_FW] * 3 + [NEW_FW]
    assert [h["in_baseline"] for h in history] == [True, True, True, False]  # a regression never enters
    assert saved["pending_change"] is None


async def test_a_scheduled_run_is_not_due_before_its_time_and_jitter_spreads_it(rig: Rig) -> None:
    src = rig.source(interval="1h", jitter="10m")
    now = await round_(src)
    nxt = src.state["next_run"]
    assert now + 3600 - 5 <= nxt <= time.time() + 3600 + 600
    runs = rig.nccl_runs()
    await round_(src, now + 60)
    assert rig.nccl_runs() == runs


async def test_an_absolute_floor_judges_a_node_without_history(rig: Rig) -> None:
    floors = [{"metric": "latency", "test": "all_reduce", "size": 8, "model": "NVIDIA H100*", "max": 10e-6}]
    src = rig.source(baseline={"floors": floors})
    await round_(src)
    assert one(rig.store, "infrapulse_probe_verdict", metric="latency", size="8",
               verdict="below_floor") == 1.0
    assert one(rig.store, "infrapulse_probe_verdict", metric="latency", size="16",
               verdict="no_baseline") == 1.0


async def test_accepting_a_new_baseline_starts_over(rig: Rig) -> None:
    src = rig.source()
    for _ in range(2):
        await round_(src)
    rig.fake({"small_latency_factor": 1.5})
    await round_(src)
    assert one(rig.store, "infrapulse_probe_verdict", metric="latency", size="8", verdict="regression") == 1.0
    (rig.state_dir / "probe" / "accept-baseline").touch()
    for _ in range(3):  # two runs build the new baseline (min_runs 2), the third is judged against it
        await round_(src)
    assert one(rig.store, "infrapulse_probe_verdict", metric="latency", size="8", verdict="ok") == 1.0
    assert not (rig.state_dir / "probe" / "accept-baseline").exists()


async def test_nccl_json_output_is_read_back_and_never_kept(rig: Rig,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROBE_TEST_SECRET", "hunter2")
    src = rig.source(nccl={"json": True})
    await round_(src)
    assert one(rig.store, "infrapulse_probe_last_result", probe="nccl_latency", result="ok") == 1.0
    t8 = one(rig.store, "infrapulse_probe_nccl_time_seconds", size="8", placement="out_of_place")
    assert t8 != round(t8, 8)  # full precision: from the JSON, not the table's 2 decimals
    for path in rig.state_dir.rglob("*"):
        if path.is_file():
            assert b"hunter2" not in path.read_bytes(), path


async def test_perftest_between_two_nics_json_and_legacy_json(rig: Rig) -> None:
    src = rig.source(nccl={"enabled": False}, perftest={"enabled": True})
    await round_(src)
    for probe in ("ib_write_lat", "ib_write_bw"):
        assert rig.store.status[("probe", probe)].reason == "ok", rig.store.status[("probe", probe)].message
    p99 = one(rig.store, "infrapulse_probe_rdma_latency_seconds", statistic="p99", size="8")
    assert 1.4e-6 < p99 < 2.5e-6
    labels = next(iter(metric(rig.store, "infrapulse_probe_rdma_latency_seconds", statistic="p99")))
    assert labels[:4] == ("mlx5_0->mlx5_1", "fabric", "ib_write_lat", "mlx5_0")
    bw = one(rig.store, "infrapulse_probe_rdma_bandwidth_bytes_per_second", statistic="average")
    assert 45000 * 2**20 < bw < 46100 * 2**20
    rig.fake({"json_legacy": True, "small_latency_factor": 2.0})
    await round_(src)
    assert one(rig.store, "infrapulse_probe_rdma_latency_seconds", statistic="typical", size="8") > 2.8e-6


async def test_perftest_text_when_json_is_off(rig: Rig) -> None:
    src = rig.source(nccl={"enabled": False}, perftest={"enabled": True, "json": "false",
                                                        "bandwidth_binary": ""})
    await round_(src)
    assert rig.store.status[("probe", "ib_write_lat")].reason == "ok"
    assert 1.4e-6 < one(rig.store, "infrapulse_probe_rdma_latency_seconds", statistic="typical") < 1.6e-6


async def test_inbox_files_are_ingested_once_across_restarts(rig: Rig) -> None:
    inbox = rig.tmp / "inbox"
    inbox.mkdir()
    (inbox / "rack7-a-b__2026-01-01.txt").write_text(
        real("probes", "nccl-tests-allreduce-2node16gpu-h100-ztan.txt").read_text())
    (inbox / "pair-x.log").write_text(real("probes", "perftest-ib_write_bw-8M-srvcli-mbsec-superbench.txt")
                                      .read_text())
    (inbox / "pair-x.log.scope").write_text("scope: ib0-loop\ntool: perftest\n")
    (inbox / "junk__x.txt").write_text("not a result\n")
    (inbox / "noscope.txt").write_text("# Out of bounds values : 0 OK\n")
    (inbox / "fresh__x.txt").write_text("still being written")
    old = time.time() - 60
    for path in inbox.iterdir():
        if not path.name.startswith("fresh"):
            os.utime(path, (old, old))
    cfg = {"dir": str(inbox), "settle": "10s"}
    src = rig.source(nccl={"enabled": False}, inbox=cfg)
    await src.tick(time.time())  # no probe configured: only the files are read
    counts = metric(rig.store, "infrapulse_probe_ingested_files_total")
    assert counts == {("ok",): 2.0, ("unparsable",): 1.0, ("no_scope",): 1.0}
    busbw = one(rig.store, "infrapulse_probe_nccl_bus_bandwidth_bytes_per_second", scope="rack7-a-b",
                size="8589934592", placement="out_of_place")
    assert busbw == pytest.approx(338.82e9)
    assert one(rig.store, "infrapulse_probe_rdma_bandwidth_bytes_per_second", scope="ib0-loop",
               statistic="average") == pytest.approx(24056.72 * 2**20)
    assert one(rig.store, "infrapulse_probe_verdict", scope="rack7-a-b", metric="busbw", size="8589934592",
               verdict="no_baseline") == 1.0
    await src.tick(time.time())
    assert metric(rig.store, "infrapulse_probe_ingested_files_total")[("ok",)] == 2.0
    rig.store = Store()
    again = rig.source(nccl={"enabled": False}, inbox=cfg)
    await again.tick(time.time())
    assert metric(rig.store, "infrapulse_probe_ingested_files_total")[("ok",)] == 2.0  # nothing read twice


async def test_an_unusable_state_dir_is_reported_and_a_corrupt_file_moved_aside(rig: Rig) -> None:
    (rig.state_dir / "probe").mkdir(parents=True)
    (rig.state_dir / "probe" / "state.json").write_text("{not json")
    src = rig.source()
    assert src.state["metrics"] == {}
    assert list((rig.state_dir / "probe").glob("state.json.corrupt-*"))
    blocker = rig.tmp / "file-not-dir"
    blocker.write_text("x")
    ctx = SourceContext(store=rig.store, interval=1.0, options={GPU_ACTIVITY_KEY: lambda: rig.gpu},
                        state_dir=str(blocker))
    broken = ProbeSource(rig.config(), ctx)
    task = asyncio.create_task(broken.run())
    await asyncio.sleep(0.2)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    status = rig.store.status[("probe", "state")]
    assert not status.up and status.reason == "state_dir" and "file-not-dir" in status.message


async def test_last_good_run_age_grows_from_first_configuration_when_never_good(rig: Rig) -> None:
    rig.gpu.processes = 1
    src = rig.source()
    first = src.state["probes"]["nccl_latency"]["first_seen"]
    now = await round_(src, first + 7200)
    assert one(rig.store, "infrapulse_probe_last_good_run_age_seconds", probe="nccl_latency") == \
        pytest.approx(now - first)
    assert not metric(rig.store, "infrapulse_probe_last_good_run_timestamp_seconds")
    assert one(rig.store, "infrapulse_probe_max_age_seconds") == 2 * 86400
