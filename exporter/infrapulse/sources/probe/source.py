"""Source `probe`: runs nccl-tests and perftest on an idle node, periodically (default every 6 h
plus jitter) and soon after a version change, ingests result files dropped by jobs, and keeps
per-size baselines and verdicts under `<state_dir>/probe/`.

Every `check_interval` the source checks the versions (a change schedules a run after
`change_delay`), the inbox and whether a run is due, then publishes. A due run waits for an idle
node (no GPU compute processes, no serving requests, or the maintenance flag file); while the
node is busy each probe reports `busy` in its status (counted once per scheduled run). Runs go
one at a time under a node-wide lock, in a task of their own so a 10-minute probe never stops
the source from publishing.

Status per probe (`infrapulse_source_up{source="probe", target=<probe>}`): up with reason ok,
busy, timeout, failed or wrong_results (the source works; the result is data, alerted on from
infrapulse_probe_last_result); down with reason no_binary (it cannot ever run). A state
directory that cannot be written is target `state`, down with reason `state_dir`.
"""

from __future__ import annotations

import asyncio
import math
import os
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from ...changes import describe_change
from ...store import Snapshot, stale_after
from ..base import Source, SourceContext
from . import families as fam
from . import idle, inbox, peer_server, runner, versions
from .baseline import Observation, Settings, judge, nccl_observations, perftest_observations
from .config import CONFIG
from .peer import PeerPerftestProbe
from .probes import NcclProbe, Pair, PerftestProbe, ProbeRun, RunContext, nccl_series, perftest_series
from .state import StateError, StateFile, trim, trim_ingested

ACCEPT_FILE = "accept-baseline"
STATE_TARGET = "state"


class ProbeSource(Source):
    name = "probe"
    role = "node"
    CONFIG = CONFIG
    ROUTES = (("POST", peer_server.ROUTE, "perftest_server_handler"),)

    def __init__(self, config: dict[str, Any], ctx: SourceContext) -> None:
        super().__init__(config, ctx)
        self.dir = Path(ctx.state_dir or "/var/lib/infrapulse") / "probe"
        self.file = StateFile(self.dir)
        self.state: dict[str, Any] = {}
        self.settings = Settings.from_config(config["baseline"])
        self.rng = random.Random()
        self.running: asyncio.Task[None] | None = None
        self._busy_slot: float | None = None  # the scheduled run a busy skip was counted for
        self._dirty = False
        opener = ctx.options.get(idle.GPU_ACTIVITY_KEY)
        self.gpu: idle.GpuActivity | None = None
        if config["idle"]["gpu_processes"]:
            self.gpu = opener() if opener is not None else idle.NvmlActivity()
        self.peer_server = peer_server.PeerServer(config, self.dir, self.idleness, self.rdma_devices,
                                                  self._server_status)

    # -- life cycle ------------------------------------------------------------------------

    async def run(self) -> None:
        while True:
            try:
                self.start(time.time())
                break
            except StateError as exc:
                self.store.record_failure(self.name, STATE_TARGET, "state_dir", str(exc))
                await asyncio.sleep(self.config["check_interval"])
        while True:
            await self.tick(time.time())
            await asyncio.sleep(self.config["check_interval"])

    def start(self, now: float) -> None:
        """Load the saved state (raises StateError when the state directory is unusable)."""
        self.state = self.file.load()
        self.store.record_success(self.name, STATE_TARGET, 0.0)
        for probe in self.probe_names():
            self.state["probes"].setdefault(probe, {"first_seen": now, "runs": {}})
        if not self.state["versions"]:
            self.state["versions"] = self.read_versions()
        if self.state["next_run"] <= 0:
            self.state["next_run"] = now + self.config["change_delay"]
        if self.config["inbox"]["dir"]:
            try:  # created by the daemon's user, so jobs running as that user can write into it
                Path(self.config["inbox"]["dir"]).mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                self.log.warning("cannot create the inbox directory", extra={"error": str(exc)})
        self._dirty = True
        self.peer_server.check_setup()

    async def close(self) -> None:
        await self.peer_server.close()
        if self.running is not None:
            self.running.cancel()
            await asyncio.gather(self.running, return_exceptions=True)

    async def tick(self, now: float) -> None:
        self.accept_baseline()
        self.check_versions(now)
        self.ingest(now)
        if self.running is None and self.due(now) is not None:
            await self.start_due_run(now)
        self.save()
        self.publish(now)

    # -- what runs ---------------------------------------------------------------------------

    def probe_names(self) -> list[str]:
        cfg = self.config
        names = [r["name"] for r in cfg["nccl"]["runs"]] if cfg["nccl"]["enabled"] else []
        if cfg["perftest"]["enabled"]:
            names.append(Path(cfg["perftest"]["latency_binary"]).name)
            if cfg["perftest"]["bandwidth_binary"]:
                names.append(Path(cfg["perftest"]["bandwidth_binary"]).name)
            names += [name for name, _test, _binary, _peer in self.peer_probes()]
        return names

    def peer_probes(self) -> list[tuple[str, str, str, dict[str, Any]]]:
        """(probe name `<test>@<peer>`, test, binary, peer) per perftest binary and peer."""
        p = self.config["perftest"]
        binaries = [b for b in (p["latency_binary"], p["bandwidth_binary"]) if b]
        return [(f"{Path(b).name}@{peer['name']}", Path(b).name, b, peer) for peer in p["peers"]
                for b in binaries]

    def rdma_devices(self) -> dict[str, str]:
        """RDMA device -> its hca_type (the NIC model floors match on)."""
        base = Path(self.config["versions"]["sysfs_root"], "class", "infiniband")
        out = {}
        try:
            devices = sorted(p for p in base.iterdir() if p.is_dir())
        except OSError:
            return {}
        for dev in devices:
            try:
                out[dev.name] = (dev / "hca_type").read_text().strip()
            except OSError:
                out[dev.name] = ""
        return out

    def pairs(self, devices: list[str]) -> list[Pair]:
        cfg = self.config["perftest"]
        if cfg["pairs"]:
            return [Pair(*p.split(":", 1)) for p in cfg["pairs"]]
        return [Pair(devices[i], devices[i + 1]) for i in range(0, len(devices) - 1, 2)][: cfg["max_pairs"]]

    def build_probes(self) -> list[NcclProbe | PerftestProbe]:
        cfg = self.config
        out: list[NcclProbe | PerftestProbe] = []
        if cfg["nccl"]["enabled"]:
            n = cfg["nccl"]
            out += [NcclProbe(r["name"], n["binary"], r["args"], n["json"], n["latency_max_bytes"],
                              n["bandwidth_min_bytes"]) for r in n["runs"]]
        if cfg["perftest"]["enabled"]:
            p = cfg["perftest"]
            models = self.rdma_devices()
            pairs = self.pairs(sorted(models))
            for binary, sizes, iters in ((p["latency_binary"], p["latency_sizes"], p["latency_iterations"]),
                                         (p["bandwidth_binary"], p["bandwidth_sizes"],
                                          p["bandwidth_iterations"])):
                if binary:
                    out.append(PerftestProbe(Path(binary).name, binary, pairs, sizes, iters, p["base_port"],
                                             p["server_host"], p["json"], p["report_gbits"], p["extra_args"],
                                             models))
            for name, test, binary, peer in self.peer_probes():
                lat = test.endswith("_lat")
                local = peer["local_device"] or min(models, default="")
                out.append(PeerPerftestProbe(name, test, binary, peer, local,
                                             p["latency_sizes" if lat else "bandwidth_sizes"],
                                             p["latency_iterations" if lat else "bandwidth_iterations"],
                                             p["json"], p["report_gbits"], p["extra_args"], models))
        return out

    def gpu_count(self) -> int:
        if self.config["nccl"]["gpus"]:
            return int(self.config["nccl"]["gpus"])
        gpus = {labels[0] for src, _t, labels, _v in self.store.iter_family("infrapulse_gpu_info")
                if src in ("nvml", "dcgm") and labels}
        return max(len(gpus), 1)

    # -- versions and schedule ----------------------------------------------------------------

    def read_versions(self) -> dict[str, str]:
        v = self.config["versions"]
        return versions.read_versions(v["sysfs_root"], v["nccl_library"], v["files"])

    def check_versions(self, now: float) -> None:
        current = self.read_versions()
        before = self.state["versions"]
        if "nccl" not in current and "nccl" in before:
            current["nccl"] = before["nccl"]  # without nccl_library it is learnt from the runs' output
        changes = versions.changed(before, current)
        if not changes:
            return
        self.log.info("versions changed; probing soon", extra={"changes": describe_change(changes)})
        self.note_changes(changes, now)
        pending = self.state["pending_change"] or {"changes": {}, "due": 0.0}
        for component, (old, new) in changes.items():
            first = pending["changes"].get(component, [old, new])[0]
            pending["changes"][component] = [first, new]
        pending["due"] = now + self.config["change_delay"]
        self.state["pending_change"] = pending
        self.state["versions"] = current
        self._dirty = True

    def note_changes(self, changes: dict[str, tuple[str, str]], now: float) -> None:
        for component, (old, new) in changes.items():
            self.state["version_changes"][component] = {"before": old, "after": new, "at": now}

    def due(self, now: float) -> float | None:
        """The scheduled time of the run that is due now, or None."""
        pending = self.state["pending_change"]
        if pending and now >= pending["due"]:
            return float(pending["due"])
        if now >= self.state["next_run"]:
            return float(self.state["next_run"])
        return None

    def accept_baseline(self) -> None:
        """An operator accepted the current performance: baselines start over from the next runs."""
        flag = self.dir / ACCEPT_FILE
        if flag.exists():
            self.state["epoch"] = time.time()  # runs are stamped with the wall clock
            for metric in self.state["metrics"].values():
                metric["verdict"] = "no_baseline"
                metric["baseline"] = metric["ratio"] = None
            flag.unlink(missing_ok=True)
            self.log.warning("probe baselines reset on request", extra={"file": str(flag)})
            self._dirty = True

    # -- running -----------------------------------------------------------------------------

    async def idleness(self) -> idle.Idleness:
        cfg = self.config["idle"]
        return await asyncio.to_thread(idle.check, self.store, self.gpu, cfg["serving"],
                                       cfg["maintenance_file"])

    async def start_due_run(self, now: float) -> None:
        slot = self.due(now)
        idleness = await self.idleness()
        if not idleness.idle:
            self.skip_busy(slot, idleness.why)
            return
        self.running = asyncio.create_task(self.run_all(slot), name="probe:run")
        self.running.add_done_callback(self._run_done)

    def _run_done(self, task: asyncio.Task[None]) -> None:
        self.running = None
        if not task.cancelled() and task.exception() is not None:
            self.log.error("probe run crashed", exc_info=task.exception())

    def skip_busy(self, slot: float | None, why: str) -> None:
        for probe in self.probe_names():
            self.set_status(probe, "busy", why)
            if slot != self._busy_slot:
                self.count(probe, "busy", time.time())
        self._busy_slot = slot
        self._dirty = True

    async def run_all(self, slot: float | None) -> None:
        pending = self.state["pending_change"]
        try:
            with runner.probe_lock(self.dir / "run.lock"):
                for probe in self.build_probes():
                    await self.run_one(probe, pending)
        except runner.ProbeBusy as exc:
            self.skip_busy(slot, str(exc))
            return
        now = time.time()
        self.state["next_run"] = now + self.config["interval"] + self.rng.uniform(0, self.config["jitter"])
        if self.state["pending_change"] is pending:
            self.state["pending_change"] = None
        self._busy_slot = None
        self._dirty = True
        self.save()
        self.publish(now)

    async def run_one(self, probe: NcclProbe | PerftestProbe, pending: dict[str, Any] | None) -> None:
        workdir = Path(tempfile.mkdtemp(prefix=f"{probe.name}.", dir=self.dir))
        try:
            ctx = RunContext(workdir, time.monotonic() + self.config["timeout"], self.env(),
                             self.config["nice"], self.config["io_idle"])
            result = await (probe.run(ctx, self.gpu_count()) if isinstance(probe,
                                                                           NcclProbe) else probe.run(ctx))
        finally:
            shutil.rmtree(workdir, ignore_errors=True)  # nccl-tests' JSON holds the whole environment
        self.record_run(result, pending)

    def env(self) -> dict[str, str]:
        return {**os.environ, **self.config["env"]}

    def record_run(self, run: ProbeRun, pending: dict[str, Any] | None) -> None:
        now = time.time()
        entry = self.state["probes"].setdefault(run.name, {"first_seen": now, "runs": {}})
        entry.update(last_run=now, last_result=run.result, last_duration=run.duration, message=run.message)
        if run.series or run.result == "ok":
            entry["series"] = [[f, list(labels), v] for f, labels, v in run.series]
        if run.result == "ok":
            entry["last_good"] = now
        old_nccl = self.state["versions"].get("nccl", "")
        if run.nccl_version and run.nccl_version != old_nccl:
            # the run itself shows NCCL changed (a new container image): judge it as a change
            self.state["versions"]["nccl"] = run.nccl_version
            if old_nccl:
                self.note_changes({"nccl": (old_nccl, run.nccl_version)}, now)
                merged = dict(pending["changes"]) if pending else {}
                merged["nccl"] = [old_nccl, run.nccl_version]
                pending = {"changes": merged, "due": now}
        self.count(run.name, run.result, now)
        self.set_status(run.name, run.result, run.message, run.duration)
        try:  # for the operator: what the tool printed last time (never the JSON: it holds the env)
            (self.dir / f"{run.name}.last-output.txt").write_text(run.output[-200_000:], encoding="utf-8")
        except OSError as exc:
            self.log.warning("cannot keep the probe's output", extra={"probe": run.name, "error": str(exc)})
        if run.result != "ok":
            self.log.warning("probe did not pass", extra={"probe": run.name, "result": run.result,
                                                          "detail": run.message})
        self.judge_all(run.observations, pending, now)

    def judge_all(self, observations: list[Observation], pending: dict[str, Any] | None, now: float) -> None:
        versions_now = dict(self.state["versions"])
        for obs in observations:
            metric = self.state["metrics"].setdefault(obs.key, {"labels": list(obs.labels()),
                                                                "better": obs.better,
                                                                "history": [], "change": None})
            metric["labels"] = list(obs.labels())
            verdict = judge(obs, metric["history"], self.settings, self.state["epoch"])
            metric["history"] = trim(metric["history"] + [{"at": now, "value": obs.value,
                                                           "versions": versions_now,
                                                           "in_baseline": verdict.enters_baseline}])
            metric.update(verdict=verdict.verdict, baseline=verdict.baseline, ratio=verdict.ratio,
                          value=obs.value,
                          at=now)
            if pending and verdict.baseline:
                metric["change"] = {"at": now, "changes": pending["changes"], "before": verdict.baseline,
                                    "after": obs.value, "ratio": verdict.ratio}
        self._dirty = True

    def count(self, probe: str, result: str, now: float) -> None:
        entry = self.state["probes"].setdefault(probe, {"first_seen": now, "runs": {}})
        entry["runs"][result] = entry["runs"].get(result, 0) + 1
        entry["last_attempt_result"] = result

    def set_status(self, probe: str, result: str, message: str, duration: float = 0.0) -> None:
        if result == "no_binary":
            self.store.record_failure(self.name, probe, result, message, duration)
            return
        self.store.record_success(self.name, probe, duration)
        status = self.store.status_of(self.name, probe)
        status.reason, status.message = result, message

    # -- the perftest server for peers -----------------------------------------------------------

    async def perftest_server_handler(self, request: web.Request) -> web.Response:
        """POST /api/v1/probes/perftest-server (routed here by the daemon)."""
        return await self.peer_server.handle(request)

    def _server_status(self, reason: str, message: str) -> None:
        if reason == "token_file":
            self.store.record_failure(self.name, peer_server.STATUS_TARGET, reason, message)
            return
        self.set_status(peer_server.STATUS_TARGET, reason, message)

    # -- inbox -------------------------------------------------------------------------------

    def ingest(self, now: float) -> None:
        cfg = self.config["inbox"]
        if not cfg["dir"]:
            return
        ingested = self.state["ingested"]
        for cand in inbox.candidates(Path(cfg["dir"]), ingested, cfg["settle"], now):
            try:
                dropped = inbox.read(cand, cfg["max_file_bytes"])
                result = self.ingest_dropped(dropped, now)
                message = ""
            except inbox.InboxError as exc:
                result, message = exc.reason, str(exc)
                self.log.warning("inbox file not ingested", extra={"file": str(cand.path),
                                                                   "reason": exc.reason,
                                                                    "detail": str(exc)})
            ingested[cand.key] = {"at": now, "result": result, "message": message}
            counts = self.state.setdefault("ingest_counts", {})
            counts[result] = counts.get(result, 0) + 1
            self._dirty = True
        self.state["ingested"] = trim_ingested(ingested)

    def ingest_dropped(self, dropped: inbox.Dropped, now: float) -> str:
        if dropped.nccl is not None:
            result = dropped.nccl
            key = f"{dropped.scope}|{result.collective or 'nccl'}"
            series = nccl_series(result, dropped.scope, dropped.path_label)
            # Wrong results first: corrupted data is never filed as a generic failure, even when
            # the run also printed "Test failure" lines (it does, for #wrong > 0).
            if result.wrong_results:
                self.state["inbox_series"][key] = [[f, list(lb), v] for f, lb, v in series]
                return "wrong_results"
            if result.errors or not result.rows:
                self.state["inbox_series"][key] = [[f, list(lb), v] for f, lb, v in series]
                return "failed"
            n = self.config["nccl"]
            observations = nccl_observations(result, dropped.scope, dropped.path_label,
                                             n["latency_max_bytes"],
                                             n["bandwidth_min_bytes"])
        else:
            reports = dropped.perftest or []
            clients = [r for r in reports if r.role == "client"] or reports
            series, observations = [], []
            for report in clients[:1]:
                key = f"{dropped.scope}|{report.test}"
                series += perftest_series(report, dropped.scope, dropped.path_label)
                observations += perftest_observations(report, dropped.scope, dropped.path_label)
        self.state["inbox_series"][key] = [[f, list(lb), v] for f, lb, v in series]
        self.judge_all(observations, None, now)
        return "ok"

    # -- persistence and publishing ----------------------------------------------------------

    def save(self) -> None:
        if not self._dirty:
            return
        try:
            self.file.save(self.state)
            self.store.record_success(self.name, STATE_TARGET, 0.0)
            self._dirty = False
        except StateError as exc:
            self.store.record_failure(self.name, STATE_TARGET, "state_dir", str(exc))

    def publish(self, now: float) -> None:
        snap = Snapshot(now)
        snap.add(fam.MAX_AGE, (), float(self.config["max_age"]))
        for component, version in sorted(self.state["versions"].items()):
            snap.add(fam.VERSIONS, (component, version), 1.0)
        for component, change in sorted(self.state["version_changes"].items()):
            snap.add(fam.CHANGE_TIME, (component, change["before"], change["after"]), float(change["at"]))
        self._publish_probes(snap, now)
        for series in self.state["inbox_series"].values():
            for family, labels, value in series:
                snap.add(family, tuple(labels), float(value))
        for result, n in sorted(self.state.get("ingest_counts", {}).items()):
            snap.add(fam.INGESTED, (result,), float(n))
        self._publish_metrics(snap)
        self.store.publish(self.name, "probe", snap, stale_after(self.config["check_interval"]))

    def _publish_probes(self, snap: Snapshot, now: float) -> None:
        configured = set(self.probe_names())
        for probe, entry in sorted(self.state["probes"].items()):
            if probe not in configured:
                continue
            if "last_run" in entry:
                snap.add(fam.LAST_RUN, (probe,), float(entry["last_run"]))
                snap.add(fam.DURATION, (probe,), float(entry.get("last_duration", 0.0)))
            if "last_good" in entry:
                snap.add(fam.LAST_GOOD, (probe,), float(entry["last_good"]))
            snap.add(fam.GOOD_AGE, (probe,), max(now - float(entry.get("last_good", entry["first_seen"])),
                                                 0.0))
            last = entry.get("last_attempt_result")
            if last is not None:
                for result in fam.RESULTS:
                    snap.add(fam.LAST_RESULT, (probe, result), 1.0 if result == last else 0.0)
            for result, n in sorted(entry["runs"].items()):
                snap.add(fam.RUNS, (probe, result), float(n))
            for family, labels, value in entry.get("series", []):
                snap.add(family, tuple(labels), float(value))

    def _publish_metrics(self, snap: Snapshot) -> None:
        for metric in self.state["metrics"].values():
            labels = tuple(metric["labels"])
            if metric.get("ratio") is not None and math.isfinite(metric["ratio"]):
                snap.add(fam.BASELINE_RATIO, labels, float(metric["ratio"]))
            if metric.get("baseline") is not None:
                snap.add(fam.BASELINE_VALUE, labels, float(metric["baseline"]))
            if metric.get("value") is not None:
                snap.add(fam.MEASURED_VALUE, labels, float(metric["value"]))
            for verdict in fam.VERDICTS:
                snap.add(fam.VERDICT, labels + (verdict,), 1.0 if verdict == metric.get("verdict") else 0.0)
            change = metric.get("change")
            if change and change.get("ratio") is not None:
                for component, (before, after) in sorted(change["changes"].items()):
                    snap.add(fam.CHANGE_RATIO, labels + (component, before, after), float(change["ratio"]))


SOURCE = ProbeSource
