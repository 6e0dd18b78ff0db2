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

ProbeSource only coordinates (the check, the run task, statuses, saving and publishing); each
concern it drives is a module of its own, listed in the package docstring.
"""

from __future__ import annotations

import asyncio
import functools
import random
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from ...changes import describe_change
from ...store import stale_after
from ..base import Source, SourceContext
from . import attempts, idle, inbox_ingest, peer_server, probe_set, schedule, scratch, snapshot, verdicts
from .baseline import Settings
from .config import CONFIG, ProbeSettings
from .probes import ProbeRun
from .runner import ProbeBusy, probe_lock
from .state import StateError, StateFile
from .versions import read_versions

STATE_TARGET = "state"


class ProbeSource(Source[ProbeSettings]):
    name = "probe"
    role = "node"
    CONFIG = CONFIG
    ROUTES = (("POST", peer_server.ROUTE, "perftest_server_handler"),)

    def __init__(self, config: ProbeSettings, ctx: SourceContext) -> None:
        super().__init__(config, ctx)
        self.dir = Path(ctx.state_dir or "/var/lib/infrapulse") / "probe"
        self.file = StateFile(self.dir)
        self.state: dict[str, Any] = {}
        self.settings = Settings.from_config(config.baseline)
        self.rng = random.Random()
        self.running: asyncio.Task[None] | None = None
        self._busy_slot: float | None = None  # the scheduled run a busy skip was counted for
        self._dirty = False  # the state changed since it was last saved
        opener = ctx.options.get(idle.GPU_ACTIVITY_KEY)
        self.gpu: idle.GpuActivity | None = None
        if config.idle.gpu_processes:
            self.gpu = opener() if opener is not None else idle.NvmlActivity()
        rdma_devices = functools.partial(probe_set.rdma_devices, config.versions.sysfs_root)
        self.peer_server = peer_server.PeerServer(config, self.dir, self.idleness, rdma_devices,
                                                  self._server_status)

    # -- life cycle ------------------------------------------------------------------------

    async def run(self) -> None:
        while True:
            try:
                self.start(time.time())
                break
            except StateError as exc:
                self.store.record_failure(self.name, STATE_TARGET, "state_dir", str(exc))
                await asyncio.sleep(self.config.check_interval)
        while True:
            await self.tick(time.time())
            await asyncio.sleep(self.config.check_interval)

    def start(self, now: float) -> None:
        """Load the saved state (raises StateError when the state directory is unusable)."""
        self.state = self.file.load()
        self.store.record_success(self.name, STATE_TARGET, 0.0)
        for probe in probe_set.names(self.config):
            attempts.entry(self.state, probe, now)
        if not self.state["versions"]:
            self.state["versions"] = self.read_versions()
        schedule.first_due(self.state, self.config.change_delay, now)
        if self.config.inbox.dir:
            try:  # created by the daemon's user, so jobs running as that user can write into it
                Path(self.config.inbox.dir).mkdir(parents=True, exist_ok=True)
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
        if verdicts.accept_baseline(self.state, self.dir):
            self._dirty = True
        self.check_versions(now)
        if inbox_ingest.ingest(self.state, self.config, self.settings, now):
            self._dirty = True
        if self.running is None and schedule.due(self.state, now) is not None:
            await self.start_due_run(now)
        self.save()
        self.publish(now)

    def read_versions(self) -> dict[str, str]:
        v = self.config.versions
        return read_versions(v.sysfs_root, v.nccl_library, v.files)

    def check_versions(self, now: float) -> None:
        changes = schedule.take_versions(self.state, self.read_versions(), self.config.change_delay, now)
        if changes:
            self.log.info("versions changed; probing soon", extra={"changes": describe_change(changes)})
            self._dirty = True

    # -- running -----------------------------------------------------------------------------

    async def idleness(self) -> idle.Idleness:
        cfg = self.config.idle
        return await asyncio.to_thread(idle.check, self.store, self.gpu, cfg.serving, cfg.maintenance_file)

    async def start_due_run(self, now: float) -> None:
        slot = schedule.due(self.state, now)
        idleness = await self.idleness()
        if not idleness.idle:
            self.skip_busy(slot, idleness.why)
            return
        # A task of its own: a 10-minute probe never stops the checks and the publishing.
        self.running = asyncio.create_task(self.run_all(slot), name="probe:run")
        self.running.add_done_callback(self._run_done)

    def _run_done(self, task: asyncio.Task[None]) -> None:
        self.running = None
        if not task.cancelled() and task.exception() is not None:
            self.log.error("probe run crashed", exc_info=task.exception())

    def skip_busy(self, slot: float | None, why: str) -> None:
        """Every probe is busy; counted once per scheduled run, however many checks find it busy."""
        for probe in probe_set.names(self.config):
            self.set_status(probe, "busy", why)
            if slot != self._busy_slot:
                attempts.count(self.state, probe, "busy", time.time())
        self._busy_slot = slot
        self._dirty = True

    async def run_all(self, slot: float | None) -> None:
        pending = self.state["pending_change"]
        gpus = functools.partial(probe_set.gpu_count, self.config, self.store)
        try:
            with probe_lock(self.dir / "run.lock"):
                for probe in probe_set.build(self.config):
                    self.record_run(await scratch.run_probe(probe, self.dir, self.config, gpus), pending)
        except ProbeBusy as exc:
            self.skip_busy(slot, str(exc))
            return
        now = time.time()
        schedule.ran(self.state, pending, self.config.interval, self.config.jitter, self.rng, now)
        self._busy_slot = None
        self._dirty = True
        self.save()
        self.publish(now)

    def record_run(self, run: ProbeRun, pending: dict[str, Any] | None) -> None:
        now = time.time()
        attempts.record(self.state, run, now)
        pending = schedule.nccl_seen(self.state, run.nccl_version, pending, now)
        attempts.count(self.state, run.name, run.result, now)
        self.set_status(run.name, run.result, run.message, run.duration)
        attempts.keep_output(self.dir, run)
        if run.result != "ok":
            self.log.warning("probe did not pass", extra={"probe": run.name, "result": run.result,
                                                          "detail": run.message})
        verdicts.judge_all(self.state, run.observations, self.settings, pending, now)
        self._dirty = True

    def set_status(self, probe: str, result: str, message: str, duration: float = 0.0) -> None:
        """Up with the result as reason (the result is data); down only for no_binary."""
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
        snap = snapshot.build(self.state, set(probe_set.names(self.config)), self.config.max_age, now)
        self.store.publish(self.name, "probe", snap, stale_after(self.config.check_interval))


SOURCE = ProbeSource
